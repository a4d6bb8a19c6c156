"""The statistics of ``badpo audit --discover``: one candidate's shared effect, its spread across
annotators, the multiple-testing control and the chi-square tail they need (numpy only).

**Shared effect.** On the pairs whose two sides differ in the candidate, ``pi`` is the share of
judgments won by the side that carries it and the effect is its log-odds, ``log((W + 1/2) /
(N - W + 1/2))`` (W wins of N judgments). The standard error treats a *pair* as the unit (a
cluster-robust sandwich): every annotator of one pair sees the same quality difference, so their
votes are not independent, and a binomial error over judgments would call a quality-driven
agreement a bias. ``Var(pi) = G / (G - 1) * sum_p (w_p - pi n_p)^2 / N^2`` (G pairs), floored at
the binomial variance of N independent votes, ``pi (1 - pi) / N`` (near separation every pair's
residual is 0, and the sum alone would call 20 pairs won outright a certainty); the log-odds'
error is the delta method's.

**Spread.** Whether the annotators disagree about the candidate: Pearson's chi-square of
homogeneity over the annotators with at least ``min_per_annotator`` judgments on pairs that differ
in it (their wins against ``n_k pi``, ``K - 1`` degrees of freedom). Its size is the
Paule-Mandel tau of per-annotator estimates (:func:`spread_sd`) with a Q-profile interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = ["Effects", "benjamini_hochberg", "chi2_quantile", "chi2_sf", "effect_sums", "effects",
           "effects_from_sums",
           "homogeneity_p", "normal_p", "simes2", "spread_sd"]

_NORMAL = NormalDist()


@dataclass(frozen=True)
class Effects:
    """Per candidate: pairs and judgments that differ in it, wins of its side, log-odds, s.e."""

    pairs: np.ndarray
    judgments: np.ndarray
    wins: np.ndarray
    estimate: np.ndarray
    se: np.ndarray

    @property
    def p(self) -> np.ndarray:
        return normal_p(self.estimate / self.se)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        z = _NORMAL.inv_cdf(0.5 + level / 2)
        return self.estimate - z * self.se, self.estimate + z * self.se


def effect_sums(candidate: np.ndarray, pair: np.ndarray, sign: np.ndarray, wins_a: np.ndarray,
                totals: np.ndarray, n_candidates: int) -> np.ndarray:
    """The sufficient statistics of :func:`effects`, [6, n_candidates]: pairs with a judgment,
    judgments N, wins W of the candidate's side, and the sums of w^2, w n and n^2 over pairs; they
    add over disjoint sets of pairs, so a screen can accumulate them chunk by chunk."""
    n = totals[pair].astype(np.float64)
    w = np.where(sign > 0, wins_a[pair], totals[pair] - wins_a[pair]).astype(np.float64)
    return np.stack([np.bincount(candidate, weights=weights, minlength=n_candidates)
                     for weights in ((n > 0).astype(np.float64), n, w, w * w, w * n, n * n)])


def effects_from_sums(sums: np.ndarray) -> Effects:
    """:class:`Effects` from :func:`effect_sums` (module docstring)."""
    pairs, judgments, wins, sum_ww, sum_wn, sum_nn = sums
    smooth = (wins + 0.5) / (judgments + 1.0)
    safe = np.maximum(judgments, 1.0)
    residual = np.maximum(sum_ww - 2 * smooth * sum_wn + smooth ** 2 * sum_nn, 0.0)
    variance = residual / safe ** 2 * np.where(pairs > 1, pairs / np.maximum(pairs - 1, 1), 1.0)
    variance = np.maximum(variance, smooth * (1 - smooth) / safe)  # never below independent votes' binomial
    estimate = np.log((wins + 0.5) / (judgments - wins + 0.5))
    se = np.sqrt(variance) / (smooth * (1 - smooth))
    return Effects(pairs.astype(np.int64), judgments.astype(np.int64), wins.astype(np.int64), estimate, se)


def effects(candidate: np.ndarray, pair: np.ndarray, sign: np.ndarray, wins_a: np.ndarray,
            totals: np.ndarray, n_candidates: int) -> Effects:
    """The shared effect of every candidate from its pair entries (candidate, pair, sign) and each
    pair's judgments (``totals``) and wins of side a (``wins_a``); entries on pairs with no
    judgment (another half's) count for nothing."""
    return effects_from_sums(effect_sums(candidate, pair, sign, wins_a, totals, n_candidates))


def normal_p(z: np.ndarray) -> np.ndarray:
    """Two-sided normal p-values, elementwise."""
    z = np.asarray(z, dtype=np.float64)
    return np.array([math.erfc(abs(v) / math.sqrt(2)) for v in z.ravel().tolist()]).reshape(z.shape)


def _gamma_q(a: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(a, x) (series below a + 1, continued
    fraction above, as in Numerical Recipes)."""
    if x <= 0:
        return 1.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        k = a
        while abs(term) > abs(total) * 1e-15:
            k += 1
            term *= x / k
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b, c, d = x + 1 - a, 1 / tiny, 1 / (x + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return min(1.0, math.exp(log_front) * h)


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X chi-square with ``df`` degrees of freedom."""
    return _gamma_q(df / 2.0, x / 2.0)


def chi2_quantile(p: float, df: int) -> float:
    """The x with P(X <= x) = p (bisection on :func:`chi2_sf`)."""
    low, high = 0.0, max(1.0, 2.0 * df)
    while 1 - chi2_sf(high, df) < p:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if 1 - chi2_sf(middle, df) < p else (low, middle)
    return (low + high) / 2


def homogeneity_p(wins: np.ndarray, totals: np.ndarray, min_per_annotator: int) -> tuple[float | None, int]:
    """(p-value, annotators tested) of Pearson's chi-square that the annotators with at least
    ``min_per_annotator`` judgments share one win probability; (None, K) with fewer than two."""
    keep = totals >= min_per_annotator
    w, n = wins[keep].astype(np.float64), totals[keep].astype(np.float64)
    if len(n) < 2:
        return None, int(len(n))
    pi = w.sum() / n.sum()
    if pi <= 0.0 or pi >= 1.0:
        return 1.0, int(len(n))
    statistic = float(np.sum((w - n * pi) ** 2 / (n * pi * (1 - pi))))
    return chi2_sf(statistic, len(n) - 1), int(len(n))


def _generalised_q(values: np.ndarray, variances: np.ndarray, tau2: float) -> float:
    weights = 1.0 / (variances + tau2)
    centre = np.sum(weights * values) / np.sum(weights)
    return float(np.sum(weights * (values - centre) ** 2))


def _solve_tau2(values: np.ndarray, variances: np.ndarray, target: float) -> float:
    """The tau^2 >= 0 at which the generalised Q (decreasing in tau^2) equals ``target``."""
    if _generalised_q(values, variances, 0.0) <= target:
        return 0.0
    high = max(float(np.var(values)), 1e-6)
    while _generalised_q(values, variances, high) > target:
        high *= 2
    low = 0.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _generalised_q(values, variances, middle) > target else (low, middle)
    return (low + high) / 2


def spread_sd(values: np.ndarray, se: np.ndarray, level: float = 0.95) -> tuple[float, float, float] | None:
    """(tau, low, high): the between-annotator standard deviation of ``values`` (per-annotator
    estimates with standard errors ``se``) by Paule-Mandel (the tau^2 at which the generalised Q
    equals its mean, K - 1) and its Q-profile interval (Q at the chi-square quantiles), so the
    estimate always lies in its interval; None with fewer than two annotators."""
    keep = np.isfinite(values) & np.isfinite(se) & (se > 0)
    values, variances = values[keep], se[keep] ** 2
    k = len(values)
    if k < 2:
        return None
    tau2 = _solve_tau2(values, variances, k - 1)
    low = _solve_tau2(values, variances, chi2_quantile(0.5 + level / 2, k - 1))
    high = _solve_tau2(values, variances, chi2_quantile(0.5 - level / 2, k - 1))
    return math.sqrt(tau2), math.sqrt(low), math.sqrt(high)


def simes2(p_first: np.ndarray, p_second: np.ndarray) -> np.ndarray:
    """Simes' combination of two p-values, ``min(2 min(p1, p2), max(p1, p2))``: a valid p-value
    for "neither null is false"; nan in the second means only the first was tested."""
    p_first, p_second = np.asarray(p_first, float), np.asarray(p_second, float)
    both = np.minimum(2 * np.minimum(p_first, p_second), np.maximum(p_first, p_second))
    return np.where(np.isnan(p_second), p_first, both)


def benjamini_hochberg(p: np.ndarray, alpha: float) -> np.ndarray:
    """The Benjamini-Hochberg rejections at false discovery rate ``alpha`` (bool, in input order)."""
    p = np.asarray(p, dtype=np.float64)
    m = len(p)
    if m == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(p, kind="stable")
    below = p[order] <= alpha * np.arange(1, m + 1) / m
    rejected = np.zeros(m, dtype=bool)
    if below.any():
        rejected[order[: int(np.flatnonzero(below).max()) + 1]] = True
    return rejected
