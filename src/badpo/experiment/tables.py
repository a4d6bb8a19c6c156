"""Tables rendered from logged runs only: ``render_tables(run_records, layout) -> (markdown, csv)``.

The layout says which run key fills which (row, seed); the records are the ``OUT/runs/*.json``
files. Nothing else enters, so re-rendering from disk gives the same bytes.

Cells (paper, Section "Experimental settings" and Appendix "Readouts"):
- an arm's value is the mean over seeds with the 95% Student-t interval,
  ``mean +- t_{0.975, n-1} sd / sqrt(n)`` (:func:`badpo.comparing.over_seeds.mean_ci`);
- the reference is trained once: its value has no interval;
- "Removed" is ``(rate_DPO - rate_arm) / (rate_DPO - rate_ref)`` computed per seed against the
  baseline (DPO) run of the same seed, then mean and interval
  (:func:`badpo.comparing.over_seeds.removal_per_seed`); it is not the removal of the means. Where
  DPO's value equals the reference's at some seed the cell reads "not measurable" and its note
  names the seeds;
- a ceiling row (vote prediction with the planted theta_k) is the mean of the column's
  ``ceiling`` readout over every run of the table's arms and seeds;
- a "pooled" column reads a ``names.null`` readout recomputed with the arm's seeds pooled (the
  paper's "three DPO seeds"): the mean of their shifts from the reference, against the relabelling
  null of that mean (:func:`badpo.readouts.names_analyses.names_null_readouts`).
A readout an arm does not have at any seed (KL of the reference, theta recovery of DPO) shows
as an em dash; one it has at some seeds only is an error naming the runs. A readout that is
null (undefined, e.g. a share over no signed samples: records hold null for NaN) is there but
nan: its cell reads "nan" and the note names the seeds.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from badpo.comparing.over_seeds import mean_ci, removal_per_seed
from badpo.core.config import from_dict
from badpo.core.outputs import spreadsheet_safe
from badpo.experiment.config import POOLED_PREFIX, ColumnSpec, ExperimentConfig, PlotSpec, TableSpec
from badpo.experiment.records import read_records
from badpo.experiment.runner import Plan
from badpo.readouts.names_analyses import names_null_readouts

__all__ = ["LayoutArm", "LayoutRun", "TableLayout", "build_layout", "render_tables",
           "read_layout", "render_from_disk", "metric_value", "arm_values"]

DASH = "—"
CSV_FIELDS = ("table", "row", "column", "metric", "kind", "interval", "n", "mean", "plus_minus", "low", "high",
              "per_seed", "note")


@dataclass(frozen=True)
class LayoutRun:
    seed: int
    key: str  # the run's record is OUT/runs/<key>.json


@dataclass(frozen=True)
class LayoutArm:
    name: str  # row label
    method: str
    runs: list[LayoutRun]  # one per seed, in seed order


@dataclass(frozen=True)
class TableLayout:
    """Everything the renderer needs besides the records; saved as OUT/layout.json."""

    title: str
    reference_label: str
    reference_key: str
    arms: list[LayoutArm]
    seeds: list[int]
    baseline: str  # arm name a removed column measures against
    level: float = 0.95
    tables: list[TableSpec] = field(default_factory=list)
    plots: PlotSpec = field(default_factory=PlotSpec)
    corpus_stats: dict = field(default_factory=dict)  # OUT/corpus/stats.json, for corpus columns


def build_layout(config: ExperimentConfig, plan: Plan) -> TableLayout:
    """The layout of ``config`` with the run keys of ``plan`` (and the corpus statistics, when a
    table shows one, so that layout.json alone renders the tables)."""
    arms = []
    for arm in config.arms:
        runs = [LayoutRun(r.seed, r.key) for r in plan.runs if r.arm == arm.name]
        arms.append(LayoutArm(arm.name, arm.method, runs))
    corpus_stats = {}
    if any(c.kind == "corpus" for table in config.tables for c in table.columns):
        path = Path(plan.corpus_dir) / "stats.json"
        if not path.is_file():
            raise ValueError(f"{path}: missing; a corpus column reads its statistics from it")
        corpus_stats = json.loads(path.read_text(encoding="utf-8"))
    return TableLayout(config.name, config.reference_label, plan.reference.key, arms,
                       list(config.seeds), config.baseline, config.level, list(config.tables),
                       config.plots, corpus_stats)


def read_layout(path: str | Path) -> TableLayout:
    return from_dict(TableLayout, json.loads(Path(path).read_text(encoding="utf-8")))


# ------------------------------------------------------------------------------- readout access
class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()


def metric_value(record: Mapping[str, Any], path: str) -> float | _Absent:
    """The readout at dotted ``path`` of a run record; ABSENT when the record lacks it, nan when
    it is null (measured but undefined: the record writer turns NaN into null)."""
    return _leaf(record.get("readouts", {}), path, f"run {record.get('key')}: readout")


def _leaf(node: Any, path: str, where: str) -> float | _Absent:
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return ABSENT
        node = node[part]
    if node is None:
        return math.nan
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise ValueError(f"{where} {path!r} is {type(node).__name__}, not a number; name a leaf")
    return float(node)


def _record(records: Mapping[str, Mapping], key: str, where: str) -> Mapping:
    if key not in records:
        raise ValueError(f"{where}: no logged run {key}")
    return records[key]


def arm_values(arm: LayoutArm, records: Mapping[str, Mapping], path: str) -> dict[int, float] | None:
    """{seed: value} of an arm, None when no seed has the readout; partial is an error."""
    values = {run.seed: metric_value(_record(records, run.key, arm.name), path) for run in arm.runs}
    lacking = [run.key for run in arm.runs if values[run.seed] is ABSENT]
    if len(lacking) == len(values):
        return None
    if lacking:
        raise ValueError(f"arm {arm.name!r}: readout {path!r} is missing from runs {lacking} but "
                         "present in the others")
    return values


# ----------------------------------------------------------------------------------- formatting
def _fixed(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def _pm(mean: float, half: float, digits: int, suffix: str = "") -> str:
    """``0.964 ± 0.005``; a half-width that rounds to 0 reads ``± <0.001``."""
    if math.isnan(mean):
        return "nan"
    if math.isnan(half):
        return _fixed(mean, digits) + suffix
    width = _fixed(half, digits)
    if float(width) == 0.0:
        width = "<" + _fixed(10.0 ** -digits, digits)
    return f"{_fixed(mean, digits)} ± {width}{suffix}"


@dataclass
class _Cell:
    text: str
    stats: dict  # n, mean, plus_minus, low, high
    per_seed: dict  # seed -> value
    note: str = ""


def _empty(note: str = "") -> _Cell:
    return _Cell(DASH, {}, {}, note)


def _summarise(values: dict[int, float], interval: str, level: float) -> dict:
    """n, mean and the +- part: the Student-t half-width (``t``), the sd (``sd``) or nan."""
    if any(math.isnan(v) for v in values.values()):
        return {"n": len(values), "mean": math.nan, "plus_minus": math.nan, "low": math.nan,
                "high": math.nan}
    stats = mean_ci(list(values.values()), level)
    spread = {"t": stats["half_width"], "sd": stats["sd"], "none": math.nan}[interval]
    return {"n": stats["n"], "mean": stats["mean"], "plus_minus": spread,
            "low": stats["mean"] - spread, "high": stats["mean"] + spread}


def _nan_note(values: dict[int, float]) -> str:
    seeds = [str(s) for s, v in values.items() if math.isnan(v)]
    return f"nan at seed(s) {', '.join(seeds)}" if seeds else ""


# ----------------------------------------------------------------------------------- the cells
def _value_cell(arm: LayoutArm, column: ColumnSpec, records: Mapping, table: TableSpec,
                level: float) -> _Cell:
    values = arm_values(arm, records, column.metric)
    if values is None:
        return _empty("not measured for this arm")
    stats = _summarise(values, table.interval, level)
    return _Cell(_pm(stats["mean"], stats["plus_minus"], column.digits), stats, values,
                 _nan_note(values))


def _baseline(table: TableSpec, layout: TableLayout) -> str:
    """The arm the table's removed columns measure against: its own, else the experiment's."""
    return table.baseline if table.baseline is not None else layout.baseline


def _removed_cell(arm: LayoutArm, column: ColumnSpec, records: Mapping, layout: TableLayout,
                  table: TableSpec) -> _Cell:
    name = _baseline(table, layout)
    if arm.name == name:
        return _empty("the baseline")
    baseline = next((a for a in layout.arms if a.name == name), None)
    if baseline is None:
        raise ValueError(f"column {column.header!r}: the baseline arm {name!r} is not in the layout")
    reference = metric_value(_record(records, layout.reference_key, "reference"), column.metric)
    values = arm_values(arm, records, column.metric)
    dpo_values = arm_values(baseline, records, column.metric)
    if reference is ABSENT or values is None or dpo_values is None:
        raise ValueError(f"column {column.header!r}: removal of {column.metric!r} needs it for the "
                         f"reference, {name} and {arm.name}")
    unmoved = [str(seed) for seed in values if dpo_values.get(seed) == reference]
    if unmoved:  # a user's data need not move every attribute: say so in the cell, not by failing
        return _Cell("not measurable", {"n": len(values)}, {},
                     f"{name} did not move {column.metric} at seed(s) {', '.join(unmoved)} (its value "
                     f"equals the reference's, {reference!r}): removal undefined")
    try:
        removal = removal_per_seed(dpo_values, values, reference, layout.level)
    except ValueError as error:
        raise ValueError(f"column {column.header!r}, arm {arm.name!r}: {error}") from None
    per_seed = removal["per_seed"]
    stats = _summarise(per_seed, table.interval, layout.level)
    percent = {k: stats[k] * 100 for k in ("mean", "plus_minus")}
    return _Cell(_pm(percent["mean"], percent["plus_minus"], column.digits, "%"), stats, per_seed)


def _amplification_cell(arm: LayoutArm, column: ColumnSpec, records: Mapping, layout: TableLayout) -> _Cell:
    """mean_arm - rate_ref, and that in units of the arm's per-seed sd: "+0.034 (1.6σ)"."""
    reference = metric_value(_record(records, layout.reference_key, "reference"), column.metric)
    values = arm_values(arm, records, column.metric)
    if values is None:
        return _empty("not measured for this arm")
    if reference is ABSENT:
        raise ValueError(f"column {column.header!r}: amplification of {column.metric!r} needs it "
                         "for the reference")
    if math.isnan(reference) or any(math.isnan(v) for v in values.values()):
        return _Cell("nan", {"n": len(values)}, values, _nan_note(values) or "nan for the reference")
    stats = mean_ci(list(values.values()), layout.level)
    shift = stats["mean"] - reference
    in_sd = shift / stats["sd"] if stats["sd"] > 0 else math.nan  # nan: one seed, or no spread
    sign = "+" if shift > 0 else ""
    text = f"{sign}{_fixed(shift, column.digits)}"
    if not math.isnan(in_sd):
        text += f" ({in_sd:.0f}σ)" if abs(in_sd) >= 10 else f" ({in_sd:.1f}σ)"
    cell_stats = {"n": stats["n"], "mean": shift, "plus_minus": stats["sd"], "low": math.nan, "high": math.nan}
    return _Cell(text, cell_stats, {s: v - reference for s, v in values.items()},
                 "no sd: one seed or equal values" if math.isnan(in_sd) else f"{in_sd!r} sd")


def _pooled_cell(arm: LayoutArm, column: ColumnSpec, records: Mapping, layout: TableLayout) -> _Cell:
    """A ``names.null`` readout with the arm's seeds pooled (module docstring); every seed's own
    value goes to the CSV's per_seed."""
    values = arm_values(arm, records, column.metric)  # every seed has it, or none: else an error
    if values is None:
        return _empty("not measured for this arm")
    runs = [_record(records, run.key, arm.name).get("readouts", {}) for run in arm.runs]
    reference = _record(records, layout.reference_key, "reference").get("readouts", {})
    pooled = _leaf(names_null_readouts(runs, reference), column.metric.removeprefix(POOLED_PREFIX),
                   f"column {column.header!r}:")
    if pooled is ABSENT:
        raise ValueError(f"column {column.header!r}: {column.metric!r} needs the reference record's "
                         "per-name shares of that readout")
    stats = {"n": len(runs), "mean": pooled, "plus_minus": math.nan, "low": math.nan, "high": math.nan}
    return _Cell(_pm(pooled, math.nan, column.digits), stats, values,
                 f"{len(runs)} seeds pooled: their mean shift against the relabelling null of that mean")


def _corpus_cell(column: ColumnSpec, layout: TableLayout) -> _Cell:
    value = _leaf(layout.corpus_stats, column.metric, "corpus/stats.json:")
    if value is ABSENT:
        raise ValueError(f"column {column.header!r}: corpus/stats.json has no {column.metric!r} (a "
                         "misspelled metric, or a corpus built by an earlier badpo: rebuild it)")
    stats = {"n": 1, "mean": value, "plus_minus": math.nan, "low": math.nan, "high": math.nan}
    return _Cell(_pm(value, math.nan, column.digits), stats, {}, "a statistic of the labels")


def _arm_cell(arm: LayoutArm, column: ColumnSpec, records: Mapping, layout: TableLayout,
              table: TableSpec) -> _Cell:
    if column.kind == "removed":
        return _removed_cell(arm, column, records, layout, table)
    if column.kind == "amplification":
        return _amplification_cell(arm, column, records, layout)
    if column.kind == "corpus":
        return _empty("a statistic of the labels: on the reference row")
    if column.kind == "pooled":
        return _pooled_cell(arm, column, records, layout)
    return _value_cell(arm, column, records, table, layout.level)


def _reference_cell(column: ColumnSpec, records: Mapping, layout: TableLayout) -> _Cell:
    if column.kind == "corpus":
        return _corpus_cell(column, layout)
    if column.kind in ("removed", "amplification", "pooled"):
        return _empty("the reference")
    value = metric_value(_record(records, layout.reference_key, "reference"), column.metric)
    if value is ABSENT:
        return _empty("not measured for the reference")
    stats = {"n": 1, "mean": value, "plus_minus": math.nan, "low": math.nan, "high": math.nan}
    return _Cell(_pm(value, math.nan, column.digits), stats, {}, "trained once: no interval")


def _ceiling_cell(column: ColumnSpec, arms: list[LayoutArm], records: Mapping) -> _Cell:
    """The column's ``ceiling`` readout averaged over every run of the table; every run must
    have it (the planted-theta prediction does not depend on the arm's own theta)."""
    if column.ceiling is None:
        return _empty()
    values, lacking = {}, []
    for arm in arms:
        for run in arm.runs:
            value = metric_value(_record(records, run.key, arm.name), column.ceiling)
            if value is ABSENT:
                lacking.append(run.key)
            else:
                values[f"{arm.name}/{run.seed}"] = value
    if lacking:
        raise ValueError(f"column {column.header!r}: the ceiling readout {column.ceiling!r} is "
                         f"missing from runs {lacking}")
    mean = math.fsum(values.values()) / len(values)
    stats = {"n": len(values), "mean": mean, "plus_minus": math.nan, "low": math.nan, "high": math.nan}
    return _Cell(_pm(mean, math.nan, column.digits), stats, values,
                 "planted theta_k, mean over every run of the table")


# ----------------------------------------------------------------------------------- rendering
def _table_rows(table: TableSpec, layout: TableLayout, records: Mapping) -> list[tuple[str, list[_Cell]]]:
    arms = [a for a in layout.arms if table.arms is None or a.name in table.arms]
    if table.arms is not None:
        arms.sort(key=lambda a: table.arms.index(a.name))
    rows = []
    if table.reference_row:
        rows.append((layout.reference_label, [_reference_cell(c, records, layout) for c in table.columns]))
    if table.ceiling_row is not None:
        rows.append((table.ceiling_row, [_ceiling_cell(c, arms, records) for c in table.columns]))
    for arm in arms:
        cells = [_arm_cell(arm, c, records, layout, table) for c in table.columns]
        rows.append((arm.name, cells))
    for index, column in enumerate(table.columns):
        if all(cells[index].text == DASH for _, cells in rows):
            raise ValueError(f"table {table.title!r}, column {column.header!r}: no row has the readout "
                             f"{column.metric!r} (a typo in the metric path, or records an older badpo "
                             "logged without it: delete OUT/runs/*.json to evaluate the trained runs again)")
    return rows


def _footnote(table: TableSpec, layout: TableLayout) -> str:
    seeds = ", ".join(str(s) for s in layout.seeds)
    level = f"{layout.level * 100:g}%"
    parts = [{"t": f"Mean ± {level} Student-t interval over seeds {seeds}",
              "sd": f"Mean ± sd over seeds {seeds}",
              "none": f"Mean over seeds {seeds}"}[table.interval]]
    if table.reference_row:
        parts.append("the reference is trained once (no interval)")
    if any(c.kind == "removed" for c in table.columns):
        name = _baseline(table, layout)
        simple = re.fullmatch(r"[\w+-]+", name)  # else "rate[LoRA 2e-3, DPO]": a comma inside is clear
        rate, row = (f"rate_{name}", name) if simple else (f"rate[{name}]", f"“{name}”")
        parts.append(f"Removed = ({rate} − rate_arm) / ({rate} − rate_ref), per seed against {row} "
                     "of the same seed, then averaged")
    if any(c.kind == "amplification" for c in table.columns):
        parts.append("Amplification = mean_arm − rate_ref, and in parentheses that difference in "
                     "units of the arm's per-seed sd")
    if any(c.kind == "corpus" for c in table.columns):
        parts.append("corpus columns are statistics of the training labels (corpus/stats.json)")
    if any(c.kind == "pooled" for c in table.columns):
        parts.append("Pooled = the seeds' mean shift from the reference, against its null under 1,000 "
                     "random relabellings of the name pool")
    if table.ceiling_row is not None:
        parts.append(f"{table.ceiling_row}: the same readout with the planted theta_k, "
                     "mean over every run of the table")
    return "; ".join(parts) + "."


def _markdown_row(texts: list[str]) -> str:
    return "| " + " | ".join(text.replace("|", "\\|") for text in texts) + " |"


def _markdown_table(table: TableSpec, rows: list[tuple[str, list[_Cell]]], layout: TableLayout) -> str:
    header = _markdown_row(["Method"] + [c.header for c in table.columns])
    rule = "|:--|" + "|".join("--:" for _ in table.columns) + "|"
    lines = [f"## {table.title}", "", header, rule]
    lines += [_markdown_row([label] + [cell.text for cell in cells]) for label, cells in rows]
    note = [" ".join(table.note.split()), ""] if table.note else []
    return "\n".join(lines + ["", _footnote(table, layout), ""] + note)


def _csv_number(value: Any) -> str:
    """Empty when there is no number, an int as is, a float by repr (every digit, nan as 'nan')."""
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else repr(float(value))


def render_tables(run_records: Iterable[Mapping] | Mapping[str, Mapping], layout: TableLayout
                  ) -> tuple[str, str]:
    """Markdown and CSV (one row per cell) of every table of ``layout``, from the records only.

    ``run_records`` are run records (or {key: record}); records the layout does not name are
    ignored, a record it names but that is missing is an error.
    """
    if isinstance(run_records, Mapping):
        run_records = run_records.values()
    records: dict[str, Mapping] = {}
    for record in run_records:
        key = record.get("key")
        if key in records:
            raise ValueError(f"two records carry the key {key}")
        records[key] = record
    if not layout.tables:
        raise ValueError("the layout has no table; list tables in the config")
    blocks = [f"# {layout.title}", ""]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for table in layout.tables:
        rows = _table_rows(table, layout, records)
        blocks.append(_markdown_table(table, rows, layout))
        for label, cells in rows:
            for column, cell in zip(table.columns, cells):
                text = {"table": table.title, "row": label, "column": column.header, "metric": column.metric,
                        "kind": column.kind, "interval": table.interval, "note": cell.note}
                writer.writerow({
                    **{key: spreadsheet_safe(value) for key, value in text.items()},  # no cell runs as a formula
                    **{k: _csv_number(cell.stats.get(k)) for k in ("n", "mean", "plus_minus", "low", "high")},
                    "per_seed": ";".join(f"{s}={v!r}" for s, v in cell.per_seed.items()),
                })
    return "\n".join(blocks), buffer.getvalue()


def render_from_disk(out_dir: str | Path) -> tuple[str, str]:
    """Re-render OUT/table.md and OUT/table.csv from OUT/layout.json and OUT/runs/*.json."""
    out = Path(out_dir)
    return render_tables(read_records(out / "runs"), read_layout(out / "layout.json"))
