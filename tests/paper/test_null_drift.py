"""experiments/scripts/null_drift.py: the share of DPO's shift a world without bias makes too, and an arm's
removal of the rest, worked by hand."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "experiments" / "scripts"


@pytest.fixture
def null_drift(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # it imports logodds_removal beside it
    spec = importlib.util.spec_from_file_location("null_drift", SCRIPTS / "null_drift.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("logodds_removal", None)


def _c(long_lo: float, long_p: float, md_lo: float, md_p: float) -> dict:
    return {"long": long_p, "long_log_odds": long_lo, "markdown": md_p, "markdown_log_odds": md_lo}


def test_shift_drift_and_removals_by_hand(null_drift):
    """Length on log-odds: DPO 2.0 -> 6.0 (shift 4), the null world 1.0 -> 2.0 (drift 1, 25%), the
    arm at 3.0: removed (6 - 3) / 4 = 75%, of the bias's 3: 100%. On probabilities: shift 0.96 - 0.70
    = 0.26, drift 0.70 - 0.60 = 0.10, arm 0.80: 0.16 / 0.26 and 0.16 / 0.16."""
    biased = (_c(2.0, 0.70, -1.0, 0.3), _c(6.0, 0.96, 5.0, 0.99), {"BA": _c(3.0, 0.80, -1.0, 0.3)})
    null = (_c(1.0, 0.60, -2.0, 0.2), _c(2.0, 0.70, -2.0, 0.2), {"BA": _c(1.5, 0.65, -2.0, 0.2)})
    rows = {(r["readout"], r["scale"]): r for r in null_drift.seed_reading(biased, null)}
    length = rows[("p(long) | body", "log_odds")]
    assert length["null_arms_minus_dpo"] == {"BA": -0.5}  # the null world's arm ends half a logit under DPO
    assert (length["dpo_shift"], length["null_drift"], length["not_bias_share"]) == (4.0, 1.0, 0.25)
    # the arm's own shifts: 1.0 biased, 0.5 null, so 0.5 of DPO's 3 reached it: 1 - 0.5 / 3
    assert length["arms"]["BA"] == {"removed": 0.75, "removed_of_bias": 1.0,
                                    "removed_of_bias_effect": pytest.approx(5 / 6)}
    p = rows[("p(long) | body", "probability")]
    assert math.isclose(p["not_bias_share"], 0.10 / 0.26)
    assert math.isclose(p["arms"]["BA"]["removed"], 0.16 / 0.26)
    assert math.isclose(p["arms"]["BA"]["removed_of_bias"], 1.0)
    md = rows[("p(md) | body", "log_odds")]  # no drift: both removals are the same, 6 / 6
    assert md["null_drift"] == 0.0 and md["arms"]["BA"] == {"removed": 1.0, "removed_of_bias": 1.0,
                                                            "removed_of_bias_effect": 1.0}


def test_effect_removal_is_left_out_for_an_arm_the_null_world_did_not_run(null_drift):
    biased = (_c(2.0, 0.70, -1.0, 0.3), _c(6.0, 0.96, 5.0, 0.99), {"BA": _c(3.0, 0.80, -1.0, 0.3)})
    null = (_c(1.0, 0.60, -2.0, 0.2), _c(2.0, 0.70, -2.0, 0.2), {})
    for row in null_drift.seed_reading(biased, null):
        assert set(row["arms"]["BA"]) == {"removed", "removed_of_bias"}


def test_an_arm_that_the_bias_moves_as_it_moves_dpo_removes_nothing(null_drift):
    """Biased-world arm = DPO, null-world arm = null DPO: none of the bias's effect is removed."""
    biased = (_c(2.0, 0.70, -1.0, 0.3), _c(6.0, 0.96, 5.0, 0.99), {"BA": _c(6.0, 0.96, 5.0, 0.99)})
    null = (_c(1.0, 0.60, -2.0, 0.2), _c(2.0, 0.70, -2.0, 0.2), {"BA": _c(2.0, 0.70, -2.0, 0.2)})
    for row in null_drift.seed_reading(biased, null):
        assert row["arms"]["BA"]["removed_of_bias_effect"] == pytest.approx(0.0)
