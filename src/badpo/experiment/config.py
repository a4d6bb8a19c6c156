"""The experiment config: a corpus, one reference, arms x seeds, the readouts, the tables.

An experiment is what one table of the paper needs (Reproducibility statement: "every reported
number derives from a logged run keyed by (method, parameters, seed)"). The settings of the two
training stages stay plain mappings here (``reference``, ``train``, each arm's ``params``): the
runner hands them to its backend's resolvers, which fill defaults and check them against the
engine's ``SFTConfig`` / ``TrainConfig`` before anything runs, so a typo fails in the plan.

Placeholders in string settings: ``{corpus}`` is the corpus directory and ``{reference}`` the
reference model, both filled by the runner when a run starts (never hashed: a key does not
depend on where the experiment lives on disk).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from badpo.core.config import ConfigError
from badpo.core.constraints import Range, check_fields

__all__ = ["ArmSpec", "ColumnSpec", "CorpusSpec", "ExperimentConfig", "PlotSpec", "TableSpec",
           "POOLED_PREFIX", "RUNNER_KEYS", "merge_settings"]

# Settings the runner owns; giving them in the config is an error naming the key. The reference
# is trained once, so its seed stays the user's (``reference.runtime.seed``).
RUNNER_KEYS = ("output_dir", "cache_dir", "resume_from", "stop_after_steps", "method", "runtime.seed")
REFERENCE_RUNNER_KEYS = ("output_dir",)
POOLED_PREFIX = "names.null."  # a pooled column reads a names.null readout, the arm's seeds pooled


@dataclass(frozen=True)
class CorpusSpec:
    """Where the judgments come from: built by a named builder into OUT/corpus, or a directory."""

    builder: str | None = "tiny-signed"  # tiny-signed | signed-ultrafeedback; null: use `path`
    path: str | None = None  # an already built corpus directory (only with builder: null)
    config: dict[str, Any] = field(default_factory=dict)  # the builder's own config keys

    def __post_init__(self) -> None:
        if (self.builder is None) == (self.path is None):
            raise ConfigError("corpus: give exactly one of corpus.builder (build it) and corpus.path "
                              f"(use a built one); got builder={self.builder!r}, path={self.path!r}")
        if self.path is not None and self.config:
            raise ConfigError("corpus.config: only a builder takes a config; corpus.path is used as is")


@dataclass(frozen=True)
class ArmSpec:
    """One row of the table: a method with its own settings, run at every seed."""

    name: str  # the row label, e.g. "BA-DPO (pooled)"
    method: str  # an arm: a method of badpo.methods.METHODS, or an arm name (ba_dpo_pooled: badpo.methods.arms)
    params: dict[str, Any] = field(default_factory=dict)  # overrides of `train` (nested or dotted keys)


@dataclass(frozen=True)
class ColumnSpec:
    """One column: a readout of every run, or its removal against the baseline arm."""

    header: str  # the column title
    metric: str  # dotted path into a run's readouts, e.g. names.first_name.woman_coded
    # value: the readout, mean +- interval over seeds; removed: per-seed removal of `metric` against
    # the baseline; amplification: the arm's mean minus the reference's, and that difference in
    # units of the arm's per-seed sd; corpus: `metric` is a dotted path into OUT/corpus/stats.json
    # (a statistic of the labels, shown on the reference row); pooled: a names.null.* readout with
    # the arm's seeds pooled (their mean shift against the relabelling null of that mean)
    kind: Literal["value", "removed", "amplification", "corpus", "pooled"] = "value"
    digits: int = 3  # decimals shown (removal is shown in percent with `digits` - 3 decimals)
    ceiling: str | None = None  # dotted path of the same readout with the planted theta_k


@dataclass(frozen=True)
class TableSpec:
    """One table: rows are arms (the reference first), columns are readouts."""

    title: str  # the heading above the table
    columns: list[ColumnSpec]
    interval: Literal["t", "sd", "none"] = "t"  # t: mean +- Student-t half-width; sd: mean +- sd; none
    reference_row: bool = True  # a first row for the reference (trained once: no interval)
    ceiling_row: str | None = None  # label of a row with each column's `ceiling`, mean over all runs
    arms: list[str] | None = None  # arm names shown, in this order; null: every arm
    baseline: str | None = None  # the arm its removed columns measure against; null: the experiment's
                                 # (a table per training setting, each against its own DPO)
    note: str | None = None  # a paragraph printed under the table: what its readouts measure


@dataclass(frozen=True)
class PlotSpec:
    """The PNG plots written beside the tables."""

    rates: list[ColumnSpec] = field(default_factory=list)  # rates.png: each metric per arm, with intervals
    theta: bool = True  # theta.png: learned vs planted theta_k per attribute (per-annotator arms)


@dataclass(frozen=True)
class ExperimentConfig:
    """``badpo experiment``: everything that one table needs, and where it goes."""

    constraints: ClassVar[Mapping] = {"level": Range(0, 1, low_open=True, high_open=True)}

    name: str = "experiment"  # shown in the progress lines and above the tables
    output_dir: str = "runs/experiment"  # OUT: corpus/, work/, runs/<key>.json, table.md, ...
    # where table.md, table.csv, layout.json and the plots go, relative to OUT (null: OUT itself):
    # a variant that shares OUT's corpus, reference and logged runs renders its own tables there
    report_dir: str | None = None
    corpus: CorpusSpec = field(default_factory=CorpusSpec)
    reference: dict[str, Any] = field(default_factory=dict)  # SFT stage settings (SFTConfig keys)
    reference_label: str = "Reference (SFT)"  # the reference's row label
    train: dict[str, Any] = field(default_factory=dict)  # preference settings shared by every arm
    arms: list[ArmSpec] = field(default_factory=list)  # the rows, in table order
    seeds: list[int] = field(default_factory=lambda: [42, 123, 456])  # every arm runs at each
    evaluation: dict[str, Any] = field(default_factory=dict)  # readout settings (part of every key)
    baseline: str = "DPO"  # the arm a "removed" column measures against, seed by seed
    level: float = 0.95  # coverage of the Student-t interval
    tables: list[TableSpec] = field(default_factory=list)
    plots: PlotSpec = field(default_factory=PlotSpec)

    def __post_init__(self) -> None:
        if not self.arms:
            raise ConfigError("arms: list at least one arm")
        if not self.seeds:
            raise ConfigError("seeds: list at least one seed")
        _no_duplicates("seeds", self.seeds)
        names = [arm.name for arm in self.arms]
        _no_duplicates("arms[].name", names)
        check_fields(self)
        check_runner_keys("reference", self.reference, REFERENCE_RUNNER_KEYS)
        check_runner_keys("train", self.train, RUNNER_KEYS)
        for index, arm in enumerate(self.arms):
            check_runner_keys(f"arms[{index}].params", arm.params, RUNNER_KEYS)
        for t, table in enumerate(self.tables):
            for a, arm_name in enumerate(table.arms or []):
                if arm_name not in names:
                    raise ConfigError(f"tables[{t}].arms[{a}]: {arm_name!r} is not an arm ({names})")
            for c, column in enumerate(table.columns):
                if column.digits < 0:
                    raise ConfigError(f"tables[{t}].columns[{c}].digits: must be >= 0")
                if column.ceiling is not None and table.ceiling_row is None:
                    raise ConfigError(f"tables[{t}].columns[{c}].ceiling: the table has no ceiling_row")
                if column.kind == "pooled" and not column.metric.startswith(POOLED_PREFIX):
                    raise ConfigError(f"tables[{t}].columns[{c}].kind: pooled reads a names.null.* readout "
                                      f"with the seeds pooled, not {column.metric!r}")
                if column.kind == "corpus" and not table.reference_row:
                    raise ConfigError(f"tables[{t}].columns[{c}].kind: a corpus statistic is shown on "
                                      "the reference row; set reference_row: true")
            removal_used = any(column.kind == "removed" for column in table.columns)
            if table.baseline is not None and table.baseline not in names:
                raise ConfigError(f"tables[{t}].baseline: {table.baseline!r} is not an arm ({names})")
            if removal_used and table.baseline is None and self.baseline not in names:
                raise ConfigError(f"baseline: {self.baseline!r} is not an arm ({names}); a removed "
                                  f"column (tables[{t}]) needs the arm it measures against")


def _no_duplicates(key: str, values: list) -> None:
    seen = set()
    for index, value in enumerate(values):
        if value in seen:
            raise ConfigError(f"{key}[{index}]: {value!r} is listed twice")
        seen.add(value)


def _expand(settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Nested form of a mapping whose keys may be dotted: {"optim.lr": 1} -> {"optim": {"lr": 1}}."""
    nested: dict[str, Any] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{where}: key {key!r} is not a name")
        parts = key.split(".")
        node = nested
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{where}.{'.'.join(parts[:depth + 1])}: set both as a value and a section")
        if isinstance(value, Mapping):
            value = _expand(value, f"{where}.{key}")
        if parts[-1] in node and isinstance(node[parts[-1]], dict) and isinstance(value, dict):
            node[parts[-1]] = merge_settings(node[parts[-1]], value)
        elif parts[-1] in node:
            raise ConfigError(f"{where}.{key}: given twice")
        else:
            node[parts[-1]] = value
    return nested


def merge_settings(base: Mapping[str, Any], overrides: Mapping[str, Any], where: str = "params") -> dict:
    """Deep merge of two settings mappings (dotted keys allowed); ``overrides`` wins leaf by leaf."""
    merged = _expand(base, where)
    for key, value in _expand(overrides, where).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_settings(merged[key], value, f"{where}.{key}")
        else:
            merged[key] = value
    return merged


def check_runner_keys(where: str, settings: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    nested = _expand(settings, where)
    for dotted in keys:
        node: Any = nested
        for part in dotted.split("."):
            node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:
            raise ConfigError(f"{where}.{dotted}: set by the runner (it chooses the run folders, "
                              "resumes a killed run and, for arms, sets the method and the seed); remove it")


_MISSING = object()


BUILTIN_EXPERIMENTS = {"tiny": "tiny.yaml"}  # name -> config file shipped in this package


def experiment_config_path(name_or_path: str) -> Path:
    """A built-in experiment by name (``tiny``: the demo), or a YAML path as given."""
    if name_or_path in BUILTIN_EXPERIMENTS:
        return Path(__file__).with_name(BUILTIN_EXPERIMENTS[name_or_path])
    return Path(name_or_path)
