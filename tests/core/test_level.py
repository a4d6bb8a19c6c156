"""The level step's maths (badpo.core.level_step) on problems worked by hand, by bisection and on a grid,
and the bias channel's shift of the untrusted annotators."""

from __future__ import annotations

import math

import pytest
import torch

from badpo.core.bias import BiasChannel
from badpo.core.level_step import LOGISTIC, level_shift, offset_mle, policy_tilt, squared, tilt_shift

F64 = torch.float64


def _judgments(wins: int, losses: int, margin: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``wins`` judgments where the coded side won (a = +1) and ``losses`` where it lost (a = -1)."""
    a = torch.tensor([1.0] * wins + [-1.0] * losses, dtype=F64)[:, None]
    return torch.full((wins + losses,), margin, dtype=F64), a


def test_the_level_is_the_untrusted_log_odds_minus_the_trusted_log_odds():
    """At zero margins each 1-D MLE is a log-odds: the trusted annotators chose the coded side 3 of
    4 times (s = log 3), the untrusted 8 of 10 (t = log 4); the level moves by log 4 - log 3."""
    zt, at = _judgments(3, 1)
    zu, au = _judgments(8, 2)
    trusted = torch.tensor([True] * 4 + [False] * 10)
    delta, s_hat = level_shift(torch.cat([zt, zu]), torch.cat([at, au]), trusted, LOGISTIC)
    assert float(s_hat) == pytest.approx(math.log(3), abs=1e-9)
    assert float(delta) == pytest.approx(math.log(4 / 3), abs=1e-9)


def _bisect(derivative, low: float = -10.0, high: float = 10.0) -> float:
    """The zero of an increasing function on [low, high]."""
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if derivative(middle) < 0 else (low, middle)
    return (low + high) / 2


def test_offset_mle_matches_bisection_with_margins_the_policy_already_has():
    """Margins z and directions a of both signs: the logistic MLE of the shift x is the zero of the
    increasing derivative sum_i -sigmoid(-(z_i + x a_i)) a_i, found by bisection."""
    z = [0.5, -0.2, 1.0, 0.3, -1.5, 0.0, 2.0]
    a = [1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0]

    def derivative(x: float) -> float:
        return sum(-a_i / (1 + math.exp(z_i + x * a_i)) for z_i, a_i in zip(z, a))

    found = offset_mle(torch.tensor(z, dtype=F64), torch.tensor(a, dtype=F64)[:, None], LOGISTIC)
    assert float(found) == pytest.approx(_bisect(derivative), abs=1e-8)


def test_two_attributes_are_solved_jointly_as_a_grid_search_finds():
    """A judgment may differ on both attributes at once; the 2-D minimiser agrees with the best
    point of a 0.01 grid to within the grid's step."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randint(-1, 2, (60, 2), generator=generator).to(F64)
    z = torch.randn(60, generator=generator, dtype=F64) + a @ torch.tensor([0.8, -0.4], dtype=F64)
    found = offset_mle(z, a, LOGISTIC)
    grid = torch.arange(-1.5, 1.5, 0.01, dtype=F64)
    xs, ys = torch.meshgrid(grid, grid, indexing="ij")
    points = torch.stack([xs.flatten(), ys.flatten()], dim=1)  # [P, 2]
    totals = torch.nn.functional.softplus(-(z[None, :] + points @ a.T)).sum(1)
    torch.testing.assert_close(found, points[totals.argmin()], atol=0.01, rtol=0)


def test_squared_link_is_least_squares():
    """IPO's (z - 1/(2 tau))^2: the shift is the mean distance to the target, in one Newton step."""
    found = offset_mle(torch.tensor([1.0, 2.0, 3.0]), torch.ones(3, 1), squared(5.0))
    assert float(found) == pytest.approx(3.0)
    mixed = offset_mle(torch.tensor([1.0, 2.0]), torch.tensor([[1.0], [-1.0]]), squared(0.0))
    assert float(mixed) == pytest.approx(0.5)  # minimise (1 + x)^2 + (2 - x)^2


def test_no_estimate_where_no_judgment_says_anything():
    """Every trusted judgment on the coded side: the logistic MLE is at infinity (NaN). A coordinate
    no judgment differs on is NaN while the other is estimated."""
    z, a = _judgments(5, 0)
    assert torch.isnan(offset_mle(z, a, LOGISTIC)).all()
    z, a = _judgments(3, 1)
    both = offset_mle(z, torch.cat([a, torch.zeros_like(a)], dim=1), LOGISTIC)
    assert float(both[0]) == pytest.approx(math.log(3)) and torch.isnan(both[1])


def test_a_separable_set_whose_logits_start_on_the_tail_has_no_estimate():
    """Separation with the logits already positive (the level step's margins mid-run): the gradient
    vanishes once z + x is ~20.7 out, which was taken for a minimiser at x = 20.7 - z (a level shift
    of -18 logits on SmolLM2's markdown); Newton's step stays near 1 there, so it is NaN. A set that
    does have a minimiser keeps it to the hand-worked value, whatever its logits' start."""
    for start in (0.0, 2.0, 5.0, 15.0):
        assert torch.isnan(offset_mle(torch.full((3,), start), torch.ones(3, 1), LOGISTIC)).all()
    assert torch.isnan(offset_mle(torch.tensor([2.0, 3.0, 0.5]), torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
                                  LOGISTIC)).all()
    _, a = _judgments(3, 1)
    assert float(offset_mle(2.0 * a[:, 0], a, LOGISTIC)) == pytest.approx(math.log(3) - 2.0)  # (2 + x) a


def test_after_the_step_the_joint_minimiser_has_the_level_where_it_is():
    """The theory: L(s, delta) = trusted(s) + untrusted(s + delta) is minimised at (s_hat, delta_hat).
    With the untrusted logits shifted by delta_hat, the best point of a 0.01 grid is (s_hat, 0),
    and moving along the line s + delta = const (flat without trusted judgments) costs loss."""
    generator = torch.Generator().manual_seed(1)
    a = torch.randint(-1, 2, (80,), generator=generator).to(F64)
    z = torch.randn(80, generator=generator, dtype=F64) + 0.7 * a
    trusted = torch.arange(80) < 25
    delta, s_hat = level_shift(z, a[:, None], trusted, LOGISTIC)
    shifted = z + torch.where(trusted, 0.0, float(delta)) * a
    grid = torch.arange(-1.5, 1.5, 0.01, dtype=F64)
    s, d = (t.flatten() for t in torch.meshgrid(grid, grid, indexing="ij"))
    moved = shifted[None, :] + (s[:, None] + torch.where(trusted, 0.0, 1.0)[None, :] * d[:, None]) * a[None, :]
    totals = torch.nn.functional.softplus(-moved).sum(1)
    best = int(totals.argmin())
    assert float(s[best]) == pytest.approx(float(s_hat), abs=0.01)
    assert float(d[best]) == pytest.approx(0.0, abs=0.01)
    along = shifted + 0.3 * torch.where(trusted, 1.0, 0.0) * a  # s + 0.3, delta - 0.3: same untrusted logits
    assert float(torch.nn.functional.softplus(-(along + float(s_hat) * a)).sum()) > float(totals.min())


@pytest.mark.parametrize("variant", ["per_annotator", "shared_mean", "class_offsets"])
def test_shift_untrusted_moves_every_other_theta_and_keeps_the_deviations(variant):
    classes = {"k0": "A", "k1": "A", "k2": "B"} if variant == "class_offsets" else None
    channel = BiasChannel(variant, ["a", "b"], ["k0", "k1", "k2"], classes, init_mean=[0.5, -0.5],
                          trusted={"k1": [0.2, 0.0]})
    before = channel.theta().detach().clone()
    channel.shift_untrusted(torch.tensor([1.0, 2.0], dtype=F64))
    after = channel.theta().detach()
    torch.testing.assert_close(after[[0, 2]], before[[0, 2]] + torch.tensor([1.0, 2.0]))
    assert after[1].tolist() == pytest.approx([0.2, 0.0])


def test_shift_untrusted_needs_trusted_annotators_and_one_value_per_declared_attribute():
    with pytest.raises(ValueError, match="has no trusted annotator"):
        BiasChannel("shared_mean", ["a"], ["k0"]).shift_untrusted(torch.zeros(1))
    channel = BiasChannel("shared_mean", ["a", "b"], ["k0", "k1"], declared=["a"], trusted=["k0"])
    with pytest.raises(ValueError, match=r"expected 1 values, one per declared attribute \['a'\]"):
        channel.shift_untrusted(torch.zeros(2))


def test_an_empty_set_has_no_estimate():
    assert torch.isnan(offset_mle(torch.zeros(0), torch.zeros(0, 2), LOGISTIC)).tolist() == [True, True]


def test_the_policy_tilt_is_the_least_squares_lean_of_pair_margins_read_once_per_pair():
    """Pairs with first-side differences A = (1, -1, 1, 0) and first-side margins (0.5, 0.1, 0.3, 7),
    judged twice, once each way round: sum A m / sum A^2 = (0.5 - 0.1 + 0.3) / 3, whoever chose what."""
    first_side = torch.tensor([1.0, -1.0, 1.0, 0.0], dtype=F64)
    margin = torch.tensor([0.5, 0.1, 0.3, 7.0], dtype=F64)
    pair = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    side = torch.tensor([1.0, -1.0] * 4, dtype=F64)
    tilt = policy_tilt(side * margin[pair], (side * first_side[pair])[:, None], pair, side)
    assert float(tilt[0]) == pytest.approx(0.7 / 3, abs=1e-12)
    assert policy_tilt(torch.zeros(8, dtype=F64), (side * first_side[pair])[:, None], pair, side).tolist() == [0.0]
    assert math.isnan(policy_tilt(margin[pair], torch.zeros(8, 1, dtype=F64), pair, side)[0])


def test_the_tilt_given_quality_reads_the_lean_at_fixed_labelled_quality():
    """Margins that are exactly 0.3 A + 0.8 q, with q going against A: the plain tilt counts the
    quality's share along A as lean (sum A m / sum A^2), the tilt given quality is 0.3 exactly; a
    quality of 0 everywhere is no column (the plain tilt). Each pair judged twice, once each way."""
    first_side = torch.tensor([1.0, -1.0, 1.0, 0.0, 2.0], dtype=F64)
    quality = torch.tensor([-1.0, 0.5, 0.0, 1.0, -0.5], dtype=F64)
    margin = 0.3 * first_side + 0.8 * quality
    pair = torch.arange(5).repeat_interleave(2)
    side = torch.tensor([1.0, -1.0] * 5, dtype=F64)
    a = (side * first_side[pair])[:, None]
    plain = policy_tilt(side * margin[pair], a, pair, side)
    expected_plain = float((first_side * margin).sum() / (first_side ** 2).sum())
    assert float(plain[0]) == pytest.approx(expected_plain, abs=1e-12)
    assert abs(expected_plain - 0.3) > 0.1  # the quality's share would be counted as lean
    given = policy_tilt(side * margin[pair], a, pair, side, quality[pair])
    assert float(given[0]) == pytest.approx(0.3, abs=1e-12)
    zeros = policy_tilt(side * margin[pair], a, pair, side, torch.zeros(10, dtype=F64))
    assert zeros.tolist() == plain.tolist()
    delta, tilt = tilt_shift(side * margin[pair], side * margin[pair], a, pair, side, LOGISTIC, quality[pair])
    assert float(tilt[0]) == pytest.approx(0.3, abs=1e-12)


def test_the_tilt_step_adds_the_lean_to_the_levels_own_optimum():
    """delta = t_hat + tilt: with the margins at 0 the lean is 0 and the step is the log-odds; with
    every margin leaning by 0.4 along a the step moves theta 0.4 further than the labels alone ask."""
    zero, a = _judgments(6, 2)
    pair, side = torch.arange(8), torch.ones(8, dtype=F64)
    delta, tilt = tilt_shift(zero, zero, a, pair, side, LOGISTIC)
    assert float(tilt[0]) == 0.0 and float(delta[0]) == pytest.approx(math.log(3), abs=1e-9)
    leaning = 0.4 * a[:, 0]
    delta, tilt = tilt_shift(leaning, leaning, a, pair, side, LOGISTIC)
    assert float(tilt[0]) == pytest.approx(0.4, abs=1e-12)
    assert float(delta[0]) == pytest.approx(math.log(3) - 0.4 + 0.4, abs=1e-9)


@pytest.mark.parametrize("variant", ["pooled", "per_annotator", "shared_mean"])
def test_shift_level_moves_every_learned_theta_without_trusted_annotators(variant):
    channel = BiasChannel(variant, ["g"], ["k0", "k1"])
    before = channel.mean().detach().clone()
    channel.shift_level(torch.tensor([0.25], dtype=F64))
    assert float(channel.mean()[0] - before[0]) == pytest.approx(0.25)
