"""A user's regular expression (a ``regex:`` attribute), matched with a time limit on each text.

Python's ``re`` cannot be stopped: a pattern that backtracks catastrophically (``(a|aa)+$`` on a
long run of a's) held ``badpo audit`` on one hostile response for good. A user's pattern is checked
with ``re`` (its syntax and its errors as users know them) and matched by the ``regex`` package,
which transformers installs, reads the same syntax and takes a timeout: past
:data:`PATTERN_SECONDS` on one text the match is a one-line error naming the pattern and the size
of the text. Patterns badpo writes itself (the markdown constructs) scan in linear time instead
(:mod:`badpo.core.markdown_scan`).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

import regex

__all__ = ["PATTERN_SECONDS", "PatternTimeout", "TimedPattern", "compile_user_pattern"]

PATTERN_SECONDS = 2.0  # one search of one response; a pattern that is not hostile takes milliseconds


class PatternTimeout(ValueError):
    """A user's pattern ran past :data:`PATTERN_SECONDS` on one text."""


@dataclass(frozen=True)
class TimedPattern:
    """``search`` and ``sub`` of a compiled user pattern, each stopped after :data:`PATTERN_SECONDS`."""

    pattern: str
    compiled: Any

    def _refuse(self, text: str) -> PatternTimeout:
        return PatternTimeout(f"regex {self.pattern!r}: still matching after {PATTERN_SECONDS:g} s on one text of "
                              f"{len(text):,} characters; the pattern backtracks without end on it (nested or "
                              "overlapping repeats such as (a|aa)+ or (a+)+): rewrite it without them")

    def search(self, text: str):
        try:
            return self.compiled.search(text, timeout=PATTERN_SECONDS)
        except TimeoutError:
            raise self._refuse(text) from None

    def sub(self, replacement: str, text: str) -> str:
        try:
            return self.compiled.sub(replacement, text, timeout=PATTERN_SECONDS)
        except TimeoutError:
            raise self._refuse(text) from None


def compile_user_pattern(pattern: str) -> TimedPattern:
    """``pattern`` checked by ``re`` (an invalid one raises ``re.error``) and compiled for timed
    matching in ``regex``'s ``re``-compatible syntax (VERSION0, whatever another library set as the
    default). A pattern whose meaning ``re`` itself warns will change (``[[:alpha:]]``, a nested set
    ``regex`` reads as a POSIX class) is refused: the two would read it differently."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        try:
            re.compile(pattern)
        except FutureWarning as warning:
            raise re.error(f"{warning}: re and regex read it apart; escape it (\\[, \\-) to match the characters "
                           "themselves") from None
    return TimedPattern(pattern, regex.compile(pattern, flags=regex.VERSION0))
