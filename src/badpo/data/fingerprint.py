"""The content of a run's data as one fingerprint, so that a run is identified by what it trained
on and not only by the path its config names.

``data`` is fingerprinted by what it is (:mod:`badpo.data.sources` reads the same kinds):

* a local file: the sha256 of its bytes, read in 1 MiB chunks;
* a folder written by ``save_to_disk``: the sha256 over every file in it (relative name and
  content);
* a ``datasets.Dataset`` (or the name :func:`badpo.data.sources.in_memory` gives one): datasets'
  own ``_fingerprint``, which changes with every transform of the data;
* a Hub dataset id: the ``_fingerprint`` of the loaded split (datasets derives it from the
  files it downloaded).

A file's hash is kept with its size and modification time (``known``: a previous record, e.g.
the one in a run folder, and a per-process memo), so an unchanged file is not read again: a
100 MB file costs one read (a fraction of a second), then a ``stat``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["FORMAT", "data_fingerprint", "file_sha256"]

FORMAT = "badpo.data/1"
_CHUNK = 1 << 20
_MEMO: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, this process


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in chunks (memory stays flat for any size)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _file_entry(path: Path, known: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """{path, size, mtime_ns, sha256} of one file; the hash is reused when a previous entry (or
    this process) saw the same size and modification time."""
    stat = path.stat()
    entry = {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    previous = known.get(str(path), {})
    if previous.get("size") == stat.st_size and previous.get("mtime_ns") == stat.st_mtime_ns \
            and isinstance(previous.get("sha256"), str):
        _MEMO[key] = previous["sha256"]
    if key not in _MEMO:
        _MEMO[key] = file_sha256(path)
    return {**entry, "sha256": _MEMO[key]}


def _files_fingerprint(root: Path, files: list[Path], known: Mapping[str, Mapping[str, Any]]
                       ) -> tuple[str, list[dict]]:
    entries = [_file_entry(path, known) for path in files]
    if root.is_file():
        return entries[0]["sha256"], entries
    digest = hashlib.sha256()
    for path, entry in zip(files, entries):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(bytes.fromhex(entry["sha256"]))
    return digest.hexdigest(), entries


def data_fingerprint(data: Any, split: str | None = None, known: Mapping[str, Any] | None = None) -> dict:
    """``{"format", "data", "split", "sha256", "files"}``: the fingerprint of ``data``'s content
    (module docstring). ``known`` is a previous fingerprint of the same data, whose file hashes
    are reused for files of unchanged size and modification time."""
    from badpo.data.sources import IN_MEMORY_PREFIXES, source_dataset

    record: dict[str, Any] = {"format": FORMAT, "data": str(data) if isinstance(data, (str, os.PathLike))
                              else type(data).__name__, "split": split, "files": []}
    if type(data).__module__.split(".")[0] == "datasets":
        return {**record, "sha256": _text_sha256(getattr(data, "_fingerprint", None) or repr(data))}
    text = str(data)
    if text.startswith(IN_MEMORY_PREFIXES):  # the name holds the in-memory data's fingerprint
        return {**record, "sha256": _text_sha256(text.partition(":")[2])}
    path = Path(os.path.expanduser(text))
    if path.is_file() or path.is_dir():
        previous = {entry["path"]: entry for entry in (known or {}).get("files", [])
                    if isinstance(entry, Mapping) and "path" in entry}
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        sha256, entries = _files_fingerprint(path.absolute(), [p.absolute() for p in files], previous)
        return {**record, "sha256": sha256, "files": entries}
    dataset, _ = source_dataset(data, split)  # a Hub id; a missing path is an error naming it
    return {**record, "sha256": _text_sha256(dataset._fingerprint)}


def _text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
