"""What a run folder saved beside its models, read as files: no model, tokenizer or config class loaded.

:class:`badpo.evaluation.trained_run.TrainedRun` opens a run to load its models; the readers that need only
what training wrote down (``badpo compare``, the paper's records) read a :class:`SavedRun`: the
run's method, its summary (``run.json``: the last step's numbers, whether theta settled), its theta
(``theta.json``), the audit of its labels (``audit.json``) and the fingerprint of its data
(``data_fingerprint.json``). A folder that BADPOTrainer (TRL) saved gives the method and the
settling from its record (``badpo_run.json``, :mod:`badpo.run_folder.external`). Whether a folder
is a run at all is :func:`badpo.run_folder.layout.is_run_folder`, so that compare,
evaluate and training agree on it.

Each file is read when asked for: a missing file is None, an unreadable one (not JSON, or not a
JSON object) a one-line :class:`ValueError` naming it and what it holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError, read_yaml
from badpo.run_folder.external import ExternalRun, read_external_run
from badpo.run_folder.identity import folded_arm
from badpo.run_folder.layout import (
    AUDIT_FILE,
    CONFIG_FILE,
    DATA_FILE,
    SUMMARY_FILE,
    THETA_FILE,
    is_external_run,
    is_run_folder,
)

__all__ = ["AUDIT_FILE", "SUMMARY_FILE", "THETA_FILE", "SavedRun", "read_json_object"]


def read_json_object(path: Path, what: str) -> dict:
    """A JSON object from ``path``; anything else is a one-line error naming the file and ``what``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: cannot read {what} ({type(error).__name__}: {error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: cannot read {what} (a JSON object was expected, got {type(data).__name__})")
    return data


@dataclass(frozen=True)
class SavedRun:
    """The files of the run folder ``folder`` (module docstring)."""

    folder: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "folder", Path(self.folder))

    def is_run(self) -> bool:
        """Whether the folder holds a run (:func:`badpo.run_folder.layout.is_run_folder`)."""
        return is_run_folder(self.folder)

    @property
    def external(self) -> bool:
        """Whether BADPOTrainer saved the folder (its record stands for config.yaml and run.json)."""
        return is_external_run(self.folder)

    @property
    def theta_file(self) -> Path:
        return self.folder / THETA_FILE

    def has_config(self) -> bool:
        return (self.folder / CONFIG_FILE).is_file()

    def record(self) -> ExternalRun | None:
        """The record of a folder BADPOTrainer saved; None for any other folder."""
        return read_external_run(self.folder) if self.external else None

    def _json(self, name: str, what: str) -> dict | None:
        path = self.folder / name
        return read_json_object(path, what) if path.is_file() else None

    def summary(self) -> dict | None:
        """``run.json``, which a run writes when it finishes (None before, or in a TRL folder)."""
        return self._json(SUMMARY_FILE, "the run's summary")

    def theta(self) -> dict | None:
        """``theta.json`` as saved (:meth:`badpo.core.bias.BiasChannel.to_dict`)."""
        return self._json(THETA_FILE, "the run's theta")

    def audit(self) -> dict | None:
        """``audit.json``: the audit of the run's training labels."""
        return self._json(AUDIT_FILE, "the run's audit")

    def data(self) -> dict | None:
        """``data_fingerprint.json``: what the run trained on."""
        return self._json(DATA_FILE, "the run's data fingerprint")

    def final(self) -> dict:
        """The numbers of the training loop's last logged step (``run.json``'s ``final``); empty when
        the run has not finished."""
        return (self.summary() or {}).get("final") or {}

    def convergence(self) -> Any:
        """Whether theta had settled (:func:`badpo.engine.reporting.theta_convergence`), from run.json
        or a TRL folder's record; None when neither says."""
        record = self.record()
        if record is not None:
            return record.theta_convergence
        return (self.summary() or {}).get("theta_convergence")

    def method(self) -> str | None:
        """The run's method: a TRL folder's record, run.json (a finished run), else config.yaml; None
        when none names one."""
        record = self.record()
        if record is not None:
            return record.method
        method = (self.summary() or {}).get("method")
        if isinstance(method, str):
            return method
        if not self.has_config():
            return None
        path = self.folder / CONFIG_FILE
        try:  # read as YAML, not as a TrainConfig: a run of an older or newer badpo still names its method
            config = read_yaml(path)  # a run folder may come from anyone: its aliases are bounded
        except (OSError, ConfigError) as error:
            raise ValueError(f"{path}: cannot read the run's config ({str(error).removeprefix(f'{path}: ')})") from None
        if not isinstance(config, Mapping) or not isinstance(config.get("method"), str):
            return None
        method = folded_arm(config).get("method")  # method and bias.variant as the arm's one name
        return method if isinstance(method, str) else None
