"""``badpo reproduce``: every table of a sweep in one resumable command, into one report folder.

A sweep config lists the experiments in order, each a ``badpo experiment`` config (an arms x
seeds table or a fixed-offset cure) with overrides and the paper table it rebuilds. Each keeps its
own ``output_dir``, so its runs are the ones ``badpo experiment CONFIG`` logs, experiments that
share a folder share its runs, and a second invocation of either trains nothing. The report folder
gathers each table's files under REPORT/<table>/ and writes REPORT/README.md with every table,
the paper's beside it when a file of the paper's tables is given (one ``## <table>`` section each).

Progress is one view over the whole sweep: each line of the experiments' own progress is prefixed
with the runs done / to run, the elapsed time and an estimate of what is left (the mean wall time
of this sweep's runs so far, times the runs left). An arms x seeds experiment is planned before
anything trains, so its runs are counted from the start; a cure plans its runs from its source's
records, so its runs are counted when it starts.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from badpo.core.config import ConfigError, load_config, read_text
from badpo.core.jsonio import atomic_write_text
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from badpo.experiment.cure.analysis import CureStages, is_cure_config, load_cure_config, run_cure_experiment
from badpo.experiment.pipeline import run_experiment
from badpo.experiment.runner import Stages, plan_experiment, prepare_corpus

__all__ = ["ReproduceConfig", "SweepProgress", "SweepTable", "run_reproduce"]

SHARED = ("corpus", "runs", "work", "reference_cache")  # what reuse_runs_of copies, file by file
REPORTED = ("table.md", "table.csv", "rates.png", "theta.png", "calibration.json")  # copied per table


@dataclass(frozen=True)
class SweepTable:
    """One table of the sweep: the experiment config that rebuilds it."""

    table: str  # the paper's table label without ``tab:`` (names_v3, multipref, ...): REPORT/<table>/
    config: str  # a `badpo experiment` config: a YAML path or a built-in name
    overrides: list[str] = field(default_factory=list)  # KEY=VALUE overrides of that config
    reuse_runs_of: str | None = None  # an earlier table of the sweep whose logged runs are copied in
    # first: runs with the same key (same corpus, reference, training) are re-scored, not retrained


@dataclass(frozen=True)
class ReproduceConfig:
    """The sweep: its tables in order, the report folder, the paper's numbers."""

    output_dir: str = "runs/reproduce"  # the report folder (each experiment keeps its own output_dir)
    paper_tables: str | None = None  # a Markdown file with a `## <table>` section per paper table
    tables: list[SweepTable] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.tables:
            raise ConfigError("tables: list at least one experiment")
        names = [t.table for t in self.tables]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(f"tables: each table once; repeated: {repeated}")
        for i, entry in enumerate(self.tables):
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", entry.table):
                raise ConfigError(f"tables[{i}].table: {entry.table!r} must be a plain folder name")
            if entry.reuse_runs_of is not None and entry.reuse_runs_of not in names[:i]:
                raise ConfigError(f"tables[{i}].reuse_runs_of: {entry.reuse_runs_of!r} is not a table "
                                  f"listed before it ({names[:i]})")


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
            estimate = f"~{_clock(self.run_seconds / self.done * left)} left"
        else:
            estimate = "no estimate until a run finishes"
        return f"{self.done}/{self.to_run} runs, {_clock(elapsed)} elapsed, {estimate}"


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}"


# A finished run's progress line (runner.run_all, cure.run_cure_experiment) reads ": done in <s> s",
# possibly followed by "; N arm run(s) left, ETA ..."; a cure's "running ..." line is a run it had
# not counted before.
_DONE = re.compile(r": done in ([0-9.]+) s(;|$)")
_RUNNING = re.compile(r": running \.\.\.$")


def _to_run(config: ExperimentConfig, stages: Stages, root: Path) -> set[tuple[Path, str]]:
    """The runs an arms x seeds experiment will train, as (folder, run key), of runs not logged
    yet (its corpus is built or found here, as the experiment itself would). ``root`` is the
    folder its runs are shared with (its own, or that of the table it reuses runs of), so a run
    two tables share is counted once."""
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = plan_experiment(config, stages, prepare_corpus(config, stages, out, lambda text: None))
    logged = lambda folder, key: (folder / "runs" / f"{key}.json").exists()  # noqa: E731
    return {(root, p.key) for p in (plan.reference, *plan.runs)
            if not logged(out.resolve(), p.key) and not logged(root, p.key)}


def run_reproduce(config: ReproduceConfig, experiment_stages: Stages, cure_stages: CureStages,
                  log: Callable[[str], None] | None = None, render_only: bool = False,
                  clock: Callable[[], float] = time.perf_counter) -> dict:
    """Run every table of the sweep in order (what is logged is skipped), then write the report.

    Returns {"tables": {table: {"output_dir", "files", "wall_s"}}, "report": README path,
    "wall_s"}.
    """
    emit = log or (lambda text: print(text, flush=True))
    progress = SweepProgress(clock)
    report = Path(config.output_dir)

    def say(text: str) -> None:
        emit(f"[sweep {progress.status()}] {text}")

    loaded, to_run, roots = [], set(), {}  # roots: table -> the folder whose runs it shares
    for i, entry in enumerate(config.tables):
        path = experiment_config_path(entry.config)
        if not path.exists():
            raise ConfigError(f"tables[{i}].config: no experiment config at {str(path)!r}")
        cure = is_cure_config(path)
        experiment = (load_cure_config(path, entry.overrides) if cure
                      else load_config(ExperimentConfig, path, entry.overrides))
        own = Path(experiment.output_dir).resolve()
        roots[entry.table] = roots[entry.reuse_runs_of] if entry.reuse_runs_of else own
        if not cure and not render_only:
            to_run |= _to_run(experiment, experiment_stages, roots[entry.table])
        loaded.append((entry, cure, experiment))
    progress.planned(len(to_run))
    report.mkdir(parents=True, exist_ok=True)
    say(f"plan: {len(loaded)} table(s); the cures' runs are counted when each starts")

    def follow(cure: bool) -> Callable[[str], None]:
        def line(text: str) -> None:
            if cure and _RUNNING.search(text):
                progress.planned(1)
            done = _DONE.search(text)
            if done:
                progress.finished(float(done.group(1)))
            say(text)
        return line

    tables, outputs = {}, {entry.table: experiment.output_dir for entry, _, experiment in loaded}
    for entry, cure, experiment in loaded:
        began = clock()
        say(f"table {entry.table}: {entry.config} -> {experiment.output_dir}")
        if entry.reuse_runs_of is not None:
            _copy_runs(Path(outputs[entry.reuse_runs_of]), Path(experiment.output_dir))
        if cure:
            run_cure_experiment(experiment, cure_stages, experiment_stages, log=follow(True),
                                render_only=render_only)
        else:
            run_experiment(experiment, experiment_stages, log=follow(False), render_only=render_only)
        files = _gather(_tables_folder(experiment, cure), report / entry.table)
        tables[entry.table] = {"output_dir": experiment.output_dir, "files": files,
                               "wall_s": round(clock() - began, 1)}
    readme = report / "README.md"
    atomic_write_text(readme, _readme(config, tables, progress))
    say(f"wrote {readme}")
    return {"tables": tables, "report": str(readme), "wall_s": round(clock() - progress.start, 1)}


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


def _readme(config: ReproduceConfig, tables: dict, progress: SweepProgress) -> str:
    paper = paper_sections(config.paper_tables) if config.paper_tables else {}
    lines = ["# badpo reproduce", "",
             f"Every table of this sweep, rebuilt from its logged runs ({progress.status()}).", ""]
    for entry in config.tables:
        done = tables[entry.table]
        lines += [f"## {entry.table}", "",
                  f"`badpo experiment {' '.join([entry.config, *entry.overrides])}` "
                  f"(runs in `{done['output_dir']}`; {done['wall_s']:.0f} s in this sweep)", ""]
        table = Path(config.output_dir) / entry.table / "table.md"
        lines += [_nested(table.read_text(encoding="utf-8").strip()) if table.exists() else "(no table.md)", ""]
        if entry.table in paper:
            lines += ["### The paper's table", "", paper[entry.table], ""]
    return "\n".join(lines) + "\n"
