"""``badpo experiment`` and ``badpo demo``: a table of arms over seeds on a corpus of one's own or a
built one (:mod:`badpo.experiment`), the one command module that reaches it. The pipeline and its
backend load torch and the engine: they are imported inside the command that runs them. The paper's
own experiments (the cure, ``reproduce``) live beside the library, in ``experiments/``."""

from __future__ import annotations

import argparse
import time

from badpo.commands.parsing import Command
from badpo.core.config import ConfigError, load_config, read_settings
from badpo.experiment.config import ExperimentConfig, experiment_config_path

__all__ = ["EXPERIMENT"]


def _add_experiment(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "experiment", help="run a table: one reference, every (arm, seed) once, tables and plots",
        description="Run what CONFIG lists that is not logged yet under its output_dir, then "
                    "render table.md / table.csv / rates.png / theta.png from the logged runs.",
        config_classes=[("experiment keys", lambda: ExperimentConfig)],
    )
    parser.add_argument("config", help="experiment YAML, or 'tiny' for the built-in tiny-world table")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="dotted overrides, e.g. seeds=[42] output_dir=runs/try")
    parser.add_argument("--render-only", action="store_true",
                        help="run nothing: render the tables from the logged runs (all must exist)")
    return parser


def _experiment(name_or_path: str, overrides, render_only: bool = False) -> dict:
    """Load an experiment (a YAML path or a built-in name) with overrides and run it."""
    from badpo.experiment.pipeline import run_experiment  # loads torch and the engine

    config = load_config(ExperimentConfig, experiment_config_path(name_or_path), overrides)
    return run_experiment(config, render_only=render_only)


def _run_experiment(args: argparse.Namespace) -> int:
    path = experiment_config_path(args.config)
    kind = read_settings(path).get("kind") if path.is_file() else None
    if kind is not None:  # the paper's cure: not a table of arms
        raise ConfigError(f"{path}: kind: {kind} is not a table of arms; the paper's "
                          f"fixed-offset cure runs beside the library, from the repository root: "
                          f"python -m experiments experiment {args.config}")
    _experiment(args.config, args.overrides, render_only=args.render_only)
    return 0


def _add_demo(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo", help="the whole effect on a laptop: DPO absorbs a planted bias, BA-DPO removes it",
        description="Build the tiny signed world, train the reference, run DPO, BA-DPO pooled and "
                    "BA-DPO theta_bar+eps_k at three seeds, evaluate, and print the table "
                    "(the built-in experiment 'tiny'; about 2.5 minutes on two CPU cores, 4 with the install). "
                    "The keys below are an experiment's; their defaults are the class's, which the "
                    "tiny experiment (src/badpo/experiment/tiny.yaml) sets otherwise.",
        config_classes=[("experiment keys", lambda: ExperimentConfig)],
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="dotted overrides of the tiny experiment, e.g. output_dir=runs/mine")
    return parser


def _run_demo(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    result = _experiment("tiny", args.overrides)
    print(f"files: {', '.join(str(f) for f in result['files'])}")  # the runner printed the table
    print(f"demo wall time: {time.perf_counter() - start:.0f} s")
    return 0


EXPERIMENT = (Command("experiment", _add_experiment, _run_experiment), Command("demo", _add_demo, _run_demo))
