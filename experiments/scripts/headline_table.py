"""README.md's headline table (issue 74), rendered from the committed run records alone, so that a
figure on the front page is a function of a record and cannot outlive it.

    python experiments/scripts/headline_table.py            # print the table
    python experiments/scripts/headline_table.py --check    # exit 1 where README.md's table differs
    python experiments/scripts/headline_table.py --write    # rewrite README.md between its markers

Each row reads one experiment: a folder holding ``layout.json`` and ``runs/`` (every seed, one
reference), or one such folder a seed (each seed with its own reference). Per seed it takes DPO's
shift from the reference and the share of it that each default BA-DPO arm (pooled and θ̄+ε_k, θ at
the library's default start) removes against DPO of the same seed, as the tables' "Removed" column
does (:func:`badpo.comparing.over_seeds.removal_per_seed`). A cell is the min–max over the row's
seeds, readouts and arms: the spread of the per-seed values, never a range of means.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from badpo.comparing.over_seeds import removal_per_seed
from badpo.experiment.records import read_records
from badpo.experiment.tables import metric_value, read_layout

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- headline:start -->", "<!-- headline:end -->"
DEFAULT_ARMS = ("ba_dpo_pooled", "ba_dpo_shared_mean")  # the two BA-DPO variants the demo trains
SMOL = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class Row:
    """One line of the table: which readouts of which records."""

    readout: str  # what the row measures, as the table names it
    world: str  # the model and the world it trained on
    metrics: tuple[str, ...]  # readout paths in the records, pooled in the row
    folder: str  # the records, relative to the repository; "{seed}" where each seed has its own folder
    seeds: tuple[int, ...] = ()  # the seeds of a per-seed folder; () where one folder holds every seed
    digits: int = 2  # of DPO's shift
    summary: str = ""  # a derived record the row's figures also appear in (linked beside the records)
    arms: tuple[str, ...] = ()  # the layout's arms the row reads (by name); (): the default BA-DPO arms


NAMES = ("names.first_name.woman_coded", "names.first_name.black_coded")
MULTIPREF = "results/level_rule/smol_multipref_logodds_seed{seed}"
# the LD-DPO runs beside DPO (seed 42's world sampled again on another CPU, its readouts those of the
# committed world to 2e-5; seeds 123 and 456 the committed world itself: results/ld_dpo/README.md)
LD_DPO = "results/ld_dpo/smol_multipref_seed{seed}"
ROWS = (
    Row("First-name rates (woman- and black-coded)", "the demo: tiny model, tiny signed world", NAMES,
        "results/demo"),
    Row("First-name rates (woman- and black-coded)", f"{SMOL}, smol-signed (names)", NAMES,
        "results/level_rule/cpu/smol_names/seed{seed}", (42, 123, 456)),
    Row("Markdown, body fixed: p(md) \\| body", f"{SMOL}, smol-multipref", ("candidates.markdown",),
        MULTIPREF, (42, 123, 456, 789)),
    Row("Length, body fixed: p(long) \\| body", f"{SMOL}, smol-multipref", ("candidates.long",),
        MULTIPREF, (42, 123, 456, 789)),
    Row("Length, body fixed: log-odds of the long candidates (mean over prompts)", f"{SMOL}, smol-multipref",
        ("candidates.long_log_odds",), MULTIPREF, (42, 123, 456, 789), digits=1,
        summary="results/level_rule/logodds_removal.json"),
    *(Row(f"Length, body fixed: log-odds of the long candidates, by LD-DPO α {alpha} (TRL's ld_alpha; no attribute "
          "declared)", f"{SMOL}, smol-multipref", ("candidates.long_log_odds",), LD_DPO, (42, 123, 456),
          digits=1, arms=(f"LD-DPO (α {alpha})",), summary="results/ld_dpo/README.md") for alpha in ("0.5", "0")),
)


def _value(record: dict, metric: str) -> float:
    """A readout of a record as a finite number; a record without it is refused, never skipped."""
    value = metric_value(record, metric)
    if not isinstance(value, float) or not math.isfinite(value):
        raise ValueError(f"run {record.get('key')}: readout {metric!r} is {value!r}, not a number")
    return value


def is_default(record: dict) -> bool:
    """Whether a BA-DPO record ran with θ's default start and rule: the README's claim is about the
    default, and a folder may hold other arms of the same method (another rule for θ)."""
    bias = record.get("settings", {}).get("bias", {})
    return bias.get("init") == "reference" and bias.get("level") in (None, "adam") and not bias.get("fixed_offset")


def readouts(folder: Path, metric: str, arms: tuple[str, ...] = ()) -> dict[int, dict[str, float]]:
    """{seed: {"reference": r, "DPO": d, arm name: a}} of one experiment folder, for the default
    BA-DPO arms or the arms named."""
    layout = read_layout(folder / "layout.json")
    records = read_records(folder / "runs")
    missing = [key for key in [layout.reference_key, *(r.key for a in layout.arms for r in a.runs)]
               if key not in records]
    if missing:
        raise ValueError(f"{folder}: the layout names runs with no record: {missing}")
    reference = _value(records[layout.reference_key], metric)
    found: dict[int, dict[str, float]] = {}
    for arm in layout.arms:
        named = arm.name in arms if arms else arm.method in DEFAULT_ARMS
        if arm.name != layout.baseline and not named:
            continue
        for run in arm.runs:
            record = records[run.key]
            if arm.name != layout.baseline and not arms and not is_default(record):
                continue
            label = "DPO" if arm.name == layout.baseline else arm.name
            found.setdefault(run.seed, {"reference": reference})[label] = _value(record, metric)
    return found


def folders(row: Row, root: Path) -> list[tuple[Path, tuple[int, ...]]]:
    """(folder, the seeds it must hold) of a row; () where its layout says which."""
    if "{seed}" not in row.folder:
        return [(root / row.folder, ())]
    return [(root / row.folder.format(seed=seed), (seed,)) for seed in row.seeds]


def figures(row: Row, root: Path = ROOT) -> dict:
    """The row's per-seed values: {"seeds", "shift": [DPO - reference], "removed": [share]} over
    every seed, readout and default arm."""
    seeds: set[int] = set()
    shift: list[float] = []
    removed: list[float] = []
    for metric in row.metrics:
        by_seed: dict[int, dict[str, float]] = {}
        for folder, expected in folders(row, root):
            found = readouts(folder, metric, row.arms)
            if expected and set(found) != set(expected):
                raise ValueError(f"{folder}: holds seeds {sorted(found)}, expected {list(expected)}")
            if set(found) & set(by_seed):
                raise ValueError(f"{folder}: seeds {sorted(set(found) & set(by_seed))} are in another folder too")
            by_seed.update(found)
        for seed, values in by_seed.items():
            arms = sorted(set(values) - {"reference", "DPO"})
            if "DPO" not in values or len(arms) != len(row.arms or DEFAULT_ARMS):
                raise ValueError(f"{row.folder}, seed {seed}: runs {sorted(values)}; expected DPO and "
                                 f"{list(row.arms) or 'both BA-DPO arms'}")
        reference = {seed: values["reference"] for seed, values in by_seed.items()}
        dpo = {seed: values["DPO"] for seed, values in by_seed.items()}
        shift += [dpo[seed] - reference[seed] for seed in by_seed]
        for arm in sorted({name for values in by_seed.values() for name in values} - {"reference", "DPO"}):
            arm_values = {seed: values[arm] for seed, values in by_seed.items()}
            removed += removal_per_seed(dpo, arm_values, reference)["per_seed"].values()
        seeds |= set(by_seed)
    return {"seeds": sorted(seeds), "shift": shift, "removed": removed}


def _records_cell(row: Row) -> str:
    """Links to the row's record folders (a family of per-seed folders as seedS, one link a seed)."""
    if "{seed}" not in row.folder:
        cell = f"[`{row.folder}/`]({row.folder}/)"
    else:
        links = ", ".join(f"[{seed}]({row.folder.format(seed=seed)}/)" for seed in row.seeds)
        cell = f"`{row.folder.format(seed='S')}/`: {links}"
    if row.summary:
        cell += f"; [{Path(row.summary).name}]({row.summary})"
    return cell


def render_row(row: Row, root: Path = ROOT) -> str:
    """The Markdown line of one row."""
    found = figures(row, root)
    low, high = (f"{v:+.{row.digits}f}" for v in (min(found["shift"]), max(found["shift"])))
    shift = low if low == high else f"{low} to {high}"  # one seed: its value, not a range
    low, high = (f"{v * 100:.0f}" for v in (min(found["removed"]), max(found["removed"])))
    removed = f"{low}%" if low == high else f"{low}–{high}%"
    seeds = ", ".join(str(seed) for seed in found["seeds"])
    return f"| {row.readout} | {row.world} | {seeds} | {shift} | {removed} | {_records_cell(row)} |"


HEADER = ("| Readout | Model, world | Seeds | DPO's shift per seed | Removed per seed | Records |",
          "|:--|:--|:--|--:|--:|:--|")
NOTE = ("Per seed, against DPO of the same seed and its reference (the demo trains one reference for every",
        "seed, the SmolLM2 runs one a seed): DPO's shift is DPO's readout less the reference's, and Removed is",
        "(DPO − arm) / (DPO − reference), 100% at the reference, 0% at DPO. Each cell is the min–max over the",
        "row's seeds, its readouts and both default BA-DPO arms (pooled and θ̄+ε_k, θ at the library's default",
        "start), or the one LD-DPO arm a row names, not a range of means. Rendered from the run records by",
        "`python experiments/scripts/headline_table.py --write`. <!-- not measured: definitions -->")


def render(root: Path = ROOT) -> str:
    """The table and its note, as they stand between the README's markers."""
    return "\n".join([*HEADER, *(render_row(row, root) for row in ROWS), "", *NOTE]) + "\n"


def between(readme: str) -> str:
    """The text between the README's markers (less the blank line each side)."""
    if readme.count(START) != 1 or readme.count(END) != 1 or readme.index(START) > readme.index(END):
        raise ValueError(f"README.md: expected one {START} before one {END}")
    return readme.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def spliced(readme: str, table: str) -> str:
    """The README with ``table`` between its markers, everything else as it was."""
    between(readme)  # the markers are there, once each
    head, rest = readme.split(START, 1)
    return f"{head}{START}\n\n{table}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite README.md's table from the records")
    action.add_argument("--check", action="store_true", help="exit 1 where README.md's table differs")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = parser.parse_args(argv)
    table = render()
    if not (args.write or args.check):
        print(table, end="")
        return 0
    readme = args.readme.read_text(encoding="utf-8")
    if args.check:
        same = between(readme) == table
        print(f"{args.readme}: the headline table {'matches' if same else 'differs from'} the records")
        return 0 if same else 1
    args.readme.write_text(spliced(readme, table), encoding="utf-8")
    print(f"{args.readme}: the headline table rewritten from the records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
