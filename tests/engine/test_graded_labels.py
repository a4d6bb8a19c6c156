"""Ties and strengths on the loop: the ordered logit on the method's logit (badpo.theta.graded),
its cut points learned beside theta and checkpointed; without ties and strengths the loss is
BA-DPO's exactly; theta's start is the joint fit, checked against an independent minimiser;
``ties: drop`` is the paper's setting, counted; what cannot take graded labels is refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from scipy.optimize import minimize

from badpo.core.config import ConfigError
from badpo.engine.loop import judgment_losses
from badpo.engine.preference import prepare_run
from badpo.engine.train import train
from fixtures.engine import assert_same_run, judgment_rows, make_config, write_jsonl

pytestmark = pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")


def _graded_rows(ties: bool = True, strengths: bool = True) -> list[dict]:
    rows = judgment_rows(12, 4)
    for i, row in enumerate(rows):
        if ties and i % 5 == 0:
            row["tie"] = True
        elif strengths:
            row["strength"] = 1 + i % 2
    return rows


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("graded")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows(12, 4))
    write_jsonl(root / "graded.jsonl", _graded_rows())
    write_jsonl(root / "one_level.jsonl", [dict(r, strength=1) for r in judgment_rows(12, 4)])
    return root


def _config(world, name, data="graded.jsonl", *overrides):
    return make_config(world, name, f"data={world / data}", "method=ba_dpo_pooled", *overrides)


def test_without_ties_and_with_one_strength_level_the_loss_is_ba_dpos_exactly(world):
    """Every win graded at one level: the ordered logit has no cut to learn and is -log sigmoid(u + b)."""
    losses = []
    for data in ("judgments.jsonl", "one_level.jsonl"):
        run = prepare_run(_config(world, "unused", data))[0]
        losses.append(judgment_losses(run, run.items.micro_batch(torch.arange(8)), 0).losses.detach())
        assert (run.cuts is None) == (data == "judgments.jsonl")
    assert torch.equal(losses[0], losses[1])
    assert not list(run.cuts.parameters())


def _nll(params, diff, grade):
    """The likelihood written out (Davidson's ties, a win's strength an ordered logit given the win):
    theta, log nu, log gap."""
    theta, nu, gap = params[0], math.exp(params[1]), math.exp(params[2])
    total = 0.0
    for d, g in zip(diff, grade):
        z = theta * d
        s = lambda x: 1.0 / (1.0 + math.exp(-x))  # noqa: E731
        denominator = math.exp(z / 2) + math.exp(-z / 2) + nu
        win = math.exp(z / 2) / denominator
        p = {0: nu / denominator, 1: win * (1 - s(z - gap) / s(z)), 2: win * s(z - gap) / s(z)}[g]
        total -= math.log(p)
    return total


def test_thetas_start_is_the_joint_fit_of_theta_and_the_cut_points(world):
    run = prepare_run(_config(world, "unused"))[0]
    diff, grade = run.data.attr_diff[:, 0].tolist(), run.data.grades.grade.tolist()
    assert sorted(set(grade)) == [0, 1, 2] and run.data.grades.levels == 2
    best = minimize(_nll, [0.0, 0.0, 0.0], args=(diff, grade), method="Nelder-Mead",
                    options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000})
    assert float(run.bias.mean()[0]) == pytest.approx(best.x[0], abs=1e-4)
    cuts = run.cuts.record()
    assert cuts["tie_strength"] == pytest.approx(math.exp(best.x[1]), abs=1e-4)
    assert cuts["strength_gaps"][0] == pytest.approx(math.exp(best.x[2]), abs=1e-4)


def test_the_cut_points_learn_are_logged_recorded_and_resume_bit_for_bit(world):
    whole = _config(world, "whole", "graded.jsonl", "steps=4")
    train(whole)
    summary = json.loads((world / "whole" / "run.json").read_text())
    assert summary["input"]["ties"] == 10 and summary["input"]["graded_wins"] == 38
    steps = [json.loads(line) for line in (world / "whole" / "log.jsonl").read_text().splitlines()]
    cuts = [r["label_cuts"]["tie_strength"] for r in steps if "label_cuts" in r]
    assert len(cuts) == 4 and cuts[0] != cuts[-1]
    assert summary["label_cuts"]["tie_strength"] == pytest.approx(cuts[-1])
    train(_config(world, "split", "graded.jsonl", "steps=4", "stop_after_steps=2"))
    train(_config(world, "split", "graded.jsonl", "steps=4", "resume_from=latest"))
    assert_same_run(world / "whole", world / "split")


def test_ties_drop_is_the_papers_setting_and_is_counted(world):
    run = prepare_run(_config(world, "unused", "graded.jsonl", "ties=drop", "strength=ignore"))[0]
    assert run.cuts is None and run.data.grades is None and len(run.data) == 38
    assert run.data.input_report["ties_dropped"] == 10 and run.data.input_report["strengths_ignored"] == 38


@pytest.mark.parametrize(("overrides", "message"), [
    (["method=ba_ipo_pooled"], "is not a log-likelihood of a logit"),
    (["bias.level=tilt"], "^bias.level: tilt solves for theta's level on plain wins"),
    (["bias.init=conditional"], "^bias.init: conditional reads plain wins"),
])
def test_what_cannot_take_graded_labels_is_refused_in_one_line(world, overrides, message):
    with pytest.raises(ConfigError, match=message):
        prepare_run(_config(world, "unused", "graded.jsonl", *overrides))
