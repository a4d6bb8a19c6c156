"""Names that explain themselves (issue 71 item 6): no two classes of the library share a name, and
no two modules share a basename but where the folder says which (a readout's row is named after its
readout, a package's table is its ``table.py``); a new clash fails here."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "src" / "badpo"
# basename: the modules that may share it, and why a reader cannot confuse them
SHARED = {
    "table.py": {"methods/table.py", "readouts/table.py"},  # each package's table
    "names.py": {"core/names.py", "readouts/rows/names.py"},  # rows/ is named after READOUTS' rows
    "candidates.py": {"readouts/rows/candidates.py"},
    "config.py": {"core/config.py", "experiment/config.py"},  # an experiment's config is its own
    "plots.py": {"comparing/plots.py", "experiment/plots.py"},  # a comparison's plots, a table's
}


def test_no_two_classes_of_the_library_share_a_name():
    where = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(path.relative_to(ROOT).as_posix())
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_a_shared_module_basename_is_one_the_folder_explains():
    by_name = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        if path.name != "__init__.py":
            by_name[path.name].add(path.relative_to(ROOT).as_posix())
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert {name: paths - SHARED.get(name, set()) for name, paths in clashes.items()
            if paths - SHARED.get(name, set())} == {}
