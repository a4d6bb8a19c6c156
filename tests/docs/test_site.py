"""The docs site (mkdocs.yml): its two hooks, and that a broken link fails the strict build."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "docs" / "site_hooks"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"site_hooks_{name}", HOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rest_roles_become_markdown_code_spans():
    griffe = pytest.importorskip("griffe", reason="the docs extra (pip install -e '.[docs]') is not installed")
    assert griffe
    roles = _module("griffe_roles")
    text = "Read by :func:`read_run`, a :class:`~badpo.readouts.reading.Readout` row; ``skipped`` last."
    assert roles.markdown_docstring(text) == "Read by `read_run`, a `Readout` row; `skipped` last."
    assert roles.markdown_docstring(":mod:`badpo.core.bias`") == "`badpo.core.bias`"


def test_the_table_pages_list_every_row_the_code_runs():
    from badpo.methods.table import METHODS
    from badpo.readouts.table import READOUTS

    tables = _module("tables")
    page = tables.on_page_markdown("# Methods\n\n<!-- table: methods -->\n\n<!-- table: readouts -->\n")
    assert "<!-- table:" not in page
    method_rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert [line.split("`")[1] for line in method_rows] == list(METHODS)
    for row in READOUTS:
        assert f"| {row.name} |" in page
    assert "| `dpo` | any (none: no θ) |" in page and "| `em_dpo` | none |" in page and "ba_dpo_pooled" not in page


def test_a_broken_link_fails_the_strict_build(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') is not installed")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "src").symlink_to(ROOT / "src")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\nSee [the missing page](no_such_page.md).\n",
                     encoding="utf-8")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode != 0
    assert "no_such_page.md" in built.stderr
