"""badpo's warnings: one category, printed as ``badpo: warning: MESSAGE`` without a source path.

A warning from badpo is about the user's data, config or run, never about the line of badpo that
noticed it, so the path and line that Python prints before a warning only hide the message. Every
warning badpo raises is a :class:`BadpoWarning` (a ``UserWarning``, so ``pytest.warns(UserWarning)``
and ``-W ignore::UserWarning`` still catch it). Importing this module wraps
``warnings.formatwarning`` once: a BadpoWarning is formatted as one line, and every other warning
is passed to the formatter that was there before, so other libraries' warnings print as they did.
Filters are untouched: ``warnings.simplefilter("ignore", BadpoWarning)`` silences badpo alone.
"""

from __future__ import annotations

import warnings

__all__ = ["BadpoWarning", "format_warning"]


class BadpoWarning(UserWarning):
    """A warning about the user's data, config or run (the base of every badpo warning)."""


def format_warning(message, category, filename, lineno, line=None) -> str:
    """``badpo: warning: MESSAGE`` for a :class:`BadpoWarning`; other warnings as before."""
    if isinstance(category, type) and issubclass(category, BadpoWarning):
        return f"badpo: warning: {message}\n"
    return format_warning.badpo_wraps(message, category, filename, lineno, line)


def _install() -> None:
    """Put :func:`format_warning` in front of the formatter in place; a module reloaded (or a
    second copy of badpo) wraps the formatter the first one wrapped, never itself."""
    current = warnings.formatwarning
    format_warning.badpo_wraps = getattr(current, "badpo_wraps", None) or current
    warnings.formatwarning = format_warning


_install()
