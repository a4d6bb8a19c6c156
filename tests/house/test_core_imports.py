"""The core imports torch, numpy and the standard library only (checked in a fresh interpreter).

A user who only audits labels, or computes the loss inside their own trainer, should not pay
for (or need) transformers, datasets, accelerate or peft. Modules are imported one at a time so
that a failure names the module that pulled the heavy library in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def _folder(name: str) -> list[str]:
    return sorted(".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
                  for p in (SRC / "badpo" / name).glob("*.py"))


# every module of core/ and methods/, and the pure modules of the layers above them
CORE = [*_folder("core"), *_folder("methods"), "badpo.auditing.estimates", "badpo.readouts.metrics",
        "badpo.readouts.mixture_metrics", "badpo.comparing.over_seeds", "badpo.comparing.intervals",
        "badpo.comparing.comparison", "experiments.anchoring", "badpo.run_folder.layout", "badpo.run_folder.identity",
        "badpo.run_folder.ownership", "badpo.run_folder.final_commit", "badpo.run_folder.paths"]
# the judgment row and the name pool: a user who only reads or writes judgments needs no torch
STANDARD_LIBRARY_ONLY = ["badpo.core.judgments", "badpo.core.names", "badpo.data"]
HEAVY = ["transformers", "datasets", "accelerate", "peft", "tokenizers", "scipy"]

PROBE = """
import importlib, json, sys
heavy = {heavy!r}
loaded = {{}}
for name in {core!r}:
    importlib.import_module(name)
    loaded[name] = sorted(m for m in heavy + ["torch"] if m in sys.modules)
print(json.dumps(loaded))
"""


def test_core_modules_import_no_heavy_library():
    code = PROBE.format(heavy=HEAVY,
                        core=[*STANDARD_LIBRARY_ONLY, *(m for m in CORE if m not in STANDARD_LIBRARY_ONLY)])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(result.stdout)
    assert len(CORE) > 12 and "badpo.core.losses" in CORE  # the folders were found
    for name in STANDARD_LIBRARY_ONLY:
        assert loaded[name] == [], f"{name} must not even need torch"
    for name in CORE:
        assert set(loaded[name]) <= {"torch"}, f"{name} pulled in {loaded[name]}"
