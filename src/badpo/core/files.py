"""Deterministic JSON / JSONL writers shared by the corpus builders (same input, same bytes)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def write_json(path: str | Path, data: Any) -> None:
    """Pretty JSON with sorted keys; NaN/inf are refused rather than written as invalid JSON."""
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    Path(path).write_text(text + "\n", encoding="utf-8")


def write_jsonl(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """One JSON object per line, keys in the order the row gives them."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
