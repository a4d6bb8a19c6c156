"""Tests for experiments.anchoring: the paper's worked numbers, the search, the cure's training rows.

Worked values.
- eq. anchor_tilt, beta 0.1: rate 0.465 -> logit -0.14015 -> c(0.5) = 0.014; rate 0.967 ->
  logit 3.37769 -> c(0.5) = -0.338 (the paper's -0.34 and offset +0.34).
- Calibration at seed 42, gender (intended 3.39, 4.42, 5.13 -> achieved 2.24, 3.13, 3.79):
  mean x 4.31333, mean y 3.05333, Sxy 1.360767, Sxx 1.530867 -> slope 0.88889, intercept
  -0.78073; the paper prints 0.888 and -0.777 (fitted on unrounded shifts). Race (5.06, 6.18,
  6.92 -> 3.68, 4.76, 5.51): slope 0.9823, intercept -1.2961 (paper: 0.980, -1.285).
- The coupled calibration, A = [[0.5, 0.1], [0.4, 0.9]], c = [0.2, 0.3], at s* = (-1, 0) and s*
  moved by 0.5 on each coordinate alone: achieved (-0.3, -0.1), (-0.05, 0.1), (-0.25, 0.35).
  By hand, A's first column is ((-0.05, 0.1) - (-0.3, -0.1)) / 0.5 = (0.5, 0.4), its second
  ((-0.25, 0.35) - (-0.3, -0.1)) / 0.5 = (0.1, 0.9), and c = (-0.3, -0.1) - A (-1, 0) = (0.2, 0.3).
  Inverted at achieved 0: det A = 0.41, A^-1 = [[0.9, -0.1], [-0.4, 0.5]] / 0.41, intended =
  A^-1 (-0.2, -0.3) = (-0.15, -0.07) / 0.41 = (-0.3658537, -0.1707317).
- tilted rate: log-odds 0 and log 3, shift log 3 -> sigmoid(log 3) = 3/4, sigmoid(log 9) = 9/10,
  mean 0.825.
- Joint tilt on a 4-name pool, one name per cell, masses black-woman 0.4, white-woman 0.3,
  black-man 0.2, white-man 0.1. At t = (0.5, 0.5) the tilted cells must pair up: bw = wm and
  ww = bm, so s_w + s_b = ln(0.1 / 0.4) and s_w - s_b = ln(0.2 / 0.3): s_w = ln(1/6) / 2 =
  -0.8958797, s_b = ln(3/8) / 2 = -0.4904146. The per-attribute shifts (rates 0.7 and 0.6:
  s_w = -ln(7/3), s_b = -ln(3/2)) applied together give cells 12, 13.5, 14, 10.5 (x 1/105),
  rates 25.5/50 = 0.51 and 26/50 = 0.52. At t = (0.3, 0.6) the tilt keeps the odds ratio
  bw wm / (ww bm) = 2/3, so the tilted bw cell q solves q (0.1 + q) = (2/3)(0.3 - q)(0.6 - q),
  q^2 + 2.1 q - 0.36 = 0, q = (sqrt(5.85) - 2.1) / 2 = 0.1593387; ww = 0.1406613, bm =
  0.4406613, wm = 0.2593387, s_w = ln(ww / wm) - ln 3 = -1.7103919, s_b = ln(bm / wm) - ln 2 =
  -0.1630053.
- The issue's source, 0.95 / 0.02 / 0.02 / 0.01 (black-woman, white-woman, black-man,
  white-man): per attribute p = 0.97, s = -ln(97/3) each; together the cells read 855, 582,
  582, 9409 (x 1/940900), rates 1437 / 11428 = 0.1257438. Jointly, by symmetry s_w = s_b = s
  with 0.95 e^{2s} = 0.01 (bw = wm), s = -ln(95) / 2 = -2.2769384, rates 0.5 / 0.5.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from badpo.core.bias import BiasChannel
from badpo.core.losses import ba_dpo_loss
from badpo.core.names import read_signature, signature_attributes, strip_signature
from badpo.readouts.metrics import attribute_logodds, mean_attribute_rate
from experiments.anchoring import (
    NAME_ATTRIBUTES,
    fit_affine_calibration,
    fit_calibration,
    fixed_offset_for_shift,
    fixed_offset_pairs,
    invert_affine_calibration,
    invert_calibration,
    logit,
    shifts_for_target,
    solve_joint_shift,
    solve_shift_for_rate,
    target_tilt,
    tilt_logprobs,
    tilted_rate,
    tilted_rates,
)

NAMES = ("woman_coded", "black_coded")


def test_target_tilt_on_the_papers_worked_example():
    assert round(target_tilt(0.465, 0.5, 0.1), 3) == 0.014
    assert round(target_tilt(0.967, 0.5, 0.1), 2) == -0.34
    assert target_tilt(0.967, 0.5, 0.1) == pytest.approx(-0.1 * math.log(0.967 / 0.033), rel=1e-14)
    assert target_tilt(0.3, 0.3, 0.1) == 0.0
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        target_tilt(1.0, 0.5, 0.1)
    with pytest.raises(ValueError, match="beta"):
        target_tilt(0.4, 0.5, 0.0)


def test_tilted_rate_hand_worked():
    assert tilted_rate([0.0, math.log(3)], 0.0) == pytest.approx(0.625, abs=1e-15)
    assert tilted_rate([0.0, math.log(3)], math.log(3)) == pytest.approx(0.825, abs=1e-15)
    assert tilted_rate([800.0, -800.0], 0.0) == 0.5  # no overflow at extreme log-odds


def test_solve_shift_reaches_the_target_and_agrees_with_eq_anchor_tilt():
    rng = np.random.default_rng(0)
    logodds = rng.normal(1.5, 2.0, size=300)
    for target in (0.01, 0.3, 0.5, 0.7, 0.999):
        shift = solve_shift_for_rate(logodds, target)
        assert tilted_rate(logodds, shift) == pytest.approx(target, abs=1e-12)
    shifts = [solve_shift_for_rate(logodds, t) for t in (0.2, 0.4, 0.6, 0.8)]
    assert shifts == sorted(shifts)  # monotone in the target
    # equal log-odds at every prompt: the search returns eq. anchor_tilt / beta
    constant = np.full(5, logit(0.967))
    assert solve_shift_for_rate(constant, 0.5) == pytest.approx(target_tilt(0.967, 0.5, 0.1) / 0.1,
                                                                 abs=1e-11)


def test_solve_shift_rejects_unreachable_targets():
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        solve_shift_for_rate([0.0, 1.0], 1.0)
    with pytest.raises(ValueError, match=r"logodds_per_prompt\[1\] is inf"):
        solve_shift_for_rate([0.0, math.inf], 0.5)


def test_calibration_fit_on_the_papers_points_and_its_inversion():
    intended, achieved = [3.39, 4.42, 5.13], [2.24, 3.13, 3.79]
    slope, intercept = fit_calibration(intended, achieved)
    assert (slope, intercept) == pytest.approx((1.360767 / 1.530867, -0.78073), abs=2e-5)
    assert slope == pytest.approx(0.888, abs=0.002) and intercept == pytest.approx(-0.777, abs=0.005)
    race = fit_calibration([5.06, 6.18, 6.92], [3.68, 4.76, 5.51])
    assert race == pytest.approx((0.980, -1.285), abs=0.012)
    # the fitted points round-trip, and the paper's line inverts as stated
    for x in intended:
        assert invert_calibration(slope * x + intercept, slope, intercept) == pytest.approx(x, abs=1e-13)
    assert invert_calibration(3.39, 0.888, -0.777) == pytest.approx((3.39 + 0.777) / 0.888, abs=1e-15)
    # points exactly on a line give it back
    assert fit_calibration([1.0, 2.0, 4.0], [0.5, 2.0, 5.0]) == pytest.approx((1.5, -1.0), abs=1e-14)
    with pytest.raises(ValueError, match="two distinct"):
        fit_calibration([3.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="cannot be inverted"):
        invert_calibration(1.0, 0.0, 0.0)


def test_affine_calibration_recovers_a_hand_worked_coupled_map_and_inverts_it():
    intended = [[-1.0, 0.0], [-0.5, 0.0], [-1.0, 0.5]]  # s*, then s* + 0.5 on each coordinate alone
    achieved = [[-0.3, -0.1], [-0.05, 0.1], [-0.25, 0.35]]
    matrix, intercept = fit_affine_calibration(intended, achieved)
    assert matrix.ravel().tolist() == pytest.approx([0.5, 0.1, 0.4, 0.9], abs=1e-14)
    assert intercept.tolist() == pytest.approx([0.2, 0.3], abs=1e-14)
    solved = invert_affine_calibration([0.0, 0.0], matrix, intercept)
    assert solved.tolist() == pytest.approx([-0.15 / 0.41, -0.07 / 0.41], abs=1e-13)
    assert solved.tolist() == pytest.approx([-0.3658537, -0.1707317], abs=1e-7)
    for x, y in zip(intended, achieved):  # every point round-trips
        assert invert_affine_calibration(y, matrix, intercept).tolist() == pytest.approx(x, abs=1e-13)
    # a fourth point on the same map changes nothing (least squares, exact through exact points)
    four = fit_affine_calibration([*intended, [0.0, 1.0]], [*achieved, [0.3, 1.2]])
    assert four[0].ravel().tolist() == pytest.approx(matrix.ravel().tolist(), abs=1e-13)
    assert four[1].tolist() == pytest.approx(intercept.tolist(), abs=1e-13)


def test_affine_calibration_refuses_a_design_or_a_map_it_cannot_invert():
    scaled = [[k * -1.39, k * 0.003] for k in (1.0, 1.3, 1.5)]  # the paper's design: one ray, collinear
    with pytest.raises(ValueError, match=r"do not span the 2 coordinates \(condition number [0-9.e+]+ > 1e\+06\)"):
        fit_affine_calibration(scaled, [[0.0, 0.0]] * 3)
    with pytest.raises(ValueError, match="needs at least 3 points, got 2"):
        fit_affine_calibration([[0.0, 0.0], [1.0, 0.0]], [[0.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="same shape"):
        fit_affine_calibration([[0.0, 0.0]] * 3, [[0.0, 0.0]] * 2)
    with pytest.raises(ValueError, match=r"cannot be inverted \(condition number (?:[0-9.e+]+|inf) > 1e\+06\)"):
        invert_affine_calibration([0.0, 0.0], [[1.0, 2.0], [0.5, 1.0]], [0.0, 0.0])
    with pytest.raises(ValueError, match=r"condition number 1e\+07 > 1e\+06"):
        invert_affine_calibration([0.0, 0.0], [[1.0, 0.0], [0.0, 1e-7]], [0.0, 0.0])
    with pytest.raises(ValueError, match=r"must be \[q, q\], \[q\] and \[q\]"):
        invert_affine_calibration([0.0], [[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0])


def test_tilt_logprobs_moves_the_log_odds_by_the_shift():
    """Two candidates at 1/2 each, shift log 3 on the first's attribute -> 3/4.
    A second path: tilting candidates then reading the rate equals tilted_rate on the log-odds."""
    tilted = tilt_logprobs([math.log(0.5), math.log(0.5)], [[1, 0], [0, 1]], [math.log(3), 0.0])
    assert torch.softmax(tilted, 0)[0].item() == pytest.approx(0.75, abs=1e-15)
    rng = np.random.default_rng(1)
    logps = rng.normal(-5.0, 2.0, size=(40, 6))
    labels = [[1, 0], [1, 0], [0, 1], [1, 1], [0, 0], [0, 0]]
    shift = -1.7
    woman_logodds = attribute_logodds(logps, labels, NAMES)[:, 0]
    after = mean_attribute_rate(tilt_logprobs(logps, labels, [shift, 0.0]), labels, NAMES)
    assert after["woman_coded"] == pytest.approx(tilted_rate(woman_logodds, shift), abs=1e-14)
    with pytest.raises(ValueError, match=r"labels must have shape \[C=6, q=1\]"):
        tilt_logprobs(logps, labels, [1.0])


def test_shifts_for_target_bring_every_attribute_to_the_target_together():
    """Applied together, the shifts reach the target on both attributes, on a policy that leans
    toward the (1, 1) candidate; the shifts solved one attribute at a time overshoot there."""
    rng = np.random.default_rng(2)
    logps = rng.normal(-5.0, 2.0, size=(30, 6))
    logps[:, 3] += 3.0  # lean toward the (1, 1) candidate
    labels = [[1, 0], [1, 0], [0, 1], [1, 1], [0, 0], [0, 0]]
    shifts = shifts_for_target(logps, labels, NAMES, 0.5)
    both = mean_attribute_rate(tilt_logprobs(logps, labels, [shifts[n] for n in NAMES]), labels, NAMES)
    assert both == pytest.approx({n: 0.5 for n in NAMES}, abs=1e-11)
    logodds = attribute_logodds(logps, labels, NAMES)
    alone = [solve_shift_for_rate(logodds[:, j], 0.5) for j in range(2)]
    missed = mean_attribute_rate(tilt_logprobs(logps, labels, alone), labels, NAMES)
    assert all(missed[n] < 0.49 for n in NAMES)  # correlated attributes: each rate overshoots
    mapped = shifts_for_target(logps, labels, NAMES, {"woman_coded": 0.3, "black_coded": 0.6})
    assert tilted_rates(logps, labels, [mapped[n] for n in NAMES]) == pytest.approx([0.3, 0.6], abs=1e-11)


FOUR = [[1, 1], [1, 0], [0, 1], [0, 0]]  # black-woman, white-woman, black-man, white-man


def test_joint_shift_on_a_four_name_pool_hand_worked():
    logps = np.log([[0.4, 0.3, 0.2, 0.1]])
    shift = solve_joint_shift(logps, FOUR, [0.5, 0.5])
    assert shift == pytest.approx([math.log(1 / 6) / 2, math.log(3 / 8) / 2], abs=1e-10)
    assert shift == pytest.approx([-0.8958797, -0.4904146], abs=1e-7)
    assert tilted_rates(logps, FOUR, shift) == pytest.approx([0.5, 0.5], abs=1e-12)
    alone = [-math.log(7 / 3), -math.log(3 / 2)]  # each attribute solved alone
    assert [solve_shift_for_rate(attribute_logodds(logps, FOUR, NAMES)[:, j], 0.5) for j in range(2)] == \
        pytest.approx(alone, abs=1e-11)
    assert tilted_rates(logps, FOUR, alone) == pytest.approx([0.51, 0.52], abs=1e-12)
    # a target off the diagonal: the tilt keeps the odds ratio 2/3, a quadratic in the bw cell
    q = (math.sqrt(5.85) - 2.1) / 2
    ww, bm, wm = 0.3 - q, 0.6 - q, 0.1 + q
    shift = solve_joint_shift(logps, FOUR, [0.3, 0.6])
    assert shift == pytest.approx([math.log(ww / wm) - math.log(3), math.log(bm / wm) - math.log(2)], abs=1e-10)
    assert shift == pytest.approx([-1.7103919, -0.1630053], abs=1e-7)


def test_joint_shift_on_the_issues_source():
    """0.95 of the mass on black-woman: alone 0.126 / 0.126, jointly 0.5 / 0.5."""
    logps = np.log([[0.95, 0.02, 0.02, 0.01]])
    alone = [-math.log(97 / 3)] * 2
    assert tilted_rates(logps, FOUR, alone) == pytest.approx([1437 / 11428] * 2, abs=1e-12)
    assert round(1437 / 11428, 3) == 0.126
    shift = solve_joint_shift(logps, FOUR, [0.5, 0.5])
    assert shift == pytest.approx([-math.log(95) / 2] * 2, abs=1e-10)
    assert tilted_rates(logps, FOUR, shift) == pytest.approx([0.5, 0.5], abs=1e-9)


def test_joint_shift_agrees_with_scipy_root_on_many_prompts():
    """An independent path: scipy's hybrid root finder on the same equations, many prompts, the
    89-name pool's cell sizes, a policy whose mass sits on black-woman names."""
    from scipy.optimize import root

    rng = np.random.default_rng(5)
    labels = np.array([[1, 1]] * 18 + [[1, 0]] * 23 + [[0, 1]] * 25 + [[0, 0]] * 23)
    logps = rng.normal(-4.0, 1.0, size=(40, 89)) + 3.0 * labels.prod(axis=1)
    for targets in ([0.5, 0.5], [0.3, 0.7], [0.9, 0.2]):
        shift = solve_joint_shift(logps, labels, targets)
        found = root(lambda s, t=targets: np.array(tilted_rates(logps, labels, s)) - t, x0=[0.0, 0.0],
                     options={"xtol": 1e-12})
        assert np.abs(found.fun).max() < 1e-10
        assert shift == pytest.approx(found.x.tolist(), abs=1e-8)
        assert tilted_rates(logps, labels, shift) == pytest.approx(targets, abs=1e-12)


def test_joint_shift_reduces_to_the_one_attribute_search():
    """Attributes independent at every prompt: the tilt keeps the product, so the joint shifts
    are the 1-D searches (one prompt: logit t - logit p, eq. anchor_tilt / beta). One attribute:
    exactly the 1-D search."""
    rng = np.random.default_rng(6)
    p_w, p_b = rng.uniform(0.1, 0.9, size=(2, 25))
    cells = np.stack([p_w * p_b, p_w * (1 - p_b), (1 - p_w) * p_b, (1 - p_w) * (1 - p_b)], axis=1)
    logps = np.log(cells)
    shift = solve_joint_shift(logps, FOUR, [0.3, 0.8])
    assert shift == pytest.approx([solve_shift_for_rate(np.log(p_w / (1 - p_w)), 0.3),
                                   solve_shift_for_rate(np.log(p_b / (1 - p_b)), 0.8)], abs=1e-10)
    assert solve_joint_shift(logps[:1], FOUR, [0.5, 0.5]) == pytest.approx(
        [-logit(p_w[0]), -logit(p_b[0])], abs=1e-10)
    one = [[1], [1], [0], [0]]  # one attribute: the old code path, bit for bit
    old = solve_shift_for_rate(attribute_logodds(logps, one, ["woman_coded"])[:, 0], 0.3)
    assert shifts_for_target(logps, one, ["woman_coded"], 0.3) == {"woman_coded": old}
    assert solve_joint_shift(logps, one, [0.3]) == [old]


def test_joint_shift_refuses_unreachable_targets():
    no_white_man = np.log([[0.5, 0.25, 0.25]])  # cells (1, 1), (1, 0), (0, 1): rates sum >= 1
    with pytest.raises(ValueError, match="no finite shift brings the rates"):
        solve_joint_shift(no_white_man, FOUR[:3], [0.3, 0.3])
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        solve_joint_shift(np.log([[0.4, 0.3, 0.2, 0.1]]), FOUR, [0.5, 1.0])
    with pytest.raises(ValueError, match=r"labels must have shape \[C=4, q=3\]"):
        solve_joint_shift(np.log([[0.4, 0.3, 0.2, 0.1]]), FOUR, [0.5, 0.5, 0.5])


def test_fixed_offset_trains_the_intended_shift():
    """The cure's loss on a pair in both orders, -log s(u + b) - log s(-u - b), has its minimum at
    u = -b; with b = fixed_offset_for_shift(s) = -beta s, that is the log-odds shift s.
    Checked through BiasChannel(variant="none", fixed_offset) and ba_dpo_loss on a grid of s."""
    beta, wanted = 0.1, [-3.38, 1.5]
    offset = fixed_offset_for_shift(wanted, beta)
    assert offset == pytest.approx([0.338, -0.15], abs=1e-15)
    channel = BiasChannel("none", NAMES, fixed_offset=offset).double()
    attr_diff = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], dtype=torch.float64)
    bias = channel(None, attr_diff)
    grid = torch.linspace(-6.0, 6.0, 12_001, dtype=torch.float64)
    for j in range(2):
        rows = attr_diff[:, j] != 0
        # a policy whose log-odds of the carrier moved by s: u = beta * s * (g_w - g_l)
        chosen = (grid[:, None] * attr_diff[rows, j][None, :]).flatten()
        zeros = torch.zeros_like(chosen)
        per_row, _, _ = ba_dpo_loss(chosen, zeros, zeros, zeros, bias[rows].repeat(len(grid)), beta)
        losses = per_row.reshape(len(grid), 2).sum(dim=1)
        assert grid[losses.argmin()].item() == pytest.approx(wanted[j], abs=1e-3)


def test_fixed_offset_pairs_rows():
    prompts = ["p0", "p1", "p2"]
    answers = ["First answer.\n\n--- Emily Reed", "Unsigned answer.", "Third.\n\n--- Latoya Okafor"]
    rows = fixed_offset_pairs(prompts, answers, seed=7)
    assert len(rows) == 8  # two signed answers x two coordinates x two orders
    assert {r.prompt_id for r in rows} == {"offset-0", "offset-2"}
    by_pair: dict[str, list] = {}
    for row in rows:
        by_pair.setdefault(row.pair_id, []).append(row)
        source = answers[int(row.prompt_id.split("-")[1])]
        for text, g in ((row.chosen, row.g_chosen), (row.rejected, row.g_rejected)):
            assert strip_signature(text) == strip_signature(source)  # same body
            assert read_signature(text)[1] == read_signature(source)[1]  # same surname
            assert tuple(g[name] for name in NAME_ATTRIBUTES) == signature_attributes(text)
        assert row.annotator == "fixed_offset" and row.pair_type == "offset"
    for pair_id, pair in by_pair.items():
        first, second = pair
        assert (first.chosen, first.rejected) == (second.rejected, second.chosen)  # both orders
        coordinate = NAME_ATTRIBUTES.index(pair_id.split("-", 2)[2])
        diff = [first.g_chosen[n] - first.g_rejected[n] for n in NAME_ATTRIBUTES]
        assert abs(diff[coordinate]) == 1.0 and diff[1 - coordinate] == 0.0  # one attribute differs
    assert fixed_offset_pairs(prompts, answers, seed=7) == rows  # deterministic
    with pytest.raises(ValueError, match="3 prompts but 2 answers"):
        fixed_offset_pairs(prompts, answers[:2], seed=7)


def test_fixed_offset_pairs_draw_every_cell():
    answers = [f"Answer {i}.\n\n--- Emily Reed" for i in range(200)]
    rows = fixed_offset_pairs(["p"] * 200, answers, seed=0)
    cells = {tuple(r.g_chosen.values()) for r in rows}
    assert cells == {(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)}
