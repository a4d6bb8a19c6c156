"""Data written into Markdown as the text it is: an annotator id, a class, an attribute or file
name in a README, a model card or a report page is data, and Markdown would read ``**x**``, a
backtick, a pipe or a tag in it as markup (the audit report showed an id ``a|b`c`**bold**`` as live
code and bold, and README.md carried ``<script>`` ids raw; issue 76)."""

from __future__ import annotations

import html
import re

__all__ = ["code_span", "markdown_text"]


def code_span(text: str) -> str:
    """``text`` as one Markdown code span that no character of it can close or break: fenced by a
    run of backticks longer than any inside it (CommonMark), line breaks shown as ``\\n``. Inside a
    code span markup is text, so a spec with a backtick or a tag stays a spec."""
    shown = str(text).replace("\r", "\\r").replace("\n", "\\n")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") or not shown.strip() else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def markdown_text(text: str) -> str:
    """``text`` as inline Markdown (a table cell, a list item, a heading) shown as it is: ``<``,
    ``>``, ``&`` as entities (a tag would be live), a backslash, backtick, ``*``, ``_``, ``#``,
    brackets and the pipe escaped (no emphasis, link, heading or code span made of data), line
    breaks shown as ``\\n``."""
    shown = re.sub(r"([\\`*_\[\]|#])", r"\\\1", html.escape(str(text), quote=False))
    return shown.replace("\r", "\\r").replace("\n", "\\n")
