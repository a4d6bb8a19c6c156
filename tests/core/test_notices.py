"""badpo's warnings print as one line without a source path, other libraries' as before, and every
warning badpo raises is a BadpoWarning (so that the formatter knows it)."""

from __future__ import annotations

import ast
import importlib
import io
import warnings
from pathlib import Path

from badpo.core.notices import BadpoWarning, format_warning

SRC = Path(__file__).resolve().parents[2] / "src"


def shown(message: str, category: type[Warning]) -> str:
    """What Python prints for one warning (the default showwarning, into a buffer)."""
    stream = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        saved = warnings.showwarning
        warnings.showwarning = lambda *args, **kwargs: stream.write(
            warnings.formatwarning(args[0], args[1], args[2], args[3], kwargs.get("line")))
        try:
            warnings.warn(message, category, stacklevel=1)
        finally:
            warnings.showwarning = saved
    return stream.getvalue()


def test_a_badpo_warning_is_one_line_and_any_other_keeps_its_source_path():
    assert warnings.formatwarning is format_warning  # installed by importing badpo.core.notices
    assert shown("3 columns ignored", BadpoWarning) == "badpo: warning: 3 columns ignored\n"
    other = shown("old API", DeprecationWarning)
    assert other.startswith(f"{__file__}:") and "DeprecationWarning: old API" in other
    plain = shown("not ours", UserWarning)
    assert __file__ in plain and "badpo: warning" not in plain


def test_installing_twice_does_not_wrap_its_own_formatter():
    """A second install (a reload, a second copy of badpo) wraps what the first one wrapped."""
    import badpo.core.notices as notices

    before = format_warning.badpo_wraps
    notices._install()
    assert warnings.formatwarning is format_warning and format_warning.badpo_wraps is before
    assert "DeprecationWarning: x" in shown("x", DeprecationWarning)  # no recursion


def _category(call: ast.Call) -> ast.expr | None:
    if len(call.args) > 1:
        return call.args[1]
    return next((k.value for k in call.keywords if k.arg == "category"), None)


def test_every_warning_badpo_raises_is_a_badpo_warning():
    """Each ``warnings.warn`` in src/badpo names a category, and that class is a BadpoWarning."""
    calls = 0
    for path in sorted((SRC / "badpo").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "warn" and getattr(node.func.value, "id", None) == "warnings"):
                continue
            calls += 1
            category = _category(node)
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            assert isinstance(category, ast.Name), f"{where}: warnings.warn without a BadpoWarning category"
            module = importlib.import_module(".".join(path.relative_to(SRC).with_suffix("").parts))
            assert issubclass(getattr(module, category.id), BadpoWarning), where
    assert calls >= 10
