"""Readouts of a mixture of type policies (EM-DPO, paper's Baselines appendix): pure metrics.

EM-DPO trains K type policies and gives each annotator a probability over the types. Its readouts
combine the K policies' own readouts (:mod:`badpo.readouts.metrics`) with the mixture weights, predict a
held-out vote under the voter's own mixture, and ask whether the types recover the annotator
classes. Same conventions as :mod:`badpo.readouts.metrics` (float64 arithmetic, one-line errors).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from badpo.core.array_checks import ArrayLike, as_float64, check_finite

__all__ = ["weighted_mean_readouts", "weighted_values", "mixture_vote_logits", "type_class_agreement"]

_DISAGREE = object()  # a non-numeric value the K readouts do not share: left out of their mean


def weighted_mean_readouts(readouts: Sequence[Mapping], weights: ArrayLike) -> dict:
    """The w-weighted mean of K policies' readouts (EM-DPO's mixture, Baselines appendix), key by key.

    ``readouts`` are K nested mappings of the same shape; a number is averaged with ``weights``
    [K] (non-negative, summing to 1); a nested mapping recursively; any other value (a string, a
    list) is kept when all K agree and left out otherwise; a key some policy lacks is left out.
    Counts (``n``) are averaged like any number, so they are kept only when equal. A ``None``
    (a JSON null, e.g. an undefined rate) in any policy gives ``None``. Example: readouts
    {"a": 1, "b": {"c": 0.5}} and {"a": 3, "b": {"c": 1.0}}, w = (0.25, 0.75) -> {"a": 2.5,
    "b": {"c": 0.875}}.
    """
    w = as_float64(weights, "weights")
    if w.ndim != 1 or len(w) != len(readouts) or len(w) == 0:
        raise ValueError(f"weights must be [K] with K = {len(readouts)} readouts, got shape {w.shape}")
    if (w < 0).any() or abs(float(w.sum()) - 1.0) > 1e-9:
        raise ValueError(f"weights must be non-negative and sum to 1, got {w.tolist()}")

    def mean(values: list):
        if all(isinstance(v, Mapping) for v in values):
            shared = [k for k in values[0] if all(k in v for v in values[1:])]
            merged = {k: mean([v[k] for v in values]) for k in shared}
            return {k: v for k, v in merged.items() if v is not _DISAGREE}
        if any(v is None for v in values):
            return None
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            if any(isinstance(v, float) and math.isnan(v) for v in values):
                return math.nan
            return math.fsum(float(wk) * float(v) for wk, v in zip(w, values))
        return values[0] if all(v == values[0] for v in values[1:]) else _DISAGREE

    return mean(list(readouts))


def weighted_values(lists: Sequence[Sequence[float]], weights: Sequence[float]) -> np.ndarray:
    """Each position's w-weighted mean of K lists of one length (exactly their value where all K
    agree): a mixture's per-prompt values from its types'. Example: (1, 2) and (1, 4), w = (0.5,
    0.5) -> (1, 3)."""
    values = np.array(lists, dtype=np.float64)  # [K, P]
    shared = (values == values[0]).all(axis=0)
    return np.where(shared, values[0], np.average(values, axis=0, weights=weights))


def mixture_vote_logits(type_margins: ArrayLike, type_probabilities: ArrayLike) -> Tensor:
    """The logit of a voter's probability of the recorded vote under its own mixture of types.

    ``type_margins`` [K, N] are u_k of each type policy on each judgment; ``type_probabilities``
    [N, K] the voter's gamma (rows sum to 1). p = sum_k gamma_k sigmoid(u_k), returned as
    log p - log(1 - p) [N], so that its sign predicts the vote as u does for one policy. Example:
    u = (2, -1), gamma = (0.5, 0.5) -> p = (0.88080 + 0.26894) / 2 = 0.57487, logit 0.30175.
    """
    u = torch.as_tensor(np.asarray(type_margins, dtype=np.float64))
    gamma = torch.as_tensor(np.asarray(type_probabilities, dtype=np.float64))
    if u.ndim != 2 or gamma.shape != (u.shape[1], u.shape[0]):
        raise ValueError(f"type_margins must be [K, N] and type_probabilities [N, K], got "
                         f"{tuple(u.shape)} and {tuple(gamma.shape)}")
    check_finite(u, "type_margins")
    if (gamma < 0).any() or not torch.allclose(gamma.sum(dim=1), torch.ones(gamma.shape[0], dtype=torch.float64)):
        raise ValueError("type_probabilities: every row must be non-negative and sum to 1")
    # log p and log(1 - p) each as a log-sum-exp, exact for margins of any size
    log_p = torch.logsumexp(gamma.T.log() + torch.nn.functional.logsigmoid(u), dim=0)
    log_q = torch.logsumexp(gamma.T.log() + torch.nn.functional.logsigmoid(-u), dim=0)
    return log_p - log_q


def type_class_agreement(type_probabilities: Mapping[str, ArrayLike], classes: Mapping[str, str]) -> dict:
    """Whether EM's types recover the annotator classes: each annotator's most probable type
    against its (planted) class, over the annotators in both mappings.

    Returns {"n", "purity", "adjusted_rand", "type_sizes", "by_class"}: purity = the share of
    annotators whose type's majority class is their own; the adjusted Rand index (Hubert and
    Arabie 1985) is 1 for the same partition and about 0 for an unrelated one; ``type_sizes``
    {type: count} counts the annotators of each type (types "0".."K-1", empty ones included) and
    ``by_class`` {class: {type: count}} splits those counts by class, so an absorbing type shows.
    Example: types (0, 0, 1, 1), classes (A, A, B, A) -> purity 3/4; pairs agreeing beyond chance
    give ARI 0.0 here (index 1, expected 1, max 2.5).
    """
    shared = [a for a in type_probabilities if a in classes]
    if len(shared) < 2:
        raise ValueError("type_class_agreement needs at least two annotators with a type and a class")
    types = [int(np.argmax(np.asarray(type_probabilities[a], dtype=np.float64))) for a in shared]
    labels = [classes[a] for a in shared]
    n_types = len(np.asarray(type_probabilities[shared[0]]))
    table: dict[tuple, int] = {}
    for t, c in zip(types, labels):
        table[(t, c)] = table.get((t, c), 0) + 1
    majority = {}
    for (t, _c), count in table.items():
        majority[t] = max(majority.get(t, 0), count)

    def pairs(count: int) -> float:
        return count * (count - 1) / 2

    index = sum(pairs(c) for c in table.values())
    by_type = sum(pairs(types.count(t)) for t in set(types))
    by_class = sum(pairs(labels.count(c)) for c in set(labels))
    expected = by_type * by_class / pairs(len(shared))
    top = (by_type + by_class) / 2
    adjusted = (index - expected) / (top - expected) if top != expected else 1.0
    return {"n": len(shared), "purity": sum(majority.values()) / len(shared), "adjusted_rand": adjusted,
            "type_sizes": {str(t): types.count(t) for t in range(n_types)},
            "by_class": {c: {str(t): table.get((t, c), 0) for t in range(n_types)} for c in sorted(set(labels))}}
