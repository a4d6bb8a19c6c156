"""Run keys and run records: how a run is named and how it is logged, apart from the sweep that
runs it (:mod:`badpo.experiment.runner`), so that a table, a plan or a cure reads and keys records
without the runner.

A key is ``<method>-seed<seed>-<12 hex>`` of sha256 over the canonical JSON of what it hashes; a
record is ``OUT/runs/<key>.json``, strict JSON written atomically, of schema :data:`SCHEMA`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.experiment.provenance import device_class
from badpo.run_folder.identity import keyed_when_set

__all__ = ["SCHEMA", "UNKEYED", "canonical_json", "stable_hash", "run_key", "keyed_settings", "write_record",
           "read_records", "read_records_for", "relative_artifact"]

SCHEMA = 1  # version of the run record
# Bookkeeping settings that do not change a run's result: left out of its key.
UNKEYED = ("output_dir", "cache_dir", "report", "save_every", "keep_checkpoints", "resume_from",
           "overwrite")


def canonical_json(value: Any) -> str:
    """One text per value: sorted keys, no spaces, ASCII; NaN or a non-JSON type is an error."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"settings cannot be keyed: {error}") from None


def stable_hash(value: Any) -> str:
    """sha256 of :func:`canonical_json`: the same in every process and on every machine."""
    return hashlib.sha256(canonical_json(value).encode("ascii")).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower() or "run"


def run_key(method: str, params: Mapping[str, Any], seed: int | None, device: str | None = None) -> str:
    """``<method>-seed<seed>-<12 hex of sha256(method, params, seed[, device])>``; the prefix is only
    there to be read. ``device``: the device class that trains and reads it (default: this
    process's, :func:`badpo.experiment.provenance.device_class`), since a GPU gives other numbers than a
    CPU for the same settings. ``cpu`` adds nothing to the hash, so a CPU record made before the
    device was keyed keeps its key and no logged CPU sweep re-runs; any other class is mixed in, so
    a CUDA key never equals a CPU one (its hashed text holds a ``device`` entry the CPU text lacks).
    The GPU records made before (results/smol_gpu) were re-keyed with the CUDA class
    (experiments/scripts/reconstruct_provenance.py)."""
    identity: dict[str, Any] = {"method": method, "params": params, "seed": seed}
    device = device_class() if device is None else device
    if device != "cpu":
        identity["device"] = device
    digest = stable_hash(identity)[:12]
    seed_part = f"-seed{seed}" if seed is not None else ""
    return f"{_slug(method)}{seed_part}-{digest}"


def keyed_settings(settings: Mapping[str, Any]) -> dict:
    """The settings a run's key hashes: all but the bookkeeping ones (:data:`UNKEYED`) and the
    keys newer than recorded runs left at their default (:data:`badpo.run_folder.identity.KEYED_WHEN_SET`)."""
    return keyed_when_set({k: v for k, v in settings.items() if k not in UNKEYED})


def write_record(path: Path, record: Mapping[str, Any]) -> None:
    """Write a run record as strict JSON, atomically: an undefined readout (NaN) is null."""
    atomic_write_text(path, dumps(record, indent=2, sort_keys=True) + "\n")


def read_records(runs_dir: str | Path) -> dict[str, dict]:
    """Every ``<key>.json`` under ``runs_dir`` -> {key: record}; a file that is not a record of
    this schema, or whose key differs from its name, is an error naming the file."""
    records = {}
    for path in sorted(Path(runs_dir).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            raise ValueError(f"{path}: not a run record of schema {SCHEMA}")
        if record.get("key") != path.stem:
            raise ValueError(f"{path}: holds the record of key {record.get('key')!r}")
        records[path.stem] = record
    return records


def read_records_for(runs_dir: Path, keys: Iterable[str]) -> dict[str, dict]:
    """The records of ``keys``; a missing one is an error naming it."""
    wanted = list(keys)
    missing = [k for k in wanted if not (runs_dir / f"{k}.json").exists()]
    if missing:
        raise FileNotFoundError(f"{runs_dir}: no record for {missing}")
    records = read_records(runs_dir)
    return {k: records[k] for k in wanted}


def relative_artifact(path: Any, out: Path) -> str:
    """Artifact paths are stored relative to OUT when inside it, so OUT can move."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(out.resolve()).as_posix()
    except ValueError:
        return str(resolved)
