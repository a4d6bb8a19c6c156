"""How two evaluated runs compare on one readout: a run's record as ``badpo compare`` reads it
(:class:`RunRecord`), one rate with its per-prompt values (:class:`Series`), and :class:`Compared`,
what a readout row of :data:`badpo.readouts.table.READOUTS` declares to be compared (its ``compared``):
where the record holds it, how a series is read, which attributes and units, and its relabelling
null. What is particular to one readout (where its record keeps a rate, its units) is the row's own,
in its module under :mod:`badpo.readouts.rows`; this module holds only what every compared readout
shares. Pure (numpy): :mod:`badpo.comparing.comparison` does the intervals, removals and verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Beside", "Compared", "RunRecord", "Series", "as_mapping", "recorded_series"]


@dataclass(frozen=True)
class RunRecord:
    """One evaluated run as compare reads it (:func:`badpo.comparing.compare_runs.load_run`)."""

    label: str  # how the run is named in every output
    path: str  # the run folder (or readouts file) as the caller gave it
    method: str | None  # the run's method (run.json / config.yaml); None when not known
    readouts: Mapping[str, Any]
    source: str = ""  # the readouts file, named in errors and notes
    theta: Mapping[str, Any] | None = None  # theta.json
    offline: Mapping[str, Any] | None = None  # audit.json: the offline estimates
    convergence: Mapping[str, Any] | None = None  # run.json theta_convergence
    notes: tuple[str, ...] = field(default=())  # what the reader found missing (no theta.json, ...)
    data: Mapping[str, Any] | None = None  # data_fingerprint.json of the run folder: what it trained on


@dataclass(frozen=True)
class Series:
    """One rate as a record holds it: its mean and, when recorded, its per-prompt values."""

    mean: float
    values: np.ndarray | None
    digest: str | None  # inputs.prompts_sha256: which prompts the values are on
    why: str | None  # why there are no per-prompt values
    n: int | None = None  # the number of prompts, as recorded


def as_mapping(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def recorded_series(mean: Any, values: Any, digest: str | None, n: int | None, where: str, missing: str) -> Series:
    """A recorded mean and its per-prompt values (``where`` names them in errors; ``missing`` says
    why there are none when ``values`` is None). A list that does not hold one number per prompt is
    an error naming the file and the key; one with a null is a series without values."""
    if values is None:
        return Series(float(mean), None, digest, missing, n)
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) or v is None for v in values):
        raise ValueError(f"{where}: expected a list of numbers")
    if n is not None and len(values) != n:
        raise ValueError(f"{where} holds {len(values)} values, but n is {n}")
    if any(v is None for v in values) or not values:
        return Series(float(mean), None, digest, f"{where} has undefined (null) values", n)
    return Series(float(mean), np.asarray(values, dtype=np.float64), digest, None, len(values))


@dataclass(frozen=True)
class Compared:
    """A readout compare puts side by side, and how each output names it. ``units(runs, records)``
    gives its attributes and the unit each is read in (None: not compared) with notes on why not;
    ``records`` are the runs and, when given, the run that stands for the reference."""

    key: str  # where compare.json holds its attributes (top level) and each run's entries
    source: str  # where readouts.json holds it
    title: str  # the heading of its table
    phrase: str  # how a verdict line names it
    tag: str  # after an attribute's name in a note ("" for the rates on generated answers)
    read: Callable[[RunRecord, str, str], Series | None]
    no_reference: str  # why a record gives no reference rate
    units: Callable[[Sequence[RunRecord], Sequence[RunRecord]], tuple[dict[str, str] | None, list[str]]]
    null: Callable[[RunRecord, str], float | None] = lambda record, name: None  # evaluate's relabelling p


@dataclass(frozen=True)
class Beside:
    """A readout compare shows beside the rates, in its table of training effects, without an
    interval (KL, held-out accuracy, theta_bar): ``take(run)`` is the run's JSON-ready value (None
    when it has none), kept in compare.json under ``key`` of the run's entry; ``columns(values)``
    turns every run's value into (header, a cell per run) columns, a column only where some run
    has the number; ``notes(value)`` are what the run's notes say of it; ``meaning`` is the clause
    of compare.md's footnote that says what the columns read; ``order`` places the columns."""

    key: str
    take: Callable[[RunRecord], Any]
    columns: Callable[[Sequence[Any]], list[tuple[str, list[str]]]]
    meaning: str
    notes: Callable[[Any], list[str]] = lambda value: []
    order: int = 0
