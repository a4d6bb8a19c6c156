"""The level with a per-pair random effect (badpo.core.pair_level): its likelihood against an
independent numerical integral, the identities the model gives exactly, and recovery on judgments
whose truth is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from badpo.core.level_step import LOGISTIC, reference_start
from badpo.core.pair_level import MAX_CONDITIONAL_ATTRIBUTES, pair_effect_level, pair_log_likelihood, pair_quality


def _world(theta, spread, pairs=1500, per=4, seed=0):
    """Judgments of ``pairs`` pairs, ``per`` each, quality ~ N(0, spread^2) shared by a pair's
    annotators, attribute differences in {-1, 0, 1}: (a [n, d], pair [n], side [n])."""
    g = torch.Generator().manual_seed(seed)
    theta = torch.tensor(theta, dtype=torch.float64)
    diff = torch.randint(-1, 2, (pairs, len(theta)), generator=g).double()
    quality = spread * torch.randn(pairs, generator=g, dtype=torch.float64)
    pair = torch.arange(pairs).repeat_interleave(per)
    chance = torch.rand(len(pair), generator=g, dtype=torch.float64)
    first_won = chance < torch.sigmoid(quality[pair] + diff[pair] @ theta)
    side = torch.where(first_won, 1.0, -1.0).double()
    return diff[pair] * side[:, None], pair, side


def _integral(theta, spread, a, pair, side, offsets):
    """log L by the trapezoid rule on a fine grid of v: a second path to the quadrature's value."""
    v = np.linspace(-12, 12, 24001)
    density = np.exp(-v ** 2 / 2) / math.sqrt(2 * math.pi)
    total = 0.0
    for p in np.unique(pair):
        rows = pair == p
        z = side[rows, None] * spread * v[None, :] + (a[rows] @ theta)[:, None] + offsets[rows, None]
        integrand = np.exp(-np.logaddexp(0, -z).sum(0)) * density
        total += math.log(np.trapezoid(integrand, v))
    return total


def test_the_quadrature_equals_an_independent_integral():
    """Seven judgments in three pairs, two attributes, offsets: Gauss-Hermite against a trapezoid
    rule on 24,001 points, to 1e-9, also where quality is worth 11 logits."""
    a = np.array([[1, 0], [-1, 0], [1, 1], [0, -1], [0, 1], [1, -1], [-1, 1]], dtype=float)
    pair = np.array([0, 0, 1, 1, 1, 2, 2])
    side = np.array([1, -1, 1, 1, -1, 1, -1], dtype=float)
    offsets = np.array([0.1, 0.0, -0.3, 0.2, 0.0, 0.5, -0.5])
    theta = np.array([0.7, -0.4])
    for spread in (0.0, 0.8, 2.5, 5.0, 11.0):
        expected = _integral(theta, spread, a, pair, side, offsets)
        value = pair_log_likelihood(torch.tensor(theta), spread, torch.tensor(a), torch.tensor(pair),
                                    torch.tensor(side), torch.tensor(offsets))
        assert float(value) == pytest.approx(expected, abs=1e-9)


def test_no_spread_is_the_plain_logistic_likelihood():
    """At tau = 0 each judgment is sigma(theta . a + o) on its own: sum log sigma, exactly."""
    a, pair, side = _world([0.9], 1.0, pairs=40)
    offsets = torch.linspace(-1, 1, len(pair), dtype=torch.float64)
    theta = torch.tensor([0.9], dtype=torch.float64)
    value = pair_log_likelihood(theta, 0.0, a, pair, side, offsets)
    assert float(value) == pytest.approx(float(torch.nn.functional.logsigmoid(a @ theta + offsets).sum()), abs=1e-9)


def test_the_fit_solves_its_score_equations_and_its_marginal_is_the_reference_start():
    """At the fitted (theta, tau) the gradient of log L vanishes (tau > 0 inside the interval), and
    the marginal level is reference_start's on the same judgments."""
    a, pair, side = _world([1.0, -0.5], 1.5, pairs=600)
    fit = pair_effect_level(a, pair, side)
    assert fit.identified and fit.spread > 0.5
    params = torch.tensor([*fit.level, fit.spread], dtype=torch.float64, requires_grad=True)
    value = pair_log_likelihood(params[:2], params[2], a, pair, side, torch.zeros(len(pair), dtype=torch.float64))
    (gradient,) = torch.autograd.grad(value, params)
    assert gradient[:2].abs().max() < 1e-5  # theta: Newton to float precision
    assert abs(float(gradient[2])) < 0.05  # tau: golden section to 1e-3
    assert fit.marginal == pytest.approx(reference_start(a, torch.zeros(len(pair)), LOGISTIC), abs=1e-7)


def test_which_side_of_a_pair_is_first_and_the_pair_ids_change_nothing():
    a, pair, side = _world([0.8], 2.0, pairs=300)
    fit = pair_effect_level(a, pair, side)
    flipped = pair % 2 == 1  # every odd pair read the other way round: its sides swap
    renamed = pair * 7 + 1000  # sparse, shifted ids
    other = pair_effect_level(a, renamed, torch.where(flipped, -side, side))
    assert other.level == pytest.approx(fit.level, abs=1e-6)
    assert other.spread == pytest.approx(fit.spread, abs=2e-3)


@pytest.mark.parametrize(("theta", "seed"), [(1.0, 1), (0.0, 2)])
def test_recovers_the_planted_level_where_quality_shrinks_the_marginal_one(theta, seed):
    """Quality with sd 2 logits, four annotators a pair: the marginal level is about 60% of the
    planted one (sqrt(1 + pi * 4 / 8) = 1.60), the conditional one recovers it within three
    standard errors, and the spread within 0.3; a null set gives 0 within three."""
    a, pair, side = _world([theta], 2.0, pairs=2000, seed=seed)
    fit = pair_effect_level(a, pair, side)
    assert fit.identified
    assert abs(fit.level[0] - theta) < 3 * fit.se[0]
    assert abs(fit.spread - 2.0) < 0.3
    if theta:
        assert fit.marginal[0] < 0.75 * theta  # the shrinkage the conditional level undoes
        assert fit.marginal[0] / fit.level[0] == pytest.approx(1 / math.sqrt(1 + math.pi * 4 / 8), abs=0.08)


def test_one_judgment_a_pair_falls_back_to_the_marginal_level_and_says_so():
    a, pair, side = _world([1.0], 2.0, pairs=400, per=1)
    fit = pair_effect_level(a, pair, side)
    assert not fit.identified and fit.spread == 0.0
    assert fit.level == fit.marginal
    assert "not identified" in fit.note and "1.60x" in fit.note


def test_past_the_attribute_cap_the_level_is_the_marginal_fit_and_says_so():
    """Each Newton step of the spread's profile costs pairs x nodes x d^2: 200 regex attributes took
    minutes and GBs (issue 76). Past the cap the marginal fit is the level, said in the note; at the
    cap the spread is still fitted."""
    d = MAX_CONDITIONAL_ATTRIBUTES + 1
    a, pair, side = _world([0.3] * d, 2.0, pairs=600, seed=1)
    fit = pair_effect_level(a, pair, side)
    assert not fit.identified and fit.spread == 0.0 and fit.level == fit.marginal
    assert f"{d} attributes are more than the {MAX_CONDITIONAL_ATTRIBUTES}" in fit.note and "1.60x" in fit.note
    assert fit.level == pytest.approx(reference_start(a, torch.zeros(len(pair)), LOGISTIC), abs=1e-6)
    kept = pair_effect_level(a[:, :MAX_CONDITIONAL_ATTRIBUTES], pair, side)
    assert kept.identified and kept.spread > 0


def test_an_attribute_no_judgment_touches_starts_at_zero_and_separation_is_refused():
    a, pair, side = _world([1.0], 1.0, pairs=200)
    fit = pair_effect_level(torch.cat([a, torch.zeros(len(a), 1, dtype=torch.float64)], 1), pair, side)
    assert fit.level[1] == 0.0 and math.isnan(fit.se[1])
    with pytest.raises(ValueError, match="no finite fit"):
        pair_effect_level(torch.ones(len(pair), 1, dtype=torch.float64), pair, side)


def test_the_pairs_quality_is_its_posterior_mean_by_an_independent_integral():
    """E[q_p | judgments] = int tau v prod sigma(...) phi(v) dv / int prod sigma(...) phi(v) dv, on a
    24,001-point grid, to 1e-9; every judgment of a pair carries its pair's value; none at tau = 0."""
    a = np.array([[1, 0], [-1, 0], [1, 1], [0, -1], [0, 1], [1, -1], [-1, 1]], dtype=float)
    pair = np.array([0, 0, 1, 1, 1, 2, 2])
    side = np.array([1, 1, 1, 1, -1, -1, -1], dtype=float)
    offsets = np.array([0.1, 0.0, -0.3, 0.2, 0.0, 0.5, -0.5])
    theta, spread = np.array([0.7, -0.4]), 2.5
    v = np.linspace(-12, 12, 24001)
    density = np.exp(-v ** 2 / 2)
    expected = []
    for p in range(3):
        rows = pair == p
        z = side[rows, None] * spread * v[None, :] + (a[rows] @ theta)[:, None] + offsets[rows, None]
        weight = np.exp(-np.logaddexp(0, -z).sum(0)) * density
        expected.append(np.trapezoid(spread * v * weight, v) / np.trapezoid(weight, v))
    args = (torch.tensor(a), torch.tensor(pair), torch.tensor(side), torch.tensor(offsets))
    value = pair_quality(torch.tensor(theta), spread, *args)
    assert value.tolist() == pytest.approx([expected[p] for p in pair], abs=1e-9)
    assert expected[0] > 0 > expected[2]  # both judgments for the first side, both for the second
    assert pair_quality(torch.tensor(theta), 0.0, *args).tolist() == [0.0] * 7


def test_the_pairs_quality_is_calibrated_on_judgments_whose_quality_is_known():
    """At the planted (theta, tau) the posterior mean is unbiased for q: regressed on it, the true
    quality has slope 1 (within 0.05 on 1,500 pairs of four judgments); it follows the pair's votes,
    so it correlates with the truth."""
    g = torch.Generator().manual_seed(3)
    pairs, per, theta, spread = 1500, 4, torch.tensor([0.9], dtype=torch.float64), 2.0
    diff = torch.randint(-1, 2, (pairs, 1), generator=g).double()
    quality = spread * torch.randn(pairs, generator=g, dtype=torch.float64)
    pair = torch.arange(pairs).repeat_interleave(per)
    chance = torch.rand(len(pair), generator=g, dtype=torch.float64)
    first_won = chance < torch.sigmoid(quality[pair] + diff[pair] @ theta)
    side = torch.where(first_won, 1.0, -1.0).double()
    guess = pair_quality(theta, spread, diff[pair] * side[:, None], pair, side)[::per]
    slope = float((guess * quality).sum() / (guess ** 2).sum())
    assert slope == pytest.approx(1.0, abs=0.05)
    assert float(torch.corrcoef(torch.stack([guess, quality]))[0, 1]) > 0.6
