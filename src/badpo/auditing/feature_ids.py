"""The kept n-grams of every response, as ids in two bytes where they fit (discover's data screen).

A screen of long answers holds one id per (response, kept n-gram) for its whole run, the largest
array it keeps: ~340 ids a 300-word answer. The ids are ranked by how many responses carry the
n-gram (0 the most common), so most of what a response carries has a small id; an id below
:data:`ESCAPE` is held in a uint16, a larger one as :data:`ESCAPE` there and its value, in order,
in a per-response run of int32 (``escaped``, indexed like ``flat`` by its own offsets).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["ESCAPE", "FeatureIds"]

ESCAPE = (1 << 16) - 1
"""The uint16 that says "the id is the next of this response's escaped ones"."""


@dataclass(frozen=True)
class FeatureIds:
    """CSR over responses: ``offsets`` [T + 1] into ``flat`` (uint16), ``escape_offsets`` [T + 1]
    into ``escaped`` (int32, the ids of ``ESCAPE`` and above, in each response's order)."""

    offsets: np.ndarray
    flat: np.ndarray
    escape_offsets: np.ndarray
    escaped: np.ndarray

    @classmethod
    def empty(cls, rows: int = 0) -> FeatureIds:
        zeros = np.zeros(rows + 1, np.int64)
        return cls(zeros, np.zeros(0, np.uint16), zeros, np.zeros(0, np.int32))

    @classmethod
    def from_chunks(cls, chunks: Iterable[tuple[np.ndarray, np.ndarray]]) -> FeatureIds:
        """The table of consecutive chunks of responses, each (its [t + 1] offsets from 0, its ids
        in response order, int64), narrowed as each chunk comes (hand over a generator: a list would
        hold every chunk's int64 ids at once)."""
        offsets, flat, escape_offsets, escaped = [np.zeros(1, np.int64)], [], [np.zeros(1, np.int64)], []
        base = escape_base = 0
        for chunk_offsets, ids in chunks:
            big = ids >= ESCAPE
            offsets.append(base + chunk_offsets[1:])
            escape_offsets.append(escape_base + np.concatenate([[0], np.cumsum(big)])[chunk_offsets[1:]])
            flat.append(np.where(big, ESCAPE, ids).astype(np.uint16))
            escaped.append(ids[big].astype(np.int32))
            base, escape_base = base + len(ids), escape_base + int(big.sum())
        return cls(np.concatenate(offsets), np.concatenate(flat) if flat else np.zeros(0, np.uint16),
                   np.concatenate(escape_offsets), np.concatenate(escaped) if escaped else np.zeros(0, np.int32))

    @property
    def per_row(self) -> np.ndarray:
        """Each response's count of kept n-grams."""
        return np.diff(self.offsets)

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in ``rows``, id) of every kept n-gram of every response in ``rows``, int64."""
        lengths = self.offsets[rows + 1] - self.offsets[rows]
        owner = np.repeat(np.arange(len(rows)), lengths)
        starts = np.repeat(self.offsets[rows] - np.cumsum(lengths) + lengths, lengths)
        ids = self.flat[starts + np.arange(len(owner))].astype(np.int64)
        where = np.flatnonzero(ids == ESCAPE)
        if len(where):
            counts = self.escape_offsets[rows + 1] - self.escape_offsets[rows]
            before = np.cumsum(counts) - counts  # the escaped ids of the earlier rows gathered
            rank = np.arange(len(where))  # each one's place among all the escaped ids gathered
            row = owner[where]
            ids[where] = self.escaped[self.escape_offsets[rows[row]] + rank - before[row]]
        return owner, ids
