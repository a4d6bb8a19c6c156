"""A JSONL file of judgments read twice so that no pass holds it: a reader for discover's screen.

The screen keeps what it needs of each judgment as it goes (the answers compressed, the rest as
integers), so the judgments themselves need not all be in memory at once; read whole, a million
judgments of 300-word answers held ~0.9 GiB of text beside the screen (issue 49). The first pass
checks every row (an invalid row is refused before the screen starts, naming its line, as the
whole-file reader does) and finds the exact repeats by a digest of each judgment; the second hands
the judgments over one at a time, with the repeats left out when they are dropped. A file that
changes between the two passes is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from badpo.core.config import ConfigError
from badpo.core.judgments import Judgment, duplicate_rows
from badpo.data.sources import ColumnMap, jsonl_file, judgments_as_read, warn_ignored

__all__ = ["JudgmentStream", "judgment_stream"]


class JudgmentStream:
    """The judgments of one JSONL file: :meth:`check` first, then :meth:`judgments`."""

    def __init__(self, path: Path, columns: ColumnMap = ColumnMap(), origin: str | None = None):
        self.path, self.columns = path, columns
        self.origin = origin or str(path)  # as the user wrote it: what the whole-file reader's messages name
        self._stamp: tuple[int, int] | None = None
        self.forms: dict[str, int] = {}  # the rows read in each form (badpo.data.label_forms), by check

    def _file_stamp(self) -> tuple[int, int]:
        stat = os.stat(self.path)
        return stat.st_size, stat.st_mtime_ns

    def _check_unchanged(self) -> None:
        if self._file_stamp() != self._stamp:
            raise ConfigError(f"{self.origin}: the file changed while it was read (size or time); read it again")

    def check(self) -> list[int]:
        """Read and check every row; returns the 0-based rows that repeat an earlier one exactly."""
        stamp = self._file_stamp()
        read, _, _, ignored, forms = judgments_as_read(self.origin, columns=self.columns, share_texts=False)
        counted = _Counted(read)
        repeated = duplicate_rows(counted)
        if not counted.n:
            raise ValueError(f"{self.origin}: no judgments (the source holds no row)")
        warn_ignored(ignored, self.origin)
        self._stamp = stamp
        self.forms = dict(forms.counts)
        return repeated

    def judgments(self, drop: frozenset[int] | set[int] = frozenset()) -> Iterator[Judgment]:
        """The checked judgments again, one at a time, without the rows in ``drop``."""
        if self._stamp is None:
            raise RuntimeError("JudgmentStream.judgments before check")
        self._check_unchanged()
        read, *_ = judgments_as_read(self.origin, columns=self.columns, share_texts=False, warn=False)
        for index, judgment in enumerate(read):
            if index not in drop:
                yield judgment
        self._check_unchanged()


class _Counted:
    """An iterable that counts what passes through it."""

    def __init__(self, items):
        self.items, self.n = items, 0

    def __iter__(self):
        for item in self.items:
            self.n += 1
            yield item


def judgment_stream(data, columns: ColumnMap = ColumnMap(), split: str | None = None) -> JudgmentStream | None:
    """A stream over ``data`` when it is a local JSONL file (and no split is asked of it), else None:
    the other sources are read whole by :func:`badpo.data.sources.read_judgment_source`."""
    path = jsonl_file(data) if split is None else None
    return None if path is None else JudgmentStream(path, columns, str(data))
