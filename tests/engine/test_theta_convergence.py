"""theta that has not settled is said to be so, on screen and in run.json (issue 24, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from badpo.engine.reporting import theta_convergence
from badpo.engine.train import train
from fixtures.engine import judgment_rows, make_config, write_jsonl


def records(values: list[float]) -> list[dict]:
    return [{"step": i + 1, "theta_bar": {"w": v}} for i, v in enumerate(values)]


def test_the_last_tenth_of_the_steps_decides_by_hand():
    # 20 steps: the tail starts at step 18; 1.00 -> 1.04 is 4% of 1.04: settled
    settled = theta_convergence(records([0.1 * i for i in range(10)] + [1.0] * 7 + [1.0, 1.02, 1.04]), 20)
    assert settled["steps"] == [18, 20] and settled["converged"]
    assert settled["attributes"]["w"]["relative_change"] == pytest.approx(0.04 / 1.04)
    # 0.10 -> 0.20 over the tail: 50% of 0.2, still rising
    rising = theta_convergence(records([0.01 * i for i in range(17)] + [0.10, 0.15, 0.20]), 20)
    assert not rising["converged"] and rising["attributes"]["w"]["moving"]
    # near zero the scale is 0.1: 0.001 -> 0.004 moved 3% of it, settled
    assert theta_convergence(records([0.0] * 17 + [0.001, 0.002, 0.004]), 20)["converged"]
    assert theta_convergence([{"step": 1, "loss": 0.6}], 1) is None  # DPO: no theta


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("theta_convergence")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def test_a_short_run_says_its_theta_is_still_moving(world, capsys):
    out = train(make_config(world, "short", "steps=4", "bias.init=zero"))  # the climb from 0
    summary = json.loads((out / "run.json").read_text())
    assert summary["theta_convergence"]["converged"] is False
    assert "theta_bar was still moving over steps 3-4" in capsys.readouterr().err  # the tail: steps 3 to 4
    dpo = train(make_config(world, "dpo", "method=dpo", "steps=2"))
    assert json.loads((dpo / "run.json").read_text())["theta_convergence"] is None
