"""The intervals of `badpo compare` (badpo.comparing.intervals): a bootstrap over prompts with a fixed
seed, worked by hand on small samples and recomputed with numpy alone, and the paired removal of a
baseline's shift, with its "not measurable" case."""

from __future__ import annotations

import math

import numpy as np
import pytest

from badpo.comparing.intervals import (
    mean_interval,
    percentile_interval,
    removal_interval,
    removal_point,
    resample_indices,
    shift_interval,
)


def hand_quantile(sorted_values: list[float], q: float) -> float:
    """The q-quantile of sorted values by linear interpolation between order statistics:
    position q (n - 1), then a straight line between its two neighbours."""
    position = q * (len(sorted_values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    return sorted_values[below] + (position - below) * (sorted_values[above] - sorted_values[below])


def test_the_interval_of_a_rate_by_hand_on_three_resamples():
    """Values (0, 1, 0, 0, 1); resamples (0, 1, 2, 3, 4), (1, 1, 4, 0, 2), (2, 3, 0, 0, 3) give
    the values (0, 1, 0, 0, 1), (1, 1, 1, 0, 0), (0, 0, 0, 0, 0): means 0.4, 0.6, 0.0. At level
    0.5 the interval is their 0.25 and 0.75 quantiles: sorted (0, 0.4, 0.6), positions 0.5 and 1.5,
    so 0 + 0.5 * 0.4 = 0.2 and 0.4 + 0.5 * 0.2 = 0.5."""
    indices = np.array([[0, 1, 2, 3, 4], [1, 1, 4, 0, 2], [2, 3, 0, 0, 3]])
    result = mean_interval([0, 1, 0, 0, 1], indices, level=0.5)
    assert result == pytest.approx({"value": 0.4, "low": 0.2, "high": 0.5, "n": 5})


def test_the_seeded_bootstrap_of_five_values_recomputed_with_numpy_alone():
    """Five values, 2000 resamples from seed 0: the same draws from numpy's generator, each
    resample's mean summed by hand, and the 2.5% and 97.5% quantiles by linear interpolation."""
    values = [0.1, 0.4, 0.2, 0.9, 0.5]
    draws = np.random.default_rng(0).integers(0, 5, size=(2000, 5))
    assert (resample_indices(5) == draws).all()  # the defaults: 2000 draws, seed 0
    means = sorted(sum(values[i] for i in row) / 5 for row in draws.tolist())
    result = mean_interval(values, resample_indices(5))
    assert result["value"] == pytest.approx(0.42)
    assert result["low"] == pytest.approx(hand_quantile(means, 0.025), abs=1e-12)
    assert result["high"] == pytest.approx(hand_quantile(means, 0.975), abs=1e-12)
    assert 0.1 < result["low"] < 0.42 < result["high"] < 0.9
    assert (resample_indices(5, seed=1) != draws).any()  # the seed decides the draws


def test_a_shift_is_the_paired_difference_and_says_whether_its_interval_holds_zero():
    """Run (1, 1, 0, 1) against the reference (0, 1, 0, 0) on the same resamples: the per-prompt
    differences (1, 0, 0, 1) are resampled together, so the shift's interval is that of their mean."""
    indices = np.array([[0, 1, 2, 3], [0, 0, 3, 3], [1, 2, 1, 2]])  # differences: 0.5, 1.0, 0.0
    shift = shift_interval([1, 1, 0, 1], [0, 1, 0, 0], indices, level=0.5)
    assert shift == pytest.approx({"value": 0.5, "low": 0.25, "high": 0.75, "n": 4, "measurable": True})
    flat = shift_interval([1, 0, 0, 1], [0, 1, 0, 1], indices, level=0.5)  # differences 1, -1, 0, 0
    assert flat["measurable"] is False and flat["low"] <= 0 <= flat["high"]


def test_removal_and_its_paired_interval_by_hand():
    """Reference (0, 0, 0, 0), baseline (1, 1, 1, 0), run (0, 1, 0, 0): removal (0.75 - 0.25) / 0.75
    = 2/3. On the resamples (0, 1, 2, 3), (0, 0, 1, 1), (1, 1, 3, 3) the three means are (0.75,
    0.25, 0), (1, 0.5, 0), (0.5, 0.5, 0): removals 2/3, 1/2, 0, each from the same prompts for the
    three rates; at level 0.5 the interval is 0.25 and 0.5 + 0.5 * (2/3 - 1/2) = 7/12."""
    indices = np.array([[0, 1, 2, 3], [0, 0, 1, 1], [1, 1, 3, 3]])
    result = removal_interval([1, 1, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0], indices, level=0.5)
    assert result["value"] == pytest.approx(2 / 3)
    assert (result["low"], result["high"]) == pytest.approx((0.25, 7 / 12))
    assert result["measurable"] is True and result["why"] is None and result["draws"] == 3
    assert result["shift"]["value"] == pytest.approx(0.75)
    assert removal_point(0.96, 0.55, 0.50) == pytest.approx(0.41 / 0.46)  # the paper's example


def test_a_removal_on_resamples_where_the_baseline_sits_on_the_reference_leaves_those_out():
    """Baseline (1, 0, 0, 0), run (0, 0, 0, 1), a zero reference: the resample (1, 2, 3, 1) has
    baseline mean 0 (no shift to remove on it) and is left out; (0, 1, 2, 3) gives (1/4 - 1/4) /
    (1/4) = 0 and (0, 0, 1, 1) gives (1/2 - 0) / (1/2) = 1, so at level 0.5 the interval is
    (0.25, 0.75). The baseline's shifts 1/4, 0, 1/2 have the interval (0.125, 0.375): measurable."""
    indices = np.array([[0, 1, 2, 3], [1, 2, 3, 1], [0, 0, 1, 1]])
    result = removal_interval([1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0], indices, level=0.5)
    assert result["measurable"] is True and result["draws"] == 2
    assert (result["shift"]["low"], result["shift"]["high"]) == pytest.approx((0.125, 0.375))
    assert (result["low"], result["high"]) == pytest.approx((0.25, 0.75))
    assert result["value"] == 0.0


def test_a_shift_whose_interval_holds_zero_is_not_measurable_rather_than_204_percent():
    """DPO 0.25 against a reference of 0.20 on 20 prompts, the run at 0.148: the point ratio is
    (0.25 - 0.148) / 0.05 = 204%, but DPO's shift of +0.05 has an interval that holds 0, so the
    removal is reported as not measurable, with no number."""
    reference = [1] * 4 + [0] * 16
    baseline = [1] * 4 + [0] * 15 + [1]  # one prompt more: 0.25
    run = [0.74] * 4 + [0] * 16  # 0.148
    assert removal_point(np.mean(baseline), np.mean(run), np.mean(reference)) == pytest.approx(2.04)
    result = removal_interval(baseline, run, reference, resample_indices(20))
    assert result["measurable"] is False
    assert result["value"] is None and result["low"] is None and result["high"] is None
    assert result["shift"]["low"] <= 0 <= result["shift"]["high"]
    assert "holds 0" in result["why"] and "+0.05" in result["why"]
    assert removal_point(0.3, 0.2, 0.3) is None  # the baseline did not move at all


def test_bad_input_is_one_line_naming_what_is_wrong():
    indices = resample_indices(3, draws=4)
    with pytest.raises(ValueError, match=r"^run: expected 3 values \(one per prompt\)"):
        removal_interval([1, 0, 1], [1, 0], [0, 0, 0], indices)
    with pytest.raises(ValueError, match="values: per-prompt values must be finite"):
        mean_interval([1, math.nan, 0], indices)
    with pytest.raises(ValueError, match=r"indices: expected \[draws, 2\]"):
        mean_interval([1, 0], indices)
    with pytest.raises(ValueError, match="level must be in"):
        percentile_interval([0.1, 0.2], level=1.0)
    with pytest.raises(ValueError, match="at least one prompt"):
        resample_indices(0)
