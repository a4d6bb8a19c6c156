"""The Python API: ``badpo.train``, ``badpo.sft``, ``badpo.evaluate`` and ``badpo.compare``, each one call.

A config is a YAML path, a dict or a config object, with keyword overrides on top (a dict value
updates that section: ``optim={"lr": 1e-3}`` keeps the other ``optim`` keys). ``data`` may also be
a ``datasets.Dataset``: it is read in memory and ``config.yaml`` records its fingerprint
(``datasets.Dataset:<fingerprint>``), so that the same call with the same dataset resumes or finds
the same run. These functions are reached through ``badpo.<name>``, which imports this module (and
torch, transformers, accelerate) only when one is first used.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError, from_dict, load_config, to_dict
from badpo.core.jsonio import atomic_write_text
from badpo.data.sources import in_memory
from badpo.engine.settings import SFTConfig, TrainConfig

__all__ = ["EvalResult", "SFTResult", "TrainResult", "compare", "evaluate", "sft", "train"]


@dataclass(frozen=True)
class TrainResult:
    """A finished preference run: its folder, ``theta.json`` as a dict (None when the method learns
    no theta), and the last log record (loss, theta_bar, ...)."""

    run_dir: Path
    theta: dict | None
    final: dict


@dataclass(frozen=True)
class SFTResult:
    """The reference's folder (Hugging Face format) and its ``sft.json`` summary."""

    model_dir: Path
    summary: dict


@dataclass(frozen=True)
class EvalResult:
    """The readouts of a run, as written to ``run_dir/readouts.json``."""

    run_dir: Path
    readouts: dict


def train(config: Any = None, **overrides: Any) -> TrainResult:
    """Run (or resume, or find finished) one preference run; see ``badpo train``."""
    from badpo.engine.train import train as train_stage

    with _resolved(TrainConfig, config, overrides) as resolved:
        run_dir = Path(train_stage(resolved))
    summary = _read_json(run_dir / "run.json") or {}
    theta = _read_json(run_dir / "theta.json")
    return TrainResult(run_dir=run_dir, theta=theta, final=summary.get("final", {}))


def sft(config: Any = None, **overrides: Any) -> SFTResult:
    """Train the SFT reference; see ``badpo sft``."""
    from badpo.engine.sft import sft as sft_stage

    with _resolved(SFTConfig, config, overrides) as resolved:
        model_dir = Path(sft_stage(resolved))
    return SFTResult(model_dir=model_dir, summary=_read_json(model_dir / "sft.json") or {})


def evaluate(run_dir: str | os.PathLike, config: Any = None, *, heldout: str | os.PathLike | None = None,
             prompts: str | os.PathLike | None = None, corpus: str | os.PathLike | None = None,
             columns: Mapping[str, str] | None = None, out: str | os.PathLike | None = None,
             trust_remote_code: bool = False, overwrite: bool = False, **overrides: Any) -> EvalResult:
    """Every readout of a finished run (``badpo evaluate``), also written to ``out`` (default
    ``run_dir/readouts.json``; never another file inside a run folder, and an existing ``out``
    only with ``overwrite``: checked before any model is loaded). ``config`` and ``overrides``
    are :class:`badpo.readouts.evaluate.EvalConfig` keys; without ``attributes`` among them the
    run's own are read. ``heldout``, ``prompts``, ``corpus`` and ``columns`` (field -> column,
    on top of the run's mapping) are :class:`badpo.readouts.run.EvalData`."""
    from badpo.core.jsonio import dumps
    from badpo.data.sources import ColumnMap
    from badpo.readouts.evaluate import EvalConfig
    from badpo.readouts.run import EvalData, evaluate_run_dir, readouts_path


    written = readouts_path(run_dir, out, overwrite)

    def text(path: str | os.PathLike | None) -> str | None:
        return os.fspath(path) if path is not None else None

    data = EvalData(prompts=text(prompts), heldout=text(heldout), corpus=text(corpus),
                    columns=from_dict(ColumnMap, dict(columns), prefix="columns") if columns is not None else None)
    readouts = evaluate_run_dir(run_dir, _as_dict(EvalConfig, config, overrides), data,
                                trust_remote_code=trust_remote_code)
    atomic_write_text(written, dumps(readouts, indent=1, sort_keys=True) + "\n")
    return EvalResult(run_dir=Path(run_dir), readouts=readouts)


def compare(runs: str | os.PathLike | Sequence[str | os.PathLike], *, reference: str | os.PathLike | None = None,
            baseline: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
            overwrite: bool = False):
    """Evaluated runs side by side (``badpo compare``): each declared attribute's rate with an
    interval over prompts, each run's removal of the baseline's shift, KL, held-out accuracy,
    theta against the audit's estimate and a verdict per run. ``runs`` is one run folder or
    several; with ``out`` the compare files are written there. Returns a
    :class:`badpo.readouts.compare_runs.Comparison`: ``.comparison`` (the dict of compare.json),
    ``.files``, and ``print()`` shows what the command prints."""
    from badpo.readouts.compare_runs import compare_runs

    folders = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)
    return compare_runs(folders, reference=reference, baseline=baseline, out=out, overwrite=overwrite)


@contextlib.contextmanager
def _resolved(config_class: type, config: Any, overrides: dict[str, Any]):
    """The typed config, with a ``datasets.Dataset`` in ``data`` readable for the block."""
    data = _as_dict(config_class, config, overrides)
    dataset = data.get("data")
    if isinstance(dataset, os.PathLike):
        data["data"] = os.fspath(dataset)
    elif dataset is not None and not isinstance(dataset, str):
        with in_memory(dataset) as name:
            yield from_dict(config_class, {**data, "data": name})
        return
    yield from_dict(config_class, data)


def _as_dict(config_class: type, config: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    if config is None:
        base: dict[str, Any] = {}
    elif isinstance(config, config_class):
        base = to_dict(config)
    elif isinstance(config, (str, os.PathLike)):
        base = to_dict(load_config(config_class, config))
    elif isinstance(config, Mapping):
        base = dict(config)
    else:
        raise ConfigError(f"config: expected a YAML path, a dict or a {config_class.__name__}, "
                          f"got {type(config).__name__}")
    return _merged(base, overrides)


def _merged(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` on top; a dict updates a dict section key by key."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
