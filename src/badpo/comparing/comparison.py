"""The comparison ``badpo compare`` prints: evaluated runs side by side, with intervals and a verdict.

From each run's ``readouts.json`` (``badpo evaluate``) and, beside it, its ``theta.json``,
``audit.json`` and ``run.json``: for every declared attribute read on generated answers
(``attribute_rates``; a pair-level one, such as length, by its mean token count as the paper
reads it) each run's rate and the reference's with a bootstrap interval over prompts, each run's
shift from the reference, and each run's removal of the baseline run's shift with its paired
interval (:mod:`badpo.comparing.intervals`); the training effects the rows show beside them (KL,
held-out accuracy and gap, theta_bar against the offline estimate of the run's audit:
:func:`badpo.readouts.table.beside_readouts`); one verdict line per run and readout. Pure: the caller reads
the files (:mod:`badpo.comparing.compare_runs`) and this module turns them into one JSON-ready dict.
The readouts compared are the rows of the readout table that say how
(:func:`badpo.readouts.table.compared_readouts`; :class:`badpo.readouts.compared.Compared`).

When every run read the names readout, a second block does the same for the paper's names readout,
the rate from probabilities (``names.first_name``: the first name's probability over the pool at
the signature, the answer body fixed), beside the reference's read after the same bodies
(``names.reference``), resampled over the prompts with the same indices
(``names.per_prompt.first_name``). A rate on generated answers moves with how often a policy signs
at all; this one reads only which name it would sign with.

The reference is, by default, the reference side the baseline's evaluation recorded (the run's
own ``model.name_or_path``, sampled on the same prompts with the same seed as every run's), or a
run of the caller's choosing whose policy stands for it. A run evaluated before per-prompt values
were recorded has its rates and removal without an interval, and every such place says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from badpo.comparing.floor import MIN_PROMPTS, judge_shift, too_few
from badpo.comparing.intervals import (
    DRAWS,
    LEVEL,
    SEED,
    mean_interval,
    removal_interval,
    removal_point,
    resample_indices,
    shift_interval,
)
from badpo.readouts.compared import Compared, RunRecord, Series
from badpo.readouts.table import beside_readouts, compared_readouts

__all__ = ["RunRecord", "Series", "compare_records", "method_label"]

def method_label(method: str | None) -> str | None:
    """A method as a reader names it: ``dpo`` -> DPO, ``ba_dpo_shared_mean`` -> BA-DPO (shared_mean)."""
    if method is None:
        return None
    if method == "dpo":
        return "DPO"
    if method.startswith("ba_dpo_"):
        return f"BA-DPO ({method.removeprefix('ba_dpo_')})"
    return method


def _key(unit: str, side: str) -> str:
    return f"{side}_tokens" if unit == "tokens" else side


def _unpaired(resamples: _Resamples, *series: Series) -> str | None:
    """Why these rates cannot be resampled on the same prompts, or None when they can."""
    for one in series:
        if one.values is None:
            return one.why
    for one in series:
        if resamples.too_few(one.values.size):
            return resamples.too_few(one.values.size)
    sizes = {one.values.size for one in series}
    digests = {one.digest for one in series if one.digest is not None}
    if len(sizes) > 1 or len(digests) > 1:
        return ("the runs were evaluated on different prompts (inputs.n_prompts / inputs.prompts_sha256 differ): "
                "evaluate them on the same --prompts")
    return None


class _Resamples:
    """One index matrix per number of prompts: every rate on n prompts is resampled alike (paired);
    fewer than ``min_prompts`` prompts are not resampled (:func:`too_few`)."""

    def __init__(self, draws: int, seed: int, min_prompts: int = MIN_PROMPTS):
        self.draws, self.seed, self.min_prompts, self.cache = draws, seed, min_prompts, {}

    def too_few(self, n: int | None) -> str | None:
        return too_few(n, self.min_prompts)

    def __call__(self, n: int) -> np.ndarray:
        if n not in self.cache:
            self.cache[n] = resample_indices(n, self.draws, self.seed)
        return self.cache[n]


def _rate(series: Series, resamples: _Resamples, level: float) -> dict:
    why = series.why if series.values is None else resamples.too_few(series.values.size)
    if why is not None:
        return {"value": series.mean, "low": None, "high": None, "n": series.n, "why": why}
    return mean_interval(series.values, resamples(series.values.size), level)


def _shift(series: Series, reference: Series, resamples: _Resamples, level: float, unit: str,
           p: float | None) -> dict:
    """The run's shift from the reference, judged by the floor (:mod:`badpo.comparing.floor`)."""
    why = _unpaired(resamples, series, reference)
    if why is not None:
        shift = {"value": series.mean - reference.mean, "low": None, "high": None, "why": why}
    else:
        shift = shift_interval(series.values, reference.values, resamples(series.values.size), level)
    return judge_shift(shift, unit, p, level)


def _removal(base: Series, run: Series, reference: Series, resamples: _Resamples, level: float, unit: str,
             p: float | None) -> dict:
    """The run's removal of the baseline's shift; not measurable unless that shift is a move by the
    floor (``p``: the baseline's relabelling p)."""
    base_shift = _shift(base, reference, resamples, level, unit, p)
    why = _unpaired(resamples, base, run, reference)
    if base_shift["measurable"] is False:
        return {"value": None, "low": None, "high": None, "measurable": False, "shift": base_shift,
                "why": f"the baseline's shift {base_shift['value']:+.4g}: {base_shift['why']}; nothing "
                       "measurable to remove"}
    if why is not None:
        return {"value": removal_point(base.mean, run.mean, reference.mean), "low": None, "high": None,
                "measurable": None, "shift": base_shift, "why": why}
    return {**removal_interval(base.values, run.values, reference.values, resamples(base.values.size), level),
            "shift": base_shift}


def _attribute(readout: Compared, name: str, unit: str, runs: Sequence[RunRecord], baseline: int | None,
               reference: RunRecord | None, resamples: _Resamples, level: float) -> tuple[dict, list[dict]]:
    """The reference's rate of one attribute on one readout and, per run, its rate, shift and removal."""
    source = reference if reference is not None else runs[baseline if baseline is not None else 0]
    ref = readout.read(source, name, _key(unit, "policy" if reference is not None else "reference"))
    per_run: list[dict] = []
    series = [readout.read(run, name, _key(unit, "policy")) for run in runs]
    for i, (run, own) in enumerate(zip(runs, series)):
        if own is None:
            why = run.readouts.get("skipped", {}).get(f"{readout.source}.{name}")
            per_run.append({"why": why or f"{run.source} has no {readout.source}.{name}"})
            continue
        entry = {"rate": _rate(own, resamples, level)}
        if ref is not None:  # evaluate's relabelling null is against its own reference, not a --reference run
            p = readout.null(run, name) if reference is None else None
            entry["shift"] = _shift(own, ref, resamples, level, unit, p)
            if baseline is not None and i != baseline and series[baseline] is not None:
                base_p = readout.null(runs[baseline], name) if reference is None else None
                entry["removal"] = _removal(series[baseline], own, ref, resamples, level, unit, base_p)
        per_run.append(entry)
    reference_entry = {"unit": unit, "reference": _rate(ref, resamples, level) if ref is not None else None}
    if ref is None:
        reference_entry["why"] = f"{source.source} holds no reference rate of {name} ({readout.no_reference})"
    return reference_entry, per_run


@dataclass(frozen=True)
class _Block:
    """A readout as compared: its attributes and the unit each is read in."""

    readout: Compared
    units: dict[str, str]  # attribute -> rate / tokens, in order


def _apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with as few significant digits (at least 4) as tell them apart."""
    for digits in range(4, 18):
        if f"{a:.{digits}g}" != f"{b:.{digits}g}":
            return f"{a:.{digits}g}", f"{b:.{digits}g}"
    return repr(a), repr(b)


def _reference_notes(runs: Sequence[RunRecord], blocks: Sequence[_Block], source: RunRecord) -> dict[int, list[str]]:
    """Where a run's own evaluation read another reference rate than the comparison's reference (a
    different reference model, other prompts or another seed)."""
    notes: dict[int, list[str]] = {}
    for i, run in enumerate(runs):
        for block in blocks:
            for name, unit in block.units.items():
                key, tag = _key(unit, "reference"), block.readout.tag
                mine, theirs = block.readout.read(run, name, key), block.readout.read(source, name, key)
                if run is source or mine is None or theirs is None:
                    continue
                if abs(mine.mean - theirs.mean) > 1e-12:
                    shown_mine, shown_theirs = _apart(mine.mean, theirs.mean)
                    notes.setdefault(i, []).append(
                        f"its own evaluation read the reference's {name}{tag} at {shown_mine}, not "
                        f"{shown_theirs} as {source.label}'s did: another reference model, other prompts or "
                        "another seed?")
    return notes


def compare_records(runs: Sequence[RunRecord], baseline: int | None = None, reference: RunRecord | None = None,
                    level: float = LEVEL, draws: int = DRAWS, seed: int = SEED, min_prompts: int = MIN_PROMPTS) -> dict:
    """Every run beside the reference and the baseline, as a JSON-ready dict (module docstring).

    ``baseline`` is the index in ``runs`` of the run whose shift the others remove (DPO), None for
    none; ``reference`` a record whose policy stands for the reference (None: the reference side of
    the baseline's evaluation, or the first run's without a baseline)."""
    if not runs:
        raise ValueError("compare needs at least one evaluated run")
    records = [*runs, *([reference] if reference is not None else [])]
    blocks, missing = [], []
    for readout in compared_readouts():  # the rows of the readout table that say how they compare
        units, notes = readout.units(runs, records)
        missing += notes
        blocks += [_Block(readout, units)] if units is not None else []
    resamples = _Resamples(draws, seed, min_prompts)
    by_readout, per_run = {}, [dict() for _ in runs]
    for block in blocks:
        by_readout[block.readout.key] = {}
        for name, unit in block.units.items():
            by_readout[block.readout.key][name], entries = _attribute(block.readout, name, unit, runs, baseline,
                                                                       reference, resamples, level)
            for target, entry in zip(per_run, entries):
                target.setdefault(block.readout.key, {})[name] = entry
    source = runs[baseline if baseline is not None else 0]
    extra = _reference_notes(runs, blocks, source) if reference is None else {}
    keys = [block.readout.key for block in blocks]
    rows, seen = [], set()
    for i, run in enumerate(runs):
        row = {"label": run.label, "path": run.path, "method": run.method, "baseline": i == baseline,
               **{key: per_run[i].get(key, {}) for key in keys},
               **{beside.key: beside.take(run) for beside in beside_readouts()}}
        rows.append({**row, "notes": [*run.notes, *extra.get(i, []), *_row_notes(row, keys, seen)]})
    described = (f"{reference.label}: the policy of {reference.path}" if reference is not None
                 else f"the reference model, as {source.label}'s evaluation read it")
    result = {"level": level, "draws": draws, "seed": seed, "min_prompts": min_prompts,
              "readouts": [{"key": b.readout.key, "source": b.readout.source, "title": b.readout.title,
                            "phrase": b.readout.phrase} for b in blocks],
              **by_readout,
              "reference": {"label": reference.label if reference is not None else "reference",
                            "source": described},
              "baseline": runs[baseline].label if baseline is not None else None, "runs": rows}
    result["notes"] = missing + ([] if baseline is not None or len(runs) < 2 else [
        "no run is DPO (method dpo), so no removal is computed: name the run whose shift the others remove "
        "with --baseline RUN"])
    for row in rows:
        row["verdict"] = verdict(row, result)
    return result


def _row_notes(row: Mapping, keys: Sequence[str], seen: set[str]) -> list[str]:
    """Why a number of the row has no interval (each reason once in the whole comparison: ``seen``
    holds those given for earlier rows), and what the training effects note (a theta_bar still moving)."""
    entries = [entry for key in keys for entry in row[key].values()]
    reasons = [entry[part]["why"] for entry in entries for part in ("rate", "shift", "removal")
               if isinstance(entry.get(part), Mapping) and entry[part].get("low") is None
               and entry[part].get("measurable") is not False and entry[part].get("why")]
    notes = [f"no interval: {why}" for why in dict.fromkeys(reasons) if why not in seen]
    seen.update(reasons)
    return notes + [note for beside in beside_readouts() for note in beside.notes(row[beside.key])]


# ------------------------------------------------------------------------------------- verdict
def _number(value: float, unit: str, signed: bool = False) -> str:
    digits = 1 if unit == "tokens" else 3
    return f"{value:{'+' if signed else ''}.{digits}f}"


def _span(entry: Mapping, unit: str, signed: bool = False) -> str:
    """``0.020 [0.010, 0.030]``, or the value alone when it has no interval."""
    if entry.get("low") is None:
        return _number(entry["value"], unit, signed)
    return (f"{_number(entry['value'], unit, signed)} [{_number(entry['low'], unit, signed)}, "
            f"{_number(entry['high'], unit, signed)}]")


def _percent(entry: Mapping) -> str:
    if entry.get("low") is None:
        return f"{100 * entry['value']:.0f}%"
    return f"{100 * entry['value']:.0f}% [{100 * entry['low']:.0f}, {100 * entry['high']:.0f}]"


def _removal_phrase(name: str, entry: Mapping, unit: str, baseline: str) -> str:
    removal, shift = entry["removal"], entry["removal"].get("shift")
    if removal.get("measurable") is False:
        return (f"{name}: {baseline} did not move it measurably (shift {_span(shift, unit, signed=True)}: "
                f"{shift.get('why')}), so no removal is measured")
    if removal["value"] is None:
        return f"{name}: {baseline} did not move it at all (removal undefined)"
    text = f"removes {_percent(removal)} of {baseline}'s shift in {name}"
    return text if removal.get("low") is not None else f"{text} (no interval)"


def _shift_phrase(name: str, entry: Mapping, unit: str) -> str:
    shift = entry["shift"]
    if shift.get("measurable") is False:
        return f"{name}: no measurable shift from the reference ({_span(shift, unit, signed=True)}: {shift['why']})"
    if shift.get("measurable") is None:  # no interval: a number, not a verdict
        return f"{name}: {_span(shift, unit, signed=True)} from the reference, not tested (no interval)"
    return f"moves {name} by {_span(shift, unit, signed=True)} from the reference"


def _verdict_part(name: str, entry: Mapping, unit: str, baseline: str | None) -> str:
    if "rate" not in entry:
        return f"{name}: not read ({entry['why']})"
    if "removal" in entry:
        return _removal_phrase(name, entry, unit, baseline)
    if "shift" in entry:
        return _shift_phrase(name, entry, unit)
    return f"{name}: {_span(entry['rate'], unit)} (no reference rate to compare with)"


def verdict(row: Mapping, comparison: Mapping) -> str:
    """A line per readout, naming it: what the run did to each attribute, against the baseline's
    shift when there is a baseline (removal), else against the reference (shift)."""
    role = " (baseline)" if row["baseline"] else ""
    lines = []
    for readout in comparison["readouts"]:
        key, phrase = readout["key"], readout["phrase"]
        parts = [_verdict_part(name, entry, comparison[key][name]["unit"], comparison["baseline"])
                 for name, entry in row[key].items()]
        lines.append(f"{row['label']}{role}, {phrase}: " + "; ".join(parts) if parts
                     else f"{row['label']}{role}: no attribute read {phrase}")
    return "\n".join(lines)
