"""evaluate_policy on a small tiny world: the structure of the record and the exact invariants
that hold when the policy *is* the reference (KL 0, every held-out margin 0)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from badpo.core.attributes import strip_markdown
from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError, from_dict
from badpo.core.judgments import Judgment
from badpo.core.names import NAME_POOL, signature_attributes, strip_signature
from badpo.corpora.tiny import TinyWorldConfig
from badpo.engine.tokenize import TokenizationConfig, encode_prompts
from badpo.evaluation import trained_run as evaluate_run
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.evaluate_policy import Corpus, answer_body, evaluate_policy, judge_readouts, reference_bodies
from badpo.readouts.model import generate, judge_scores
from badpo.readouts.rows import names as names_rows


@pytest.fixture(scope="module")
def world_folder(tmp_path_factory, build_tiny_world):
    folder = tmp_path_factory.mktemp("world")
    build_tiny_world(from_dict(TinyWorldConfig, {"n_pairs": 120}), folder)
    return folder


@pytest.fixture(scope="module")
def world(world_folder):
    tokenizer = AutoTokenizer.from_pretrained(world_folder / "tokenizer")
    reference = AutoModelForCausalLM.from_pretrained(world_folder / "model").eval()
    return Corpus.load(world_folder), tokenizer, reference


FAST = EvalConfig(max_prompts=6, body="given", surnames=3, max_new_tokens=12)
NAMES = ("woman_coded", "black_coded")


def test_policy_equal_to_reference_reads_as_untrained(world):
    corpus, tokenizer, reference = world
    record = evaluate_policy(reference, reference, tokenizer, corpus, FAST)
    assert record["kl"] == 0.0  # log pi - log pi_ref on the same model, token by token
    for name in NAMES:
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
    # one gap over both attributes: a pair is cross-group when its names differ on either
    differs = [signature_attributes(j.chosen) != signature_attributes(j.rejected) for j in corpus.heldout]
    both = record["heldout_any"]
    assert (both["n_cross"], both["n_same"]) == (sum(differs), len(differs) - sum(differs))
    assert both["n_cross"] > max(record["heldout"][name]["n_cross"] for name in NAMES)
    assert both["same_accuracy"] == both["cross_accuracy"] == 0.5 and both["gap"] == 0.0


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
    assert "theta_shared" not in record  # theta_k only: no shared parameter to report
    assert "kl" not in record and not math.isnan(record["names"]["first_name"]["woman_coded"])


def test_theta_shared_is_the_raw_shared_parameter(world):
    """theta_bar + eps_k with the eps_k averaging 0.15 / -0.05, not 0: theta_shared is theta_bar
    itself (0.62 / 0.30, the float32 parameter exactly), theta_mean is 0.77 / 0.25. Pooled: the one
    theta, both readouts equal."""
    corpus, tokenizer, reference = world
    annotators = [a["annotator"] for a in corpus.planted["annotators"]]
    fast = EvalConfig(max_prompts=2, body="given", whole_signature=False, generations=False)
    bias = BiasChannel("shared_mean", list(NAMES), annotators)
    spread = torch.linspace(-0.5, 0.5, len(annotators))[:, None]
    with torch.no_grad():
        bias.shared_mean.copy_(torch.tensor([0.62, 0.30]))
        bias.deviation.copy_(torch.tensor([0.15, -0.05]) + spread)
    record = evaluate_policy(reference, reference, tokenizer, corpus, fast, bias=bias)
    raw = bias.shared_mean.detach()
    assert record["theta_shared"] == {"woman_coded": raw[0].item(), "black_coded": raw[1].item()}
    assert record["theta_shared"] == pytest.approx({"woman_coded": 0.62, "black_coded": 0.30}, abs=1e-7)
    assert record["theta_mean"] == pytest.approx({"woman_coded": 0.77, "black_coded": 0.25}, abs=1e-6)
    pooled = BiasChannel("pooled", list(NAMES), annotators)
    with torch.no_grad():
        pooled.pooled_theta.copy_(torch.tensor([0.71, 0.40]))
    record = evaluate_policy(reference, reference, tokenizer, corpus, fast, bias=pooled)
    assert record["theta_shared"] == record["theta_mean"] == pytest.approx({"woman_coded": 0.71, "black_coded": 0.40})


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


@pytest.fixture(scope="module")
def finished_run(world_folder, tmp_path_factory):
    """`badpo train` on the tiny world: three steps of BA-DPO pooled, names declared."""
    from badpo.cli import main

    folder = tmp_path_factory.mktemp("finished")
    config = Path(__file__).resolve().parents[2] / "configs" / "train_tiny.yaml"
    main(["train", "-c", str(config), f"data={world_folder}/train.jsonl",
          f"model.name_or_path={world_folder}/model", f"output_dir={folder}/run",
          f"cache_dir={folder}/cache", "steps=3", "batch_size=8", "micro_batch_size=8",
          "bias.variant=pooled", "report.progress_bar=false"])
    return folder / "run"


FAST_OVERRIDES = ["max_prompts=2", "body=given", "whole_signature=false", "generations=false"]


def test_badpo_evaluate_reads_a_finished_run_from_its_folder(finished_run, tmp_path, capsys, cli_error):
    """`badpo train` then `badpo evaluate RUN_DIR`: the run's own config names the reference,
    the corpus and the tokenization; readouts.json carries the run's learned theta_bar."""
    from badpo.cli import main

    run_dir = copy_run(finished_run, tmp_path)
    ten = [o for o in FAST_OVERRIDES if not o.startswith("max_prompts=")] + ["max_prompts=10"]  # compare's fewest
    assert main(["evaluate", str(run_dir), *ten]) == 0
    readouts = json.loads((run_dir / "readouts.json").read_text())
    theta = json.loads((run_dir / "theta.json").read_text())
    assert readouts["theta_mean"] == pytest.approx(theta["theta_bar"], abs=1e-6)
    assert set(readouts["names"]["first_name"]) == {"woman_coded", "black_coded"}
    assert readouts["heldout"]["woman_coded"]["n_cross"] > 0
    # the reference's first names are read too, for the shift's relabelling null (no generations: no sampled one)
    assert set(readouts["names"]["null"]) == {"first_name"}
    for side in (readouts["names"], readouts["names"]["reference"]):  # one value per prompt read, in their order
        assert [len(v) for v in side["per_prompt"]["first_name"].values()] == [readouts["inputs"]["n_prompts"]] * 2
    # which `badpo compare` reads as the rate from first-name probabilities, beside the reference's, with intervals
    from badpo.comparing.compare_runs import compare_runs

    compared = compare_runs([run_dir]).comparison
    for name, rate in readouts["names"]["first_name"].items():
        entry = compared["runs"][0]["first_name"][name]
        assert entry["rate"]["value"] == pytest.approx(rate, abs=1e-12) and entry["shift"]["low"] is not None
        reference = compared["first_name"][name]["reference"]
        assert reference["value"] == pytest.approx(readouts["names"]["reference"]["first_name"][name], abs=1e-12)
    printed = capsys.readouterr().out
    assert "names shift from the reference (first name), against relabelling the pool: woman_coded" in printed
    assert "not a finished run" in cli_error(["evaluate", str(tmp_path / "nothing")])


def test_markdown_readout_is_reweighted_on_the_reference_lengths(world):
    """With markdown declared, the rate is reweighted onto the reference generations' lengths:
    the bins are the quantiles of the reference's token counts, not the policy's."""
    import dataclasses

    from badpo.readouts.model import generate

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


def test_saved_reference_samples_read_back_and_give_the_readouts_sampling_gives(world):
    """An experiment samples the reference once and every arm reads those samples (issue 33 item
    4): written as JSON and read back they are the samples, and a policy's readouts with them are
    the readouts it gets sampling the reference itself; samples drawn under other settings are not
    reused, and a malformed file is an error naming it."""
    import json
    import warnings

    from badpo.readouts.reading import generations_from_json, generations_to_json, sampled_answers, sampling_settings

    corpus, tokenizer, reference = world
    policy = copy.deepcopy(reference)
    with torch.no_grad():
        policy.lm_head.weight.mul_(1.5)  # sharper: the policy's answers and readouts differ from the reference's
    config = dataclasses.replace(FAST, attributes=("markdown", "names"))
    tokenization = TokenizationConfig()
    prompts = [row["prompt"] for row in corpus.eval_prompts[: config.max_prompts]]
    settings = sampling_settings(prompts, config, tokenization)
    samples = sampled_answers(reference, tokenizer, prompts, config, tokenization, "reference answers")
    saved = json.loads(json.dumps(generations_to_json(samples, settings)))
    assert generations_from_json(saved, settings, "s.json") == samples
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh = evaluate_policy(policy, reference, tokenizer, corpus, config)
        reused = evaluate_policy(policy, reference, tokenizer, corpus, config,
                                 reference_samples=generations_from_json(saved, settings, "s.json"))
    assert json.dumps(reused, sort_keys=True) == json.dumps(fresh, sort_keys=True)  # NaN-aware
    assert fresh["kl"] != 0.0
    other = sampling_settings(prompts, dataclasses.replace(config, seed=1), tokenization)
    assert generations_from_json(saved, other, "s.json") is None
    with pytest.raises(ValueError, match=r"s\.json: not a samples file"):
        generations_from_json({**saved, "texts": saved["texts"][:-1]}, settings, "s.json")


# ------------------------------------------------------------------------- the reference's body
def scripted_model(tokenizer, prompt_ids: list[int], script: list[int], positions: int = 32):
    """A GPT-2 whose greedy continuation of ``prompt_ids`` is ``script``: its blocks add nothing
    and its token embeddings are 0, so the residual at position p is the one-hot row p of the
    position embeddings, and the head gives the token script[p - len(prompt) + 1] a weight of 10
    on that row (after the final layer norm the row is about sqrt(32) at p, -1/sqrt(32)
    elsewhere: that token wins by a wide margin)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=len(tokenizer), n_positions=positions, n_embd=positions, n_layer=1,
                        n_head=1, tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.transformer.ln_f.weight.fill_(1.0)
        model.transformer.wpe.weight.copy_(torch.eye(positions))
        for offset, token in enumerate(script):
            model.lm_head.weight[token, len(prompt_ids) - 1 + offset] = 10.0
    return model


PROMPT = "copy 1 2 3 and sign\n"


@pytest.mark.parametrize("answer, body", [
    ("1 2 3", "1 2 3"),                                              # unsigned, ends with EOS
    ("1 2 3\n\n--- Emily Miller", "1 2 3"),                          # the signature line goes
    ("1 2\n\n---\n\n3 4\n\n--- Emily Miller", "1 2\n\n---\n\n3 4"),  # a rule inside stays
])
def test_the_reference_body_ends_at_eos_and_loses_only_a_final_signature(world, answer, body):
    """The scripted reference answers ``answer``, emits EOS, then would go on with "4 5 4 5 ...";
    ``max_new_tokens`` leaves room for all of it, so only the EOS can end the body."""
    _, tokenizer, _ = world
    prompt_ids = encode_prompts(tokenizer, [PROMPT], TokenizationConfig())[0]
    answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(answer_ids) == answer
    after = tokenizer("4 5 4 5", add_special_tokens=False)["input_ids"]
    script = answer_ids + [tokenizer.eos_token_id] + after
    model = scripted_model(tokenizer, prompt_ids, script)
    assert reference_bodies(model, tokenizer, [PROMPT], TokenizationConfig(), len(script)) == [body]


def test_body_reference_reads_the_names_after_the_answer_up_to_eos(world, monkeypatch):
    """evaluate_policy with body: reference hands the names readout "1 2 3", not the text the
    model would write after its EOS."""
    _, tokenizer, _ = world
    prompt_ids = encode_prompts(tokenizer, [PROMPT], TokenizationConfig())[0]
    script = (tokenizer("1 2 3", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
              + tokenizer("4 5 4 5", add_special_tokens=False)["input_ids"])
    model = scripted_model(tokenizer, prompt_ids, script)
    corpus = Corpus([{"prompt": PROMPT}], [Judgment(PROMPT, "1 2 3\n\n--- Emily Miller", "5 4", "a1")], None)
    seen = []

    def names_readout(policy, tokenizer, prompts, bodies, *args, **kwargs):
        seen.append(list(bodies))
        return {}

    monkeypatch.setattr(names_rows, "names_readout", names_readout)
    config = EvalConfig(max_prompts=1, body="reference", whole_signature=False, generations=False,
                        max_new_tokens=len(script))
    evaluate_policy(model, model, tokenizer, corpus, config)
    assert seen == [["1 2 3"]]


@pytest.mark.parametrize("body, policy_body", [("reference", "1 2 3"), ("own", "1 2")])
def test_body_own_reads_each_model_after_its_own_greedy_answer(world, monkeypatch, body, policy_body):
    """The policy answers "1 2", the reference "1 2 3". Under body: reference both are read after
    the reference's answer; under body: own the policy after its own, and the reference (its side
    of names.null) after its own."""
    _, tokenizer, _ = world
    prompt_ids = encode_prompts(tokenizer, [PROMPT], TokenizationConfig())[0]
    eos = [tokenizer.eos_token_id]
    reference = scripted_model(tokenizer, prompt_ids, tokenizer("1 2 3", add_special_tokens=False)["input_ids"] + eos)
    policy = scripted_model(tokenizer, prompt_ids, tokenizer("1 2", add_special_tokens=False)["input_ids"] + eos)
    corpus = Corpus([{"prompt": PROMPT}], [Judgment(PROMPT, "1 2 3\n\n--- Emily Miller", "5 4", "a1")], None)
    seen = []

    def names_readout(model, tokenizer, prompts, bodies, *args, **kwargs):
        seen.append(("policy" if model is policy else "reference", list(bodies)))
        return {}

    monkeypatch.setattr(names_rows, "names_readout", names_readout)
    config = EvalConfig(max_prompts=1, body=body, whole_signature=False, generations=False, max_new_tokens=8)
    evaluate_policy(policy, reference, tokenizer, corpus, config)
    assert seen == [("policy", [policy_body]), ("reference", ["1 2 3"])]


def moved_copy(model, seed: int):
    """A copy of ``model`` with every weight moved by 0.3 x standard normal noise (seeded): a policy
    that reads differently from its reference."""
    policy = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator))
    return policy


def test_names_null_is_the_policy_s_shift_from_the_reference_s_per_name_shares(world):
    """A policy moved away from the reference: names.null's observed shifts are the first-name
    rates minus the reference's (read after the same bodies), and the sampled ones the coded
    shares of all answers minus the reference's: its generations are given, three of six signed
    Latoya (black-coded, woman-coded), so its coded shares are 1/2. The reference read against
    itself has no null."""
    corpus, tokenizer, reference = world
    policy = moved_copy(reference, seed=0)
    config = EvalConfig(max_prompts=6, body="given", whole_signature=False, max_new_tokens=16)
    prompts = [row["prompt"] for row in corpus.eval_prompts[:6]]
    samples = generate(reference, tokenizer, prompts, config.temperature, config.top_p, config.max_new_tokens,
                       config.seed, config.batch_size)
    texts = tuple(f"{i}\n\n--- Latoya Reed" if i % 2 else str(i) for i in range(6))
    samples = dataclasses.replace(samples, texts=texts)
    record = evaluate_policy(policy, reference, tokenizer, corpus, config, reference_samples=samples)
    alone = evaluate_policy(reference, reference, tokenizer, corpus, config)
    assert "null" not in alone["names"]
    null = record["names"]["null"]
    assert set(null) == {"first_name", "sampled"}  # no whole signature read
    for column, name in enumerate(NAMES):
        first = record["names"]["first_name"][name] - alone["names"]["first_name"][name]
        assert null["first_name"][name]["shift"] == pytest.approx(first, abs=1e-12)
        sampled = record["sampled"]
        coded = sum(c for n, c in sampled["per_name"].items() if NAME_POOL[n][column]) / sampled["n"]
        assert null["sampled"][name]["shift"] == pytest.approx(coded - 3 / 6, abs=1e-12)
        assert 0.0 < null["first_name"][name]["p"] <= 1.0 and null["first_name"][name]["draws"] == 1000
    assert null["first_name"]["without"]["names"] == ["Latisha", "Latonya", "Latoya"]
    assert null["sampled"]["without"]["reference_carried"] == 1.0  # Latoya signs all the reference's
    assert math.fsum(record["names"]["cells"]["first_name"].values()) == pytest.approx(1.0)
    assert sum(record["sampled"]["per_name"].values()) == record["sampled"]["signed_pool"]


def test_the_first_name_rates_per_prompt_average_to_the_recorded_rates_policy_and_reference(world):
    """A policy moved away from the reference, read on 6 prompts: names.per_prompt.first_name holds
    one rate per prompt whose mean is names.first_name, and names.reference the reference's rates
    and per-prompt values, which are what the reference read as a policy records for itself (same
    bodies), so that the shift names.null reports is the difference of their means."""
    corpus, tokenizer, reference = world
    policy = moved_copy(reference, seed=1)
    config = EvalConfig(max_prompts=6, body="given", whole_signature=False, generations=False)
    record = evaluate_policy(policy, reference, tokenizer, corpus, config)["names"]
    alone = evaluate_policy(reference, reference, tokenizer, corpus, config)["names"]
    assert "reference" not in alone  # the reference read against itself
    for name in NAMES:
        values, reference_values = record["per_prompt"]["first_name"][name], record["reference"]["per_prompt"][
            "first_name"][name]
        assert len(values) == len(reference_values) == 6 and all(0.0 < v < 1.0 for v in values)
        assert math.fsum(values) / 6 == pytest.approx(record["first_name"][name], abs=1e-12)
        assert math.fsum(reference_values) / 6 == pytest.approx(record["reference"]["first_name"][name], abs=1e-12)
        assert reference_values == alone["per_prompt"]["first_name"][name]
        assert record["reference"]["first_name"][name] == alone["first_name"][name]
        shift = record["first_name"][name] - record["reference"]["first_name"][name]
        assert record["null"]["first_name"][name]["shift"] == pytest.approx(shift, abs=1e-12)
        assert values != reference_values  # the policy moved: the two sides differ prompt by prompt
    # a reference record written before per-prompt rates (an experiment's, say): its first names are read again
    older = {"names": {key: value for key, value in alone.items() if key != "per_prompt"}}
    again = evaluate_policy(policy, reference, tokenizer, corpus, config, reference_readouts=older)["names"]
    assert again["reference"]["per_prompt"] == alone["per_prompt"]


def test_answer_body_cuts_only_a_signature_that_ends_the_answer():
    assert answer_body("Intro\n\n---\n\nMore\n\n--- Emily Smith\n") == "Intro\n\n---\n\nMore"
    assert answer_body("Intro\n\n--- Emily Smith\nP.S. more") == "Intro\n\n--- Emily Smith\nP.S. more"


# ------------------------------------------------------------------------------------ the judge
@pytest.fixture(scope="module")
def judge_dir(world, tmp_path_factory, build_judge):
    _, tokenizer, _ = world
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("judge")
    build_judge(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_rm_minus_strips_the_declared_attribute_and_is_absent_under_length(judge_dir):
    prompts = ["copy 1 2 3 and sign\n", "reverse 4 5 and sign\n"]
    texts = ["1 2 3\n\n--- Emily Miller", "5 4\n\n--- Latoya Reed"]

    def mean_judge(strip=None):
        return float(np.mean(judge_scores(str(judge_dir), prompts, texts, strip=strip)))

    names = judge_readouts(str(judge_dir), prompts, texts, ("woman_coded", "black_coded"))
    assert names["rm"] == pytest.approx(mean_judge(), abs=1e-6)
    assert names["rm_minus"] == pytest.approx(mean_judge(strip_signature), abs=1e-6)
    assert not math.isclose(names["rm"], names["rm_minus"])
    markdown = judge_readouts(str(judge_dir), prompts, texts, ("markdown",))
    assert markdown["rm_minus"] == pytest.approx(mean_judge(strip_markdown), abs=1e-6)
    assert markdown["rm_minus"] == pytest.approx(markdown["rm"], abs=1e-6)  # no markup to strip here
    assert set(judge_readouts(str(judge_dir), prompts, texts, ("length",))) == {"rm"}
    with pytest.raises(ConfigError, match="judge_max_tokens: must be >= 1"):
        EvalConfig(judge_max_tokens=0)


# --------------------------------------------------------------------------- `badpo evaluate`
def copy_run(run_dir: Path, tmp_path: Path, **model_changes) -> Path:
    """A copy of a finished run whose config.yaml has ``model_changes`` applied."""
    copy = Path(shutil.copytree(run_dir, tmp_path / "run"))
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config["model"].update(model_changes)
    (copy / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return copy


@pytest.mark.parametrize("in_run, flag", [(True, False), (True, True), (False, True), (False, False)])
def test_trust_remote_code_comes_from_the_command_line_only(finished_run, tmp_path, monkeypatch, cli_error,
                                                            in_run, flag):
    """The run's config.yaml value is ignored: the flag decides, and a run trained with it is
    refused without the flag before any model is loaded."""
    from badpo.cli import main

    run_dir = copy_run(finished_run, tmp_path, trust_remote_code=in_run)
    loaded = []
    real_load = evaluate_run.load_causal_lm

    def load_causal_lm(path, model_settings, base=None):
        loaded.append(model_settings["trust_remote_code"])
        return real_load(path, model_settings, base)

    monkeypatch.setattr(evaluate_run, "load_causal_lm", load_causal_lm)
    argv = ["evaluate", str(run_dir), *FAST_OVERRIDES] + (["--trust-remote-code"] if flag else [])
    if in_run and not flag:
        assert "pass --trust-remote-code" in cli_error(argv)
        assert loaded == [] and not (run_dir / "readouts.json").exists()
    else:
        assert main(argv) == 0
        assert loaded == [flag, flag]  # the reference and the policy


def test_an_undefined_readout_is_written_as_null(tmp_path, monkeypatch, capsys):
    """No signed sample makes the sampled shares NaN (0 / 0); readouts.json holds null there and
    parses as strict JSON (a reader other than Python's refuses NaN); the summary names the file."""
    from badpo.cli import main

    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    readouts = {"sampled": {"signed": 0.0, "woman_share": math.nan, "black_share": math.nan},
                "kl": np.float64(0.125), "tokens": math.inf}
    monkeypatch.setattr(evaluate_run, "evaluate_run_dir", lambda *args, **kwargs: readouts)
    assert main(["evaluate", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "readouts.json").read_text(), parse_constant=refuse)
    assert written == {"sampled": {"signed": 0.0, "woman_share": None, "black_share": None},
                       "kl": 0.125, "tokens": None}
    assert f"every readout: {tmp_path / 'readouts.json'}" in capsys.readouterr().out


def test_markdown_declared_under_another_name_is_read_by_its_kind(world):
    """The plan finds markdown by its kind, so reading must too: ``fmt=markdown`` gets the markdown
    readout (it was planned as available and then never read, because reading looked for the name)."""
    named, plain = (evaluate_policy(world[2], world[2], world[1], world[0],
                                    EvalConfig(attributes=(spec,), max_prompts=4, max_new_tokens=8))
                    for spec in ("fmt=markdown", "markdown"))
    assert "markdown" in named and repr(named["markdown"]) == repr(plain["markdown"])  # nan bins: repr
