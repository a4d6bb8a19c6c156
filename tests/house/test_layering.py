"""Imports point one way, and the layers are the folders of ``src/badpo``:

    core -> methods -> data -> run_folder -> auditing -> corpora -> theta -> engine -> readouts -> evaluation
        -> comparing -> experiment -> cli -> integrations

A module's layer is its folder (``badpo/core/losses.py`` is in ``core``); ``cli.py``, ``api.py``,
the command modules of ``commands/`` and the package root ``badpo`` (whose lazy names are the
API's) are the ``cli`` layer, the front door. Every ``import badpo...`` and ``from badpo... import``
statement counts, at module level or inside a function (a function-local import is still a
dependency, it only hides a cycle until the function runs), relative imports included. A module may
import from its own layer or a lower one. The graph of badpo modules must have no cycle.

Importing ``badpo.a.b`` also runs the package ``badpo.a`` (its ``__init__``); from outside that
package this counts as an edge to the package too, so an ``__init__`` cannot hide an upward
import either.

Tables of arms over seeds (``badpo.experiment``) sit on the library: no library module imports them,
and of the front door only the command line does (``badpo experiment``, ``demo``). The paper's own
experiments (``experiments/``, beside ``src``) sit on top of it all: nothing in ``src/badpo`` imports
them.

No edge points upward. The audit layer is the package ``badpo.auditing``; ``badpo.audit(...)`` is
the API's function, a name of the package root imported on first use, so importing the audit layer
loads no front door. No module names another by a string
(``importlib.import_module``): a table row holds a function that imports late instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "badpo"

# lowest first; integrations (adapters into other trainers) is an edge like cli: it may import
# everything, and as the top layer nothing may import it.
LAYERS = ("core", "methods", "data", "run_folder", "auditing", "corpora", "theta", "engine", "readouts", "evaluation",
          "comparing", "experiment", "cli", "integrations")
FRONT_DOORS = ("badpo", "badpo.cli", "badpo.api")
FOLDERS_OF = {"commands": "cli"}  # a folder whose layer has another name
# the modules that may import badpo.experiment (besides itself)
EXPERIMENT_USERS = ("badpo.cli", "badpo.commands")


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    if module in FRONT_DOORS:
        return "cli"
    folder = module.split(".")[1]
    named = FOLDERS_OF.get(folder, folder)
    if named in LAYERS and module.count(".") >= 1 and (SRC / "badpo" / folder).is_dir():
        return named
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
    """{module: {imported module: line}}."""
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
             "badpo.methods.table": {"badpo.auditing.estimates": 5}}
    assert cycles(graph) == [["badpo.core.bias", "badpo.engine.train"]]
    assert violations(graph) == [
        "badpo.core.bias -> badpo.engine.train (line 3): core imports engine",
        "badpo.methods.table -> badpo.auditing.estimates (line 5): methods imports auditing",
    ]


def test_every_module_but_the_front_doors_lives_in_a_layer_folder():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert top == ["api", "cli"]
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted([*(name for name in LAYERS if name != "cli"), *FOLDERS_OF])


def experiment_importers(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every edge into ``badpo.experiment`` from a module outside it that is not the command line."""
    return [f"{module} -> {target} (line {line})" for module, targets in sorted(graph.items())
            for target, line in sorted(targets.items())
            if (target == "badpo.experiment" or target.startswith("badpo.experiment."))
            and not (module == "badpo.experiment" or module.startswith("badpo.experiment."))
            and not any(module == user or module.startswith(user + ".") for user in EXPERIMENT_USERS)]


def test_only_the_command_line_imports_the_experiment_tables():
    graph = import_graph()
    seen = graph["badpo.commands.experiment"]
    assert any(target.startswith("badpo.experiment.") for target in seen)  # the walk sees it
    found = experiment_importers(graph)
    assert not found, "the library imports badpo.experiment:\n  " + "\n  ".join(found)
    assert experiment_importers({"badpo.api": {"badpo.experiment.runner": 3},
                            "badpo.experiment.tables": {"badpo.experiment": 1},
                            "badpo.commands.experiment": {"badpo.experiment.config": 2}}) == [
        "badpo.api -> badpo.experiment.runner (line 3)"]


def test_no_edge_points_upward_and_the_audit_layer_loads_no_front_door():
    import subprocess
    import sys

    graph = import_graph()
    upward = {(module, target) for module, targets in graph.items() for target in targets
              if LAYERS.index(layer(target)) > LAYERS.index(layer(module))}
    assert upward == set()
    code = ("import sys, badpo.auditing.estimates, badpo; print('badpo.api' in sys.modules); "
            "print(callable(badpo.audit), badpo.audit is sys.modules['badpo.api'].audit)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True"]  # the audit layer loads no front door; badpo.audit is the API's


# modules that import the user's code by the name the user gave (never a badpo module)
USER_CODE_IMPORTERS = {"badpo.core.attributes": "a module:function attribute spec names the user's function"}


def string_imports() -> list[str]:
    """Every call of ``importlib.import_module`` (or ``__import__``) in the package: a module named
    by a string, an edge no test sees."""
    found = []
    for module, path in modules().items():
        if module in USER_CODE_IMPORTERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("import_module", "__import__"):
                    found.append(f"{module} (line {node.lineno})")
    return found


def test_no_module_is_imported_by_a_string():
    assert not string_imports(), "modules named by strings:\n  " + "\n  ".join(string_imports())


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


RESEARCH = ("benchmarks", "experiments")  # on top of the library: they may import any layer


def research_imports() -> list[str]:
    """What the research scripts import of badpo that is not there or not public: a module that does
    not exist (moved: the script would fail only when run) or another module's private name."""
    known, found = modules(), []
    for folder in RESEARCH:
        for path in sorted((SRC.parent / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                for name in (n for n in names if n.split(".")[0] == "badpo"):
                    if name not in known:
                        found.append(f"{folder}/{path.name} (line {node.lineno}) imports {name}, which does not exist")
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("badpo"):
                    found += [f"{folder}/{path.name} (line {node.lineno}) imports {node.module}.{alias.name}"
                              for alias in node.names if alias.name.startswith("_")]
    return found


def test_the_research_scripts_import_existing_public_badpo_names():
    """benchmarks/ and experiments/ read records and run folders through the library's readers, so a
    module they import must exist and a name they take from it must be public."""
    assert not research_imports(), "research scripts:\n  " + "\n  ".join(research_imports())


def test_the_library_never_imports_the_experiments_beside_it():
    """``experiments/`` is not in the wheel: a module of ``src/badpo`` that imported it would fail
    on every installed copy."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{module_name(path)} (line {node.lineno}) imports {n}" for n in names
                      if n.split(".")[0] in RESEARCH]
    assert not found, "\n  ".join(found)
