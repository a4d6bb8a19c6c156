"""The paper's experiments, on top of the library and never imported by it (``tests/house/
test_layering.py`` holds that): ``badpo experiment`` and ``badpo reproduce`` run them.

- :mod:`badpo.paper.config`: :class:`ExperimentConfig` (YAML under ``configs/experiment_*``).
- :mod:`badpo.paper.records`: run keys and atomic run records.
- :mod:`badpo.paper.runner`: the resumable sweep (corpus, plan, runs).
- :mod:`badpo.paper.tables`: ``render_tables(run_records, layout) -> (markdown, csv)``.
- :mod:`badpo.paper.plots`: rates.png, theta.png.
- :mod:`badpo.paper.backend`: the real backend (engine + evaluation) behind the runner.
- :mod:`badpo.paper.pipeline`: ``run_experiment``: corpus, plan, sweep, tables and plots.
- :mod:`badpo.paper.reproduce`, :mod:`badpo.paper.reproduce_plan`: every table of a sweep.
- :mod:`badpo.paper.cure` and :mod:`badpo.paper.anchoring`: the fixed-offset cure and its maths.
- :mod:`badpo.paper.provenance`: the commit, packages and device behind each run record.

Imports among them point one way: records, config <- runner <- tables <- plots, runner <- backend,
and pipeline on top of them all. Import the module that defines a name; this package exports none, so
that keying a run imports neither torch nor the engine.
"""
