"""``python -m experiments reproduce --plan``: what a sweep will train, table by table, before anything runs.

The plan keys every run as the sweep will (:func:`badpo.experiment.runner.plan_experiment` for an
arms x seeds table, :func:`experiments.cure.plan.plan_cure` for a cure), trains nothing and
builds nothing (a corpus not built yet is keyed by a stand-in: :func:`plan_unbuilt`). A run is

- *logged* when its record is in its table's folder or in a folder that table reuses runs of
  (``reuse_runs_of``, followed back: the sweep copies those records in before the table runs);
- *made earlier* when an earlier table of the sweep makes it into the same shared folder;
- *to run* when the table makes it; *missing* when it is none of these, which stops the sweep.

Runs are shared by (folder, key): the folder of the first table of a ``reuse_runs_of`` chain
stands for the whole chain. The estimate is each table's runs to run times its wall time per run
in a measured sweep (the sweep config's ``measured`` and ``measured_on``), and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError, load_config
from badpo.core.outputs import check_writable_folder
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from badpo.experiment.runner import Backend, PlannedRecord, plan_unbuilt
from experiments.cure.analysis import CureBackend
from experiments.cure.config import is_cure_config, load_cure_config
from experiments.cure.plan import plan_cure

__all__ = ["Measured", "SweepTable", "ReproduceConfig", "TablePlan", "SweepPlan", "plan_sweep", "hms"]


@dataclass(frozen=True)
class Measured:
    """What one table took in a measured sweep: ``--plan`` estimates from it."""

    seconds: float  # the table's wall time in that sweep
    runs: int  # the runs it made there (a run another table made first is not counted)

    def __post_init__(self) -> None:
        if self.seconds < 0 or self.runs < 0:
            raise ConfigError(f"measured: seconds and runs must be >= 0, got {self.seconds} and {self.runs}")


@dataclass(frozen=True)
class SweepTable:
    """One table of the sweep: the experiment config that rebuilds it."""

    table: str  # the paper's table label without ``tab:`` (names_v3, multipref, ...): REPORT/<table>/
    config: str  # a `badpo experiment` config: a YAML path or a built-in name
    overrides: list[str] = field(default_factory=list)  # KEY=VALUE overrides of that config
    # an earlier table whose logged runs are copied in first (a run of the same key is re-scored, not retrained)
    reuse_runs_of: str | None = None
    finding: str | None = None  # the paper's finding this table must show to count as reproduced
    measured: Measured | None = None  # its wall time and runs in the sweep that measured_on names


@dataclass(frozen=True)
class ReproduceConfig:
    """The sweep: its tables in order, the report folder, the paper's numbers."""

    output_dir: str = "runs/reproduce"  # the report folder (each experiment keeps its own output_dir)
    paper_tables: str | None = None  # a Markdown file with a `## <table>` section per paper table
    tables: list[SweepTable] = field(default_factory=list)
    # the sweep the tables' `measured` come from: machine, threads, commit, date, where it is recorded
    measured_on: str | None = None
    # where this sweep's run records are committed (a results/ path): the report cites it beside each
    # table's figures, and each finding cites its table in the paper (docs/figures cite their source)
    records: str | None = None

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
            if entry.measured is not None and not self.measured_on:
                raise ConfigError(f"tables[{i}].measured: say in measured_on which sweep measured it "
                                  "(machine, threads, commit, where it is recorded)")


def hms(seconds: float) -> str:
    """H:MM:SS."""
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}"


@dataclass(frozen=True)
class TablePlan:
    """One table: every record it reads, and what becomes of each."""

    entry: SweepTable
    cure: bool
    experiment: Any = field(repr=False)  # its ExperimentConfig or CureConfig, overrides applied
    records: tuple[PlannedRecord, ...]
    logged: tuple[PlannedRecord, ...]
    made_earlier: tuple[tuple[PlannedRecord, str], ...]  # (record, the earlier table that makes it)
    to_run: tuple[PlannedRecord, ...]
    missing: tuple[PlannedRecord, ...]
    corpus_built: bool | None  # None: a cure (its corpus is its source experiment's)

    @property
    def estimate_s(self) -> float | None:
        """Runs to run x the table's measured seconds per run; None without a measurement."""
        measured = self.entry.measured
        if not self.to_run:
            return 0.0
        if measured is None or measured.runs == 0:
            return None
        return len(self.to_run) * measured.seconds / measured.runs


@dataclass(frozen=True)
class SweepPlan:
    """Every table's plan, where the report lands, and what the estimate rests on."""

    tables: tuple[TablePlan, ...]
    report: Path
    measured_on: str | None
    logged: int  # distinct records the tables read that are logged and no table makes

    @property
    def to_run(self) -> int:
        return sum(len(t.to_run) for t in self.tables)

    @property
    def estimate_s(self) -> float:
        """The sum over the tables that have an estimate."""
        return sum(t.estimate_s or 0.0 for t in self.tables)

    def text(self) -> str:
        """What ``python -m experiments reproduce --plan`` prints."""
        lines = ["Plan (nothing trained, nothing built):"]
        for t in self.tables:
            out = t.experiment.output_dir
            parts = [f"{len(t.logged)} logged"]
            made = sorted({table for _, table in t.made_earlier})
            if made:
                parts.append(f"{len(t.made_earlier)} made earlier by {', '.join(made)}")
            parts.append(f"{len(t.to_run)} to run")
            estimate = t.estimate_s
            parts.append("no estimate (no measured time)" if estimate is None else f"~{hms(estimate)}")
            corpus = "; corpus to build" if t.corpus_built is False and t.entry.reuse_runs_of is None else ""
            lines.append(f"- {t.entry.table} ({t.entry.config} -> {out}): {len(t.records)} runs: "
                         f"{', '.join(parts)}{corpus}")
            if t.to_run:
                lines.append(f"    to run: {_grouped(r.label for r in t.to_run)}")
            if t.missing:
                lines.append(f"    missing (the sweep stops at this table): {_grouped(r.label for r in t.missing)}")
        unmeasured = any(t.estimate_s is None for t in self.tables)
        about = "" if self.measured_on is None else f"; about {hms(self.estimate_s)}" + (
            " for the tables estimated" if unmeasured else "")
        lines.append(f"In all: {self.to_run} runs to run, {self.logged} logged{about}.")
        lines.append(self.basis())
        lines.append(f"Report: {self.report / 'README.md'} (each table's files in {self.report}/<table>/).")
        return "\n".join(lines) + "\n"

    def basis(self) -> str:
        """What the estimate rests on, in one line."""
        unmeasured = [t.entry.table for t in self.tables if t.estimate_s is None]
        if self.measured_on is None:
            return "Estimate: none (the sweep config has no measured times)."
        text = (f"Estimate: each table's runs to run x its wall time per run in the sweep measured on "
                f"{self.measured_on}; another machine, thread count or load scales it")
        return text + (f"; not estimated: {', '.join(unmeasured)}." if unmeasured else ".")


def _grouped(labels: Iterable[str]) -> str:
    """"DPO seed 42", "DPO seed 123" -> "DPO seeds 42, 123" (order kept)."""
    groups: dict[str, list[str]] = {}
    for label in labels:
        name, _, seed = label.rpartition(" seed ")
        groups.setdefault(name if name else label, []).append(seed if name else "")
    return "; ".join(name if seeds == [""] else f"{name} seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}"
                     for name, seeds in groups.items())


def load_table(index: int, entry: SweepTable) -> tuple[bool, Any]:
    """(whether it is a cure, its config with the entry's overrides)."""
    path = experiment_config_path(entry.config)
    if not path.exists():
        raise ConfigError(f"tables[{index}].config: no experiment config at {str(path)!r}")
    if is_cure_config(path):
        return True, load_cure_config(path, entry.overrides)
    return False, load_config(ExperimentConfig, path, entry.overrides)


def _records(cure: bool, experiment: Any, experiment_backend: Backend, cure_backend: CureBackend | None,
             chain: list[Path], chains: dict[Path, list[Path]]) -> tuple[list[PlannedRecord], bool | None]:
    if cure:
        if cure_backend is None:
            raise ConfigError(f"{experiment.name}: a cure table needs the cure's backend to be planned")
        return plan_cure(experiment, cure_backend, experiment_backend, chains), None
    plan, built = plan_unbuilt(experiment, experiment_backend, chain[1:])
    out = Path(experiment.output_dir)
    return [PlannedRecord("reference" if p.kind == "reference" else f"{p.arm} seed {p.seed}", out, p.key, False)
            for p in (plan.reference, *plan.runs)], built


def plan_sweep(config: ReproduceConfig, experiment_backend: Backend, cure_backend: CureBackend | None) -> SweepPlan:
    """The plan of every table of ``config``, in order (see the module's docstring)."""
    if Path(config.output_dir).exists() and not Path(config.output_dir).is_dir():  # --plan says so too
        raise ConfigError(f"output_dir: {config.output_dir} is a file; the report is written into a folder")
    try:  # a folder under a file (afile/sub) cannot be made either; permissions are the run's to meet
        check_writable_folder(config.output_dir, "output_dir:", config.output_dir)
    except NotADirectoryError as error:
        raise ConfigError(str(error)) from None
    except PermissionError:
        pass
    chains: dict[str, list[Path]] = {}  # table -> its folder, then those it reuses runs of
    owner: dict[Path, str] = {}  # a table's own folder -> the first table in it
    made: dict[tuple[Path, str], str] = {}  # (shared folder, key) -> the table that makes it
    logged_ids: set[tuple[Path, str | None]] = set()
    tables = []
    for index, entry in enumerate(config.tables):
        cure, experiment = load_table(index, entry)
        own = Path(experiment.output_dir).resolve()
        chains[entry.table] = [own, *(chains[entry.reuse_runs_of] if entry.reuse_runs_of else [])]
        owner.setdefault(own, entry.table)
        records, built = _records(cure, experiment, experiment_backend, cure_backend, chains[entry.table],
                                  {folder: chains[table] for folder, table in owner.items()})
        sort: dict[str, list] = {"logged": [], "earlier": [], "to_run": [], "missing": []}
        for record in records:
            folder = record.folder.resolve()
            chain = chains.get(owner.get(folder, ""), [folder]) if folder != own else chains[entry.table]
            shared = (chain[-1], record.key)
            if record.key is not None and (record.logged or any((f / "runs" / f"{record.key}.json").exists()
                                                                for f in chain)):
                sort["logged"].append(record)
                logged_ids.add(shared)
            elif record.key is not None and shared in made:
                sort["earlier"].append((record, made[shared]))
            elif record.made_here:
                sort["to_run"].append(record)
                if record.key is not None:
                    made[shared] = entry.table
            else:
                sort["missing"].append(record)
        tables.append(TablePlan(entry, cure, experiment, tuple(records), tuple(sort["logged"]),
                                tuple(sort["earlier"]), tuple(sort["to_run"]), tuple(sort["missing"]), built))
    # a run logged in one folder of a chain and made in another (a copy) counts as made
    return SweepPlan(tuple(tables), Path(config.output_dir), config.measured_on, len(logged_ids - set(made)))
