"""The readouts of a mixture of type policies (EM-DPO + MinMax-DPO): w-weighted means of the type
policies' readouts, and votes predicted by each annotator's own type probabilities."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from badpo.core.config import from_dict
from badpo.corpora.tiny import TinyWorldConfig
from badpo.readouts.evaluate_policy import Corpus, EvalConfig, evaluate_policy
from badpo.readouts.mixture_reading import Mixture, evaluate_mixture
from badpo.readouts.model import heldout_margins
from badpo.readouts.names_analyses import names_null_readouts

FAST = EvalConfig(max_prompts=4, body="given", surnames=3, max_new_tokens=8)


@pytest.fixture(scope="module")
def world(tmp_path_factory, build_tiny_world):
    """A tiny world, its reference, and two type policies: the reference's weights plus seeded noise."""
    folder = tmp_path_factory.mktemp("mixture_world")
    build_tiny_world(from_dict(TinyWorldConfig, {"n_pairs": 120}), folder)
    policies = []
    for k in range(2):
        model = AutoModelForCausalLM.from_pretrained(folder / "model")
        noise = torch.Generator().manual_seed(k)
        with torch.no_grad():
            for weight in model.parameters():
                weight.add_(0.05 * torch.randn(weight.shape, generator=noise))
        model.save_pretrained(folder / f"type-{k}")
        policies.append(folder / f"type-{k}")
    tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    reference = AutoModelForCausalLM.from_pretrained(folder / "model").eval()
    return Corpus.load(folder), tokenizer, reference, policies


def load(path: Path):
    return AutoModelForCausalLM.from_pretrained(path).eval()


def _assert_same_numbers(a, b, where: str = "") -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for key in a:
            _assert_same_numbers(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    elif isinstance(a, (int, float)):
        assert b == pytest.approx(a, abs=1e-9), where
    else:
        assert a == b, where


def test_a_mixture_of_one_policy_twice_reads_as_that_policy(world):
    """Identity: K copies of one policy under any w and gamma give that policy's readouts, votes
    included (sum_k gamma_k sigmoid(u) = sigmoid(u), whose logit is u)."""
    corpus, tokenizer, reference, policies = world
    annotators = sorted({j.annotator for j in corpus.heldout})
    gamma = {a: [i / len(annotators), 1 - i / len(annotators)] for i, a in enumerate(annotators)}
    mixture = Mixture((0.3, 0.7), gamma, (0.5, 0.5), (policies[0], policies[0]))
    mixed = evaluate_mixture(load, mixture, reference, tokenizer, corpus, FAST)
    single = evaluate_policy(load(policies[0]), reference, tokenizer, corpus, FAST)
    assert mixed["mixture"]["weights"] == [0.3, 0.7]
    assert mixed["type_recovery"]["n"] == len(annotators)
    _assert_same_numbers(single, {k: v for k, v in mixed.items() if k in single})


def test_mixture_votes_use_each_annotators_type_probabilities(world):
    """Two different policies: heldout accuracy is w's mean of theirs; a vote is predicted right
    when sum_k gamma_{a,k} sigmoid(u_k) > 1/2 (a tie counts half), computed here vote by vote; an
    annotator absent from the mixture gets the priors."""
    corpus, tokenizer, reference, policies = world
    config = EvalConfig(max_prompts=2, body="given", whole_signature=False, generations=False)
    annotators = sorted({j.annotator for j in corpus.heldout})
    gamma = {a: [0.9, 0.1] if i % 2 else [0.2, 0.8] for i, a in enumerate(annotators[1:])}
    priors = (0.6, 0.4)
    mixture = Mixture((0.25, 0.75), gamma, priors, tuple(policies))
    mixed = evaluate_mixture(load, mixture, reference, tokenizer, corpus, config)

    singles = [evaluate_policy(load(p), reference, tokenizer, corpus, config) for p in policies]
    for name in ("woman_coded", "black_coded"):
        for key in ("same_accuracy", "cross_accuracy", "gap"):
            expected = 0.25 * singles[0]["heldout"][name][key] + 0.75 * singles[1]["heldout"][name][key]
            assert mixed["heldout"][name][key] == pytest.approx(expected, abs=1e-12, nan_ok=True)

    # names.null is that of the mixture's per-name shares (w's mean of the types'), not w's mean of
    # the types' nulls: its shift is w's mean, its p that of the mixed shares against the reference's
    reference_side = evaluate_policy(reference, reference, tokenizer, corpus, config)
    assert mixed["names"]["null"] == names_null_readouts(mixed, reference_side)
    shifts = [single["names"]["null"]["first_name"]["black_coded"]["shift"] for single in singles]
    assert mixed["names"]["null"]["first_name"]["black_coded"]["shift"] == pytest.approx(
        0.25 * shifts[0] + 0.75 * shifts[1], abs=1e-12)

    margins = [heldout_margins(load(p), reference, tokenizer, corpus.heldout, 0.1).tolist() for p in policies]
    assert mixed["votes_unseen_annotator_judgments"] == sum(j.annotator == annotators[0] for j in corpus.heldout)
    for a, name in enumerate(("woman_coded", "black_coded")):
        scores = []
        for index, judgment in enumerate(corpus.heldout):
            w_value, l_value = corpus_values(judgment)
            if w_value[a] == l_value[a]:
                continue  # same-group on this attribute: not a cross vote
            g = gamma.get(judgment.annotator, list(priors))
            p = sum(g[k] / (1 + math.exp(-margins[k][index])) for k in range(2))
            scores.append(1.0 if p > 0.5 else 0.5 if p == 0.5 else 0.0)
        assert mixed[f"votes/{name}"]["n"] == len(scores) > 0
        assert mixed[f"votes/{name}"]["accuracy"] == pytest.approx(sum(scores) / len(scores), abs=1e-12)


def test_a_mixtures_per_prompt_values_are_each_prompts_weighted_mean(world):
    """Two different policies under w = (0.25, 0.75): each prompt's value of an attribute on the
    mixture's generations is 0.25 a + 0.75 b of the two policies' (exactly a where they agree),
    so that their mean is the mixture's rate and `badpo compare` can resample its prompts; the
    reference's values (markdown declared: its generations are sampled) are the reference's."""
    corpus, tokenizer, reference, policies = world
    gamma = {a: [0.5, 0.5] for a in {j.annotator for j in corpus.heldout}}
    mixture = Mixture((0.25, 0.75), gamma, (0.5, 0.5), tuple(policies))
    config = EvalConfig(attributes=("names", "seven=regex:7", "markdown"), max_prompts=4, body="given", surnames=3,
                        max_new_tokens=8)
    mixed = evaluate_mixture(load, mixture, reference, tokenizer, corpus, config)
    singles = [evaluate_policy(load(p), reference, tokenizer, corpus, config) for p in policies]
    for name, rate in mixed["attribute_rates"].items():
        a, b = (single["attribute_rates"][name]["per_prompt"]["policy"] for single in singles)
        expected = [x if x == y else 0.25 * x + 0.75 * y for x, y in zip(a, b)]
        assert rate["per_prompt"]["policy"] == pytest.approx(expected, abs=1e-12)
        assert sum(rate["per_prompt"]["policy"]) / len(a) == pytest.approx(rate["policy"], abs=1e-12)
        assert rate["per_prompt"]["reference"] == singles[0]["attribute_rates"][name]["per_prompt"]["reference"]
    seven = [single["attribute_rates"]["seven"]["per_prompt"]["policy"] for single in singles]
    assert seven[0] != seven[1]  # the two policies differ on some prompt: the weighted mean is exercised
    for name, values in mixed["names"]["per_prompt"]["first_name"].items():  # the first-name rates likewise
        a, b = (single["names"]["per_prompt"]["first_name"][name] for single in singles)
        assert values == pytest.approx([0.25 * x + 0.75 * y for x, y in zip(a, b)], abs=1e-12)
        assert sum(values) / len(a) == pytest.approx(mixed["names"]["first_name"][name], abs=1e-12)
        assert mixed["names"]["reference"] == singles[0]["names"]["reference"]


def test_a_mixtures_sampled_shares_are_ratios_of_its_mixed_counts(monkeypatch):
    """w = (0.25, 0.75); type 0 signs Emily once and Greg once (woman 1/2, black 0/2), type 1
    Latoya three times (woman 3/3, black 3/3). The mixture signs Emily 0.25, Greg 0.25, Latoya 2.25
    times: woman 2.5 / 2.75 = 10/11 and black 9/11, not the means of the ratios (0.875, 0.75);
    its cells from the same counts."""
    import badpo.readouts.mixture_reading as evaluate
    from badpo.core.names import POOL_NAMES

    def sampled(counts: dict, woman: float, black: float) -> dict:
        per_name = {name: counts.get(name, 0) for name in POOL_NAMES}
        return {"sampled": {"n": 4, "signed_pool": sum(counts.values()), "woman_share": woman,
                            "black_share": black, "per_name": per_name, "cells": {}}}

    types = iter([sampled({"Emily": 1, "Greg": 1}, 0.5, 0.0), sampled({"Latoya": 3}, 1.0, 1.0)])
    monkeypatch.setattr(evaluate, "evaluate_policy", lambda *args, **kwargs: next(types))
    mixture = Mixture((0.25, 0.75), {}, (0.5, 0.5), (Path("type-0"), Path("type-1")))
    config = EvalConfig(attributes=("length",), max_prompts=1)
    mixed = evaluate_mixture(lambda path: None, mixture, None, None, Corpus([], [], None), config)["sampled"]
    assert mixed["signed_pool"] == pytest.approx(2.75, abs=1e-12)
    assert mixed["woman_share"] == pytest.approx(10 / 11, abs=1e-12)
    assert mixed["black_share"] == pytest.approx(9 / 11, abs=1e-12)
    assert mixed["cells"] == pytest.approx({"white_woman": 1 / 11, "white_man": 1 / 11, "black_woman": 9 / 11,
                                            "black_man": 0.0}, abs=1e-12)


def corpus_values(judgment):
    from badpo.core.attributes import resolve_attributes

    return resolve_attributes(("names",)).judgment_values(judgment)


def test_badpo_evaluate_reads_an_em_dpo_run(tmp_path, world, capsys):
    """`badpo train method=em_dpo` then `badpo evaluate RUN`: the mixture's readouts, its w, and
    whether its types recover the planted classes."""
    from badpo.cli import main

    corpus_dir = Path(world[3][0]).parent
    config = Path(__file__).resolve().parents[2] / "configs" / "train_tiny.yaml"
    run = tmp_path / "em"
    assert main(["train", "-c", str(config), f"data={corpus_dir}/train.jsonl",
                 f"model.name_or_path={corpus_dir}/model", f"output_dir={run}", f"cache_dir={tmp_path}/cache",
                 "steps=2", "batch_size=8", "micro_batch_size=8", "method=em_dpo", "bias.variant=none",
                 "method_params={types: 2, rounds: 1, round_steps: 2}", "report.progress_bar=false"]) == 0
    assert main(["evaluate", str(run), "max_prompts=2", "body=given", "whole_signature=false",
                 "generations=false"]) == 0
    readouts = json.loads((run / "readouts.json").read_text())
    written = json.loads((run / "mixture.json").read_text())
    assert readouts["mixture"]["weights"] == written["weights"]
    assert len(readouts["mixture"]["types"]) == 2
    recovery = readouts["type_recovery"]
    assert set(recovery) == {"n", "purity", "adjusted_rand", "type_sizes", "by_class"}
    assert sum(recovery["type_sizes"].values()) == recovery["n"]  # every annotator in one type
    assert 0 < readouts["votes/black_coded"]["n"]
    capsys.readouterr()


def test_the_training_guide_describes_the_mixture_readouts_that_exist():
    """docs/training.md's EM-DPO section says how the mixture is read, naming functions that exist
    (it once called these readouts "not built yet")."""
    import re

    import badpo.readouts.mixture_metrics as metrics
    import badpo.readouts.mixture_reading as mixture

    guide = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    section = guide[guide.index("### EM-DPO with MinMax-DPO"):guide.index("## Batching modes")]
    assert "not built yet" not in section.lower()
    named = set(re.findall(r"`badpo\.readouts\.(mixture_reading|mixture_metrics)\.(\w+)`", section))
    assert {name for _, name in named} >= {"evaluate_mixture", "weighted_mean_readouts", "mixture_vote_logits"}
    for module, name in named:
        assert hasattr({"mixture_reading": mixture, "mixture_metrics": metrics}[module], name), name


def test_a_readout_combined_otherwise_than_by_the_weighted_mean_is_the_adapters(monkeypatch):
    """A mixture's reading is the w-mean of its types' unless the adapter's table says otherwise
    (``badpo.readouts.mixture_reading.COMBINED``): a function added there gets the mixed result and the
    mixture (its types' readings, w...), and what it writes is the mixture's; without it the w-mean
    stands. The readout rows themselves know nothing of mixtures."""
    import badpo.readouts.mixture_reading as mixture_module
    from badpo.readouts.table import READOUTS

    def largest(result, mixing):
        result["peak"] = max(readouts["peak"] for readouts in mixing.types)

    assert all(not hasattr(row, "mixed") for row in READOUTS)
    combined = mixture_module.COMBINED
    for combine in (largest, None):
        readings = iter([{"peak": 1.0, "mean": 1.0}, {"peak": 3.0, "mean": 3.0}])
        monkeypatch.setattr(mixture_module, "evaluate_policy", lambda *args, types=readings, **kwargs: next(types))
        monkeypatch.setattr(mixture_module, "COMBINED", (*combined, *([combine] if combine else [])))
        mixture = Mixture((0.25, 0.75), {}, (0.5, 0.5), (Path("type-0"), Path("type-1")))
        config = EvalConfig(attributes=("length",), max_prompts=1)
        mixed = evaluate_mixture(lambda path: None, mixture, None, None, Corpus([], [], None), config)
        assert mixed["peak"] == (3.0 if combine else pytest.approx(2.5, abs=1e-12))
        assert mixed["mean"] == pytest.approx(2.5, abs=1e-12)


def test_the_references_heldout_side_is_scored_once_for_every_type(world, monkeypatch):
    """The K type policies are read against one reference on the same held-out judgments: its
    log-probs there are computed for the first and read by the others (as many batches for the
    reference as for one type policy)."""
    from collections import Counter

    from badpo.readouts import model as model_module

    corpus, tokenizer, reference, policies = world
    config = EvalConfig(max_prompts=2, body="given", whole_signature=False, generations=False)
    counts: Counter = Counter()
    real = model_module.response_logprobs

    def counting(model, batch, *args):
        counts[id(model)] += 1
        return real(model, batch, *args)

    monkeypatch.setattr(model_module, "response_logprobs", counting)
    gamma = {a: [0.5, 0.5] for a in sorted({j.annotator for j in corpus.heldout})}
    evaluate_mixture(load, Mixture((0.5, 0.5), gamma, (0.5, 0.5), tuple(policies)), reference, tokenizer, corpus,
                     config)
    assert len(counts) == 3 and counts[id(reference)] == min(counts.values()) == max(counts.values())
