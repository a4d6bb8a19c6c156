"""The checks a stage's config passes before anything loads (``badpo train``, ``sft``, ``rm`` and the
experiment planner call them): each bad value is one line naming its key.

A single field's allowed values are declared beside the field (``constraints`` in
:mod:`badpo.engine.settings`) and checked by one walk (:func:`badpo.core.constraints.check_fields`);
what is here reads several fields, the data's folder or the installed packages."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path

from badpo.core.attributes import imports_user_code, resolve_attributes
from badpo.core.bias import variant_facts
from badpo.core.config import ConfigError
from badpo.core.constraints import check_fields
from badpo.engine.settings import (
    BiasSettings,
    JudgmentRunConfig,
    ReportConfig,
    RMConfig,
    RunConfig,
    SFTConfig,
    TrainConfig,
)
from badpo.theta.options import check_level_has_theta, check_orthogonal

# report_to entries that an extra of badpo installs; any other tracker accelerate supports is
# installed by its own package, of the same name as the tracker
TRACKER_EXTRAS = ("tensorboard", "wandb")


def check_trackers(report: ReportConfig) -> None:
    """Every tracker in ``report.report_to`` is one accelerate supports and is importable: checked
    when the config is read, not after minutes of reference log-probs."""
    import importlib.util

    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    for name in report.report_to:
        if name not in LOGGER_TYPE_TO_CLASS:
            raise ConfigError(f"report.report_to: {name!r} is not a tracker accelerate supports; "
                              f"choose from {sorted(LOGGER_TYPE_TO_CLASS)}")
        if importlib.util.find_spec(name) is None:
            how = f"pip install -e '.[{name}]' (in badpo's clone)" if name in TRACKER_EXTRAS else f"pip install {name}"
            raise ConfigError(f"report.report_to: {name} is not installed; "
                              f"{how} (or drop {name} from report_to)")


def check_common(config: RunConfig) -> None:
    """Checks shared by every stage, before any data or model is loaded; each error names its key."""
    if not config.model.name_or_path:
        raise ConfigError("model.name_or_path: required (a Hub id or a local path)")
    if not config.data:
        raise ConfigError("data: required (a .jsonl/.parquet/.csv/.json file, a save_to_disk folder "
                          "or a Hub dataset id)")
    check_fields(config)
    check_trackers(config.report)


def check_train(config: TrainConfig) -> None:
    check_common(config)
    method = config.arm
    check_level_has_theta(config.bias.level, method.learns_theta, f"method {method.name!r}")
    params = method.parse_params(config.method_params)
    # an arm of several policies counts stop_after_steps over all of its steps (badpo.engine.mixture)
    check_judgment_run(config, lambda steps: (params.total_steps(steps), "the arm's total steps")
                       if method.type_policies else (steps, "steps"), method)
    if config.fsdp:
        check_fsdp(config, method.type_policies)


def check_fsdp(config: TrainConfig, type_policies: bool) -> None:
    """What ``fsdp: true`` cannot do, refused before anything loads: what is untested on a sharded
    policy (EM-DPO's parts, a compiled decoder, ...), and the LoRA path is not sharded."""
    if type_policies:
        raise ConfigError(f"fsdp: method {config.method!r} trains its type policies in parts, each handed "
                          "on to the next, untested on a sharded policy; train it under DDP (fsdp=false)")
    if config.model.compile:
        raise ConfigError("fsdp: a compiled decoder (model.compile) is not sharded by badpo (its hooks "
                          "would run inside the compiled blocks, untested); set model.compile=false or fsdp=false")
    if config.model.selective_checkpointing:
        raise ConfigError("fsdp: selective checkpointing is not tested on a sharded policy; set "
                          "model.selective_checkpointing=false or fsdp=false")
    if (config.runtime.length_groups or 1) > 1:
        raise ConfigError("fsdp: every process must forward a micro-batch in as many parts (each part "
                          "gathers the sharded weights); set runtime.length_groups=1 or fsdp=false")
    if config.lora.enabled:
        raise ConfigError("fsdp: LoRA is not sharded by badpo (its adapters are small enough for "
                          "DDP); set lora.enabled=false or fsdp=false")


def check_judgment_run(config: JudgmentRunConfig, total_steps: Callable[[int], tuple[int, str]],
                       method=None) -> None:
    """The checks ``train`` and ``rm`` share: the length of the run, its checkpoints, the bias
    options and its folder. ``total_steps(steps)``: the run's steps and what to call them;
    ``method``: train's Method row (None for the reward model)."""
    total, what = total_steps(config.steps)
    if config.stop_after_steps is not None and not 0 < config.stop_after_steps <= total:
        raise ConfigError(f"stop_after_steps: must lie in [1, {what}={total}], "
                          f"got {config.stop_after_steps}")
    check_trusted(config.bias)
    if config.bias.level == "orthogonal":  # a theta is learned: check_level_has_theta ran first
        check_orthogonal(bool(config.bias.trusted), method, config.micro_batch_size, declared_count(config))
    names = coordinate_names(config.attributes)
    if config.bias.fixed_offset is not None and names is not None:
        check_offset_length(config.bias.fixed_offset, names)
    _check_not_the_data_folder(config.data, config.output_dir)


def coordinate_names(specs) -> tuple[str, ...] | None:
    """The attribute coordinates ``specs`` give, where the config alone tells (no spec runs user
    code); None otherwise: they are known when the data is read."""
    if not specs or any(map(imports_user_code, specs)):
        return None
    with warnings.catch_warnings():  # a spec's notices are given once, when the data is read
        warnings.simplefilter("ignore")
        return tuple(resolve_attributes(specs).names)


def declared_count(config: JudgmentRunConfig) -> int | None:
    """How many attribute coordinates get a theta (``bias.declared``, else every coordinate),
    where the config alone tells; None otherwise."""
    if config.bias.declared is not None:
        return len(config.bias.declared)
    names = coordinate_names(config.attributes)
    return None if names is None else len(names)


def check_offset_length(offset: list[float], names: tuple[str, ...] | list[str]) -> None:
    """``bias.fixed_offset`` holds one value per attribute coordinate (``names`` counts the two of
    ``names``); checked before anything loads where the specs run no user code, and again on the data."""
    if len(offset) != len(names):
        raise ConfigError(f"bias.fixed_offset: expected {len(names)} values, one per attribute {list(names)}, "
                          f"got {len(offset)}")


def _check_not_the_data_folder(data, output_dir: str) -> None:
    """A run folder is a folder, and not the folder of the run's own data file: overwrite would
    clear it (and an SFT model's files would land among a corpus's)."""
    if output_dir and Path(output_dir).expanduser().is_file():
        raise ConfigError(f"output_dir: {output_dir} is a file; a run writes into a folder of its own")
    if not isinstance(data, str) or not output_dir:
        return
    path, output = Path(data).expanduser(), Path(output_dir).expanduser().resolve()
    if (path.is_file() and path.resolve().parent == output) or (path.is_dir() and path.resolve() == output):
        raise ConfigError(f"output_dir: {output_dir} holds the run's data ({data}); give the run its own folder")


def check_trusted(bias: BiasSettings) -> None:
    """Each trusted annotator once, and the values it is fixed at finite."""
    trusted = bias.trusted or []
    if len(set(trusted)) != len(trusted):
        raise ConfigError(f"bias.trusted: an annotator id appears twice in {trusted}")
    for annotator, values in (trusted.items() if isinstance(trusted, dict) else ()):
        if not all(map(math.isfinite, values)):
            raise ConfigError(f"bias.trusted.{annotator}: must be finite, got {values}")


def check_rm(config: RMConfig) -> None:
    check_common(config)
    try:
        facts = variant_facts(config.bias_variant)
    except ValueError as error:
        raise ConfigError(f"bias.{error}") from None
    check_level_has_theta(config.bias.level, facts.learns_theta, f"bias.variant {config.bias_variant!r}")
    if config.bias.shuffled_ids:
        raise ConfigError("bias.shuffled_ids: the shuffled-ids control is a preference arm (badpo train); "
                          "badpo rm does not shuffle, so leave it false")
    check_judgment_run(config, lambda steps: (steps, "steps"))


def check_sft(config: SFTConfig) -> None:
    check_common(config)
    _check_not_the_data_folder(config.data, config.output_dir)
