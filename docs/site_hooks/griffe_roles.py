"""A griffe extension for the docs site: badpo's docstrings use reST roles (:class:`x`, :func:`~a.b`)
and double backquotes, which mkdocstrings would show verbatim; here they become Markdown code
spans (the name as written, without a leading ``~`` or the path it hides)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|obj|exc):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def markdown_docstring(text: str) -> str:
    """reST roles and ``literals`` as Markdown code spans; a ``~`` keeps only the last name."""
    def role(match: re.Match) -> str:
        name = match.group(1)
        shown = name.rsplit(".", 1)[-1] if match.group(0).count("~") else name
        return f"`{shown}`"
    return _LITERAL.sub(r"`\1`", _ROLE.sub(role, text))


class SphinxRoles(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
