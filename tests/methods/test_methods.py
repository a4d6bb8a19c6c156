"""The baselines as methods: hand-worked losses, the identities that tie each to DPO, and resume.

The losses are pure functions of a JudgmentBatch, worked out by hand below; the identities run
the real engine on the tiny fixture world.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from badpo.core.config import ConfigError
from badpo.engine.train import train
from badpo.methods import (
    METHODS,
    CrowdParams,
    GroupParams,
    GroupWeights,
    IPOParams,
    JudgmentBatch,
    RDPOParams,
    arm_name,
    get_arm,
    ipo_terms,
    r_dpo_terms,
    sample_seeds,
    sampo_terms,
)
from fixtures.engine import judgment_rows, log_records, make_config, write_jsonl


def _batch(**views) -> JudgmentBatch:
    """One judgment: pi(y_w) = -1, pi(y_l) = -2, pi_ref = -1.5 for both; beta 0.1, so
    u = 0.1 ((-1 + 1.5) - (-2 + 1.5)) = 0.1 and the log-ratio margin h = 1."""
    base = dict(policy_chosen=torch.tensor([-1.0]), policy_rejected=torch.tensor([-2.0]),
                reference_chosen=torch.tensor([-1.5]), reference_rejected=torch.tensor([-1.5]),
                bias_logit=torch.tensor([0.0]), beta=0.1, sample_seeds=torch.tensor([7]))
    return JudgmentBatch(**{**base, **views})


def test_r_dpo_adds_alpha_times_the_token_length_difference():
    """|y_w| = 10, |y_l| = 4, alpha = 0.005: logit 0.1 + 0.005 * 6 = 0.13,
    loss log(1 + e^-0.13) = 0.630258."""
    terms = r_dpo_terms(_batch(chosen_lengths=torch.tensor([10]), rejected_lengths=torch.tensor([4])),
                        RDPOParams())
    assert float(terms.losses) == pytest.approx(0.6302582, abs=1e-6)
    assert float(terms.chosen_rewards) == pytest.approx(0.05) and float(terms.rejected_rewards) == pytest.approx(-0.05)
    with_bias = r_dpo_terms(_batch(chosen_lengths=torch.tensor([10]), rejected_lengths=torch.tensor([4]),
                                   bias_logit=torch.tensor([-0.03])), RDPOParams())
    assert float(with_bias.losses) == pytest.approx(math.log1p(math.exp(-0.1)), abs=1e-6)


def test_ipo_regresses_the_margin_plus_the_bias_to_one_over_two_tau():
    """h = 1, b = 0.5, tau = 0.5: (1 + 0.5 - 1)^2 = 0.25; b = 0: (1 - 1)^2 = 0."""
    assert float(ipo_terms(_batch(bias_logit=torch.tensor([0.5])), IPOParams(tau=0.5)).losses) == pytest.approx(0.25)
    assert float(ipo_terms(_batch(), IPOParams(tau=0.5)).losses) == pytest.approx(0.0)
    with pytest.raises(ConfigError, match="method_params.tau: must be > 0"):
        IPOParams(tau=0.0)


def test_sampo_keeps_the_shorter_count_of_the_longer_side_uniformly():
    """Chosen log-ratios (1, 2, 3, 4), rejected (0.5, 0.5): SamPO keeps 2 of the 4 chosen terms.
    Each of the 6 pairs of positions is equally likely: over 1,200 seeds each appears 200 times
    on average (binomial sd 12.9; the bounds 140..260 are 4.6 sd)."""
    chosen, rejected = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0.5, 0.5])
    sums = Counter()
    for seed in range(1200):
        batch = _batch(chosen_token_logratios=(chosen,), rejected_token_logratios=(rejected,),
                       sample_seeds=torch.tensor([seed]))
        terms = sampo_terms(batch)
        kept = float(terms.chosen_rewards) / 0.1  # beta * (sum of kept chosen terms - 0)
        assert float(terms.rejected_rewards) == pytest.approx(0.1)  # 0.1 * (0.5 + 0.5)
        u = 0.1 * (kept - 1.0)
        assert float(terms.losses) == pytest.approx(math.log1p(math.exp(-u)), abs=1e-6)
        sums[round(kept)] += 1
    # pair sums: 1+2=3, 1+3=4, 1+4=5, 2+3=5, 2+4=6, 3+4=7 -> sum 5 is two pairs
    assert set(sums) == {3, 4, 5, 6, 7}
    for total, count in sums.items():
        expected = 400 if total == 5 else 200
        assert expected - 60 * (2 if total == 5 else 1) < count < expected + 60 * (2 if total == 5 else 1)
    same = _batch(chosen_token_logratios=(chosen,), rejected_token_logratios=(rejected,))
    assert torch.equal(sampo_terms(same).losses, sampo_terms(same).losses)  # the seed fixes the draw


def test_sampo_on_equal_lengths_is_dpo():
    ratios = (torch.tensor([0.2, -0.1, 0.4]),), (torch.tensor([-0.3, 0.1, 0.0]),)
    terms = sampo_terms(_batch(chosen_token_logratios=ratios[0], rejected_token_logratios=ratios[1]))
    u = 0.1 * (0.5 - (-0.2))
    assert float(terms.losses) == pytest.approx(math.log1p(math.exp(-u)), abs=1e-7)


def test_sample_seeds_depend_on_seed_step_and_judgment_only():
    a = sample_seeds(42, 3, torch.tensor([5, 9, 11]))
    assert a.tolist() == sample_seeds(42, 3, torch.tensor([11, 5, 9]))[[1, 2, 0]].tolist()
    assert len({*a.tolist(), *sample_seeds(42, 4, torch.tensor([5, 9, 11])).tolist(),
                *sample_seeds(43, 3, torch.tensor([5, 9, 11])).tolist()}) == 9


def test_group_weights_by_hand():
    """Groups of the step's 4 judgments: (0, 0, 0, 1), q = (1/2, 1/2): a judgment of group 0
    weighs 1/2 * 4 / 3 = 2/3, of group 1 1/2 * 4 / 1 = 2 (sum 4 = N). Losses (1, 1, 1, 3):
    L = (1, 3); Group-DRO moves q to softmax(log q + 0.5 L) = (1 / (1 + e), e / (1 + e)) =
    (0.268941, 0.731059); Crowd-PrefRL (direction -1) to (0.731059, 0.268941)."""
    groups, judgments = torch.tensor([0, 0, 0, 1]), torch.arange(4)
    for direction, q0 in ((+1, 1 / (1 + math.e)), (-1, 1 / (1 + math.exp(-1)))):
        weights = GroupWeights(groups, ("a", "b"), eta=0.5, direction=direction)
        w = weights.weights(judgments, judgments)
        assert w.tolist() == pytest.approx([2 / 3, 2 / 3, 2 / 3, 2.0]) and float(w.sum()) == pytest.approx(4)
        weights.observe(judgments[:2], torch.tensor([1.0, 1.0]))  # two micro-batches
        weights.observe(judgments[2:], torch.tensor([1.0, 3.0]))
        logged = weights.update(lambda t: t)
        assert weights.q.tolist() == pytest.approx([q0, 1 - q0], abs=1e-12)
        # the sd of 2 q = (2 q0, 2 - 2 q0) around its mean 1: |1 - 2 q0|
        assert logged == {"group_weight": {"a": pytest.approx(q0), "b": pytest.approx(1 - q0)},
                          "group_weight_sd": pytest.approx(abs(1 - 2 * q0))}
        restored = GroupWeights(groups, ("a", "b"), eta=0.5, direction=direction)
        restored.load_state_dict(weights.state_dict())
        assert torch.equal(restored.q, weights.q)


def test_the_weight_sd_is_on_the_papers_scale_around_a_mean_of_one():
    """227 annotators (MultiPref): all the weight on one of them is G q = (227, 0, ..., 0), whose
    sd around the mean 1 is sqrt((226^2 + 226) / 227) = sqrt(226) = 15.03, the paper's "sd 15";
    equal weights have sd 0. Above 12 groups the log holds the spread, not every weight."""
    groups = torch.arange(227)
    weights = GroupWeights(groups, tuple(f"a{i}" for i in range(227)), eta=0.0, direction=1)
    assert weights.update(lambda t: t)["group_weight_sd"] == pytest.approx(0.0, abs=1e-12)
    weights.q = torch.zeros(227, dtype=torch.float64)
    weights.q[5] = 1.0
    logged = weights.update(lambda t: t)  # eta 0 keeps q
    assert logged == {"group_weight_max": 1.0, "group_weight_min": 0.0,
                      "group_weight_sd": pytest.approx(math.sqrt(226))}
    summary = weights.summary()["group_weights"]  # every weight, by name, for run.json
    assert len(summary) == 227 and summary["a5"] == 1.0 and sum(summary.values()) == 1.0


def test_a_group_absent_from_the_step_keeps_its_weight_and_gets_none_of_the_loss():
    weights = GroupWeights(torch.tensor([0, 1, 2, 2]), ("a", "b", "c"), eta=0.5, direction=1)
    step = torch.tensor([0, 2, 3])  # group b absent
    assert weights.weights(step, step).tolist() == pytest.approx([1.5, 0.75, 0.75])
    weights.observe(step, torch.tensor([2.0, 0.0, 0.0]))
    weights.update(lambda t: t)
    a, b, c = (1 / 3 * math.exp(1.0), 1 / 3, 1 / 3)
    assert weights.q.tolist() == pytest.approx([a / (a + b + c), b / (a + b + c), c / (a + b + c)])


def test_method_params_are_typed_and_checked():
    assert get_arm("r_dpo").parse_params({}).alpha == 0.005
    assert get_arm("r_dpo").parse_params({"alpha": 0.02}).alpha == 0.02
    assert get_arm("crowd_prefrl").parse_params({}) == CrowdParams("annotators", 0.5)
    assert get_arm("group_dro_dpo").parse_params({}) == GroupParams("classes", 0.5)
    with pytest.raises(ConfigError, match="unknown key.*method_params.alpa"):
        get_arm("r_dpo").parse_params({"alpa": 1})
    with pytest.raises(ConfigError, match="method_params.groups: 'people' is not one of"):
        get_arm("group_dro_dpo").parse_params({"groups": "people"})
    with pytest.raises(ConfigError, match="method_params: this method takes no parameters"):
        get_arm("dpo").parse_params({"alpha": 1})
    assert {"r_dpo", "sampo", "group_dro_dpo", "crowd_prefrl", "ipo"} <= set(METHODS)


# ------------------------------------------------------------------ identities on the real engine
@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("methods")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    one_class = [{**row, "annotator_class": "A"} for row in judgment_rows()]
    write_jsonl(root / "one_class.jsonl", one_class)
    # equal-length sides: every response is four words (+ EOS) long
    words = ["sure i think you", "maybe try that first", "yes good answer here", "no bad short answer"]
    rows = []
    for i, row in enumerate(judgment_rows()):
        a, b = words[i // 4 % 4], words[(i // 4 + 1) % 4]
        chosen, rejected = (a, b) if row["chosen"] < row["rejected"] else (b, a)
        rows.append({**row, "chosen": chosen, "rejected": rejected})
    write_jsonl(root / "equal.jsonl", rows)
    return root


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(out / "policy" / "model.safetensors")


def _same(a: Path, b: Path, exact: bool) -> None:
    ra, rb = log_records(a), log_records(b)
    for x, y in zip(ra, rb, strict=True):
        if exact:
            assert x["loss"] == y["loss"] and x["grad_norm"] == y["grad_norm"]
        else:
            assert x["loss"] == pytest.approx(y["loss"], rel=1e-6)
            assert x["grad_norm"] == pytest.approx(y["grad_norm"], rel=1e-5)
    for name, weight in _weights(a).items():
        if exact:
            assert torch.equal(weight, _weights(b)[name]), name
        else:
            torch.testing.assert_close(weight, _weights(b)[name], rtol=0, atol=2e-5)


@pytest.mark.parametrize("method, params, data, exact", [
    ("r_dpo", "{alpha: 0.0}", "judgments.jsonl", True),
    ("group_dro_dpo", "{}", "one_class.jsonl", True),
    ("sampo", "{}", "equal.jsonl", False),  # sums of token ratios: the same up to float order
    ("crowd_prefrl", "{groups: classes}", "one_class.jsonl", True),
])
def test_each_baseline_reduces_to_dpo(world, method, params, data, exact):
    common = (f"data={world / data}", "method_params={}")
    dpo = train(make_config(world, f"dpo-{data}-{method}", "method=dpo", *common))
    other = train(make_config(world, f"{method}-{data}", f"method={method}",
                              f"data={world / data}", f"method_params={params}"))
    _same(dpo, other, exact)


def test_group_weights_move_and_survive_stop_and_resume_bit_exactly(world):
    whole = train(make_config(world, "dro-whole", "method=group_dro_dpo", "steps=4"))
    first = train(make_config(world, "dro-split", "method=group_dro_dpo", "steps=4", "stop_after_steps=2"))
    resumed = train(make_config(world, "dro-split", "method=group_dro_dpo", "steps=4", "resume_from=latest"))
    assert first == resumed
    weights = [r["group_weight"] for r in log_records(whole)]
    assert weights == [r["group_weight"] for r in log_records(resumed)]
    assert weights[-1]["A"] != 0.5 and sum(weights[-1].values()) == pytest.approx(1.0)
    _same(whole, resumed, exact=True)
    # run.json keeps every group's final weight, the last logged ones
    assert json.loads((whole / "run.json").read_text())["group_weights"] == pytest.approx(weights[-1])


@pytest.mark.parametrize("method", ["r_dpo", "sampo", "group_dro_dpo", "crowd_prefrl", "ipo",
                                    "sampo_ba_pooled", "crowd_prefrl_ba_per_annotator"])
def test_every_baseline_trains_alone_and_with_a_learned_bias(world, method):
    out = train(make_config(world, f"short-{method}", f"method={method}", "steps=2"))
    record = log_records(out)[-1]
    assert math.isfinite(record["loss"]) and json.loads((out / "run.json").read_text())["method"] == method
    theta = json.loads((out / "theta.json").read_text())
    assert (theta["variant"] != "none") == ("_ba_" in method)


@pytest.mark.parametrize("method, params, data", [
    ("r_dpo_ba_shared_mean", "{alpha: 0.0}", "judgments.jsonl"),
    ("group_dro_dpo_ba_shared_mean", "{}", "one_class.jsonl"),
])
def test_a_baseline_with_a_learned_bias_reduces_to_ba_dpo(world, method, params, data):
    """alpha = 0, or a single group, leaves BA-DPO's loss: the same run to the bit, theta included."""
    ba_dpo = train(make_config(world, f"ba-{data}-{method}", "method=ba_dpo_shared_mean",
                               f"data={world / data}", "method_params={}"))
    other = train(make_config(world, f"{method}-{data}", f"method={method}",
                              f"data={world / data}", f"method_params={params}"))
    _same(ba_dpo, other, exact=True)
    assert (ba_dpo / "theta.json").read_text() == (other / "theta.json").read_text()
    assert all(value != 0.0 for value in json.loads((other / "theta.json").read_text())["theta_bar"].values())


def test_unknown_method_params_are_refused_before_loading(world):
    with pytest.raises(ConfigError, match="unknown key.*method_params.beta"):
        train(make_config(world, "bad", "method=r_dpo", "method_params={beta: 1}",
                          f"data={world / 'nowhere.jsonl'}"))


@pytest.mark.parametrize("name", sorted(arm_name(n, "pooled") for n, m in METHODS.items() if m.takes_bias))
def test_every_learned_theta_loss_is_its_link_of_its_logits(name):
    """The level step (badpo.core.level_step) reads each loss as link(logits): the logits a row returns,
    put through the row's level_link, give back its per-judgment losses (R-DPO's length term and
    the bias inside, IPO's squared link)."""
    method = get_arm(name)
    params = method.parse_params({})
    views = dict(bias_logit=torch.tensor([0.3, -0.2], requires_grad=True),
                 policy_chosen=torch.tensor([-1.0, -3.0], requires_grad=True),
                 policy_rejected=torch.tensor([-2.0, -2.5]), reference_chosen=torch.tensor([-1.5, -2.0]),
                 reference_rejected=torch.tensor([-1.5, -2.0]), sample_seeds=torch.tensor([7, 8]),
                 chosen_lengths=torch.tensor([10, 3]), rejected_lengths=torch.tensor([4, 5]),
                 chosen_token_logratios=(torch.tensor([0.5, 0.25]), torch.tensor([-1.0])),
                 rejected_token_logratios=(torch.tensor([0.0]), torch.tensor([0.5, 0.0, -0.5])))
    terms = method.loss(JudgmentBatch(beta=0.1, **views), params)
    torch.testing.assert_close(method.level_link(params).loss(terms.logits), terms.losses.detach())
    # the logit keeps its graph: the likelihood of ties and strengths (badpo.theta.graded) is taken on it
    assert terms.losses.requires_grad and terms.logits.requires_grad
