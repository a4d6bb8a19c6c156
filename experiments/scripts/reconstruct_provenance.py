"""Complete the provenance of committed run records made before runs recorded it (issue 49), and
re-key the H100 records of ``results/smol_gpu`` with the device class they trained on.

    python experiments/scripts/reconstruct_provenance.py

* A record with no ``provenance``, or one whose ``source`` is null (a run of an installed wheel),
  gets ``source.commit``: the commit that added the record to the repository (the run's code was
  at or before it; ``dirty`` null: not known). A record with no provenance at all also gets its
  device kind (``cuda`` for ``results/smol_gpu``, whose records ran on one lent H100, else ``cpu``)
  and its threads (``settings.runtime.num_threads``); the H100's packages are the ones
  docs/measurements.md names for it (torch 2.11, transformers 5.17), a CPU record's are unknown
  (null). ``provenance.reconstructed`` lists every field filled in this way and how.
* ``results/smol_gpu``'s records were keyed with the CPU class (they predate the device in the key),
  so six of them share a key with a CPU record of ``results/smol_cpu``. Each gets the key its own
  settings give with the ``cuda`` class (:func:`badpo.experiment.records.run_key`); the file names, the
  ``key``, ``training_key`` and ``reference`` fields, and every ``layout.json`` under the folder follow.
  Readouts and settings are kept byte for byte.

Idempotent: a record already complete, or already keyed for its class, is left as it is.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from badpo.core.jsonio import atomic_write_text
from badpo.experiment.records import keyed_settings, run_key, write_record

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
GPU_FOLDER = "smol_gpu"
H100 = {"kind": "cuda", "name": "NVIDIA H100", "count": 1}
H100_PACKAGES = {"torch": "2.11.0", "transformers": "5.17.0"}  # docs/measurements.md, "One H100, three seeds"


def added_by(path: Path) -> str | None:
    """The commit that added ``path`` to the repository."""
    out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "-1", "--", str(path)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.strip()
    return out or None


def complete(record: dict, path: Path) -> bool:
    """Fill in what the record's provenance lacks (module docstring); True when it changed."""
    provenance = record.get("provenance")
    if provenance and (provenance.get("source") or {}).get("commit"):
        return False
    filled = ["source.commit"]
    if not provenance:
        on_gpu = GPU_FOLDER in path.parts
        provenance = {"device": dict(H100) if on_gpu else {"kind": "cpu", "name": None},
                      "packages": dict(H100_PACKAGES) if on_gpu else None,
                      "torch_threads": record["settings"].get("runtime", {}).get("num_threads")}
        filled += ["device", "packages", "torch_threads"]
    provenance["source"] = {"commit": added_by(path), "dirty": None}
    provenance["reconstructed"] = {
        "fields": filled,
        "how": "source.commit: the commit that added the record (the run's code was at or before it); "
               "device: the folder's (results/smol_gpu ran on one H100); packages: those "
               "docs/measurements.md names for that device, null where unknown; torch_threads: "
               "settings.runtime.num_threads (experiments/scripts/reconstruct_provenance.py)"}
    record["provenance"] = provenance
    return True


def rekey_gpu_folder(folder: Path) -> dict[str, str]:
    """Key every record of ``folder/runs`` with the cuda class; returns {old key: new key}."""
    paths = {path.stem: path for path in sorted((folder / "runs").glob("*.json"))}
    records = {key: json.loads(path.read_text(encoding="utf-8")) for key, path in paths.items()}
    renamed: dict[str, str] = {}
    for old in sorted(records, key=lambda k: records[k]["kind"] != "reference"):  # references first
        record = records[old]
        trained = {"settings": keyed_settings(record["settings"]), "corpus": record["corpus"]}
        if record["kind"] == "arm":
            record["reference"] = renamed.get(record["reference"], record["reference"])
            trained["reference"] = records[record["reference"]]["training_key"]
        name = "reference" if record["kind"] == "reference" else record["method"]
        key = run_key(name, {**trained, "evaluation": record["evaluation"]}, record["seed"], device="cuda")
        record["training_key"] = run_key(name, trained, record["seed"], device="cuda")
        record["key"] = key
        renamed[old] = key
        records[key] = record
    for old, new in renamed.items():
        paths[old].unlink()
        write_record(folder / "runs" / f"{new}.json", records[new])
    for layout in folder.rglob("layout.json"):
        text = layout.read_text(encoding="utf-8")
        for old, new in renamed.items():
            text = text.replace(f'"{old}"', f'"{new}"')
        atomic_write_text(layout, text)
    return {old: new for old, new in renamed.items() if old != new}


def main() -> None:
    changed = 0
    for path in sorted(RESULTS.rglob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict) and "key" in record and "settings" in record and complete(record, path):
            write_record(path, record)
            changed += 1
    renamed = rekey_gpu_folder(RESULTS / GPU_FOLDER)
    print(f"provenance completed in {changed} record(s); {len(renamed)} record(s) of results/{GPU_FOLDER} re-keyed")


if __name__ == "__main__":
    main()
