"""``badpo experiment``: one reference, every (arm, seed) logged once, tables from the logs.

- :mod:`badpo.experiment.config`: :class:`ExperimentConfig` (YAML under ``configs/experiment_*``).
- :mod:`badpo.experiment.runner`: keys, atomic run records, the resumable sweep.
- :mod:`badpo.experiment.tables`: ``render_tables(run_records, layout) -> (markdown, csv)``.
- :mod:`badpo.experiment.plots`: rates.png, theta.png.
- :mod:`badpo.experiment.stages`: the real stages (engine + evaluation) behind the runner.
- :mod:`badpo.experiment.pipeline`: ``run_experiment``: corpus, plan, sweep, tables and plots.

Imports among them point one way: config <- runner <- tables <- plots, runner <- stages, and
pipeline on top of them all.

Names are imported on first use, so that keying a run does not import torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ArmSpec": "config", "ColumnSpec": "config", "CorpusSpec": "config", "ExperimentConfig": "config",
    "PlotSpec": "config", "TableSpec": "config",
    "RunTask": "runner", "Stages": "runner", "read_records": "runner", "run_key": "runner",
    "run_experiment": "pipeline",
    "TableLayout": "tables", "render_from_disk": "tables", "render_tables": "tables",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'badpo.experiment' has no attribute {name!r}")
    return getattr(importlib.import_module(f"badpo.experiment.{_EXPORTS[name]}"), name)
