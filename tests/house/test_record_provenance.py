"""Every committed record says truly what made it (issue 74 item 3).

- its commit exists and precedes the commit that last wrote the record (a record cannot name code
  that did not exist when it was committed);
- its device is named, a CPU's model included (``unknown`` where it was not read);
- the copies of one run key (an experiment copies a shared arm's record into its own folder, or
  runs it again) agree on every readout both hold, within 1e-5 + 1e-4 relative, when they ran on
  the same kind of machine (device, CPU or GPU model, torch threads): the key holds the settings,
  the data and the reference, not the machine, and fp32 arithmetic moves with the thread count and
  the CPU; a copy that a later run replaces is listed in results/superseded.json with why;
- a newer copy never drops a readout an older copy holds.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
SUPERSEDED = json.loads((RESULTS / "superseded.json").read_text(encoding="utf-8"))["superseded"]
ABSOLUTE, RELATIVE = 1e-5, 1e-4


def _records() -> dict[Path, dict]:
    found = {}
    for path in sorted(RESULTS.rglob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("provenance"), dict):
            found[path] = record
    return found


RECORDS = _records()
RUNS = {path: r for path, r in RECORDS.items() if path.parent.name == "runs" and r.get("schema") == 1}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _last_written() -> dict[str, str]:
    """{path relative to the repository: the newest commit that added, changed or renamed it there}."""
    out = _git("log", "-M", "--diff-filter=AMR", "--name-status", "--format=C %H", "--", "results")
    commit, newest = "", {}
    for line in out.splitlines():
        if line.startswith("C "):
            commit = line[2:]
        elif line.strip():
            newest.setdefault(line.split("\t")[-1], commit)
    return newest


def _changed() -> set[str]:
    """Files under results/ that differ from HEAD or are new: written after the last commit."""
    out = _git("status", "--porcelain", "--untracked-files=all", "--", "results")
    return {line[3:].split(" -> ")[-1].strip('"') for line in out.splitlines()}


def test_every_record_names_a_commit_that_precedes_it():
    try:
        shallow = _git("rev-parse", "--is-shallow-repository").strip() == "true"
    except (OSError, subprocess.CalledProcessError):  # no git, or not a checkout git will read
        pytest.skip("not a git checkout: the records' commits cannot be placed")
    if shallow:
        pytest.skip("a shallow clone holds too little history to place the records' commits")
    written, changed, ancestors, wrong = _last_written(), _changed(), {}, []
    for path, record in RECORDS.items():
        named = (record["provenance"].get("source") or {}).get("commit")
        relative = path.relative_to(ROOT).as_posix()
        # written since the last commit (new, or a rerun over a committed one): it must precede the checkout
        last = "HEAD" if relative in changed else written.get(relative, "HEAD")
        if last not in ancestors:
            ancestors[last] = set(_git("rev-list", last).split())
        full = subprocess.run(["git", "rev-parse", "--verify", "-q", f"{named}^{{commit}}"], cwd=ROOT,
                              capture_output=True, text=True).stdout.strip() if named else ""
        if full not in ancestors[last]:
            wrong.append(f"{relative}: commit {named!r} is not in the history of {last[:8]}")
    assert not wrong, "\n".join(wrong[:20])


def test_every_record_names_its_device_and_a_cpus_model():
    wrong = []
    for path, record in RECORDS.items():
        device = record["provenance"].get("device")
        if not isinstance(device, dict) or not device.get("kind"):
            wrong.append(f"{path.relative_to(ROOT)}: no device kind")
        elif device["kind"] == "cpu" and not (device.get("cpu") or {}).get("model"):
            wrong.append(f"{path.relative_to(ROOT)}: a CPU record without cpu.model (say 'unknown')")
    assert not wrong, "\n".join(wrong[:20])


def machine(record: dict) -> tuple:
    """What a run's arithmetic depends on besides its key: device, its model, torch's threads."""
    provenance = record["provenance"]
    device = provenance.get("device") or {}
    cpu = (device.get("cpu") or {}).get("signature", "unrecorded")
    model = device.get("name") if device.get("kind") != "cpu" else cpu
    return device.get("kind"), model, provenance.get("torch_threads")


def leaves(value, prefix: str = "") -> dict[str, object]:
    """A nested readout as {dotted path: leaf}; a list's length is a leaf of its own."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in leaves(item, f"{prefix}{key}.").items()}
    if isinstance(value, list):
        flat = {f"{prefix}len": len(value)}
        for index, item in enumerate(value):
            flat.update(leaves(item, f"{prefix}{index}."))
        return flat
    return {prefix.rstrip("."): value}


def close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or isinstance(a, str) or isinstance(b, str):
            return a is b or (a is None and isinstance(b, float) and math.isnan(b)) or (
                b is None and isinstance(a, float) and math.isnan(a))
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= ABSOLUTE + RELATIVE * max(abs(a), abs(b))
    return a == b


def superseded(path: Path) -> bool:
    relative = path.relative_to(RESULTS).as_posix()
    return any(relative == folder or relative.startswith(folder + "/") for folder in SUPERSEDED)


def copies() -> dict[str, list[tuple[Path, dict]]]:
    by_key = defaultdict(list)
    for path, record in RUNS.items():
        by_key[record["key"]].append((path, record))
    return {key: found for key, found in by_key.items() if len(found) > 1}


def test_copies_of_a_key_on_one_kind_of_machine_agree():
    compared, wrong = 0, []
    for key, found in copies().items():
        for (path_a, a), (path_b, b) in combinations(found, 2):
            if machine(a) != machine(b) or superseded(path_a) or superseded(path_b):
                continue
            compared += 1
            left = leaves({"readouts": a.get("readouts"), "theta": a.get("theta")})
            right = leaves({"readouts": b.get("readouts"), "theta": b.get("theta")})
            differ = [leaf for leaf in left.keys() & right.keys() if not close(left[leaf], right[leaf])]
            if differ:
                wrong.append(f"{key}: {path_a.relative_to(RESULTS)} and {path_b.relative_to(RESULTS)} differ at "
                             f"{sorted(differ)[:3]}")
    assert compared > 100 and not wrong, "\n".join(wrong[:20])


def test_a_newer_copy_never_drops_a_readout_an_older_one_holds():
    wrong = []
    for key, found in copies().items():
        ordered = sorted(found, key=lambda pr: pr[1].get("finished_at") or "")
        for (path_a, a), (path_b, b) in combinations(ordered, 2):
            dropped = leaves(a.get("readouts") or {}).keys() - leaves(b.get("readouts") or {}).keys()
            if dropped:
                wrong.append(f"{key}: {path_b.relative_to(RESULTS)} lacks {sorted(dropped)[:3]} of "
                             f"{path_a.relative_to(RESULTS)}")
    assert not wrong, "\n".join(wrong[:20])


def test_every_superseded_folder_exists():
    assert all((RESULTS / folder).is_dir() for folder in SUPERSEDED)
