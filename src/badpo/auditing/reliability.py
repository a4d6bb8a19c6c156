"""Annotator reliability: how much each rater's votes follow what the other raters of the same pairs
saw, so that a rater who clicks at random (or against the task) is found, not only one whose bias
differs from the pool's.

**The model** (a scale on the rater's whole logit): annotator k's vote j picks the side its pair's
consensus favours with ``P = sigmoid(s_k z_j)``, ``z_j`` the consensus logit of the side k chose.
``s_k = 1``: k follows the consensus as a typical rater does; ``0``: a fair coin; ``< 0``: against it.

**Why a scale and not a lapse mixture** ``P = (1 - e_k) sigmoid(z) + e_k / 2``: both put a coin at
the same point (s = 0, e = 1) and differ little in between, but (1) a typical rater sits at e = 0, the
edge of the mixture's range, where likelihood intervals and tests are not regular (the ratio
statistic is a chi-bar-square there), while s = 1 is an interior point; (2) a rater against the task
is s < 0, inside the model, where the mixture needs e > 1; (3) the log-likelihood
``sum_j log sigmoid(s z_j)`` is concave in s, one logistic regression without intercept per rater;
(4) s_k acts on the logit as BA-DPO's loss does, so it is also the training weight (below).

**The consensus** ``z_j`` is leave-one-annotator-out: the pooled fit of the labels with a per-pair
random effect for quality (:func:`badpo.core.pair_level.pair_effect_level`: theta and the quality
spread tau) gives, for j's pair p, the posterior of its quality q_p given the votes on p of every
annotator but k (votes ``sigmoid(+-(q_p + theta . d_p))``, ``q_p ~ N(0, tau^2)``), and z_j is the logit
of the predictive ``P(first side) = E[sigmoid(q_p + theta . d_p) | those votes]`` (a trapezoid rule
over q_p), read toward the side k chose. All of k's votes on p are left out (a repeat vote would
otherwise predict k's own). The posterior predictive, not the posterior mean of q_p, so that a
typical rater is calibrated at s = 1 rather than looking sharper or blunter than the pool. z_j does
not depend on k's votes (but through theta and tau, pooled over everyone), so a coin's votes are
independent of their z and the tests below hold their null exactly (their p-values use the
likelihood ratio's asymptotic chi-square law). Votes
on pairs nobody else judged carry no consensus and are not read. Random voters in the pool dilute
everyone's consensus (and shrink tau): they cost the others power, and typical raters then read a
little above 1. A biased rater's votes leave the consensus on the pairs that differ in the bias's
attribute, so strong bias lowers s_k a little; the bias itself is the joint audit's to read.

**The estimate** is the mode of ``sum_j log sigmoid(s z_j) - (s - 1)^2 / (2 PRIOR_SD^2)``: a normal prior
centred on a typical rater keeps s finite when every vote agrees with the consensus, and shrinks
toward "reliable", so the prior alone never makes a rater look unreliable. Its 95% interval is the
profile (penalised likelihood-ratio) interval. A rater with fewer than ``MIN_SHARED`` votes on pairs
another annotator judged gets no estimate (``reliability`` None, the note says why).

**The flag** ``unreliable``: the one-sided test of H0 ``s_k >= FLOOR`` (k follows the consensus at half
a typical rater's strength or more) against ``s_k < FLOOR``, from the signed root of the penalised
likelihood-ratio statistic (``reliability_p``), with Benjamini-Hochberg at false discovery rate
``FDR`` over the estimated raters: among the flags, the expected share of raters at or above half
strength is at most FDR. Why not flag on H0 ``s = 0`` itself: rejecting it says a rater *is*
distinguishable from noise, and a flag is the opposite finding; a null at s = 1 would flag, given
enough votes, a careful rater who is a little blunter than the pool. ``noise_p`` is still reported:
the two-sided test of ``s_k = 0`` (small: the votes carry the shared signal, or its reverse). The
p-values of raters who share pairs are mildly dependent through the consensus; BH is not corrected
for it.

**For training** :func:`reliability_weights` gives each annotator a weight in [0, 1]: 0 for a flagged
rater, s_k clipped to [0, 1] otherwise (for a vote at margin 0 the scaled model's gradient is s_k
times DPO's: the weight is that scale, to first order), 1 for a rater without an estimate (no
evidence against them: nothing is dropped silently).

**Cost**: one pass over the quadrature's nodes (69 at tau <= 2.5, 327 at tau = 12), each a few
array operations over the N votes, then per-rater bisections (about 150 evaluations of
``bincount`` over the shared votes): O(N (nodes + 150)) in numpy, no loop over judgments or
annotators; on 100,000 judgments about a second (docs/audit.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from badpo.auditing.discover_stats import benjamini_hochberg
from badpo.auditing.forest import plot_label  # an id as the terminal shows it: cut past 120 characters
from badpo.auditing.start_level import judgment_pairs
from badpo.core.judgments import Judgment

__all__ = ["FDR", "FLOOR", "MIN_SHARED", "PRIOR_SD", "Reliability", "annotator_reliability", "consensus_logits",
           "format_reliability", "reliability_of", "reliability_row", "reliability_weights", "scale_fits"]

FLOOR = 0.5  # the flag's null: the rater follows the consensus at half a typical rater's strength or more
FDR = 0.1  # Benjamini-Hochberg's false discovery rate over the raters
MIN_SHARED = 10  # fewer votes on pairs another annotator judged: no estimate
PRIOR_SD = 1.0  # the prior N(1, PRIOR_SD^2) on s_k: a coin (0) and a rater against the task (-1) stay plausible
LEVEL = 0.95
_TAIL = 8.5  # the quality grid spans [-8.5, 8.5] standard deviations
_REACH = 64.0  # the searches stop this far from their start (an unpenalised fit of a separated rater)
_LISTED = 10  # flagged raters the terminal names before "... and N more"


@dataclass(frozen=True)
class Reliability:
    """Every annotator's scale s_k (``estimate``, ``low``, ``high``; nan: no estimate), the flag's
    p-value ``p`` (H0 s_k >= floor), ``noise_p`` (H0 s_k = 0), the flags, and what was read."""

    annotators: tuple[str, ...]
    shared: np.ndarray  # [K] votes on pairs another annotator judged
    estimate: np.ndarray  # [K]
    low: np.ndarray
    high: np.ndarray
    p: np.ndarray
    noise_p: np.ndarray
    unreliable: np.ndarray  # [K] bool
    floor: float = FLOOR
    fdr: float = FDR
    spread: float = 0.0  # the pooled fit's quality spread tau (logits)
    note: str | None = None  # why nobody was estimated, when so

    @property
    def flagged(self) -> tuple[str, ...]:
        return tuple(a for a, f in zip(self.annotators, self.unreliable.tolist()) if f)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (None for no value): the settings, and per annotator its row."""
        return {"model": "P(vote) = sigmoid(s_k z), z the pair's leave-one-annotator-out consensus logit",
                "floor": self.floor, "fdr": self.fdr, "min_shared": MIN_SHARED, "prior_sd": PRIOR_SD,
                "spread": self.spread, "note": self.note, "flagged": list(self.flagged),
                "estimated": int(np.isfinite(self.estimate).sum()),
                "annotators": {a: reliability_row(self, a) for a in self.annotators},
                "weights": reliability_weights(self)}


def _value(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def reliability_row(reliability: Reliability | None, annotator: str) -> dict[str, Any]:
    """One annotator's fields as the report's rows carry them (``None`` values without an estimate)."""
    if reliability is None or annotator not in reliability.annotators:
        return {"shared_votes": None, "reliability": None, "reliability_low": None, "reliability_high": None,
                "reliability_p": None, "noise_p": None, "unreliable": False, "reliability_note": None}
    k = reliability.annotators.index(annotator)
    shared = int(reliability.shared[k])
    note = reliability.note if reliability.note is not None else (
        None if math.isfinite(reliability.estimate[k]) else
        f"{shared} votes on pairs another annotator judged, under {MIN_SHARED}: no estimate")
    return {"shared_votes": shared, "reliability": _value(reliability.estimate[k]),
            "reliability_low": _value(reliability.low[k]), "reliability_high": _value(reliability.high[k]),
            "reliability_p": _value(reliability.p[k]), "noise_p": _value(reliability.noise_p[k]),
            "unreliable": bool(reliability.unreliable[k]), "reliability_note": note}


def reliability_weights(reliability: Reliability) -> dict[str, float]:
    """annotator -> training weight in [0, 1]: 0 when flagged unreliable, the estimated scale s_k
    clipped to [0, 1] otherwise, 1 without an estimate (too few shared votes: no evidence)."""
    weights = np.where(np.isfinite(reliability.estimate), np.clip(reliability.estimate, 0.0, 1.0), 1.0)
    return {a: 0.0 if flagged else float(w)
            for a, w, flagged in zip(reliability.annotators, weights.tolist(), reliability.unreliable.tolist())}


# ---------------------------------------------------------------------------------- the consensus
def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _grid(spread: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes v and log-weights of E f(v), v ~ N(0, 1), by the trapezoid rule on [-8.5, 8.5]. Its error
    falls as exp(-2 pi d / step) for an integrand analytic in a strip of half-width d, and products of
    sigmoid(tau v + c) have poles pi / tau off the real axis: the step min(0.25, pi / (5 tau)) reads a
    consensus logit to 1e-12 at tau = 2 (a step of 0.5 was off by 4e-5; tests/audit/test_reliability.py)."""
    step = min(0.25, math.pi / (5 * spread)) if spread > 0 else 0.25
    half = math.ceil(_TAIL / step)
    v = np.arange(-half, half + 1) * step
    return v, math.log(step) - v * v / 2 - 0.5 * math.log(2 * math.pi)


def consensus_logits(pair: np.ndarray, cell: np.ndarray, side: np.ndarray, offset: np.ndarray,
                     spread: float) -> np.ndarray:
    """Per vote [N], the logit that its pair's first side wins given the votes on that pair outside
    its cell: ``log E[sigmoid(t)] - log E[sigmoid(-t)]``, t = tau v + offset, over v's posterior given
    those votes. ``pair``, ``cell`` [N] any integer ids (a cell: one annotator's votes on one pair),
    ``side`` +1 where the vote chose the pair's first side, -1 the second, ``offset`` theta . d of
    the pair's first side minus its second. One loop over the grid's nodes, vectorised over votes."""
    _, pair = np.unique(pair, return_inverse=True)
    _, cell = np.unique(cell, return_inverse=True)
    side, offset = np.asarray(side, dtype=np.float64), np.asarray(offset, dtype=np.float64)
    up = np.full(len(side), -np.inf)
    down = np.full(len(side), -np.inf)
    for node, log_weight in zip(*_grid(spread)):
        t = spread * node + offset
        vote = _log_sigmoid(side * t)
        others = np.bincount(pair, vote)[pair] - np.bincount(cell, vote)[cell]
        up = np.logaddexp(up, log_weight + others + _log_sigmoid(t))
        down = np.logaddexp(down, log_weight + others + _log_sigmoid(-t))
    return up - down


# ------------------------------------------------------------------------------- the scale fits
def _crossing(holds, start: np.ndarray, direction: float) -> np.ndarray:
    """Per rater, where ``holds`` (an elementwise test of an array of scales, true at ``start``) turns
    false moving from ``start`` in ``direction``: the span doubled until it brackets (at most
    ``_REACH``), then 50 bisections."""
    width = np.ones_like(start)
    while np.any(grow := holds(start + direction * width) & (width < _REACH)):
        width = np.where(grow, 2 * width, width)
    inner, outer = start.copy(), start + direction * width
    for _ in range(50):
        middle = (inner + outer) / 2
        kept = holds(middle)
        inner, outer = np.where(kept, middle, inner), np.where(kept, outer, middle)
    return (inner + outer) / 2


def scale_fits(x: np.ndarray, vertex: np.ndarray, n_annotators: int, prior_sd: float = PRIOR_SD,
               floor: float = FLOOR, level: float = LEVEL) -> tuple[np.ndarray, ...]:
    """(estimate, low, high, p, noise_p) [K] of each rater's scale from its votes' consensus logits
    ``x`` [n] (toward the side chosen) and their rater ``vertex`` [n]: the mode of
    ``l_k(s) = sum_j log sigmoid(s x_j) - (s - 1)^2 / (2 prior_sd^2)`` (``prior_sd`` inf: the maximum
    likelihood), the profile interval ``2 (l(mode) - l(s)) <= z^2``, the one-sided p of ``s >= floor``
    from the signed root of that statistic, and the two-sided p of ``s = 0``."""
    precision = 0.0 if math.isinf(prior_sd) else 1.0 / prior_sd ** 2

    def loglik(s: np.ndarray) -> np.ndarray:
        return np.bincount(vertex, _log_sigmoid(s[vertex] * x), n_annotators) - precision * (s - 1) ** 2 / 2

    def rising(s: np.ndarray) -> np.ndarray:  # the score is positive: the mode lies above s
        return np.bincount(vertex, x * np.exp(_log_sigmoid(-s[vertex] * x)), n_annotators) > precision * (s - 1)

    ones = np.ones(n_annotators)
    up = rising(ones)
    estimate = np.where(up, _crossing(rising, ones, 1.0), _crossing(lambda s: ~rising(s), ones, -1.0))
    best = loglik(estimate)
    z = _normal_quantile(0.5 + level / 2)

    def inside(s: np.ndarray) -> np.ndarray:
        return 2 * (best - loglik(s)) <= z * z

    low, high = _crossing(inside, estimate, -1.0), _crossing(inside, estimate, 1.0)
    at_floor = np.maximum(2 * (best - loglik(np.full(n_annotators, floor))), 0.0)
    root = np.sign(estimate - floor) * np.sqrt(at_floor)
    p = np.array([0.5 * math.erfc(-r / math.sqrt(2)) for r in root.tolist()])
    at_zero = np.maximum(2 * (best - loglik(np.zeros(n_annotators))), 0.0)
    noise_p = np.array([math.erfc(math.sqrt(s / 2)) for s in at_zero.tolist()])
    return estimate, low, high, p, noise_p


def _normal_quantile(u: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(u)


# ------------------------------------------------------------------------------------ the audit
def annotator_reliability(annotators: Sequence[str], vertex: Any, pair: Any, side: Any, differences: Any,
                          level: Sequence[float], spread: float, *, fdr: float = FDR, floor: float = FLOOR,
                          min_shared: int = MIN_SHARED, prior_sd: float = PRIOR_SD) -> Reliability:
    """Every annotator's reliability (module docstring) from arrays: ``vertex`` [N] the vote's
    annotator (a position in ``annotators``), ``pair`` [N] its pair (any integer id), ``side`` [N] +1
    where it chose its pair's first side, -1 the second, ``differences`` [N, q] g(chosen) -
    g(rejected); ``level`` (theta [q]) and ``spread`` (tau) are the pooled fit's."""
    vertex, pair = np.asarray(vertex, dtype=np.int64), np.asarray(pair, dtype=np.int64)
    side, differences = np.asarray(side, dtype=np.float64), np.asarray(differences, dtype=np.float64)
    n, k = len(vertex), len(annotators)
    if not (len(pair) == len(side) == n and differences.shape == (n, len(level))):
        raise ValueError(f"annotator_reliability: {n} votes but pair {pair.shape}, side {side.shape}, "
                         f"differences {differences.shape} for {len(level)} attributes")
    if n and (vertex.min() < 0 or vertex.max() >= k or not np.isin(side, (-1.0, 1.0)).all()):
        raise ValueError("annotator_reliability: vertex must index the annotators and side be +1 or -1")
    _, dense = np.unique(pair, return_inverse=True)
    _, cell = np.unique(dense * k + vertex, return_inverse=True)  # one annotator's votes on one pair
    shared = np.bincount(dense)[dense] > np.bincount(cell)[cell]  # someone else voted on the pair too
    offset = side * (differences @ np.asarray(level, dtype=np.float64))  # theta . (first side - second side)
    z = consensus_logits(dense[shared], cell[shared], side[shared], offset[shared], spread)
    votes = np.bincount(vertex[shared], minlength=k)
    estimate, low, high, p, noise_p = scale_fits(side[shared] * z, vertex[shared], k, prior_sd, floor)
    known = votes >= min_shared
    estimate, low, high, p, noise_p = (np.where(known, a, np.nan) for a in (estimate, low, high, p, noise_p))
    unreliable = np.zeros(k, dtype=bool)
    unreliable[known] = benjamini_hochberg(p[known], fdr)
    return Reliability(tuple(annotators), votes, estimate, low, high, p, noise_p, unreliable, floor, fdr,
                       float(spread))


def _not_estimated(annotators: Sequence[str], note: str) -> Reliability:
    nothing = np.full(len(annotators), np.nan)
    return Reliability(tuple(annotators), np.zeros(len(annotators), dtype=np.int64), nothing, nothing, nothing,
                       nothing, nothing, np.zeros(len(annotators), dtype=bool), note=note)


def reliability_of(judgments: Sequence[Judgment], differences: np.ndarray, fit: Any,
                   annotators: Sequence[str]) -> Reliability:
    """:func:`annotator_reliability` of the audit's judgments (ties already left out), their
    ``differences`` and the pooled fit ``fit`` (:class:`badpo.core.pair_level.PairEffectFit`, the
    audit's ``start``); nobody is estimated, saying why, without a fit, without pairs judged by several
    annotators, or when they agree no more than the attributes explain (spread 0)."""
    if fit is None:
        return _not_estimated(annotators, "no pooled fit of the labels (no judgment differs on a declared "
                                          "attribute, or the fit has no finite value: see the warnings)")
    if not fit.identified:  # the fit's own reason: too few repeated pairs, or too many attributes
        return _not_estimated(annotators, f"{fit.note.split(': ', 1)[0]}, so what the raters of a pair share "
                                          "is not read")
    if not fit.spread > 0:
        return _not_estimated(annotators, "the raters of a pair agree no more than the declared attributes "
                                          "explain (quality spread 0): no shared signal to measure a rater against")
    position = {a: i for i, a in enumerate(annotators)}
    vertex = np.array([position[j.annotator] for j in judgments], dtype=np.int64)
    pair, side = judgment_pairs(judgments)
    return annotator_reliability(annotators, vertex, pair, side, differences, fit.level, fit.spread)


def format_reliability(reliability: Reliability) -> list[str]:
    """The audit's lines on annotator reliability: counts, and the flagged raters with their intervals."""
    head = ("annotator reliability s (how much a rater's votes follow the other raters of the same pairs: "
            "1 typical, 0 a coin, < 0 against the task)")
    if reliability.note is not None:
        return [f"{head}: not estimated: {reliability.note}"]
    known = np.isfinite(reliability.estimate)
    lines = [f"{head}:", f"  {int(known.sum())} of {len(known)} annotators estimated"
             + (f", {int((~known).sum())} with under {MIN_SHARED} votes on pairs another annotator judged "
                "(no estimate)" if not known.all() else "")
             + (f"; median s {float(np.median(reliability.estimate[known])):+.2f}" if known.any() else "")]
    flagged = np.flatnonzero(reliability.unreliable)
    flagged = flagged[np.argsort(reliability.estimate[flagged], kind="stable")]
    shown = ", ".join(f"{plot_label(reliability.annotators[k])} {reliability.estimate[k]:+.2f} "
                      f"[{reliability.low[k]:+.2f}, {reliability.high[k]:+.2f}]" for k in flagged[:_LISTED])
    more = f" ... and {len(flagged) - _LISTED} more" if len(flagged) > _LISTED else ""
    lines.append(f"  unreliable (evidence that s < {reliability.floor:g}; Benjamini-Hochberg, FDR "
                 f"{reliability.fdr:g}): " + (f"{len(flagged)}: {shown}{more}" if len(flagged) else "none"))
    return lines

