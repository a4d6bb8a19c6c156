"""BA-SimPO on the loop: theta starts at the labels' fit around SimPO's own logit at the start (the
length-normalised reference margin minus gamma, not 0), and the arm trains; R-DPO with theta starts
around its length term."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from badpo.core.level_step import LOGISTIC
from badpo.engine.preference import prepare_run
from badpo.engine.train import train
from badpo.theta.start import initial_level
from fixtures.engine import judgment_rows, make_config, write_jsonl

pytestmark = pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("reference_free")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows(12, 4))
    return root


def _logits_by_hand(run, name: str) -> torch.Tensor:
    """The arm's logit at the start from the run's cached log-probs and its response lengths."""
    data, reference = run.data, run.reference.detach().double().cpu()
    lengths = data.store.response_lengths().double()
    w, lo = data.chosen_row, data.rejected_row
    if name == "simpo":
        return 2.0 * (reference[w] / lengths[w] - reference[lo] / lengths[lo]) - 0.5
    return 0.05 * (lengths[w] - lengths[lo])


@pytest.mark.parametrize(("method", "extra"), [("simpo_ba_pooled", ["beta=2.0"]),
                                               ("r_dpo_ba_pooled", ["method_params.alpha=0.05"])])
def test_theta_starts_around_the_methods_logit_at_the_start(world, method, extra):
    run = prepare_run(make_config(world, "unused", f"method={method}", *extra))[0]
    by_hand = _logits_by_hand(run, method.split("_")[0])
    assert by_hand.abs().max() > 0.05  # a start that assumed 0 would be another level
    labels = run.data.theta_labels()
    expected = initial_level("reference", labels, ["signed"], LOGISTIC, start_logits=by_hand)[0]
    assumed_zero = initial_level("reference", labels, ["signed"], LOGISTIC)[0]
    assert float(run.bias.mean()[0]) == pytest.approx(expected, abs=1e-5)
    assert abs(expected - assumed_zero) > 1e-3


def test_ba_simpo_trains_and_its_theta_moves(world):
    train(make_config(world, "simpo", "method=simpo_ba_shared_mean", "beta=2.0"))
    records = [json.loads(line) for line in (world / "simpo" / "log.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r and "theta_bar" in r]
    assert len(steps) == 3 and all(math.isfinite(r["loss"]) for r in steps)
    assert steps[0]["theta_bar"]["signed"] != steps[-1]["theta_bar"]["signed"]
    assert (world / "simpo" / "theta.json").is_file() and (world / "simpo" / "policy").is_dir()
