"""The parts of reading a judgment row that come before the row is a judgment: the error that names
a row, how a row is named, an annotator id as badpo keys it, and the lines of a JSONL file.

They live apart from :mod:`badpo.core.judgments` (which imports them and hands them on under its own
name) so that the row module keeps to one screenful of checks. Standard library only.
"""

from __future__ import annotations

import json
import os
import unicodedata
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from badpo.core.notices import BadpoWarning

__all__ = ["JudgmentError", "annotator_id", "describe_row", "jsonl_rows", "parse_jsonl_line", "say_normalised"]


class JudgmentError(ValueError):
    """A judgment row is invalid; the message names the row (and pair_id) and the field."""

    def __init__(self, message: str, row: int | None = None, field: str | None = None):
        super().__init__(message)
        self.row = row
        self.field = field


def annotator_id(value: str) -> str:
    """An annotator id as badpo keys it: Unicode NFC, without surrounding whitespace, so that
    ``A01`` and ``A01 ``, or ``René`` composed and decomposed, are one annotator."""
    return unicodedata.normalize("NFC", value).strip()


def say_normalised(spellings: dict[str, set[str]]) -> None:
    """One warning when normalising the ids changed any: how many spellings were merged."""
    changed = {key: sorted(raw) for key, raw in spellings.items() if raw != {key}}
    if not changed:
        return
    merged = sum(len(raw) - 1 for raw in changed.values())  # spellings that became another's id
    key, raw = max(changed.items(), key=lambda item: len(item[1]))
    warnings.warn(f"annotator ids normalised (Unicode NFC, surrounding whitespace): {merged} spelling(s) merged "
                  f"into another of the same annotator, {len(changed)} annotator(s) affected; e.g. "
                  f"{', '.join(map(repr, raw))} -> {key!r}", BadpoWarning, stacklevel=3)


def describe_row(index: int, line: int | None, source: str | None, row: Any) -> str:
    """How an error names a row: ``FILE line L: row i (pair_id ...)``, or ``SOURCE: row i``."""
    text = f"row {index}"
    pair_id = row.get("pair_id") if isinstance(row, Mapping) else None
    if isinstance(pair_id, str) and pair_id:
        text += f" (pair_id {pair_id!r})"
    if line is not None:
        text = f"{source or 'JSONL'} line {line}: {text}"
    elif source is not None:
        text = f"{source}: {text}"
    return text


def jsonl_rows(path: Path) -> Iterator[tuple[tuple, Any]]:
    """(label, parsed object) per non-blank line, labelled for :func:`badpo.core.judgments.validate_labelled`;
    malformed JSON or UTF-8 names the line."""
    index = 0
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            row = parse_jsonl_line(raw, path, line_number, index)
            if row is not None:
                yield (index, line_number, str(path)), row
                index += 1


def parse_jsonl_line(raw: bytes, path: str | os.PathLike, line_number: int, index: int) -> Any:
    """The JSON value of one line of a JSONL file, None for a blank line; text that is not UTF-8,
    not JSON, or repeats a key is a :class:`JudgmentError` naming the file and line (``index``:
    the row number it would have). Shared by the whole-file reader above and the streaming audit,
    which reads a growing file from where it stopped."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JudgmentError(f"{path} line {line_number}: not UTF-8 text (byte "
                            f"{raw[error.start]:#04x} at column {error.start + 1})", row=index) from None
    if not line.strip():
        return None
    try:
        return json.loads(line, object_pairs_hook=_no_duplicate_keys)
    except ValueError as error:  # json.JSONDecodeError and duplicate keys
        raise JudgmentError(f"{path} line {line_number}: not valid JSON ({error})", row=index) from error
    except RecursionError:  # a value nested past Python's recursion limit
        raise JudgmentError(f"{path} line {line_number}: JSON nested too deeply to be a judgment row",
                            row=index) from None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out
