"""The distinct answers of a discover screen, each held once and zlib-compressed.

A screen reads every distinct answer several times (the library's attributes, three passes over
the n-grams, naming the kept ones) but holds them for its whole run, and on long answers they are
the largest thing it holds: 300-word answers are ~1.4 KB each as Python strings and ~0.6 KB
compressed. :class:`PackedTexts` tells answers apart by a 16-byte BLAKE2b digest of their UTF-8
bytes (two different answers share one with probability about n² / 2^129), so the strings
themselves need not be kept to find a repeat, and keeps each answer's count of spaces, which sizes
the screen's chunks without opening the answer.
"""

from __future__ import annotations

import hashlib
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

__all__ = ["PackedTexts"]

_LEVEL = 1  # zlib's fastest: 300-word answers to ~43%, where the slowest setting reaches ~40%


class PackedTexts(Sequence[str]):
    """Distinct texts in order of first appearance; ``add`` gives a text's index."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._blobs: list[bytes] = []
        self._index: dict[bytes, int] = {}
        self._spaces = array("q")
        for text in texts:
            self.add(text)

    def add(self, text: str) -> int:
        """The index of ``text``, appended when not held yet."""
        raw = text.encode("utf-8", "surrogatepass")
        key = hashlib.blake2b(raw, digest_size=16).digest()
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self._blobs)
            self._blobs.append(zlib.compress(raw, _LEVEL))
            self._spaces.append(text.count(" "))
        return found

    def __len__(self) -> int:
        return len(self._blobs)

    def __getitem__(self, index):  # noqa: ANN001 - an int or a slice, as a list takes
        if isinstance(index, slice):
            return [self._open(blob) for blob in self._blobs[index]]
        return self._open(self._blobs[index])

    def __iter__(self) -> Iterator[str]:
        return (self._open(blob) for blob in self._blobs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedTexts):
            return self._blobs == other._blobs
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # mutable, as a list

    @property
    def spaces(self) -> np.ndarray:
        """Each text's count of " ", int64 ``[T]``."""
        return np.array(self._spaces, dtype=np.int64)  # a copy: a view would stop ``add`` growing it

    @staticmethod
    def _open(blob: bytes) -> str:
        return zlib.decompress(blob).decode("utf-8", "surrogatepass")
