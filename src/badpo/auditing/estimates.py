"""The label audit: what the judgments can and cannot tell about the bias, read before training.

For every declared attribute coordinate the audit counts the *cross-group* judgments (the two
responses differ on that coordinate; only these identify theta, Table "attributes" of the
Datasets appendix) and the offline estimate: the log-odds that the attribute-carrying side (the
side with the larger value) wins a cross-group judgment, overall, per annotator class, per pair
type and per (pair type, class), each with its count and the binomial delta-method standard
error sqrt(1/w + 1/(n - w)).

It then builds the annotator graph of Theorem "thm:identif": vertices are annotators, and two
annotators are joined when they judged a common cross-group pair (pair identity is
``pair_key``). Differences theta_k - theta_k' are identified only within a connected component.
The graph is built for "cross-group on any coordinate" (the theorem's graph) and per coordinate
(with q > 1 attributes a pair that is cross-group on coordinate i only ties coordinate i).

Two annotator-level failures are listed: an annotator with no cross-group judgment (theta_k is
not identified) and one who chose the attribute side in every one of their cross-group
judgments on a coordinate, or in none (for a fixed policy theta_k diverges to +inf / -inf; the
per-coordinate check is sufficient for divergence, while a separation along a mixed direction
of several coordinates is not searched for). Each problem is also raised as a
``BiasIdentifiabilityWarning``.

Trusted annotators (``audit(..., trusted=ids)``: theta_k known, e.g. 0) pin the free offset of
their component: differences are identified within a component, so one known theta_k there
gives every other its absolute value. With trusted ids the graph warning names the components
(with cross-group judgments) that contain no trusted annotator and so keep a free offset;
components that all hold one are pinned even when the graph is split.

A disconnected graph is the theorem's condition, sufficient and not necessary: with
response-level attributes the offsets of two components can still be tied through the reward
when their compared pairs share responses (tests/core/test_theory.py has such a case).

The audit of a built-in corpus with planted biases (``badpo audit --example``) needs the data
layer and lives there: :func:`badpo.corpora.example.example_report`.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np

from badpo.auditing.reliability import reliability_of
from badpo.auditing.start_level import start_level
from badpo.core.judgments import Judgment, annotator_classes, check_pair_texts, pair_key
from badpo.core.label_counts import no_ties
from badpo.core.notices import BadpoWarning

__all__ = [
    "BiasIdentifiabilityWarning", "LogOdds", "AnnotatorGraph", "CoordinateAudit", "Audit",
    "attribute_differences", "offline_log_odds", "penalised_log_odds", "penalised_p_value", "audit",
]

MISSING = "(none)"  # slice key for rows without an annotator class / pair type
_LISTED = 8  # annotator ids named in one warning before "... and N more"


class BiasIdentifiabilityWarning(BadpoWarning):
    """The labels do not identify (part of) theta: see the audit's warnings."""


class _AttributeValues(Protocol):
    names: tuple[str, ...]

    def judgment_values(self, j: Judgment) -> tuple[np.ndarray, np.ndarray]: ...


def offline_log_odds(wins: int, total: int) -> float:
    """log(w / (n - w)): the log-odds that the attribute side wins; +inf at w = n, -inf at w = 0.

    This is the pooled MLE of theta on swap pairs with the policy at the reference.
    """
    if total <= 0:
        raise ValueError(f"offline_log_odds: total must be > 0, got {total}")
    if not 0 <= wins <= total:
        raise ValueError(f"offline_log_odds: wins must lie in [0, {total}], got {wins}")
    if wins == total:
        return math.inf
    if wins == 0:
        return -math.inf
    return math.log(wins / (total - wins))


def _jeffreys_loglik(log_odds: np.ndarray, wins: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """a log sigmoid(t) + b log sigmoid(-t) with a = wins + 1/2, b = losses + 1/2."""
    return -(wins + 0.5) * np.logaddexp(0.0, -log_odds) - (losses + 0.5) * np.logaddexp(0.0, log_odds)


def penalised_log_odds(wins: Any, total: Any, level: float = 0.95
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, low, high) of the log-odds that the attribute side wins, finite for any counts.

    The estimate is ``log((w + 1/2) / (n - w + 1/2))``: the mode, on the log-odds scale, of the
    posterior under the Jeffreys prior Beta(1/2, 1/2) (the likelihood penalised by that prior),
    so it stays finite where the MLE ``log(w / (n - w))`` is infinite (w = 0 or n), and n = 0
    gives 0 with a wide interval. The interval is the profile (likelihood-ratio) interval of that
    penalised log-likelihood ``l(t) = a log sigmoid(t) + b log sigmoid(-t)`` (a = w + 1/2,
    b = n - w + 1/2): every t with ``2 (l(estimate) - l(t)) <= z^2``, z the normal quantile of
    ``level``; it is asymmetric where the counts are lopsided. Exact binomial coverage of the
    95% interval for a true |theta| <= 3: 0.956 on average and 0.91 at worst for n = 5..60,
    0.86 at worst for n <= 3 (tests/audit/test_diagnostics.py enumerates it). Vectorised over arrays.
    """
    wins, total = np.asarray(wins, dtype=np.float64), np.asarray(total, dtype=np.float64)
    if np.any(total < 0) or np.any(wins < 0) or np.any(wins > total):
        raise ValueError("penalised_log_odds: need 0 <= wins <= total")
    if not 0.0 < level < 1.0:
        raise ValueError(f"penalised_log_odds: level must lie in (0, 1), got {level}")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    losses = total - wins
    estimate = np.log((wins + 0.5) / (losses + 0.5))
    target = _jeffreys_loglik(estimate, wins, losses) - z * z / 2
    bounds = []
    for side in (-1.0, 1.0):  # bisection on [estimate, estimate + side * width], width doubled until it brackets
        width = np.ones_like(estimate)
        while np.any(outside := _jeffreys_loglik(estimate + side * width, wins, losses) > target):
            width = np.where(outside, 2 * width, width)
        inner, outer = estimate.copy(), estimate + side * width
        for _ in range(64):
            middle = (inner + outer) / 2
            kept = _jeffreys_loglik(middle, wins, losses) >= target
            inner, outer = np.where(kept, middle, inner), np.where(kept, outer, middle)
        bounds.append(inner)
    return estimate, bounds[0], bounds[1]


def penalised_p_value(wins: Any, total: Any, log_odds: float) -> np.ndarray:
    """Two-sided p-value of "the annotator's log-odds equals ``log_odds``": the penalised
    likelihood-ratio statistic of :func:`penalised_log_odds` against chi-square(1), so that
    ``p < 1 - level`` exactly when ``log_odds`` lies outside that function's interval."""
    wins, total = np.asarray(wins, dtype=np.float64), np.asarray(total, dtype=np.float64)
    losses = total - wins
    estimate = np.log((wins + 0.5) / (losses + 0.5))
    statistic = 2 * (_jeffreys_loglik(estimate, wins, losses)
                     - _jeffreys_loglik(np.full_like(estimate, log_odds), wins, losses))
    return np.array([math.erfc(math.sqrt(max(s, 0.0) / 2)) for s in statistic.ravel().tolist()]
                    ).reshape(statistic.shape)


@dataclass(frozen=True)
class LogOdds:
    """Counts on one coordinate within one slice of the judgments."""

    judgments: int  # judgments in the slice
    cross: int  # of which cross-group on this coordinate
    wins: int  # of which the attribute-carrying side won

    @property
    def share_cross(self) -> float | None:
        return self.cross / self.judgments if self.judgments else None

    @property
    def log_odds(self) -> float | None:
        """The offline estimate; None without cross-group judgments, +-inf at the edges."""
        return offline_log_odds(self.wins, self.cross) if self.cross else None

    @property
    def se(self) -> float | None:
        """Delta-method standard error sqrt(1/w + 1/(n - w)); None where the estimate is not finite."""
        if self.cross == 0 or self.wins in (0, self.cross):
            return None
        return math.sqrt(1.0 / self.wins + 1.0 / (self.cross - self.wins))

    @property
    def divergent(self) -> str | None:
        """'+inf' / '-inf' when every / no cross-group judgment went to the attribute side."""
        if self.cross and self.wins == self.cross:
            return "+inf"
        if self.cross and self.wins == 0:
            return "-inf"
        return None

    def to_dict(self) -> dict[str, Any]:
        estimate = self.log_odds
        return {
            "judgments": self.judgments, "cross": self.cross, "wins": self.wins,
            "share_cross": self.share_cross,
            "log_odds": estimate if estimate is not None and math.isfinite(estimate) else None,
            "se": self.se, "divergent": self.divergent,
        }


@dataclass(frozen=True)
class AnnotatorGraph:
    """Connected components of the annotator graph, each sorted, largest first."""

    components: tuple[tuple[str, ...], ...]

    @property
    def n_components(self) -> int:
        return len(self.components)

    @property
    def connected(self) -> bool:
        return len(self.components) <= 1

    def to_dict(self) -> dict[str, Any]:
        return {"n_components": self.n_components, "connected": self.connected,
                "components": [list(c) for c in self.components]}


@dataclass(frozen=True)
class CoordinateAudit:
    """The audit of one attribute coordinate."""

    name: str
    overall: LogOdds
    by_class: dict[str, LogOdds]  # empty when no row has an annotator class
    by_pair_type: dict[str, LogOdds]  # empty when no row has a pair type
    by_pair_type_class: dict[str, dict[str, LogOdds]]  # pair type -> class -> counts
    by_annotator: dict[str, LogOdds]
    graph: AnnotatorGraph
    unidentified: tuple[str, ...]  # no cross-group judgment on this coordinate
    diverge_up: tuple[str, ...]  # chose the attribute side every time: theta_k -> +inf
    diverge_down: tuple[str, ...]  # never chose it: theta_k -> -inf

    def to_dict(self) -> dict[str, Any]:
        def table(d: dict[str, LogOdds]) -> dict[str, Any]:
            return {key: value.to_dict() for key, value in d.items()}

        return {
            "name": self.name, "overall": self.overall.to_dict(),
            "by_class": table(self.by_class), "by_pair_type": table(self.by_pair_type),
            "by_pair_type_class": {t: table(d) for t, d in self.by_pair_type_class.items()},
            "by_annotator": table(self.by_annotator), "graph": self.graph.to_dict(),
            "unidentified": list(self.unidentified),
            "diverge_up": list(self.diverge_up), "diverge_down": list(self.diverge_down),
        }


@dataclass(frozen=True)
class Audit:
    """The whole audit; ``to_dict`` is plain JSON (no inf/NaN),
    :func:`badpo.auditing.terminal_table.format_audit` the table."""

    attribute_names: tuple[str, ...]
    n_judgments: int
    annotators: tuple[str, ...]  # sorted
    cross_any: int  # judgments cross-group on at least one coordinate
    coordinates: tuple[CoordinateAudit, ...]
    graph: AnnotatorGraph  # edge: a common pair cross-group on any coordinate
    unidentified: tuple[str, ...]  # no cross-group judgment on any coordinate
    warnings: tuple[str, ...]
    trusted: tuple[str, ...] = ()  # annotators whose theta_k is known (pins their component)
    start: Any = None  # where bias.init: conditional starts theta (badpo.auditing.start_level), when asked for
    labels: Mapping[str, Any] | None = None  # the labels read (label_counts.LabelCounts.to_dict), ties left out
    reliability: Any = None  # each annotator's reliability (badpo.auditing.reliability.Reliability), when asked for

    def coordinate(self, name: str) -> CoordinateAudit:
        for coordinate in self.coordinates:
            if coordinate.name == name:
                return coordinate
        raise KeyError(f"no attribute {name!r} in this audit; have {list(self.attribute_names)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "attribute_names": list(self.attribute_names),
            "n_judgments": self.n_judgments,
            "n_annotators": len(self.annotators),
            "cross_any": self.cross_any,
            "share_cross_any": self.cross_any / self.n_judgments,
            "coordinates": [c.to_dict() for c in self.coordinates],
            "graph": self.graph.to_dict(),
            "unidentified": list(self.unidentified),
            "warnings": list(self.warnings),
        } | ({"trusted": list(self.trusted), "unpinned": [list(c) for c in self.unpinned()]}
             if self.trusted else {}) | self._start_dict() | (
            {"ties": self.labels["ties"], "labels": dict(self.labels)} if self.labels is not None else {}) | (
            {"reliability": self.reliability.to_dict()} if self.reliability is not None else {})

    def _start_dict(self) -> dict[str, Any]:
        """``start_level`` {attribute: theta's start} and its fit, when the audit computed them."""
        if self.start is None:
            return {}
        fit = self.start.as_dict()
        fit["se"] = [None if value != value else value for value in fit["se"]]  # NaN: no estimate
        return {"start_level": dict(zip(self.attribute_names, self.start.level)), "start_level_fit": fit}

    def unpinned(self) -> tuple[tuple[str, ...], ...]:
        """Components of the "any attribute" graph that have cross-group judgments and no trusted
        annotator: each keeps a free theta offset. Without trusted ids, every such component."""
        return _unpinned(self.graph, set(self.trusted), set(self.annotators) - set(self.unidentified))

    def to_json(self) -> str:
        """Canonical JSON text: sorted keys, two-space indent, inf/NaN refused."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"


# ------------------------------------------------------------------------------------- audit
def attribute_differences(judgments: Sequence[Judgment], attributes: _AttributeValues) -> np.ndarray:
    """g(y_w) - g(y_l) per judgment, [N, q]; a wrong length or a non-finite value names the row."""
    if hasattr(attributes, "differences"):  # an AttributeSet: one evaluation per distinct pair text
        return attributes.differences(judgments)
    q = len(attributes.names)
    diffs = np.empty((len(judgments), q), dtype=np.float64)
    for row, judgment in enumerate(judgments):
        g_w, g_l = (np.asarray(v, dtype=np.float64) for v in attributes.judgment_values(judgment))
        if g_w.shape != (q,) or g_l.shape != (q,):
            raise ValueError(f"row {row}: attribute values of shapes {g_w.shape}, {g_l.shape}; "
                             f"expected ({q},) for {list(attributes.names)}")
        if not (np.isfinite(g_w).all() and np.isfinite(g_l).all()):
            raise ValueError(f"row {row}: non-finite attribute value {g_w.tolist()} / {g_l.tolist()}")
        diffs[row] = g_w - g_l
    return diffs


def _counts(mask: np.ndarray, cross: np.ndarray, won: np.ndarray) -> LogOdds:
    return LogOdds(int(mask.sum()), int((mask & cross).sum()), int((mask & won).sum()))


def _slices(labels: list[str | None], cross: np.ndarray, won: np.ndarray,
            within: np.ndarray | None = None) -> dict[str, LogOdds]:
    """Counts per distinct label (None -> MISSING), sorted by label; {} when every label is None."""
    if all(label is None for label in labels):
        return {}
    keys = np.array([MISSING if label is None else label for label in labels], dtype=object)
    everything = np.ones(len(keys), dtype=bool) if within is None else within
    return {key: _counts(everything & (keys == key), cross, won)
            for key in sorted(set(keys[everything].tolist()))}


def _components(annotators: tuple[str, ...], vertex: np.ndarray, pairs: np.ndarray,
                cross: np.ndarray) -> AnnotatorGraph:
    """Union-find over annotators; the judgments of one cross-group pair are joined together."""
    parent = list(range(len(annotators)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]  # path halving
            i = parent[i]
        return i

    first_judge: dict[int, int] = {}
    for k, pair in zip(vertex[cross].tolist(), pairs[cross].tolist()):
        other = first_judge.setdefault(pair, k)
        a, b = root(k), root(other)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[str]] = {}
    for i, name in enumerate(annotators):  # annotators are sorted, so each group is too
        groups.setdefault(root(i), []).append(name)
    ordered = sorted(groups.values(), key=lambda c: (-len(c), c[0]))
    return AnnotatorGraph(tuple(tuple(c) for c in ordered))


def _listed(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_LISTED])
    return shown + (f" ... and {len(ids) - _LISTED} more" if len(ids) > _LISTED else "")


def _graph_warning(graph: AnnotatorGraph, scope: str) -> str:
    singles = sum(1 for c in graph.components if len(c) == 1)
    return (f"{scope}: the annotator graph has {graph.n_components} connected components "
            f"({singles} of them single annotators); theta_k - theta_k' is identified only "
            f"within a component, each component has its own free offset")


def _unpinned(graph: AnnotatorGraph, trusted: set[str], identified: set[str]) -> tuple[tuple[str, ...], ...]:
    return tuple(c for c in graph.components if set(c) & identified and not set(c) & trusted)


def _level_warning(graph: AnnotatorGraph, scope: str, trusted: set[str], identified: set[str]) -> str | None:
    """Without trusted ids: the split-graph warning. With them: the components left unpinned."""
    if not trusted:
        return None if graph.connected else _graph_warning(graph, scope)
    unpinned = _unpinned(graph, trusted, identified)
    if not unpinned:
        return None
    shown = [f"{{{', '.join(c[:_LISTED])}{', ...' if len(c) > _LISTED else ''}}}" for c in unpinned]
    return (f"{scope}: {len(unpinned)} of {graph.n_components} connected component(s) hold no trusted "
            f"annotator, so their theta level is not pinned (a free offset each): {_listed(shown)}")


def _coordinate_warnings(c: CoordinateAudit, trusted: set[str]) -> list[str]:
    if c.overall.cross == 0:
        return [f"{c.name}: no cross-group judgments; theta is not identified on this attribute"]
    found = []
    if c.unidentified:
        found.append(f"{c.name}: {len(c.unidentified)} annotator(s) with no cross-group judgment "
                     f"(theta_k not identified): {_listed(c.unidentified)}")
    if c.diverge_up:
        found.append(f"{c.name}: {len(c.diverge_up)} annotator(s) chose the attribute side in every "
                     f"cross-group judgment (theta_k -> +inf for a fixed policy): {_listed(c.diverge_up)}")
    if c.diverge_down:
        found.append(f"{c.name}: {len(c.diverge_down)} annotator(s) never chose the attribute side "
                     f"(theta_k -> -inf for a fixed policy): {_listed(c.diverge_down)}")
    level = _level_warning(c.graph, c.name, trusted, set(c.by_annotator) - set(c.unidentified))
    if level is not None:
        found.append(level)
    return found


@dataclass(frozen=True)
class _Judges:
    """Who judged which pair: the audit's index of the judgments, shared by every coordinate."""

    annotators: tuple[str, ...]  # sorted
    vertex: np.ndarray  # [N] the judgment's annotator, a position in ``annotators``
    pairs: np.ndarray  # [N] the judgment's pair (one number per pair_key)
    classes: list[str | None]  # [N] annotator class
    pair_types: list[str | None]  # [N]
    type_keys: np.ndarray  # [N] pair type, None as MISSING


def _judges(judgments: list[Judgment], trusted: Sequence[str]) -> _Judges:
    """Index the judgments by annotator and pair; a trusted id without a judgment is a ValueError."""
    annotators = tuple(sorted({j.annotator for j in judgments}))
    position = {a: i for i, a in enumerate(annotators)}
    for annotator in trusted:
        if annotator not in position:
            raise ValueError(f"trusted: annotator {annotator!r} has no judgment to audit")
    vertex = np.array([position[j.annotator] for j in judgments], dtype=np.int64)
    key_index: dict[str, int] = {}
    pair_of: dict[tuple, int] = {}  # the same texts and pair_id have the same pair_key: hash them once
    pairs = np.array([pair_of[t] if (t := (j.pair_id, j.prompt, j.chosen, j.rejected)) in pair_of
                      else pair_of.setdefault(t, key_index.setdefault(pair_key(j), len(key_index)))
                      for j in judgments], dtype=np.int64)
    pair_types = [j.pair_type for j in judgments]
    type_keys = np.array([MISSING if t is None else t for t in pair_types], dtype=object)
    return _Judges(annotators, vertex, pairs, [j.annotator_class for j in judgments], pair_types, type_keys)


def _audit_coordinate(name: str, cross: np.ndarray, won: np.ndarray, judges: _Judges) -> CoordinateAudit:
    """The counts of one coordinate (``cross``, ``won``: [N] of that column) in every slice, and its graph."""
    by_type = _slices(judges.pair_types, cross, won)
    per_judge = [np.bincount(judges.vertex, weights=w, minlength=len(judges.annotators)).astype(np.int64)
                 for w in (None, cross, won)]
    by_annotator = {a: LogOdds(*(int(counts[k]) for counts in per_judge))
                    for k, a in enumerate(judges.annotators)}
    return CoordinateAudit(
        name=name,
        overall=_counts(np.ones(len(cross), dtype=bool), cross, won),
        by_class=_slices(judges.classes, cross, won),
        by_pair_type=by_type,
        by_pair_type_class={t: _slices(judges.classes, cross, won, judges.type_keys == t) for t in by_type},
        by_annotator=by_annotator,
        graph=_components(judges.annotators, judges.vertex, judges.pairs, cross),
        unidentified=tuple(a for a, c in by_annotator.items() if c.cross == 0),
        diverge_up=tuple(a for a, c in by_annotator.items() if c.divergent == "+inf"),
        diverge_down=tuple(a for a, c in by_annotator.items() if c.divergent == "-inf"),
    )


def _audit_warnings(coordinates: Sequence[CoordinateAudit], graph: AnnotatorGraph, annotators: tuple[str, ...],
                    unidentified: tuple[str, ...], pins: set[str], any_cross: bool) -> list[str]:
    """Every coordinate's problems, then those of the "any attribute" graph."""
    found = [w for c in coordinates for w in _coordinate_warnings(c, pins)]
    if unidentified and len(unidentified) < len(annotators):
        found.append(f"{len(unidentified)} annotator(s) with no cross-group judgment on any attribute "
                     f"(theta_k not identified): {_listed(unidentified)}")
    level = _level_warning(graph, "any attribute", pins, set(annotators) - set(unidentified))
    if any_cross and level is not None:
        found.append(level)
    return found


def audit(judgments: Sequence[Judgment], attributes: _AttributeValues,
          trusted: Sequence[str] = (), source: str | None = None,
          differences: np.ndarray | None = None, start: bool = False) -> Audit:
    """Audit ``judgments`` on the coordinates of ``attributes`` (an ``AttributeSet``); ``trusted``
    are the annotators whose theta_k is known (an id without a judgment is a ValueError). Data
    that training refuses is refused here the same way (an annotator in two classes:
    :func:`badpo.core.judgments.annotator_classes`, whose error names ``source``'s row).

    ``differences`` are :func:`attribute_differences` of the same judgments when the caller has
    them already (the report fits its joint estimates on them). ``start``: also fit where
    ``bias.init: conditional`` starts theta (:mod:`badpo.auditing.start_level`; ``Audit.start``) and,
    on that fit, each annotator's reliability (:mod:`badpo.auditing.reliability`; ``Audit.reliability``).
    Problems are returned in ``Audit.warnings`` and raised as ``BiasIdentifiabilityWarning``.
    """
    judgments = list(judgments)
    if not judgments:
        raise ValueError("audit: no judgments to audit")
    no_ties(judgments, "the audit's estimates")
    annotator_classes(judgments, source)
    check_pair_texts(judgments, source)
    names = tuple(attributes.names)
    diffs = attribute_differences(judgments, attributes) if differences is None else differences
    if diffs.shape != (len(judgments), len(names)):
        raise ValueError(f"audit: differences of shape {diffs.shape}; expected {(len(judgments), len(names))}")
    cross, won = diffs != 0, diffs > 0  # [N, q]; won implies cross
    judges = _judges(judgments, trusted)
    coordinates = tuple(_audit_coordinate(name, cross[:, i], won[:, i], judges) for i, name in enumerate(names))

    any_cross = cross.any(axis=1)
    graph = _components(judges.annotators, judges.vertex, judges.pairs, any_cross)
    seen = set(judges.vertex[any_cross].tolist())
    unidentified = tuple(a for k, a in enumerate(judges.annotators) if k not in seen)
    found = _audit_warnings(coordinates, graph, judges.annotators, unidentified, set(trusted), bool(any_cross.any()))
    for message in found:
        warnings.warn(message, BiasIdentifiabilityWarning, stacklevel=2)
    fit = start_level(judgments, diffs, trusted) if start and any_cross.any() else None
    reliable = reliability_of(judgments, diffs, fit, judges.annotators) if start else None  # needs the same fit
    return Audit(names, len(judgments), judges.annotators, int(any_cross.sum()), coordinates,
                 graph, unidentified, tuple(found), tuple(trusted), fit, reliability=reliable)
