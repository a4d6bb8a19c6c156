"""Imports point one way, and the layers are the folders of ``src/badpo``:

    core -> methods -> data -> audit -> corpora -> engine -> readouts -> experiment -> cli -> integrations

A module's layer is its folder (``badpo/core/losses.py`` is in ``core``); ``cli.py`` and
``api.py`` (the two front doors) are the ``cli`` layer, and the package root ``badpo`` imports
nothing. Every ``import badpo...`` and ``from badpo... import`` statement counts, at module level
or inside a function (a function-local import is still a dependency, it only hides a cycle until
the function runs), relative imports included. A module may import from its own layer or a lower
one. The graph of badpo modules must have no cycle.

Importing ``badpo.a.b`` also runs the package ``badpo.a`` (its ``__init__``); from outside that
package this counts as an edge to the package too, so an ``__init__`` cannot hide an upward
import either.

Dynamic imports (``importlib.import_module`` of a name in a string: the corpus builders of
``badpo.corpora.builders``, the stage functions of ``badpo.cli``, the lazy names of
``badpo.experiment`` and of ``badpo``, the call of the package ``badpo.audit``, which is the API's
audit) are not seen here.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "badpo"

# lowest first; integrations (adapters into other trainers) is an edge like cli: it may import
# everything, and as the top layer nothing may import it.
LAYERS = ("core", "methods", "data", "audit", "corpora", "engine", "readouts", "experiment", "cli",
          "integrations")
FRONT_DOORS = ("badpo.cli", "badpo.api")


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    if module == "badpo":
        return "core"  # the package root: a docstring, a version and lazy names only
    if module in FRONT_DOORS:
        return "cli"
    folder = module.split(".")[1]
    if folder in LAYERS and module.count(".") >= 1 and (SRC / "badpo" / folder).is_dir():
        return folder
    raise AssertionError(f"{module} is in no layer folder: move it into one of {LAYERS}")


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _target(name: str, known: dict[str, Path]) -> str:
    """The badpo module an imported dotted name refers to (a name inside a module: that module)."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports(module: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """{imported badpo module: first line} of every import statement in ``path``, at any depth."""
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            # ``from badpo.data import names`` imports the module badpo.core.names
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                     for alias in node.names]
        for name in names:
            if name != "badpo" and not name.startswith("badpo."):
                continue
            target = _target(name, known)
            assert target in known, f"{module} (line {node.lineno}) imports {name}, which does not exist"
            # importing badpo.a.b runs the package badpo.a first
            packages = [".".join(target.split(".")[:i]) for i in range(2, target.count(".") + 1)]
            for imported in [target, *packages]:
                if imported != module and not module.startswith(imported + "."):
                    found.setdefault(imported, node.lineno)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {module: imports(module, path, known) for module, path in known.items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, {}):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def violations(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every edge that points to a higher layer, or outside a module's narrower rule."""
    found = []
    for module, targets in sorted(graph.items()):
        rank = LAYERS.index(layer(module))
        for target, line in sorted(targets.items()):
            where = f"{module} -> {target} (line {line})"
            if LAYERS.index(layer(target)) > rank:
                found.append(f"{where}: {layer(module)} imports {layer(target)}")
    return found


def test_every_module_has_a_layer_and_every_import_exists():
    graph = import_graph()
    assert "badpo.cli" in graph and "badpo.core.bias" in graph  # the walk found the package
    for module in graph:
        layer(module)


def test_no_import_cycle_among_badpo_modules():
    graph = import_graph()
    found = cycles(graph)
    described = []
    for component in found:
        members = set(component)
        edges = [f"{a} -> {b} (line {graph[a][b]})" for a in component for b in graph[a] if b in members]
        described.append(" | ".join(edges))
    assert not found, "import cycles:\n  " + "\n  ".join(described)


def test_imports_point_to_the_same_or_a_lower_layer():
    found = violations(import_graph())
    assert not found, "imports of a higher layer:\n  " + "\n  ".join(found)


def test_the_checks_catch_a_cycle_and_an_upward_import():
    graph = {"badpo.core.bias": {"badpo.engine.train": 3}, "badpo.engine.train": {"badpo.core.bias": 1},
             "badpo.methods.table": {"badpo.audit.estimates": 5}}
    assert cycles(graph) == [["badpo.core.bias", "badpo.engine.train"]]
    assert violations(graph) == [
        "badpo.core.bias -> badpo.engine.train (line 3): core imports engine",
        "badpo.methods.table -> badpo.audit.estimates (line 5): methods imports audit",
    ]


def test_every_module_but_the_front_doors_lives_in_a_layer_folder():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert top == ["api", "cli"]
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(name for name in LAYERS if name != "cli")


def private_imports() -> list[str]:
    """Every ``from badpo.x import _name``: another module's private name, a contract nobody wrote."""
    found = []
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("badpo"):
                found += [f"{module} (line {node.lineno}) imports {node.module}.{alias.name}"
                          for alias in node.names if alias.name.startswith("_")]
    return found


def test_no_module_imports_another_modules_private_name():
    assert not private_imports(), "private names imported:\n  " + "\n  ".join(private_imports())
