"""JSON the project writes, and the one atomic writer every file goes through.

Strictly valid JSON, so a readout that is undefined is ``null``.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which no other JSON reader accepts.
A readout that is undefined (a rate over zero cases, a log-odds over a one-sided count) is a
missing value, so every non-finite float becomes ``null`` here; torch / numpy scalars become
plain numbers. Every file is written through :func:`atomic_write_text`: a reader, or a run
killed mid-write, sees the old file or the whole new one, never a part. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def json_ready(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None, tuples by lists, and 0-d tensors /
    numpy scalars (anything with ``.item()``) by Python numbers."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return json_ready(value.item())
    if hasattr(value, "tolist"):
        return json_ready(value.tolist())
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`json_ready` (``value``), refusing NaN / inf if any slipped through."""
    return json.dumps(json_ready(value), allow_nan=False, **kwargs)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it and ``os.replace``; a failure
    names ``path``, not the temporary file the user never asked for."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as error:
        raise type(error)(f"cannot write {path}: {error.strerror or error}") from error
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Pretty JSON with sorted keys (same input, same bytes); NaN / inf are refused rather than
    written as invalid JSON."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
                      + "\n")


def write_jsonl(path: str | os.PathLike, rows: Sequence[Mapping[str, Any]]) -> None:
    """One JSON object per line, keys in the order the row gives them."""
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows))
