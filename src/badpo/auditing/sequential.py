"""The anytime-valid test of ``badpo audit --stream``: a confidence sequence for a Bernoulli rate
from a beta-binomial mixture martingale, and the two-sample flag built from two of them.

**One rate.** For ``w`` wins in ``n`` independent Bernoulli(p) draws, mix the likelihood over the
Jeffreys density Beta(1/2, 1/2) and divide by the likelihood at ``p``::

    M_n(p) = B(w + 1/2, n - w + 1/2) / B(1/2, 1/2) / (p^w (1 - p)^(n - w))

Under p this is a nonnegative martingale with M_0 = 1 (a ratio of the mixture's predictive
probabilities to p's), so Ville's inequality gives ``P_p(M_n(p) >= 1/a for some n) <= a``, and

    C_n(a) = {p : M_n(p) < 1/a}

holds the true p at every n at once with probability at least 1 - a: a confidence sequence,
valid however often it is read and whenever the reader stops. ``log M_n`` is convex in p and at
most 0 at ``w / n`` (the mixture is at most the maximum likelihood), so ``C_n`` is an open
interval around ``w / n``; n = 0 gives (0, 1).

**Two rates.** Annotator k's stream and the pool's stream each get a sequence at level ``a``. If
the two rates are one p, the intervals can be disjoint only when one of them misses p, so by the
union bound ``P(disjoint at some n) <= 2a`` with no assumption on how the two streams depend on
each other. That is why it is used rather than one product e-value ``M_k(p) M_pool(p)``: an
annotator's vote and the pool's vote on the same pair share that pair's quality, so the product is
not a martingale in the order the votes arrive, while each factor is one in its own stream's.
:func:`side_level` splits a family-wise ``alpha`` over the annotators and attributes (Bonferroni)
and each test's share over its two sides.

Standard library and numpy only; the streaming state lives in :mod:`badpo.auditing.stream`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["LOG_BETA_HALF", "log_mixture", "interval", "intervals", "separated", "side_level", "logit"]

LOG_BETA_HALF = math.log(math.pi)  # log B(1/2, 1/2) = log Gamma(1/2)^2 = log pi
_BISECTIONS = 64  # halvings of the bracket: far below double precision on [0, 1]
_table = {"half": np.zeros(0), "one": np.zeros(0)}  # lgamma(x + 1/2), lgamma(x + 1) at x = 0, 1, ...


def side_level(alpha: float, pool_size: int, n_attributes: int) -> float:
    """The level ``a`` of each side of one (annotator, attribute) test: ``alpha / (2 pool_size q)``.

    Every test then has false-flag probability at most ``alpha / (pool_size q)``, an annotator with
    no bias difference on any attribute at most ``alpha / pool_size``, and a pool of at most
    ``pool_size`` annotators has any false flag with probability at most ``alpha``. The level
    depends on no data (not on when an annotator first appears), which keeps it exact.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: must lie in (0, 1), got {alpha}")
    if pool_size < 1 or n_attributes < 1:
        raise ValueError(f"pool_size and the number of attributes must be >= 1, got {pool_size}, {n_attributes}")
    return alpha / (2.0 * pool_size * n_attributes)


def _lgamma(kind: str, x: np.ndarray) -> np.ndarray:
    """lgamma(x + 1/2) or lgamma(x + 1) of non-negative integer arrays, from a table grown on demand."""
    need = int(x.max(initial=0)) + 1
    if len(_table[kind]) < need:
        size = max(need, 2 * len(_table[kind]), 1024)
        shift = 0.5 if kind == "half" else 1.0
        _table[kind] = np.array([math.lgamma(i + shift) for i in range(size)])
    return _table[kind][x]


def _log_beta(wins: np.ndarray, total: np.ndarray) -> np.ndarray:
    """log B(w + 1/2, n - w + 1/2) - log B(1/2, 1/2): the log of the mixture's probability of the
    observed sequence (any sequence with these counts)."""
    return _lgamma("half", wins) + _lgamma("half", total - wins) - _lgamma("one", total) - LOG_BETA_HALF


def log_mixture(wins: Any, total: Any, p: Any) -> np.ndarray:
    """log M_n(p) of the module docstring, vectorised; ``0 log 0`` counts as 0, and a p that the
    counts exclude outright (p = 0 with a win, p = 1 with a loss) gives +inf."""
    wins, total = np.asarray(wins, dtype=np.int64), np.asarray(total, dtype=np.int64)
    p = np.asarray(p, dtype=np.float64)
    if np.any(wins < 0) or np.any(wins > total):
        raise ValueError("log_mixture: need 0 <= wins <= total")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("log_mixture: p must lie in [0, 1]")
    return _log_mixture(wins, total, p)


def _log_mixture(wins: np.ndarray, total: np.ndarray, p: np.ndarray) -> np.ndarray:
    losses = total - wins
    with np.errstate(divide="ignore", invalid="ignore"):
        on_wins = np.where(wins > 0, wins * np.log(p), 0.0)
        on_losses = np.where(losses > 0, losses * np.log1p(-p), 0.0)
    return _log_beta(wins, total) - on_wins - on_losses


def _scalar_log_mixture(log_beta: float, wins: int, losses: int, p: float) -> float:
    return log_beta - (wins * math.log(p) if wins else 0.0) - (losses * math.log1p(-p) if losses else 0.0)


@lru_cache(maxsize=1 << 18)
def interval(wins: int, total: int, level: float) -> tuple[float, float]:
    """The ends (lo, hi) of ``C_n(level)`` for ``wins`` of ``total``, by bisection on each side of
    ``w / n``; cached, since a stream asks again for the same small counts."""
    if total == 0:
        return 0.0, 1.0
    threshold = -math.log(level)
    losses = total - wins
    log_beta = float(_log_beta(np.array(wins), np.array(total)))
    centre = wins / total
    ends = []
    for outer, excluded in ((0.0, wins > 0), (1.0, losses > 0)):
        if not excluded and _scalar_log_mixture(log_beta, wins, losses, outer) < threshold:
            ends.append(outer)  # the end of [0, 1] itself is inside the sequence
            continue
        inner, far = centre, outer
        for _ in range(_BISECTIONS):
            middle = (inner + far) / 2
            if middle in (inner, far):
                break
            if _scalar_log_mixture(log_beta, wins, losses, middle) < threshold:
                inner = middle
            else:
                far = middle
        ends.append(inner)
    return ends[0], ends[1]


def intervals(wins: Any, total: Any, level: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`interval` over arrays of counts: (lo, hi) of the same shape."""
    wins, total = np.asarray(wins, dtype=np.int64), np.asarray(total, dtype=np.int64)
    ends = [interval(int(w), int(n), level) for w, n in zip(wins.ravel().tolist(), total.ravel().tolist())]
    lo = np.array([e[0] for e in ends], dtype=np.float64).reshape(wins.shape)
    hi = np.array([e[1] for e in ends], dtype=np.float64).reshape(wins.shape)
    return lo, hi


def separated(lo: np.ndarray, hi: np.ndarray, wins: np.ndarray, total: np.ndarray, level: float) -> np.ndarray:
    """True where the interval (lo, hi) of one stream and the sequence of another stream (``wins``
    of ``total``) at ``level`` are disjoint, without solving for the second one's ends.

    The second sequence's lower end is at or above ``hi`` exactly when ``hi`` lies below its centre
    and its ``log M`` at ``hi`` reaches the threshold (``log M`` falls up to the centre); the
    other side likewise, so one evaluation per side decides it.
    """
    wins, total = np.asarray(wins, dtype=np.int64), np.asarray(total, dtype=np.int64)
    centre = wins / np.maximum(total, 1)
    some = total > 0
    below = some & (hi < centre)  # the annotator's interval could lie below the pool's
    above = some & (lo > centre)
    found = np.zeros(np.shape(centre), dtype=bool)
    candidates = np.nonzero(below | above)
    if candidates[0].size:  # log M only where the order of the centres leaves room for a gap
        at = np.where(below, hi, lo)[candidates]
        found[candidates] = _log_mixture(wins[candidates], total[candidates], at) >= -math.log(level)
    return found


def logit(p: Any) -> np.ndarray:
    """log(p / (1 - p)) with -inf / +inf at 0 / 1: the intervals on the audit's log-odds scale."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)
