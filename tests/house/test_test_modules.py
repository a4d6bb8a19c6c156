"""The tests' own layout: no test module imports another (what tests share lives in tests/fixtures/,
imported as ``fixtures.<name>``), no two test files share a basename (pytest's default ``prepend``
import mode imports each test file under its basename, so a second one of the same name would be a
collection error), and the model builders reach tests only as fixtures (tests/conftest.py marks a
test ``slow`` by the fixtures it requests; an imported builder would escape the marking)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def all_test_paths() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def imported_names(path: Path) -> set[str]:
    """Every dotted name an ``import`` or ``from ... import`` of ``path`` reaches, at any depth (late
    imports inside functions count); ``from a import b`` gives ``a`` and ``a.b``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}".lstrip(".") for alias in node.names)
    return names


def test_no_module_under_tests_imports_a_test_module():
    test_modules = {path.stem for path in all_test_paths()}
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        hits = sorted(name for name in imported_names(path)
                      if any(part in test_modules for part in name.split(".")))
        if hits:
            offenders[str(path.relative_to(TESTS))] = hits
    assert not offenders, f"move what these share into tests/fixtures/: {offenders}"


def test_the_checker_sees_a_test_module_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from test_theory import World\n    import fixtures.test_x\n")
    assert {"test_theory", "test_theory.World", "fixtures.test_x"} <= imported_names(probe)


def test_test_basenames_are_unique_across_folders():
    counts = Counter(path.name for path in all_test_paths())
    assert [name for name, n in counts.items() if n > 1] == []
    assert len(counts) > 40  # the search found the layer folders


# (module, function) of every model builder that tests/conftest.py serves as a fixture. engine_backend
# is not here: a test that only plans an experiment imports it (and stays fast).
BUILDERS = {("fixtures.engine", "build_model"), ("fixtures.engine", "save_model_dir"),
            ("fixtures.engine", "build_judge"), ("badpo.corpora.tiny", "build_model"),
            ("badpo.corpora.tiny", "build_tiny_world"), ("badpo.corpora.tiny_multipref", "build_tiny_multipref")}


def test_model_builders_are_requested_as_fixtures_not_imported():
    from conftest import MODEL_BUILDERS

    assert {"build_tiny_model" if (module, name) == ("badpo.corpora.tiny", "build_model") else name
            for module, name in BUILDERS} <= MODEL_BUILDERS
    offenders = {}
    for path in all_test_paths():
        names = imported_names(path)
        hits = sorted(f"{module}.{name}" for module, name in BUILDERS if f"{module}.{name}" in names)
        if hits:
            offenders[str(path.relative_to(TESTS))] = hits
    assert not offenders, f"request these as fixtures (see tests/conftest.py): {offenders}"
