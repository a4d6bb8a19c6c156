"""The candidates of ``badpo audit --discover``: attributes the annotators might be biased on.

**The library** (:data:`LIBRARY`) is a list of attribute specs that ``badpo train`` accepts as
they are (``attributes=[...]``; :func:`badpo.core.attributes.resolve_attributes` reads them): the
built-ins ``length`` (pair-level: the side with at least 1.5 times the other's words),
``markdown`` and ``names`` (two coordinates, ``woman_coded`` and ``black_coded``), and ``NAME=regex:``
specs for markdown elements (lists, headers, bold, code, tables), emoji, exclamation and question
marks, first- and second-person words, hedges, refusals and apologies, numbers and numbers with a
unit, URLs, a signature line, and the form of the first and last sentence (opens with an
affirmation, ends with a question or an exclamation). Every one is 0/1 per response (``length``
per pair), so its effect is a log-odds.

**The data screen** (:func:`text_features`) proposes strings nobody listed: per response, the first
and the last one to three whitespace-separated words (``starts`` / ``ends``) and every word and
two-word phrase anywhere (``has``). Only n-grams whose every word holds a letter are kept: a
number or a punctuation run is content (which digit an answer holds is its quality, in the tiny
worlds as in real data) or is covered by the library (``number``, ``exclamation``, ``md_list``).
A feature becomes a ``NAME=regex:`` spec (:func:`feature_spec`) that matches exactly the responses
that carry it, so what the screen finds can be declared as it was tested.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from badpo.core.attribute_library import LIBRARY

__all__ = ["LIBRARY", "MAX_WORDS", "feature_name", "feature_spec", "text_features"]



MAX_WORDS = 3  # the longest start / end n-gram; phrases anywhere are one or two words
_LETTER = re.compile(r"[^\W\d_]")
_POSITIONS = ("starts", "ends", "has")


@functools.lru_cache(maxsize=1 << 16)
def _has_letter(word: str) -> bool:
    """Whether a word holds a letter; cached, since a pool's answers repeat their words (the data
    screen reads each answer three times, and this search was a third of its time, issue 76)."""
    return _LETTER.search(word) is not None


def text_features(text: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """The distinct (position, words) features of one response: ``("starts", (w1,))`` ..
    ``("ends", (w_{n-2}, w_{n-1}, w_n))`` and ``("has", (w,))`` / ``("has", (w, w'))``, each
    yielded once, only those whose every word holds a letter."""
    words = tuple(text.split())
    lettered = [_has_letter(word) for word in words]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for k in range(1, min(MAX_WORDS, len(words)) + 1):
        if all(lettered[:k]):
            seen.add(("starts", words[:k]))
        if all(lettered[-k:]):
            seen.add(("ends", words[-k:]))
    seen.update(("has", (word,)) for word, ok in zip(words, lettered) if ok)
    seen.update(("has", pair) for pair, ok, next_ok in zip(zip(words, words[1:]), lettered, lettered[1:])
                if ok and next_ok)
    return iter(seen)


def feature_pattern(position: str, words: tuple[str, ...]) -> str:
    """The regular expression that matches a response exactly when it carries the feature (the
    words are split on whitespace as :func:`text_features` splits them)."""
    if position not in _POSITIONS or not words:
        raise ValueError(f"feature ({position!r}, {words!r}): position must be one of {_POSITIONS}, words non-empty")
    body = r"\s+".join(re.escape(word) for word in words)
    if position == "starts":
        return rf"\A\s*{body}(?!\S)"
    if position == "ends":
        return rf"(?<!\S){body}\s*\Z"
    return rf"(?<!\S){body}(?!\S)"


def feature_name(position: str, words: tuple[str, ...]) -> str:
    """A short attribute name for the feature, e.g. ``ends_indeed``, ``has_as_asked``."""
    slug = "_".join(re.sub(r"[^A-Za-z0-9]+", "-", word).strip("-") or "x" for word in words)
    return f"{position}_{slug}"[:48]


def feature_spec(position: str, words: tuple[str, ...], name: str | None = None) -> str:
    """The ``NAME=regex:PATTERN`` spec of a data-screen feature."""
    return f"{name or feature_name(position, words)}=regex:{feature_pattern(position, words)}"
