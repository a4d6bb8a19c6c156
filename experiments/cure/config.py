"""What a cure config says (``kind: fixed_offset_cure``, YAML under ``experiments/configs/experiment_*offset*``):
the source arm, the fresh prompts, how the source answers, the cure's training settings, its
targets and calibration. Checked when loaded, before any source is planned; the steps that read it
are :mod:`experiments.cure.analysis`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from badpo.core.config import ConfigError, load_config, read_settings
from badpo.experiment.config import check_runner_keys
from experiments.cure.calibration import CalibrationSpec

__all__ = ["CURE_KIND", "CURE_OWNED", "SourceSpec", "PromptSpec", "AnswerSpec", "CureConfig", "is_cure_config",
           "load_cure_config"]

CURE_KIND = "fixed_offset_cure"  # the top-level ``kind`` of a cure config
# Train settings the cure sets itself (per run), on top of the runner's own.
CURE_OWNED = ("data", "model.name_or_path", "bias.fixed_offset", "method")


@dataclass(frozen=True)
class SourceSpec:
    """Where the biased policies come from: one arm of a logged ``badpo experiment``."""

    experiment: str = ""  # that experiment's YAML (its output_dir holds the records)
    arm: str = "DPO"  # the arm whose policy is cured, one per seed
    run_missing: bool = False  # train the source arm's missing seeds (and its reference) first
    match: Literal["key", "arm_seed"] = "key"  # find its records by planned key, or by arm and seed


@dataclass(frozen=True)
class PromptSpec:
    """The fresh prompts the source answers: a file, or fresh prompts of the tiny world."""

    file: str | None = "{corpus}/offset_prompts.jsonl"  # {prompt_id, prompt} rows; {corpus} filled
    fresh_tiny: int | None = None  # instead: draw this many tiny-world prompts absent from the corpus
    seed: int = 0  # the tiny draw's seed


@dataclass(frozen=True)
class AnswerSpec:
    """How the source answers (the paper's decoder) and how its answers become pairs."""

    temperature: float = 0.7
    top_p: float = 0.9
    max_new_tokens: int = 512
    seed: int = 0  # sampling seed
    batch_size: int = 16  # prompts per generate call
    heldout_share: float = 0.1  # answers (with all their rows) held out from training


@dataclass(frozen=True)
class CureConfig:
    """``badpo experiment`` on a config whose ``kind`` is ``fixed_offset_cure``."""

    kind: Literal["fixed_offset_cure"] = CURE_KIND
    name: str = "fixed-offset cure"  # progress lines and the title of table.md
    output_dir: str = "runs/offset"  # OUT: work/, runs/<key>.json, calibration.json, table.*
    source: SourceSpec = field(default_factory=SourceSpec)
    prompts: PromptSpec = field(default_factory=PromptSpec)
    answers: AnswerSpec = field(default_factory=AnswerSpec)
    method: str = "dpo"  # the stage's objective (the paper: DPO)
    train: dict[str, Any] = field(default_factory=dict)  # TrainConfig keys of the cure stage
    targets: list[float] = field(default_factory=lambda: [0.5, 0.3, 0.7])  # each at calibration.seed
    all_seed_targets: list[float] = field(default_factory=lambda: [0.5])  # also at every seed
    seeds: list[int] = field(default_factory=lambda: [42, 123, 456])  # source seeds
    calibration: CalibrationSpec = field(default_factory=CalibrationSpec)
    evaluation: dict[str, Any] = field(default_factory=dict)  # EvalConfig keys
    compare_arms: list[str] = field(default_factory=list)  # source-experiment arms shown below, read only
    level: float = 0.95  # coverage of the interval of the all-seed rows

    def __post_init__(self) -> None:
        if self.source.match == "arm_seed" and self.source.run_missing:
            raise ConfigError("source.run_missing: runs by planned key; it cannot be used with match: arm_seed")
        if not self.source.experiment:
            raise ConfigError("source.experiment: give the YAML of the experiment whose arm is cured")
        if (self.prompts.file is None) == (self.prompts.fresh_tiny is None):
            raise ConfigError("prompts: give exactly one of prompts.file and prompts.fresh_tiny")
        if self.prompts.fresh_tiny is not None and self.prompts.fresh_tiny < 1:
            raise ConfigError(f"prompts.fresh_tiny: must be >= 1, got {self.prompts.fresh_tiny}")
        if not 0.0 < self.answers.heldout_share < 1.0:
            raise ConfigError(f"answers.heldout_share: must lie in (0, 1), got {self.answers.heldout_share}")
        for key, values in (("targets", self.targets), ("all_seed_targets", self.all_seed_targets),
                            ("calibration.target", [self.calibration.target])):
            for i, t in enumerate(values):
                if not 0.0 < t < 1.0:
                    raise ConfigError(f"{key}[{i}]: a target rate must lie in (0, 1), got {t}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds: list one or more distinct seeds, got {self.seeds}")
        if self.calibration.seed not in self.seeds:
            raise ConfigError(f"calibration.seed: {self.calibration.seed} is not one of seeds {self.seeds}")
        check_runner_keys("train", self.train, ("output_dir", "cache_dir", "resume_from",
                                                 "runtime.seed", *CURE_OWNED))
        if not 0.0 < self.level < 1.0:
            raise ConfigError(f"level: must lie in (0, 1), got {self.level}")


def is_cure_config(path: str | Path) -> bool:
    """Whether a YAML file is a cure config (top-level ``kind: fixed_offset_cure``, in the file or
    in a config it ``extends``)."""
    try:
        data = read_settings(path)
    except (OSError, ConfigError):
        return False  # the experiment loader reports it with its own error
    return data.get("kind") == CURE_KIND


def load_cure_config(path: str | Path, overrides=()) -> CureConfig:
    """A cure config from YAML with dotted overrides (checked: unknown keys are ConfigErrors)."""
    return load_config(CureConfig, path, overrides)

