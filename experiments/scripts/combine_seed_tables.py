"""One table over seeds from per-seed report folders, for experiments where each seed has its own
reference (``seeds=[S] reference.runtime.seed=S``, one ``badpo experiment`` call per seed): the
runner trains one reference per output folder, so each call renders a one-seed table.

    python experiments/scripts/combine_seed_tables.py OUT 42=RUN42/level_rule 123=RUN123/level_rule ...

Each report folder holds the ``table.csv`` the runner wrote for the seed named before it; a seed
may name several (reports of other arms over the same runs: their shared rows must agree to 1e-4,
the float noise of a rerun on the GPU). For every cell the per-seed values
(its ``per_seed`` column; removals are per seed against DPO of the same seed, as the runner
computes them) are pooled: OUT/table.md shows the mean, the 95% Student-t interval over seeds and
the range, OUT/table.csv every pooled value. The reference rows are averaged too (one reference a
seed). A cell with no value at some seed is shown with the seeds it has (``n``).
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from badpo.comparing.over_seeds import mean_ci

FIELDS = ("table", "row", "column", "metric", "kind", "n", "mean", "plus_minus", "low", "high", "per_seed")


def read_cells(seed: str, folder: Path) -> list[dict]:
    """The rows of FOLDER/table.csv, each with its value at SEED as {seed: value} (none if empty)."""
    path = folder / "table.csv"
    if not path.is_file():
        raise SystemExit(f"{path}: no such file (a report folder of `badpo experiment`)")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        pairs = dict(part.split("=", 1) for part in row.get("per_seed", "").split(";") if part)
        seeds = {key.rsplit("/", 1)[-1] for key in pairs}  # ROW/SEED: a cell pooled over runs (the ceiling)
        if seeds - {seed}:
            raise SystemExit(f"{path}: holds seed(s) {sorted(seeds)}, named as seed {seed}")
        if not pairs and row.get("n") == "1" and row.get("mean"):
            pairs = {seed: row["mean"]}  # the reference: one value, no seed
        row["values"] = {key: float(value) for key, value in pairs.items()}
    return rows


def combine(reports: list[tuple[str, Path]]) -> list[dict]:
    """The cells of every (seed, folder) pooled by (table, row, column, metric, kind), in the order
    first seen."""
    pooled: dict[tuple, dict] = {}
    for seed, folder in reports:
        for row in read_cells(seed, folder):
            key = (row["table"], row["row"], row["column"], row["metric"], row["kind"])
            cell = pooled.setdefault(key, {name: row[name] for name in FIELDS[:5]} | {"values": {}})
            for s, value in row["values"].items():
                known = cell["values"].setdefault(s, value)
                if abs(known - value) > 1e-4 * max(1.0, abs(value)):
                    raise SystemExit(f"{folder}: {row['row']!r} / {row['column']!r} at seed {s} is {value!r}, "
                                     f"another report of that seed has {known!r}")
    for cell in pooled.values():
        per_seed: dict[str, list[float]] = {}
        for key, value in cell["values"].items():
            per_seed.setdefault(key.rsplit("/", 1)[-1], []).append(value)
        cell["values"] = {seed: sum(v) / len(v) for seed, v in per_seed.items()}
        values = list(cell["values"].values())
        stats = mean_ci(values) if values else {"mean": math.nan, "half_width": math.nan, "n": 0}
        cell.update(n=len(values), mean=stats["mean"], plus_minus=stats["half_width"],
                    low=min(values, default=math.nan), high=max(values, default=math.nan),
                    per_seed=";".join(f"{s}={v!r}" for s, v in cell["values"].items()))
    return list(pooled.values())


def _format(cell: dict) -> str:
    if not cell["n"]:
        return "—"
    scale, unit, digits = (100.0, "%", 0) if cell["kind"] == "removed" else (1.0, "", 3)
    mean = f"{cell['mean'] * scale:.{digits}f}{unit}"
    if cell["n"] == 1:
        return mean
    return (f"{mean} ± {cell['plus_minus'] * scale:.{digits}f} "
            f"({cell['low'] * scale:.{digits}f}–{cell['high'] * scale:.{digits}f})")


def markdown(cells: list[dict], seeds: int) -> str:
    """One Markdown table per source table: rows by row label, columns by column header."""
    lines = []
    for table in dict.fromkeys(c["table"] for c in cells):
        mine = [c for c in cells if c["table"] == table]
        columns = list(dict.fromkeys((c["column"], c["metric"], c["kind"]) for c in mine))
        lines += [f"## {table}", "", "| Method | " + " | ".join(h.replace("|", "\\|") for h, _, _ in columns) + " |",
                  "|:--|" + "--:|" * len(columns)]
        for row in dict.fromkeys(c["row"] for c in mine):
            found = {(c["column"], c["metric"], c["kind"]): c for c in mine if c["row"] == row}
            lines.append(f"| {row} | " + " | ".join(_format(found[k]) if k in found else "" for k in columns) + " |")
        lines.append("")
    lines.append(f"Mean ± 95% Student-t interval over {seeds} seeds (range in brackets), each seed with its own "
                 "reference; Removed per seed against DPO of the same seed, then averaged.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("reports", nargs="+", help="SEED=FOLDER, FOLDER holding that seed's table.csv")
    args = parser.parse_args()
    reports = []
    for item in args.reports:
        seed, _, folder = item.partition("=")
        if not folder:
            parser.error(f"{item!r}: expected SEED=FOLDER")
        reports.append((seed, Path(folder)))
    cells = combine(reports)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(markdown(cells, len({s for s, _ in reports})), encoding="utf-8")
    with (args.out / "table.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(cells)
    print(f"wrote {args.out / 'table.md'}, {args.out / 'table.csv'}")


if __name__ == "__main__":
    main()
