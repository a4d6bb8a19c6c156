"""The core imports torch, numpy and the standard library only (checked in a fresh interpreter).

A user who only audits labels, or computes the loss inside their own trainer, should not pay
for (or need) transformers, datasets, accelerate or peft. Modules are imported one at a time so
that a failure names the module that pulled the heavy library in.
"""

from __future__ import annotations

import json
import subprocess
import sys

CORE = [
    "badpo.data",  # the judgment row and the name pool: no torch either
    "badpo.losses",
    "badpo.bias",
    "badpo.attributes",
    "badpo.diagnostics",
    "badpo.readouts",
    "badpo.readouts_mixture",
    "badpo.anchoring",
]
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
    code = PROBE.format(heavy=HEAVY, core=CORE)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(result.stdout)
    assert loaded["badpo.data"] == [], "the data format must not even need torch"
    for name in CORE:
        assert set(loaded[name]) <= {"torch"}, f"{name} pulled in {loaded[name]}"
