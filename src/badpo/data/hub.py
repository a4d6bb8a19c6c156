"""Read one split of a source corpus, by Hugging Face Hub id or from a local copy.

The real builders (:mod:`badpo.corpora.multipref`, :mod:`badpo.corpora.signed_ultrafeedback`) read
their corpus through :func:`load_split` so that a missing corpus is one clear error,
:class:`CorpusNotFoundError`, naming the id or path, instead of a traceback from inside
``datasets``. ``source`` is, in the order tried:

1. an existing local path:
   - a file (``.parquet``, ``.jsonl``, ``.jsonl.gz``, ``.json``): the rows of the requested split. A path may
     contain ``{split}``, which is replaced by the split name (``uf/{split}.parquet``);
   - a directory written by ``save_to_disk`` (a ``DatasetDict``: the split is picked; a single
     ``Dataset``: taken when it records no split or the requested one);
   - any other directory: the files named after the split, ``SPLIT.EXT``, ``SPLIT-*.EXT``, or the
     same under ``data/`` (the layout of a Hub snapshot), EXT one of parquet / jsonl / jsonl.gz / json;
2. a string that looks like a path (absolute, ``./``, ``~``, a file suffix) but does not exist:
   CorpusNotFoundError, the Hub is not tried;
3. otherwise a Hub id, read with ``datasets.load_dataset(source, subset, split=split)``
   (``subset`` is the Hub configuration name, None for the default). This machine has no
   network; where the Hub cannot be reached (or ``HF_HUB_OFFLINE=1``) the error says so.

Nothing global is set here (no environment variable, no ``datasets`` option), and ``datasets`` /
``pyarrow`` are imported only when a source is read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CorpusNotFoundError", "CorpusSchemaError", "load_split", "require_columns"]

_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json")  # .jsonl.gz: as HelpSteer3 publishes its files


class CorpusNotFoundError(FileNotFoundError):
    """The corpus (or the requested split) cannot be read from the given id or path."""


class CorpusSchemaError(ValueError):
    """The corpus was read but lacks a column (or nested field) a builder needs."""


def load_split(source: str, split: str, subset: str | None = None) -> Sequence[Mapping[str, Any]]:
    """The rows of ``split`` of ``source`` (Hub id or local path), as a sequence of dicts.

    Returns a ``datasets.Dataset`` for Hub ids and saved datasets, a list of dicts for files;
    both support ``len``, ``rows[i]`` and iteration. Raises CorpusNotFoundError.
    """
    if not isinstance(source, str) or not source.strip():
        raise CorpusNotFoundError(f"corpus source must be a Hub id or a path, got {source!r}")
    local = Path(os.path.expanduser(source.replace("{split}", split)))
    if local.exists():
        return _load_local(local, split, source)
    if _looks_like_path(source):
        raise CorpusNotFoundError(
            f"no file or directory at {str(local)!r} (corpus source {source!r}, split {split!r})")
    return _load_hub(source, split, subset)


def require_columns(rows: Sequence[Mapping[str, Any]], required: Sequence[str], source: str,
                    split: str) -> None:
    """CorpusSchemaError naming the missing columns when ``rows`` lack one of ``required``."""
    if len(rows) == 0:
        raise CorpusSchemaError(f"{source!r} split {split!r} has no rows")
    names = getattr(rows, "column_names", None)
    columns = list(names) if names is not None else list(rows[0])
    missing = [c for c in required if c not in columns]
    if missing:
        raise CorpusSchemaError(f"{source!r} split {split!r} lacks column(s) {missing}; "
                                f"it has {columns}")


def _looks_like_path(source: str) -> bool:
    return (source.startswith(("/", "~", "."))
            or source.endswith(_SUFFIXES) or "{split}" in source or source.count("/") > 1
            or os.sep != "/" and os.sep in source)


def _load_local(path: Path, split: str, source: str) -> Sequence[Mapping[str, Any]]:
    if path.is_file():
        return _read_file(path)
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        return _load_saved(path, split, source)
    files = _split_files(path, split)
    if not files:
        present = sorted(p.name for p in path.iterdir())[:20]
        raise CorpusNotFoundError(
            f"{str(path)!r} (corpus source {source!r}) is a directory without a saved dataset "
            f"and without files for split {split!r} (looked for {split}.parquet/.jsonl/.json, "
            f"{split}-*.parquet/..., also under data/); it contains {present}")
    rows: list[dict[str, Any]] = []
    for file in files:
        rows.extend(_read_file(file))
    return rows


def _split_files(directory: Path, split: str) -> list[Path]:
    """Files of one split in ``directory`` or ``directory/data``, in name order, one format."""
    for base in (directory, directory / "data"):
        for suffix in _SUFFIXES:
            found = sorted({*base.glob(f"{split}{suffix}"), *base.glob(f"{split}-*{suffix}")})
            if found:
                return found
    return []


def _read_file(path: Path) -> list[dict[str, Any]]:
    if path.name.endswith(".jsonl.gz"):
        return _read_json_lines(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet  # heavy; only when a parquet file is read

        try:
            return pyarrow.parquet.read_table(path).to_pylist()
        except Exception as error:  # pyarrow raises its own error types for a bad file
            raise CorpusNotFoundError(f"{str(path)!r} is not a readable parquet file "
                                      f"({type(error).__name__}: {error})") from None
    if path.suffix == ".jsonl":
        return _read_json_lines(path)
    if path.suffix == ".json":
        text = path.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return _read_json_lines(path)  # JSON lines under a .json name, as datasets allows
        if isinstance(data, list) and all(isinstance(row, dict) for row in data):
            return data
        raise CorpusSchemaError(f"{str(path)!r}: expected a JSON list of row objects or JSON lines")
    raise CorpusNotFoundError(f"{str(path)!r}: unsupported file type {path.suffix!r}; "
                              f"use one of {list(_SUFFIXES)}, a saved dataset or a Hub id")


def _read_json_lines(path: Path) -> list[dict[str, Any]]:
    import gzip

    rows = []
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise CorpusSchemaError(f"{str(path)!r} line {number}: not valid JSON ({error})") from None
            if not isinstance(row, dict):
                raise CorpusSchemaError(f"{str(path)!r} line {number}: expected a JSON object")
            rows.append(row)
    return rows


def _load_saved(path: Path, split: str, source: str) -> Sequence[Mapping[str, Any]]:
    import datasets  # heavy; only when a saved dataset is read

    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise CorpusNotFoundError(f"saved dataset {str(path)!r} (corpus source {source!r}) "
                                      f"has no split {split!r}; it has {list(loaded)}")
        return loaded[split]
    recorded = loaded.split
    if recorded is not None and str(recorded) != split:
        raise CorpusNotFoundError(f"saved dataset {str(path)!r} (corpus source {source!r}) holds "
                                  f"split {str(recorded)!r}, not {split!r}")
    return loaded


def _load_hub(source: str, split: str, subset: str | None) -> Sequence[Mapping[str, Any]]:
    import datasets  # heavy; only when the Hub is asked

    try:
        return datasets.load_dataset(source, subset, split=split)
    except ValueError as error:  # an unknown split, a missing or unknown configuration name
        raise CorpusNotFoundError(f"cannot load split {split!r} of Hub dataset {source!r} "
                                  f"(subset {subset!r}): {error}") from None
    except (OSError, ConnectionError) as error:  # FileNotFoundError, DatasetNotFoundError, offline
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        how = "HF_HUB_OFFLINE is set" if offline else "this machine may have no network"
        raise CorpusNotFoundError(
            f"cannot load corpus {source!r} (split {split!r}): not a local path, and the Hugging "
            f"Face Hub id could not be read ({how}; no network is available here). Pass a local "
            f"copy: a parquet/jsonl file, a Hub snapshot directory or a save_to_disk directory. "
            f"[{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}]") from None
