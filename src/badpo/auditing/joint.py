"""The joint per-annotator audit: every declared attribute of one annotator estimated together,
and the pool's level located so that the biased annotators it is meant to find do not move it.

**Why joint.** The marginal estimate of one attribute counts every judgment that is cross-group on
it, whatever else differs between the two sides. When two attributes go together (the side with
a sign-off is often the side without an emoji), an annotator who only likes emoji looks
*anti*-sign-off. One regression per annotator on the differences of all attributes at once
attributes each vote to the attribute that explains it.

**The model** is BA-DPO's bias term with the policy at the reference (u = 0): annotator k prefers
the chosen side with probability ``sigmoid(theta_k . dg)``, ``dg = g(chosen) - g(rejected)``.
Every row is a win of its chosen side, so k's log-likelihood is ``sum_j log sigmoid(theta_k .
dg_j)``; for one 0/1 attribute it is the marginal's ``w log sigmoid(t) + (n - w) log sigmoid(-t)``.
theta_k is on the scale of dg: log-odds per unit of the attribute (for a 0/1 attribute, the
log-odds that the attribute side wins).

**The prior.** Each coordinate has an independent normal prior ``N(0, (PRIOR_SCALE / s_i)^2)``,
``s_i`` the root mean square of the non-zero dg_i over the whole pool (1 for a 0/1 attribute, so
the prior sd is 2.5 on the log-odds scale; for a continuous attribute it does not depend on its
unit). The estimate is the posterior mode, i.e. a ridge with precision ``1 / (PRIOR_SCALE s_i)^2``:
finite for every count (3 wins in 3 on a 0/1 attribute gives +2.08, not +inf) and when two
attributes always co-occur in an annotator's judgments (the ridge splits their sum; the standard
errors then say the split is unknown). It shrinks toward 0, "no bias", so the prior alone never
makes an annotator look biased. The standard error is the square root of the diagonal of the
inverse of the penalised information at the mode (the Laplace approximation of the posterior);
the interval is estimate +- 1.96 se. A coordinate on which the annotator has no cross-group
judgment has no estimate (its column of dg is all 0; the prior alone would give 0).

**The level** against which an annotator is outlying is a Tukey biweight M-estimate of location
over the annotators' estimates (:func:`robust_level`): started at their median, with the scale
``S = 1.4826 MAD`` fixed, each annotator weighted by ``(1 - u^2)^2`` (0 beyond ``|u| = 1``),
``u = (estimate - level) / (4.685 S)``, and by ``1 / (se^2 + S^2)`` (an annotator whose own estimate
is noisier than the spread between annotators counts less; typical ones count alike), iterated to
a fixed point. The median can be moved by at most the share of biased raters, and the biweight then
gives raters far from the bulk weight exactly 0, so a third of the raters biased in one direction
leaves the level near the others' value, where the pooled log-odds of all judgments moves toward
them. When more than half the estimates are equal (MAD 0) the level is that value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PRIOR_SCALE", "BIWEIGHT_C", "JointFit", "RobustLevel", "fit_annotator", "fit_joint",
           "prior_precision", "robust_level", "two_sided_p"]

PRIOR_SCALE = 2.5  # prior sd of theta_k on the log-odds scale of a 0/1 attribute
BIWEIGHT_C = 4.685  # Tukey's constant: 95% efficiency at the normal
_MAD_TO_SD = 1.4826  # MAD * this estimates the sd of a normal sample


@dataclass(frozen=True)
class JointFit:
    """Every annotator's joint estimate: ``estimate[k, i]`` and ``se[k, i]``, nan where annotator
    k has no cross-group judgment on attribute i."""

    names: tuple[str, ...]
    annotators: tuple[str, ...]
    estimate: np.ndarray  # [K, q]
    se: np.ndarray  # [K, q]
    prior_sd: np.ndarray  # [q]: PRIOR_SCALE / s_i (inf without a prior)


@dataclass(frozen=True)
class RobustLevel:
    """The biweight level of one attribute over the annotators that have an estimate."""

    level: float | None  # None when no annotator has an estimate
    scale: float  # S = 1.4826 MAD of the estimates
    weights: np.ndarray  # each annotator's share of the level (sums to 1; 0: left out)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def prior_precision(diffs: np.ndarray, prior_scale: float = PRIOR_SCALE) -> np.ndarray:
    """1 / (prior_scale * s_i)^2 per coordinate, s_i the RMS of the non-zero dg_i of the pool
    (1 where there is none); 0 for ``prior_scale = inf`` (the unpenalised maximum likelihood)."""
    if not prior_scale > 0:
        raise ValueError(f"prior_scale must be > 0, got {prior_scale}")
    if math.isinf(prior_scale):
        return np.zeros(diffs.shape[1])
    nonzero = diffs != 0
    counts = nonzero.sum(axis=0)
    squares = np.where(nonzero, diffs * diffs, 0.0).sum(axis=0)
    rms = np.where(counts > 0, np.sqrt(squares / np.maximum(counts, 1)), 1.0)
    return 1.0 / (prior_scale * rms) ** 2


def fit_annotator(x: np.ndarray, precision: np.ndarray, tol: float = 1e-10,
                  max_iter: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """(mode, se) of ``sum_j log sigmoid(x_j . t) - 1/2 sum_i precision_i t_i^2`` over the columns
    of ``x`` [n, q]: Newton's method with step halving (the objective is concave, strictly with a
    positive precision). The caller drops all-zero columns when the precision may be 0."""
    theta = np.zeros(x.shape[1])

    def objective(t: np.ndarray) -> float:
        return float(_log_sigmoid(x @ t).sum() - 0.5 * (precision * t * t).sum())

    def information(t: np.ndarray) -> np.ndarray:
        p = np.exp(_log_sigmoid(x @ t))
        return (x * (p * (1 - p))[:, None]).T @ x + np.diag(precision)

    value = objective(theta)
    for _ in range(max_iter):
        lose = np.exp(_log_sigmoid(-(x @ theta)))  # sigmoid(-m): the gradient's weight of each row
        gradient = x.T @ lose - precision * theta
        step = np.linalg.solve(information(theta), gradient)
        shrink = 1.0
        while True:
            candidate = theta + shrink * step
            new_value = objective(candidate)
            if new_value >= value - 1e-12 or shrink < 1e-6:
                break
            shrink /= 2
        theta, value = candidate, new_value
        if float(np.max(np.abs(shrink * step), initial=0.0)) < tol:
            break
    return theta, np.sqrt(np.diag(np.linalg.inv(information(theta))))


def fit_joint(diffs: np.ndarray, vertex: np.ndarray, annotators: Sequence[str], names: Sequence[str],
              prior_scale: float = PRIOR_SCALE) -> JointFit:
    """One penalised regression per annotator on the rows ``diffs`` [N, q] (dg of each judgment,
    oriented chosen minus rejected) whose ``vertex`` is that annotator's index."""
    precision = prior_precision(diffs, prior_scale)
    q = diffs.shape[1]
    estimate = np.full((len(annotators), q), np.nan)
    se = np.full((len(annotators), q), np.nan)
    order = np.argsort(vertex, kind="stable")
    bounds = np.searchsorted(vertex[order], np.arange(len(annotators) + 1))
    for k in range(len(annotators)):
        rows = diffs[order[bounds[k]:bounds[k + 1]]]
        rows = rows[(rows != 0).any(axis=1)]  # a same-group row adds log sigmoid(0), a constant
        seen = np.flatnonzero((rows != 0).any(axis=0))
        if seen.size:
            estimate[k, seen], se[k, seen] = fit_annotator(rows[:, seen], precision[seen])
    prior_sd = np.where(precision > 0, 1.0 / np.sqrt(np.where(precision > 0, precision, 1.0)), np.inf)
    return JointFit(tuple(names), tuple(annotators), estimate, se, prior_sd)


def robust_level(estimates: Sequence[float], se: Sequence[float], tol: float = 1e-12,
                 max_iter: int = 500) -> RobustLevel:
    """The biweight level of ``estimates`` with their standard errors (module docstring)."""
    values = np.asarray(estimates, dtype=np.float64)
    errors = np.asarray(se, dtype=np.float64)
    if values.size == 0:
        return RobustLevel(None, 0.0, values)
    if not (np.isfinite(values).all() and np.isfinite(errors).all()):
        raise ValueError("robust_level: estimates and standard errors must be finite")
    level = float(np.median(values))
    scale = _MAD_TO_SD * float(np.median(np.abs(values - level)))
    if scale == 0.0:  # more than half share one value: that value, the rest left out
        weights = (values == level).astype(np.float64)
        return RobustLevel(level, 0.0, weights / weights.sum())
    weights = np.ones_like(values)
    for _ in range(max_iter):
        u = (values - level) / (BIWEIGHT_C * scale)
        weights = np.where(np.abs(u) < 1, (1 - u * u) ** 2, 0.0) / (errors ** 2 + scale ** 2)
        new = float(np.sum(weights * values) / np.sum(weights))
        done = abs(new - level) < tol
        level = new
        if done:
            break
    return RobustLevel(level, scale, weights / weights.sum())


def two_sided_p(z: np.ndarray) -> np.ndarray:
    """P(|Z| >= |z|) for a standard normal Z, elementwise (nan stays nan)."""
    z = np.asarray(z, dtype=np.float64)
    return np.array([math.erfc(abs(v) / math.sqrt(2)) if np.isfinite(v) else math.nan
                     for v in z.ravel().tolist()]).reshape(z.shape)
