"""Bold and links found by a scan linear in the text, with exactly the spans of their regexes.

The regular expressions that define ``**bold**`` and ``[text](url)``
(:data:`badpo.core.markdown.MARKDOWN_PATTERNS`) backtrack: from every ``**`` or ``[`` they scan to
the end of the line before failing, so one hostile answer (60 KB of ``*``, or of ``**a ``) stalled
the audit, discover and training for minutes. A failed start here settles every later start that
shares its fate, and each forward search resumes where the last one stopped, so a text is read a
bounded number of times. :class:`ScannedPattern` offers what the callers use of a compiled pattern
(``search``, ``finditer``, ``sub``) and carries the regex it matches as, which stays its definition
(a ``regex:`` attribute spec of that pattern is matched by the scan; tests compare the two).
Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["BOLD", "LINK", "LINK_WITH_IMAGE", "SCANNED", "ScannedPattern"]

_WORD, _SPACE = re.compile(r"\w"), re.compile(r"\s")
Span = tuple[int, int, tuple[str, ...]]  # start, end, groups


class _Forward:
    """The first match of ``pattern`` at or after a position, reusing the last search while the
    position lies between where it started and what it found (nothing matches in between)."""

    def __init__(self, pattern: re.Pattern[str], text: str):
        self.pattern, self.text, self.since, self.found = pattern, text, -1, -1

    def at(self, position: int) -> int:
        if not self.since <= position <= self.found:
            match = self.pattern.search(self.text, position)
            self.since, self.found = position, match.start() if match else len(self.text)
        return self.found


class _Bold:
    """``marker`` text ``marker`` on one line (``**`` or ``__``), as the bold regex reads it: a start
    not after a word character nor before a space; the first character after it that is neither a
    space nor the marker's (before the line ends); then the first close (not after a space nor
    before a word character) after that character on the same line."""

    def __init__(self, text: str, marker: str):
        self.text, self.marker = text, marker * 2
        self.content = _Forward(re.compile(rf"[^\s{re.escape(marker)}]|\n"), text)
        self.close = _Forward(re.compile(rf"(?<!\s)(?={re.escape(self.marker)}(?!\w))"), text)
        self.newline = _Forward(re.compile(r"\n"), text)

    def next_from(self, position: int) -> tuple[int, int] | None:
        text, size = self.text, len(self.text)
        while (start := text.find(self.marker, position)) >= 0:
            inside = start + 2
            if (start and _WORD.match(text, start - 1)) or inside >= size or _SPACE.match(text, inside):
                position = start + 1
                continue
            first = self.content.at(inside)
            if first >= size:
                return None
            if text[first] == "\n":  # a later start on this line finds the same newline
                position = first + 1
                continue
            close, line_end = self.close.at(first + 1), self.newline.at(first)
            if close < line_end:
                return start, close + 2
            position = line_end + 1  # a later start on this line has no close either
        return None


def _bold_spans(text: str) -> Iterator[Span]:
    """The non-overlapping bold spans, left to right, as ``finditer`` of the bold regex gives them."""
    scans = [_Bold(text, marker) for marker in "*_" if marker * 2 in text]
    upcoming = [scan.next_from(0) for scan in scans]
    while any(upcoming):
        start, end = min(span for span in upcoming if span is not None)
        yield start, end, ()
        upcoming = [scan.next_from(end) if span is not None and span[0] < end else span
                    for scan, span in zip(scans, upcoming)]


def _link_spans(text: str, image: bool = False) -> Iterator[Span]:
    """``[text](url)`` or ``[text](url "title")`` spans (an image's ``!`` with it when ``image``),
    groups (text, url), as ``finditer`` of the link regex gives them: from a ``[`` everything is
    decided by the first ``]`` or newline after it, so the starts before that share one answer."""
    size, position, last_end = len(text), 0, 0
    bracket_end = _Forward(re.compile(r"[\]\n]"), text)
    url_end, title_start = _Forward(re.compile(r"[)\s]"), text), _Forward(re.compile(r"[^ \t]"), text)
    title_end = _Forward(re.compile(r"[\"\n]"), text)
    while (start := text.find("[", position)) >= 0:
        close = bracket_end.at(start + 1)
        end = None
        if start + 1 < close < size and text[close] == "]" and text.startswith("(", close + 1):
            url = url_end.at(close + 2)
            if close + 2 < url < size and text[url] == ")":
                end = url + 1
            elif close + 2 < url < size and text[url] in " \t":
                quote = title_start.at(url)
                if quote < size and text[quote] == '"':
                    closing = title_end.at(quote + 1)
                    end = closing + 2 if text.startswith('")', closing) else None
        if end is None:
            position = start + 1 if close == start + 1 else close + 1
            continue
        begin = start - 1 if image and start > last_end and text[start - 1] == "!" else start
        yield begin, end, (text[start + 1:close], text[close + 2:url])
        position = last_end = end


def _image_link_spans(text: str) -> Iterator[Span]:
    return _link_spans(text, image=True)


class _Found:
    """The part of ``re.Match`` a replacement function reads."""

    def __init__(self, text: str, span: Span):
        self.string, (self._start, self._end, self._groups) = text, span

    def group(self, index: int = 0) -> str:
        return self.string[self._start:self._end] if index == 0 else self._groups[index - 1]

    def span(self) -> tuple[int, int]:
        return self._start, self._end


@dataclass(frozen=True)
class ScannedPattern:
    """A regex (``pattern``) matched by a linear scan: ``search``, ``finditer`` and ``sub`` give the
    spans ``re.compile(pattern)`` gives."""

    pattern: str
    spans: Callable[[str], Iterator[Span]]

    def finditer(self, text: str) -> Iterator[_Found]:
        return (_Found(text, span) for span in self.spans(text))

    def search(self, text: str) -> _Found | None:
        return next(self.finditer(text), None)

    def sub(self, replacement: str | Callable[[_Found], str], text: str) -> str:
        """``re.sub``; a string replacement is taken literally (it may hold no backslash)."""
        if isinstance(replacement, str) and "\\" in replacement:
            raise ValueError(f"ScannedPattern.sub: a template ({replacement!r}) is not supported; pass a function")
        pieces, last = [], 0
        for found in self.finditer(text):
            start, end = found.span()
            pieces += [text[last:start], replacement if isinstance(replacement, str) else replacement(found)]
            last = end
        return "".join(pieces) + text[last:] if pieces else text


# **bold** / __bold__ on one line, not inside a word ("x**2 + y**2" is not bold) and with at least
# one character other than the marker ("****" is not bold)
BOLD = ScannedPattern(r"\*\*(?<!\w\*\*)(?!\s)[^\n]*?[^\s*][^\n]*?(?<!\s)\*\*(?!\w)"
                      r"|__(?<!\w__)(?!\s)[^\n]*?[^\s_][^\n]*?(?<!\s)__(?!\w)", _bold_spans)
# [text](url) or [text](url "title"), images included; with the image's "!" and groups (text, url)
LINK = ScannedPattern(r"\[[^\]\n]+\]\([^)\s]+(?:[ \t]+\"[^\"\n]*\")?\)", _link_spans)
LINK_WITH_IMAGE = ScannedPattern(r"!?\[([^\]\n]+)\]\(([^)\s]+)(?:[ \t]+\"[^\"\n]*\")?\)", _image_link_spans)
SCANNED: dict[str, ScannedPattern] = {scanned.pattern: scanned for scanned in (BOLD, LINK, LINK_WITH_IMAGE)}
"""Regex -> its scan: a ``regex:`` attribute of one of these (discover's ``md_bold``) is matched by the scan."""
