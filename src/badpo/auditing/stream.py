"""Flags while a pool is labelled: per-annotator bias estimates kept up to date as judgments arrive,
and a flag when an anytime-valid test says an annotator's bias differs from the pool's.

**What is counted.** For each declared attribute the unit is a *cross-group* judgment (the two
sides differ on it) and its indicator "the attribute side won", as in the offline audit
(:mod:`badpo.auditing.estimates`). Two rules keep each stream a sequence of independent draws:

- annotator k's stream holds k's first judgment of each pair (a repeat of a pair k already judged
  is counted in ``duplicates`` and skipped: its vote shares that pair's quality with the first);
- the pool's stream for k holds, for each cross-group pair, the first judgment by someone other
  than k (leave-one-out, one vote per pair: several votes on one pair share its quality and are
  not independent). It is kept as ``pool_first - first[k] + second[k]``: every pair's first vote,
  less the pairs k voted on first, plus the vote that came second on those.

**The test** (:mod:`badpo.auditing.sequential`): both streams get a beta-binomial mixture confidence
sequence at level ``a = alpha / (2 pool_size q)``; (k, attribute) is flagged the first time the two
intervals are disjoint. It is read after *every* judgment, so a flag is a function of the judgment
sequence alone, whatever the batches it arrived in (a resumed stream flags exactly as an
uninterrupted one); a flag stays raised.

**The guarantee.** Assume (i) the pairs are independent draws from one distribution and who judges
a pair is drawn independently of the pair and of every vote (a fixed assignment distribution over
the pool); (ii) votes are independent given their pairs. Then k's stream is i.i.d. Bernoulli(p_k)
and k's pool stream i.i.d. Bernoulli(p_-k), the assignment-weighted rate of the others. If
``p_k = p_-k`` (null), the chance that k is *ever* flagged on that attribute, over an unbounded
stream read after every judgment, is at most ``2a = alpha / (pool_size q)``; an annotator with no
difference on any attribute, at most ``alpha / pool_size``; a pool of at most ``pool_size``
annotators gets any false flag with probability at most ``alpha`` (union bound; beyond
``pool_size`` annotators the bound grows to ``alpha m / pool_size``, and the table says so).
When the pool's membership drifts (annotators join or leave), ``p_-k`` drifts with it and (i) fails.

The state is plain JSON (:meth:`StreamAudit.to_state`); the file reader, the state file's checks
and the command line are in :mod:`badpo.auditing.stream_file`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from badpo.auditing.sequential import interval, intervals, logit, separated, side_level
from badpo.core.attributes import resolve_attributes
from badpo.core.judgments import Judgment, JudgmentError, describe_row, pair_key, validate_labelled

__all__ = ["STATE_FORMAT", "StreamAudit"]

STATE_FORMAT = "badpo-stream-audit/1"
_COUNTERS = ("own", "first", "second")  # per annotator, [q, 2] each: (cross-group votes, attribute-side wins)


class StreamAudit:
    """The running state of one stream: feed it with :meth:`update` (judgment rows) or
    :meth:`observe` (annotator, pair key and attribute differences), read it with :meth:`table`."""

    def __init__(self, specs: Sequence[str], alpha: float = 0.05, pool_size: int = 100, stream: str = ""):
        self.specs = tuple(specs)
        self.attributes = resolve_attributes(self.specs)  # resolved from the caller's specs, never a file's
        self.names = self.attributes.names
        self.alpha, self.pool_size, self.stream = float(alpha), int(pool_size), str(stream)
        self.level = side_level(self.alpha, self.pool_size, len(self.names))
        q = len(self.names)
        self.annotators: list[str] = []
        self.classes: list[str | None] = []
        self._index: dict[str, int] = {}
        self.counts = {name: np.zeros((0, q, 2), dtype=np.int64) for name in _COUNTERS}
        self.bounds = np.zeros((0, q, 2), dtype=np.float64)  # (lo, hi) of each annotator's own sequence
        self.flagged = np.zeros((0, q, 2), dtype=np.int64)  # (judgment number, own votes) at the flag; 0 = none
        self.pool_first = np.zeros((q, 2), dtype=np.int64)
        self.pairs: dict[str, list[int]] = {}  # cross-group pair -> its distinct judges, in order
        self.judgments = self.cross = self.duplicates = 0

    def config(self) -> dict[str, Any]:
        """What a state must have been made with to be resumed by this audit."""
        return {"attributes": list(self.specs), "names": list(self.names), "alpha": self.alpha,
                "pool_size": self.pool_size, "stream": self.stream}

    # ------------------------------------------------------------------------------- input
    def update(self, rows: Iterable[Mapping[str, Any] | Judgment], source: str | None = None,
               first_line: int | None = None) -> list[dict[str, Any]]:
        """Validate and take in judgment rows, in order; returns the flags they raised. An error names
        ``source`` and the stream's row number (and line, when ``first_line`` numbers the rows)."""
        rows = list(rows)
        start = self.judgments
        labels = [((start + i, None if first_line is None else first_line + i, source), row)
                  for i, row in enumerate(rows)]
        judgments = validate_labelled(labels)
        return self.observe_judgments(judgments, [label for label, _ in labels])

    def observe_judgments(self, judgments: Sequence[Judgment], labels: Sequence[tuple]) -> list[dict[str, Any]]:
        """Take in validated judgments, ``labels[i]`` naming row i in an error (see :meth:`update`)."""
        def where(i: int) -> str:
            index, line, source = labels[i]
            return describe_row(index, line, source, {"pair_id": judgments[i].pair_id})

        for i, j in enumerate(judgments):  # the anytime test counts wins: no tie may be read as one
            if j.tie or j.strength is not None:
                name, what = ("tie", "a tie") if j.tie else ("strength", f"a win of strength {j.strength}")
                raise JudgmentError(f"{where(i)}, field {name!r}: {what}; the stream audit (--stream) does not take "
                                    "ties or strengths yet (badpo audit DATA -a SPEC audits the whole file, leaving "
                                    "ties out and saying so)", row=labels[i][0], field=name)
        try:
            differences = self.attributes.differences(judgments)
        except ValueError:
            for i, j in enumerate(judgments):  # find the row again, and name it in the stream's terms
                try:
                    self.attributes.differences([j])
                except ValueError as error:
                    message = str(error).removeprefix("row 0: ")
                    raise JudgmentError(f"{where(i)}: {message}", row=labels[i][0]) from None
            raise
        classes = {}
        for i, j in enumerate(judgments):
            known = self._index.get(j.annotator)
            had = self.classes[known] if known is not None else classes.get(j.annotator, j.annotator_class)
            if had != j.annotator_class:
                raise JudgmentError(f"{where(i)}, field 'annotator_class': annotator {j.annotator!r} has class "
                                    f"{j.annotator_class!r} here but {had!r} earlier; an annotator is in one "
                                    "class", row=labels[i][0], field="annotator_class")
            classes.setdefault(j.annotator, j.annotator_class)
        return self.observe([j.annotator for j in judgments], [pair_key(j) for j in judgments], differences,
                            [j.annotator_class for j in judgments])

    def observe(self, annotators: Sequence[str], pairs: Sequence[str], differences: np.ndarray,
                classes: Sequence[str | None] | None = None) -> list[dict[str, Any]]:
        """Take in judgments already reduced to (annotator, pair key, g(chosen) - g(rejected) [q]),
        reading the test after each one; returns the flags raised, in order."""
        differences = np.asarray(differences, dtype=np.float64)
        if differences.shape != (len(annotators), len(self.names)) or len(pairs) != len(annotators):
            raise ValueError(f"observe: {len(annotators)} annotators, {len(pairs)} pairs and differences of "
                             f"shape {differences.shape}; expected [{len(annotators)}, {len(self.names)}]")
        crossed = np.stack([differences != 0, differences > 0], axis=-1).astype(np.int64)  # [B, q, 2]
        any_cross = crossed[:, :, 0].any(axis=1).tolist()
        raised: list[dict[str, Any]] = []
        for i, annotator in enumerate(annotators):
            k = self._annotator(annotator, None if classes is None else classes[i])
            self.judgments += 1
            if any_cross[i]:
                raised += self._one(k, pairs[i], crossed[i])
        return raised

    def _annotator(self, annotator: str, annotator_class: str | None) -> int:
        k = self._index.get(annotator)
        if k is not None:
            return k
        k = self._index[annotator] = len(self.annotators)
        self.annotators.append(annotator)
        self.classes.append(annotator_class)
        if k >= len(self.bounds):  # grow every per-annotator array by doubling
            size = max(8, 2 * len(self.bounds))
            for name, array in self.counts.items():
                self.counts[name] = np.concatenate([array, np.zeros((size - len(array),) + array.shape[1:], np.int64)])
            empty = np.zeros((size - len(self.bounds),) + self.bounds.shape[1:])
            self.bounds = np.concatenate([self.bounds, empty + [0.0, 1.0]])
            self.flagged = np.concatenate([self.flagged, empty.astype(np.int64)])
        return k

    def _one(self, k: int, pair: str, vote: np.ndarray) -> list[dict[str, Any]]:
        """One cross-group judgment of annotator k on ``pair``; ``vote`` is [q, 2] of 0/1."""
        judges = self.pairs.setdefault(pair, [])
        if k in judges:
            self.duplicates += 1
            return []
        self.cross += 1
        own = self.counts["own"]
        own[k] += vote
        for i in np.flatnonzero(vote[:, 0]).tolist():
            self.bounds[k, i] = interval(int(own[k, i, 1]), int(own[k, i, 0]), self.level)
        if not judges:  # the pair's first vote: in every other annotator's pool stream
            self.pool_first += vote
            self.counts["first"][k] += vote
            touched = slice(0, len(self.annotators))
        elif len(judges) == 1:  # the second: in the pool stream of the annotator who came first
            self.counts["second"][judges[0]] += vote
            touched = np.array(sorted({k, judges[0]}))
        else:
            touched = np.array([k])
        judges.append(k)
        return self._look(touched)

    def pool_counts(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """[m, q, 2] counts of each annotator's leave-one-out pool stream (one vote per pair)."""
        return self.pool_first[None] - self.counts["first"][rows] + self.counts["second"][rows]

    def _look(self, rows: np.ndarray | slice) -> list[dict[str, Any]]:
        """Read the test of the annotators ``rows`` (their own or their pool stream just changed)."""
        pool = self.pool_counts(rows)
        bounds = self.bounds[rows]
        hit = separated(bounds[..., 0], bounds[..., 1], pool[..., 1], pool[..., 0], self.level)
        if not hit.any():
            return []
        hit &= self.flagged[rows, :, 0] == 0
        positions = np.arange(len(self.annotators))[rows]
        raised = []
        for r, i in zip(*np.nonzero(hit)):
            k = int(positions[r])
            self.flagged[k, i] = (self.judgments, self.counts["own"][k, i, 0])
            raised.append({"annotator": self.annotators[k], "attribute": self.names[i],
                           "judgment": self.judgments, "cross": int(self.counts["own"][k, i, 0])})
        return raised

    # ------------------------------------------------------------------------------ output
    def family_note(self) -> str | None:
        """A line when the pool outgrew ``pool_size``, the size the family-wise bound was split over."""
        m = len(self.annotators)
        if m <= self.pool_size:
            return None
        return (f"{m} annotators, more than pool_size {self.pool_size}: each annotator's bound still holds, "
                f"the chance of any false flag is now at most {self.alpha * m / self.pool_size:.3g}")

    def table(self) -> dict[str, Any]:
        """Plain JSON of every estimate and flag: per attribute the pool (one vote per pair) and each
        annotator's counts, Jeffreys log-odds, anytime interval (log-odds), leave-one-out pool
        interval and flag (the judgment number and own vote count at which it was raised)."""
        m = len(self.annotators)
        own, pool = self.counts["own"][:m], self.pool_counts(slice(0, m))
        attributes = []
        for i, name in enumerate(self.names):
            lo, hi = intervals(own[:, i, 1], own[:, i, 0], self.level)
            pool_lo, pool_hi = intervals(pool[:, i, 1], pool[:, i, 0], self.level)
            rows = []
            for k in range(m):
                n, w = (int(v) for v in own[k, i])
                at, at_cross = (int(v) for v in self.flagged[k, i])
                rows.append({"annotator": self.annotators[k], "class": self.classes[k], "cross": n, "wins": w,
                             "estimate": _jeffreys(w, n), "low": _finite(logit(lo[k])), "high": _finite(logit(hi[k])),
                             "pool_cross": int(pool[k, i, 0]), "pool_wins": int(pool[k, i, 1]),
                             "pool_low": _finite(logit(pool_lo[k])), "pool_high": _finite(logit(pool_hi[k])),
                             "flagged": at > 0, "flagged_at_judgment": at or None,
                             "flagged_at_cross": at_cross if at else None})
            n, w = (int(v) for v in self.pool_first[i])
            attributes.append({"name": name, "pool": {"cross": n, "wins": w, "estimate": _jeffreys(w, n)},
                               "flagged": sum(r["flagged"] for r in rows), "annotators": rows})
        return {"format": "badpo-stream-audit-table/1", "stream": self.stream, "alpha": self.alpha,
                "pool_size": self.pool_size, "level_per_side": self.level, "judgments": self.judgments,
                "cross_group": self.cross, "duplicates": self.duplicates, "annotators": m,
                "family_note": self.family_note(), "attributes": attributes}

    # ------------------------------------------------------------------------------- state
    def to_state(self) -> dict[str, Any]:
        """Everything needed to go on exactly where this audit is, as plain JSON values."""
        return {
            "format": STATE_FORMAT, "config": self.config(),
            "judgments": self.judgments, "cross_group": self.cross, "duplicates": self.duplicates,
            "annotators": [{"id": a, "class": c, **{name: self.counts[name][k].tolist() for name in _COUNTERS},
                            "flagged": self.flagged[k].tolist()}
                           for k, (a, c) in enumerate(zip(self.annotators, self.classes))],
            "pool_first": self.pool_first.tolist(), "pairs": self.pairs,
        }

    def load_state(self, state: Mapping[str, Any], where: str) -> None:
        """Take the counts of ``state`` (from :meth:`to_state`) into this fresh audit; a state of
        another configuration, or one that is not well formed, is a ValueError naming ``where``."""
        if self.judgments or self.annotators:
            raise ValueError("load_state: this audit has already taken in judgments")
        try:
            _check_state(state, self.config(), len(self.names))
        except KeyError as error:
            raise ValueError(f"{where}: not a badpo stream-audit state (no key {error})") from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: {error}") from None
        for entry in state["annotators"]:
            k = self._annotator(entry["id"], entry["class"])
            for name in _COUNTERS:
                self.counts[name][k] = entry[name]
            self.flagged[k] = entry["flagged"]
            lo, hi = intervals(self.counts["own"][k, :, 1], self.counts["own"][k, :, 0], self.level)
            self.bounds[k, :, 0], self.bounds[k, :, 1] = lo, hi
        self.pool_first[:] = state["pool_first"]
        self.pairs = {key: list(judges) for key, judges in state["pairs"].items()}
        self.judgments, self.cross, self.duplicates = state["judgments"], state["cross_group"], state["duplicates"]


def _jeffreys(wins: int, total: int) -> float | None:
    return math.log((wins + 0.5) / (total - wins + 0.5)) if total else None


def _finite(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _check_state(state: Mapping[str, Any], config: Mapping[str, Any], q: int) -> None:
    """Raise with the reason when ``state`` is not a well-formed state of ``config``."""
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(f"not a badpo stream-audit state (format {found!r}, expected {STATE_FORMAT!r})")
    theirs = state["config"]
    if not isinstance(theirs, Mapping) or not isinstance(state["pairs"], Mapping):
        raise ValueError("config and pairs must be JSON objects")
    differing = [key for key in config if theirs.get(key) != config[key]]
    if differing:
        shown = "; ".join(f"{key} {theirs.get(key)!r} there, {config[key]!r} here" for key in differing)
        raise ValueError(f"belongs to another configuration ({shown}); use a new state file for it")

    def counts(value: Any, what: str) -> None:
        array = np.asarray(value)
        if (array.shape != (q, 2) or array.dtype.kind not in "iu" or np.any(array < 0)
                or np.any(array[:, 1] > array[:, 0])):
            raise ValueError(f"{what}: expected {q} pairs of counts (cross-group votes, wins <= votes), got {value!r}")

    counts(state["pool_first"], "pool_first")
    m = len(state["annotators"])
    for position, entry in enumerate(state["annotators"]):
        if not isinstance(entry["id"], str) or not (entry["class"] is None or isinstance(entry["class"], str)):
            raise ValueError(f"annotators[{position}]: id and class must be strings")
        for name in _COUNTERS:
            counts(entry[name], f"annotators[{position}].{name}")
        if np.asarray(entry["flagged"]).shape != (q, 2):
            raise ValueError(f"annotators[{position}].flagged: expected {q} pairs of counts")
    for key, judges in state["pairs"].items():
        if not isinstance(judges, list) or not all(isinstance(k, int) and 0 <= k < m for k in judges):
            raise ValueError(f"pairs[{key!r}]: expected a list of annotator positions below {m}")
    for name in ("judgments", "cross_group", "duplicates"):
        if not isinstance(state[name], int) or state[name] < 0:
            raise ValueError(f"{name}: expected a count, got {state[name]!r}")
