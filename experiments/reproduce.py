"""``python -m experiments reproduce``: every table of a sweep in one resumable command, into one report folder.

A sweep config lists the experiments in order, each a ``badpo experiment`` config (an arms x
seeds table or a fixed-offset cure) with overrides and the paper table it rebuilds. Each keeps its
own ``output_dir``, so its runs are the ones ``badpo experiment CONFIG`` logs, experiments that
share a folder share its runs, and a second invocation of either trains nothing. The report folder
gathers each table's files under REPORT/<table>/ and writes REPORT/README.md with every table,
the paper's beside it when a file of the paper's tables is given (one ``## <table>`` section each).

Before anything runs, the whole sweep is planned (:mod:`experiments.reproduce_plan`, what
``--plan`` prints): every run each table reads, keyed as the runner keys it, and whether it is
logged, made by an earlier table, or to run. Progress is one view over the whole sweep: each line
of the experiments' own progress is prefixed with the runs done / to run, the elapsed time and an
estimate of what is left (the mean wall time of this sweep's runs so far, times the runs left).
The report's first line says what the sweep did: the runs it trained and skipped and its wall
time, or, with ``--render-only``, how many logged runs it was rendered from.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from badpo.core.config import read_text
from badpo.core.jsonio import atomic_write_text
from badpo.experiment.pipeline import run_experiment
from badpo.experiment.runner import Backend
from experiments.cure.analysis import CureBackend, run_cure_experiment
from experiments.reproduce_plan import Measured, ReproduceConfig, SweepPlan, SweepTable, hms, plan_sweep

__all__ = ["Measured", "ReproduceConfig", "SweepProgress", "SweepTable", "run_reproduce"]

SHARED = ("corpus", "runs", "work", "reference_cache")  # what reuse_runs_of copies, file by file
REPORTED = ("table.md", "table.csv", "rates.png", "theta.png", "calibration.json")  # copied per table


class SweepProgress:
    """Runs done / to run over the whole sweep, elapsed time, and an estimate of what is left."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock, self.start = clock, clock()
        self.to_run = self.done = 0
        self.run_seconds = 0.0

    def planned(self, runs: int) -> None:
        self.to_run += runs

    def finished(self, seconds: float) -> None:
        self.done += 1
        self.run_seconds += seconds

    def status(self) -> str:
        elapsed = self.clock() - self.start
        left = max(self.to_run - self.done, 0)
        if left == 0:
            estimate = "nothing left"
        elif self.done:
            estimate = f"~{hms(self.run_seconds / self.done * left)} left"
        else:
            estimate = "no estimate until a run finishes"
        return f"{self.done}/{self.to_run} runs, {hms(elapsed)} elapsed, {estimate}"


# A finished run's progress line (runner.run_all, cure.run_cure_experiment) reads ": done in <s> s",
# possibly followed by "; N arm run(s) left, ETA ...".
_DONE = re.compile(r": done in ([0-9.]+) s(;|$)")


def run_reproduce(config: ReproduceConfig, experiment_backend: Backend, cure_backend: CureBackend,
                  log: Callable[[str], None] | None = None, render_only: bool = False,
                  clock: Callable[[], float] = time.perf_counter) -> dict:
    """Run every table of the sweep in order (what is logged is skipped), then write the report.

    Returns {"tables": {table: {"output_dir", "files", "wall_s", "trained", "runs"}}, "report":
    README path, "wall_s", "trained", "logged"} (``logged``: the records the tables read that were
    logged before the sweep began).
    """
    emit = log or (lambda text: print(text, flush=True))
    progress = SweepProgress(clock)
    report = Path(config.output_dir)

    def say(text: str) -> None:
        emit(f"[sweep {progress.status()}] {text}")

    plan = plan_sweep(config, experiment_backend, cure_backend)
    for index, table in enumerate(plan.tables):
        if table.missing:  # the sweep would stop there, after training every table before it
            raise FileNotFoundError(
                f"tables[{index}] ({table.entry.table}): needs runs that are not logged and that no earlier "
                f"table makes: {', '.join(r.label for r in table.missing)}; run its source experiment first or "
                "list that experiment's table before it")
    if not render_only:
        progress.planned(plan.to_run)
    report.mkdir(parents=True, exist_ok=True)
    say(f"plan: {len(plan.tables)} table(s), {plan.to_run} run(s) to run, {plan.logged} logged")

    def follow(text: str) -> None:
        done = _DONE.search(text)
        if done:
            progress.finished(float(done.group(1)))
        say(text)

    tables, outputs = {}, {t.entry.table: t.experiment.output_dir for t in plan.tables}
    for table in plan.tables:
        entry, experiment = table.entry, table.experiment
        began, trained = clock(), progress.done
        say(f"table {entry.table}: {entry.config} -> {experiment.output_dir}")
        if entry.reuse_runs_of is not None:
            _copy_runs(Path(outputs[entry.reuse_runs_of]), Path(experiment.output_dir))
        if table.cure:
            run_cure_experiment(experiment, cure_backend, experiment_backend, log=follow, render_only=render_only)
        else:
            run_experiment(experiment, experiment_backend, log=follow, render_only=render_only)
        files = _gather(_tables_folder(experiment, table.cure), report / entry.table)
        tables[entry.table] = {"output_dir": experiment.output_dir, "files": files,
                               "wall_s": round(clock() - began, 1), "trained": progress.done - trained,
                               "runs": len(table.records)}
    readme = report / "README.md"
    wall = clock() - progress.start
    atomic_write_text(readme, _readme(config, tables, _header(plan, progress.done, wall, render_only),
                                      render_only))
    say(f"wrote {readme}")
    return {"tables": tables, "report": str(readme), "wall_s": round(wall, 1), "trained": progress.done,
            "logged": plan.logged}


def _header(plan: SweepPlan, trained: int, wall: float, render_only: bool) -> str:
    """What the sweep did, as the report's first line says it."""
    if render_only:
        return (f"Rendered with `--render-only` from the {plan.logged} logged runs its tables read; "
                f"nothing was trained (rendering took {hms(wall)}).")
    return (f"This sweep trained {trained} run(s) and skipped {plan.logged} already logged, in "
            f"{hms(wall)} wall time.")


def _copy_runs(source: Path, target: Path) -> None:
    """Copy the runs logged under ``source`` that ``target`` lacks (a file that exists is kept)."""
    if source.resolve() == target.resolve():
        return
    for name in SHARED:
        for path in (source / name).rglob("*") if (source / name).is_dir() else ():
            copy = target / path.relative_to(source)
            if path.is_file() and not copy.exists():
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy)


def _tables_folder(experiment, cure: bool) -> Path:
    """Where an experiment wrote its tables and plots: ``OUT/report_dir`` (OUT without one; a cure
    has none)."""
    out = Path(experiment.output_dir)
    return out / experiment.report_dir if not cure and experiment.report_dir else out


def _gather(source: Path, target: Path) -> list[str]:
    """Copy a table's report files from where its experiment wrote them into the report."""
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in REPORTED:
        if (source / name).exists():
            shutil.copyfile(source / name, target / name)
            copied.append(str(target / name))
    return copied


def paper_sections(path: str | Path) -> dict[str, str]:
    """``## <table>`` sections of a Markdown file: table -> its text (the heading excluded)."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in read_text(path).splitlines():
        heading = re.fullmatch(r"## +(\S+)\s*", line)
        if heading:
            current = sections.setdefault(heading.group(1), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def _nested(markdown: str) -> str:
    """A table.md under its table's ``##`` section: its ``#`` title and ``##`` tables go two levels
    down (``###``, ``####``), beside the ``### The paper's table`` that follows."""
    return re.sub(r"(?m)^(#{1,4}) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", markdown)


def _cited(finding: str, paper_section: str) -> str:
    """The finding, ending with the source its paper table's caption gives (``(paper, Table N)``,
    written by experiments/scripts/paper_tables.py), unless it cites the paper already."""
    source = re.search(r"\(paper, Table \d+\)", paper_section.split("\n", 1)[0])
    if source is None or "(paper," in finding:
        return finding
    return f"{finding.rstrip('.')} {source.group(0)}."


def _readme(config: ReproduceConfig, tables: dict, header: str, render_only: bool) -> str:
    paper = paper_sections(config.paper_tables) if config.paper_tables else {}
    lines = ["# python -m experiments reproduce", "",
             f"Every table of this sweep, rebuilt from its logged runs. {header}", ""]
    for entry in config.tables:
        done = tables[entry.table]
        runs = (f"rendered from its {done['runs']} logged runs" if render_only else
                f"{done['trained']} of its {done['runs']} runs trained in this sweep, {done['wall_s']:.0f} s")
        records = f"; records in `{config.records}`" if config.records else ""
        lines += [f"## {entry.table}", "",
                  f"`badpo experiment {' '.join([entry.config, *entry.overrides])}` "
                  f"(runs in `{done['output_dir']}`; {runs}{records})", ""]
        if entry.finding:
            lines += [f"**What counts as reproduced** (the paper's finding): "
                      f"{_cited(entry.finding, paper.get(entry.table, ''))}", ""]
        table = Path(config.output_dir) / entry.table / "table.md"
        lines += [_nested(table.read_text(encoding="utf-8").strip()) if table.exists() else "(no table.md)", ""]
        if entry.table in paper:
            lines += ["### The paper's table", "", paper[entry.table], ""]
    return "\n".join(lines) + "\n"
