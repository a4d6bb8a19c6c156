"""The paper's experiments and the project's research record, on top of the badpo library and never
part of it: not in the wheel, never imported by ``src/badpo`` (``tests/house/test_layering.py``,
``tests/house/test_wheel_contents.py``). Run from the repository root: ``python -m experiments``.

- :mod:`experiments.cure`: the fixed-offset cure (the paper's anchoring section): config, steps,
  calibration, plan, table and the backend that trains and reads out its runs.
- :mod:`experiments.anchoring`: the cure's maths (fixed offsets, the signature pairs).
- :mod:`experiments.reproduce`, :mod:`experiments.reproduce_plan`: every table of a sweep in one
  resumable command, into one report folder, and its plan.
- ``configs/``: the experiments' YAML (the paper's tables, the level issue's worlds, the real model's
  seeds); ``analyses/`` and ``scripts/``: one-off analyses and tools behind the records under
  ``results/``.

They use badpo's public layers (:mod:`badpo.experiment` for keyed, resumable tables of arms; the
engine, the readouts) as any user's code would.
"""
