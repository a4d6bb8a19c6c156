"""A run trained outside badpo's loop, by :class:`badpo.integrations.trl.BADPOTrainer`: its record.

A ``badpo train`` folder tells ``badpo evaluate`` and ``badpo compare`` what training fixed through
its ``config.yaml`` (reference, tokenization, beta, attributes), ``policy/``, ``theta.json`` and
``run.json``. A TRL output folder has TRL's own layout instead: the policy's weights (or its LoRA
adapter) and tokenizer at the top of the folder, as ``save_pretrained`` writes them. BADPOTrainer
adds ``theta.json`` (:meth:`badpo.core.bias.BiasChannel.save`) and :data:`RECORD_FILE`, which says
the rest in one JSON object (:class:`ExternalRun`): the method and its parameters, the bias
variant, the attribute specs, the annotators, the reference model, beta, how prompts were
tokenized, the step reached and whether theta had settled. The readers recognise the folder by that
file (:func:`is_external_run`) and read the policy from the folder itself.

The record is data only: a reader checks every key and its type, and a bad one is a one-line
error naming the file and the key. Nothing in it decides what code runs (a ``module:function``
attribute still needs the caller's own declaration, as with ``config.yaml``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from badpo.core.attributes import imports_user_code, resolve_attributes
from badpo.core.config import ConfigError, from_dict, to_dict
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.core.tokenization import TokenizationConfig
from badpo.methods import get_arm
from badpo.run_folder.layout import EXTERNAL_RECORD as RECORD_FILE
from badpo.run_folder.layout import is_external_run

__all__ = ["RECORD_FILE", "FORMAT", "ExternalRun", "is_external_run", "read_external_run",
           "write_external_run", "local_path"]

FORMAT = "badpo.external-run/1"
# the bias.level rules BADPOTrainer runs: those of badpo.theta.options.LEVEL_RULES that keep no
# judgment's last margin (run_folder sits below theta, so the names are written here; a test holds them equal)
TRAINER_LEVELS = ("adam", "orthogonal")


@dataclass(frozen=True)
class ExternalRun:
    """What a run trained outside the engine fixed, as :data:`RECORD_FILE` holds it."""

    format: str  # FORMAT
    trainer: str  # who wrote the folder, e.g. badpo.integrations.trl.BADPOTrainer
    method: str  # the arm's name (badpo.methods.arms: dpo, ba_dpo_<variant>, r_dpo_ba_<variant>...)
    variant: str  # the bias channel's variant (badpo.core.bias.VARIANTS)
    attribute_names: list[str]  # one per coordinate of g, in order
    attributes: list[str] | None  # their specs; None: declared as an AttributeSet, specs unknown
    annotators: list[str]  # the bias channel's annotators, in its order
    reference: str | None  # Hub id or absolute path of the reference model (the LoRA base); None: unknown
    beta: float  # DPO's KL strength
    tokenization: TokenizationConfig  # how a prompt was tokenized in training (text prompts: "never")
    trust_remote_code: bool = False  # the model was loaded with trust_remote_code
    method_params: dict[str, Any] = field(default_factory=dict)  # the method's own parameters, resolved
    step: int = 0  # optimizer steps done when the folder was written
    theta_convergence: dict[str, Any] | None = None  # badpo.engine.reporting.theta_convergence; None: no log
    bias_level: str = "adam"  # what theta did after its start (badpo.theta.options.LEVEL_RULES)
    versions: dict[str, str] = field(default_factory=dict)  # badpo, trl, transformers


def local_path(name_or_path: str | os.PathLike) -> str:
    """A local folder as an absolute path (so the record reads from any working directory); a Hub id
    as it is."""
    path = Path(name_or_path).expanduser()
    return str(path.resolve()) if path.exists() else str(name_or_path)


def write_external_run(folder: str | os.PathLike, record: ExternalRun) -> Path:
    path = Path(folder) / RECORD_FILE
    atomic_write_text(path, dumps(to_dict(record), indent=1) + "\n")
    return path


def read_external_run(folder: str | os.PathLike) -> ExternalRun:
    """The record in ``folder``; a missing, unreadable or ill-typed one is a one-line error naming
    the file (and the key)."""
    path = Path(folder) / RECORD_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: missing (a folder BADPOTrainer.save_model wrote holds it)") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable run record ({type(error).__name__}: {error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a run record (a JSON object was expected, got {type(data).__name__})")
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: format {data.get('format')!r} is not {FORMAT!r}")
    try:
        record = from_dict(ExternalRun, data)
    except ConfigError as error:
        raise ValueError(f"{path}: {error}") from None
    _check(record, path)
    return record


def _check(record: ExternalRun, path: Path) -> None:
    """What the types alone do not say: a known method of the recorded variant, a positive beta,
    one spec per attribute name."""
    try:
        arm = get_arm(record.method)
    except ConfigError:
        raise ValueError(f"{path}: method {record.method!r} is not a badpo arm") from None
    if arm.bias_variant != record.variant:
        raise ValueError(f"{path}: variant {record.variant!r} is not the variant of method {record.method!r}")
    if not (math.isfinite(record.beta) and record.beta > 0):
        raise ValueError(f"{path}: beta must be a positive number, got {record.beta!r}")
    if not record.attribute_names:
        raise ValueError(f"{path}: attribute_names is empty")
    if record.bias_level not in TRAINER_LEVELS:
        raise ValueError(f"{path}: bias_level must be one of {list(TRAINER_LEVELS)}, got {record.bias_level!r}")
    if record.attributes is not None:
        _check_specs(record.attributes, record.attribute_names, path)


def _check_specs(specs: list[str], names: list[str], path: Path) -> None:
    """The specs declare exactly ``names``, in order (one spec may declare several: ``names`` is
    woman_coded and black_coded). A ``module:function`` spec is not imported to find out: the record
    does not decide what code runs, so with one of those only the specs' own syntax is checked."""
    if any(imports_user_code(spec) for spec in specs):
        return
    try:
        declared = list(resolve_attributes(specs).names)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: attributes: {error}") from None
    if declared != list(names):
        raise ValueError(f"{path}: attributes {specs} declare {declared}, not attribute_names {list(names)}")
