"""Judgment data: the row format, its validation and I/O (see ``docs/data-format.md``).

Kept light on purpose: importing this package loads only the standard library; the
``datasets`` library is imported inside :func:`read_judgments` when a dataset is read.
The name pool lives in :mod:`badpo.data.names`.
"""

from __future__ import annotations

from badpo.data.judgments import (
    Judgment,
    JudgmentError,
    pair_key,
    read_judgments,
    validate_judgments,
    write_judgments,
)

__all__ = [
    "Judgment",
    "JudgmentError",
    "pair_key",
    "read_judgments",
    "validate_judgments",
    "write_judgments",
]
