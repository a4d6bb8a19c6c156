"""How two evaluated runs compare on one readout: a run's record as ``badpo compare`` reads it
(:class:`RunRecord`), one rate with its per-prompt values (:class:`Series`), and :class:`Compared`,
what a readout row of :data:`badpo.readouts.table.READOUTS` declares to be compared (its ``compared``):
where the record holds it, how a series is read, which attributes and units, and its relabelling
null. Pure (numpy): :mod:`badpo.readouts.comparison` does the intervals, removals and verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Beside", "Compared", "RunRecord", "Series", "as_mapping", "first_name_units", "generated_units",
           "read_first_name", "read_series"]

OLD_RECORD = ("evaluated before badpo recorded per-prompt values ({source} has no attribute_rates.NAME.per_prompt): "
              "run `badpo evaluate` on it again for intervals")
OLD_FIRST_NAME = ("evaluated before badpo recorded per-prompt first-name rates ({source} has no "
                  "names.per_prompt.first_name): run `badpo evaluate` on it again for intervals")


@dataclass(frozen=True)
class RunRecord:
    """One evaluated run as compare reads it (:func:`badpo.readouts.compare_runs.load_run`)."""

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


def _series(mean: Any, values: Any, digest: str | None, n: int | None, where: str, missing: str) -> Series:
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


def read_series(record: RunRecord, name: str, key: str) -> Series | None:
    """``attribute_rates.NAME.KEY`` of a record and its per-prompt values; None when the run did
    not read the attribute. A per-prompt list that does not hold one number per prompt is an
    error naming the file and the key."""
    entry = record.readouts.get("attribute_rates", {}).get(name)
    if not isinstance(entry, Mapping) or entry.get(key) is None:
        return None
    where = f"{record.source}: attribute_rates.{name}"
    if not isinstance(entry[key], (int, float)):
        raise ValueError(f"{where}.{key} is {entry[key]!r}; expected a number")
    digest = record.readouts.get("inputs", {}).get("prompts_sha256")
    n = entry.get("n") if isinstance(entry.get("n"), int) else None
    per_prompt = entry.get("per_prompt")
    values = per_prompt.get(key) if isinstance(per_prompt, Mapping) else None
    return _series(entry[key], values, digest, n, f"{where}.per_prompt.{key}", OLD_RECORD.format(source=record.source))


def read_first_name(record: RunRecord, name: str, key: str) -> Series | None:
    """The first-name rate of NAME from probabilities and its per-prompt values: the policy's
    (``key`` policy: ``names.first_name``, ``names.per_prompt.first_name``) or the reference's
    read after the same bodies (``key`` reference: ``names.reference``; in a record written before
    that, ``names.first_name`` minus the shift ``names.null.first_name`` reports, without values).
    None when the record holds neither."""
    names = as_mapping(record.readouts.get("names"))
    inputs = as_mapping(record.readouts.get("inputs"))
    digest, n = inputs.get("prompts_sha256"), inputs.get("n_prompts")
    n = n if isinstance(n, int) else None
    old = OLD_FIRST_NAME.format(source=record.source)
    side = names if key == "policy" else as_mapping(names.get("reference"))
    mean = as_mapping(side.get("first_name")).get(name)
    where = f"{record.source}: names{'' if key == 'policy' else '.reference'}"
    if mean is None and key == "reference":
        policy = as_mapping(names.get("first_name")).get(name)
        shift = as_mapping(as_mapping(as_mapping(names.get("null")).get("first_name")).get(name)).get("shift")
        if isinstance(policy, (int, float)) and isinstance(shift, (int, float)):
            return Series(float(policy) - float(shift), None, digest, old, n)
    if mean is None:
        return None
    if not isinstance(mean, (int, float)):
        raise ValueError(f"{where}.first_name.{name} is {mean!r}; expected a number")
    values = as_mapping(as_mapping(side.get("per_prompt")).get("first_name")).get(name)
    return _series(mean, values, digest, n, f"{where}.per_prompt.first_name.{name}", old)


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


def _unit(records: Sequence[RunRecord], name: str) -> str:
    """``tokens`` for a pair-level attribute (read by its mean token count), else ``rate``."""
    for record in records:
        entry = record.readouts.get("attribute_rates", {}).get(name)
        if isinstance(entry, Mapping):
            return "tokens" if "policy_tokens" in entry else "rate"
    return "rate"


def generated_units(runs: Sequence[RunRecord], records: Sequence[RunRecord]) -> tuple[dict[str, str], list[str]]:
    """Every attribute a record read on generated answers, the declared ones first, each by its unit."""
    declared = [name for run in records for name in run.readouts.get("inputs", {}).get("attributes", [])]
    read = {name for run in records for name in run.readouts.get("attribute_rates", {})}
    names = [name for name in dict.fromkeys([*declared, *sorted(read)]) if name in read]
    return {name: _unit(runs, name) for name in names}, []


def first_name_units(runs: Sequence[RunRecord],
                     records: Sequence[RunRecord]) -> tuple[dict[str, str] | None, list[str]]:
    """The rate from first-name probabilities, when every record read it (with a note when only
    some did): one attribute per coded side of the name pool."""
    read = [as_mapping(as_mapping(record.readouts.get("names")).get("first_name")) for record in records]
    if not any(read):
        return None, []
    missing = [record for record, first in zip(records, read) if not first]
    if missing:
        return None, [f"the rate from first-name probabilities is not compared: {missing[0].source} holds no "
                      "names.first_name (no names attribute declared, or another readout)"]
    return dict.fromkeys((name for first in read for name in first), "rate"), []
