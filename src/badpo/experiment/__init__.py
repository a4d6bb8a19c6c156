"""The paper's experiments, on top of the library and never imported by it (``tests/house/
test_layering.py`` holds that): ``badpo experiment`` and ``python -m experiments reproduce`` run them.

- :mod:`badpo.experiment.config`: :class:`ExperimentConfig` (YAML under ``experiments/configs/experiment_*``).
- :mod:`badpo.experiment.records`: run keys and atomic run records.
- :mod:`badpo.experiment.runner`: the resumable sweep (corpus, plan, runs).
- :mod:`badpo.experiment.tables`: ``render_tables(run_records, layout) -> (markdown, csv)``.
- :mod:`badpo.experiment.plots`: rates.png, theta.png.
- :mod:`badpo.experiment.backend`: the real backend (engine + evaluation) behind the runner.
- :mod:`badpo.experiment.pipeline`: ``run_experiment``: corpus, plan, sweep, tables and plots.
- :mod:`experiments.reproduce`, :mod:`experiments.reproduce_plan`: every table of a sweep.
- :mod:`experiments.cure` and :mod:`experiments.anchoring`: the fixed-offset cure and its maths.
- :mod:`badpo.experiment.provenance`: the commit, packages and device behind each run record.

Imports among them point one way: records, config <- runner <- tables <- plots, runner <- backend,
and pipeline on top of them all. Import the module that defines a name; this package exports none, so
that keying a run imports neither torch nor the engine.
"""
