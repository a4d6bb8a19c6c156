"""Markdown in a response: whether it has markup, which constructs, and the text without it.

The ``markdown`` attribute (:mod:`badpo.core.attributes`) is :func:`has_markdown` of a response;
its RM⁻ transform and its counterfactual edit are :func:`strip_markdown`. What counts as markup is
chosen so that plain prose (arithmetic, ``snake_case``, a signature's ``---`` line) does not:
:data:`MARKDOWN_PATTERNS` lists each construct with the near misses it must not match, and
docs/data-format.md states the rule for users. Standard library only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from badpo.core.markdown_scan import BOLD, LINK, LINK_WITH_IMAGE, ScannedPattern

__all__ = ["MARKDOWN_PATTERNS", "has_markdown", "markdown_constructs", "strip_markdown"]

_LINE_START = re.MULTILINE
# Each runs in time linear in the text: bold and links by a scan with their regex's spans
# (badpo.core.markdown_scan), the table's pipe line through a lookahead, which is never retried.
MARKDOWN_PATTERNS: dict[str, re.Pattern[str] | ScannedPattern] = {
    # "# Title" .. "###### Title": 1-6 hashes then a space; "#tbt" and "C# is" are not headings.
    "heading": re.compile(r"^ {0,3}#{1,6}[ \t]+\S", _LINE_START),
    # "- item", "* item", "+ item" (any indentation); "--- Name" and "5 * 3" are not.
    "bullet_list": re.compile(r"^[ \t]*[-*+][ \t]+\S", _LINE_START),
    # "1. item" / "1) item" at line start; "1.5 million" and "in 2019. Then" are not.
    "ordered_list": re.compile(r"^[ \t]*\d{1,9}[.)][ \t]+\S", _LINE_START),
    # an opening code fence ``` or ~~~ (closed or not, as CommonMark renders it)
    "code_fence": re.compile(r"^ {0,3}(?:```|~~~)", _LINE_START),
    # **bold** / __bold__ on one line, not inside a word ("x**2 + y**2" is not bold) and
    # with at least one character other than the marker ("****" is not bold)
    "bold": BOLD,
    # a line holding a pipe, directly followed by a delimiter row such as "|---|:--:|"
    "table": re.compile(r"^(?=[^\n]*\|)[^\n]*\n[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?$",
                        _LINE_START),
    # "> quoted" at line start
    "blockquote": re.compile(r"^ {0,3}>[ \t]+\S", _LINE_START),
    # [text](url) or [text](url "title"), images included
    "link": LINK,
    # `code`: two backticks on one line around something
    "inline_code": re.compile(r"`[^`\n]+`"),
}


# Substrings a construct cannot match without: a cheap test that skips most regex searches.
_NEEDS: dict[str, tuple[str, ...]] = {
    "heading": ("#",), "code_fence": ("```", "~~~"), "bold": ("**", "__"), "table": ("|",),
    "blockquote": (">",), "link": ("](",), "inline_code": ("`",),
}


def _found(name: str, text: str) -> bool:
    needs = _NEEDS.get(name)
    if needs is not None and not any(needle in text for needle in needs):
        return False
    return MARKDOWN_PATTERNS[name].search(text) is not None


def markdown_constructs(text: str) -> tuple[str, ...]:
    """Names of the :data:`MARKDOWN_PATTERNS` found in ``text`` (for inspection and tests)."""
    text = _normalise_newlines(text)
    return tuple(name for name in MARKDOWN_PATTERNS if _found(name, text))


@functools.lru_cache(maxsize=1 << 16)
def has_markdown(text: str) -> bool:
    """True when the text contains markdown markup: any construct of :data:`MARKDOWN_PATTERNS`.

    Counted: ATX headings (``# `` .. ``###### `` at line start, up to 3 spaces of indent),
    bullet items (``- ``, ``* ``, ``+ `` after any indentation), ordered items (``1. ``,
    ``1) ``), code fences (three backticks or ``~~~`` at line start), ``**bold**`` and ``__bold__``
    (not inside a word), pipe tables (a line with ``|`` followed by a delimiter row of
    ``-``/``:`` cells separated by ``|``), blockquotes (``> `` at line start), inline links
    ``[text](url)`` and inline code (a pair of backticks on one line). Not counted, because plain prose produces
    them: single-marker emphasis (``*x*``, ``_x_``: ``2*x + 3*y``, ``snake_case``),
    horizontal rules and setext underlines (``---``, as in the signature line), indented
    code blocks, HTML tags, bare URLs and e-mail addresses. Line ends ``\\r\\n`` and ``\\r``
    are read as ``\\n``.
    """
    text = _normalise_newlines(text)
    return any(_found(name, text) for name in MARKDOWN_PATTERNS)


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _inner(marker_length: int) -> Callable[[re.Match[str]], str]:
    """The text a paired marker (``**``, a backtick) encloses."""
    return lambda match: match.group(0)[marker_length:-marker_length]


def _plain_table(match: re.Match[str]) -> str:
    """A pipe table as plain lines: the delimiter row dropped, each row's cells joined by ", "."""
    header, _delimiter, *rows = match.group(0).split("\n")
    return "\n".join(", ".join(cell.strip() for cell in line.strip().strip("|").split("|"))
                     for line in (header, *rows))


# construct -> (what to replace, by what): each pattern matches exactly where the construct's
# MARKDOWN_PATTERNS entry does, and every replacement is shorter than what it replaces.
_PLAIN: dict[str, tuple[re.Pattern[str] | ScannedPattern, str | Callable]] = {
    "heading": (re.compile(r"^ {0,3}#{1,6}[ \t]+(?=\S)", _LINE_START), ""),
    "bullet_list": (re.compile(r"^([ \t]*)[-*+][ \t]+(?=\S)", _LINE_START), r"\1"),
    "ordered_list": (re.compile(r"^([ \t]*)\d{1,9}[.)][ \t]+(?=\S)", _LINE_START), r"\1"),
    "code_fence": (re.compile(r"^ {0,3}(?:```|~~~)[^\n]*\n?", _LINE_START), ""),
    "bold": (MARKDOWN_PATTERNS["bold"], _inner(2)),
    # the header and delimiter rows, then every following line that holds a pipe
    "table": (re.compile(MARKDOWN_PATTERNS["table"].pattern + r"(?:\n[^\n]*\|[^\n]*)*", _LINE_START),
              _plain_table),
    "blockquote": (re.compile(r"^ {0,3}>[ \t]+(?=\S)", _LINE_START), ""),
    # an image's "!" goes with it
    "link": (LINK_WITH_IMAGE, lambda match: f"{match.group(1)} ({match.group(2)})"),
    "inline_code": (MARKDOWN_PATTERNS["inline_code"], _inner(1)),
}


def strip_markdown(text: str) -> str:
    """The text with its markup removed (for RM⁻ under a markdown attribute), so that
    :func:`has_markdown` is False on the result: heading, bullet, item-number and blockquote
    markers and code-fence lines are dropped, ``**bold**`` and `` `code` `` keep their text,
    ``[text](url)`` reads ``text (url)``, a pipe table loses its delimiter row and its pipes
    (cells joined by ", "). Text without markdown comes back unchanged; text with it comes back
    with ``\n`` line ends. Passes repeat until nothing changes, because removing one marker can
    expose another ("- **x**", "> - item"); markup still there after :data:`_PASSES` passes is
    nested deeper than answers nest it (a hostile row, "> > > ..." thousands deep, which would
    take a pass per level), and is flattened instead (:func:`_flatten`)."""
    if not has_markdown(text):
        return text
    text = _normalise_newlines(text)
    for _ in range(_PASSES):
        plain = text
        for name in MARKDOWN_PATTERNS:
            pattern, replacement = _PLAIN[name]
            plain = pattern.sub(replacement, plain)
        if plain == text:
            return text
        text = plain
    return _flatten(text) if has_markdown(text) else text


_PASSES = 16
_MARKUP_CHARACTERS = re.compile(r"[*_`#>|\[~]")
_LINE_MARKERS = re.compile(r"^([ \t]*)(?:(?:[-+]|\d{1,9}[.)])[ \t]+)+", _LINE_START)


def _flatten(text: str) -> str:
    """``text`` without any character markup needs, and without the list markers that start its
    lines (their indentation kept): no construct of :data:`MARKDOWN_PATTERNS` is left, in one pass."""
    return _LINE_MARKERS.sub(r"\1", _MARKUP_CHARACTERS.sub("", text))
