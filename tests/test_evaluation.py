"""evaluate_policy on a small tiny world: the structure of the record and the exact invariants
that hold when the policy *is* the reference (KL 0, every held-out margin 0)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from badpo.bias import BiasChannel
from badpo.config import from_dict
from badpo.data.tiny import TinyWorldConfig, build_tiny_world
from badpo.evaluation import Corpus, EvalConfig, evaluate_policy


@pytest.fixture(scope="module")
def world_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("world")
    build_tiny_world(from_dict(TinyWorldConfig, {"n_pairs": 120}), folder)
    return folder


@pytest.fixture(scope="module")
def world(world_folder):
    folder = world_folder
    tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    reference = AutoModelForCausalLM.from_pretrained(folder / "model").eval()
    return Corpus.load(folder), tokenizer, reference


FAST = EvalConfig(max_prompts=6, body="given", surnames=3, max_new_tokens=12)


def test_policy_equal_to_reference_reads_as_untrained(world):
    corpus, tokenizer, reference = world
    record = evaluate_policy(reference, reference, tokenizer, corpus, FAST)
    assert record["kl"] == 0.0  # log pi - log pi_ref on the same model, token by token
    for name in ("woman_coded", "black_coded"):
        heldout = record["heldout"][name]
        # every margin u is exactly 0: a tie counts half, so both accuracies are 1/2, gap 0
        assert heldout["same_accuracy"] == heldout["cross_accuracy"] == 0.5
        assert heldout["gap"] == 0.0
        assert record[f"votes/{name}"]["accuracy"] == 0.5  # DPO: u alone, and u = 0
        # the planted ceiling predicts by the sign of theta_k . dg alone, which beats chance
        assert record[f"votes_ceiling/{name}"]["accuracy"] > 0.5
    for readout in ("first_name", "whole_signature"):
        rates = record["names"][readout]
        assert set(rates) == {"woman_coded", "black_coded"}
        assert all(0.0 < r < 1.0 for r in rates.values())
    assert "theta_mean" not in record  # no bias channel, nothing learned to report


def test_bias_channel_readouts(world):
    corpus, tokenizer, reference = world
    annotators = [a["annotator"] for a in corpus.planted["annotators"]]
    planted = torch.tensor([a["theta"] for a in corpus.planted["annotators"]])
    bias = BiasChannel("per_annotator", ["woman_coded", "black_coded"], annotators)
    with torch.no_grad():
        bias.annotator_theta.copy_(planted)  # the planted values: recovery is perfect
    record = evaluate_policy(reference, reference, tokenizer, corpus,
                             EvalConfig(max_prompts=2, body="given", whole_signature=False,
                                        generations=False), bias=bias)
    for name in ("woman_coded", "black_coded"):
        assert record["theta_recovery"]["pearson"][name] == pytest.approx(1.0, abs=1e-6)
        # with u = 0 the run's own theta_k are the planted ones: the vote readout is the ceiling
        assert record[f"votes/{name}"] == record[f"votes_ceiling/{name}"]
    assert record["theta_mean"]["black_coded"] == pytest.approx(planted[:, 1].mean().item(), abs=1e-6)
    assert "kl" not in record and not math.isnan(record["names"]["first_name"]["woman_coded"])


def test_theta_is_matched_to_attributes_by_name_and_unseen_annotators_get_theta_bar(world):
    """A run whose theta lists the attributes in another order than the evaluation reads them is
    still scored coordinate by coordinate; an annotator the run never saw gets theta_bar."""
    corpus, tokenizer, reference = world
    annotators = [a["annotator"] for a in corpus.planted["annotators"]]
    planted = torch.tensor([a["theta"] for a in corpus.planted["annotators"]])
    swapped = BiasChannel("per_annotator", ["black_coded", "woman_coded"], annotators)
    with torch.no_grad():
        swapped.annotator_theta.copy_(planted[:, [1, 0]])
    fast = EvalConfig(max_prompts=2, body="given", whole_signature=False, generations=False)
    record = evaluate_policy(reference, reference, tokenizer, corpus, fast, bias=swapped)
    for name in ("woman_coded", "black_coded"):
        assert record[f"votes/{name}"] == record[f"votes_ceiling/{name}"]
        assert record["theta_recovery"]["pearson"][name] == pytest.approx(1.0, abs=1e-6)
    assert record["theta_mean"]["woman_coded"] == pytest.approx(planted[:, 0].mean().item(), abs=1e-6)

    heldout_annotators = {j.annotator for j in corpus.heldout}
    missing = sorted(heldout_annotators)[0]
    partial = BiasChannel("per_annotator", ["woman_coded", "black_coded"],
                          [a for a in annotators if a != missing])
    record = evaluate_policy(reference, reference, tokenizer, corpus, fast, bias=partial)
    assert record["votes_unseen_annotator_judgments"] == sum(j.annotator == missing for j in corpus.heldout)


def test_badpo_evaluate_reads_a_finished_run_from_its_folder(world_folder, tmp_path):
    """`badpo train` then `badpo evaluate RUN_DIR`: the run's own config names the reference,
    the corpus and the tokenization; readouts.json carries the run's learned theta_bar."""
    import json

    from badpo.cli import main

    run_dir = tmp_path / "run"
    config = Path(__file__).resolve().parents[1] / "configs" / "train_tiny.yaml"
    main(["train", "-c", str(config), f"data={world_folder}/train.jsonl",
          f"model.name_or_path={world_folder}/model", f"output_dir={run_dir}",
          f"cache_dir={tmp_path}/cache", "steps=3", "batch_size=8", "micro_batch_size=8",
          "method=ba_dpo_pooled", "report.progress_bar=false"])
    main(["evaluate", str(run_dir), "max_prompts=2", "body=given", "whole_signature=false",
          "generations=false"])
    readouts = json.loads((run_dir / "readouts.json").read_text())
    theta = json.loads((run_dir / "theta.json").read_text())
    assert readouts["theta_mean"] == pytest.approx(theta["theta_bar"], abs=1e-6)
    assert set(readouts["names"]["first_name"]) == {"woman_coded", "black_coded"}
    assert readouts["heldout"]["woman_coded"]["n_cross"] > 0
    with pytest.raises(SystemExit, match="not a finished run"):
        main(["evaluate", str(tmp_path / "nothing")])


def test_markdown_readout_is_reweighted_on_the_reference_lengths(world):
    """With markdown declared, the rate is reweighted onto the reference generations' lengths:
    the bins are the quantiles of the reference's token counts, not the policy's."""
    import dataclasses

    from badpo.readouts_model import generate

    corpus, tokenizer, reference = world
    config = EvalConfig(attributes=("markdown",), max_prompts=6, max_new_tokens=12)
    record = evaluate_policy(reference, reference, tokenizer, corpus, config)
    assert "names" not in record  # no names attribute declared: no names readout
    own = generate(reference, tokenizer, [r["prompt"] for r in corpus.eval_prompts[:6]],
                   max_new_tokens=12, seed=config.seed, batch_size=config.batch_size)
    assert record["markdown"]["raw_rate"] == record["markdown"]["rate"] == 0.0  # digits carry no markup
    assert record["markdown"]["bin_edges"] == pytest.approx(
        list(np.quantile(own.token_counts, np.linspace(0, 1, 6))))
    flat = dataclasses.replace(own, token_counts=tuple(3 for _ in own.token_counts))
    record = evaluate_policy(reference, reference, tokenizer, corpus, config, reference_samples=flat)
    assert record["markdown"]["bin_edges"] == [3.0] * 6
