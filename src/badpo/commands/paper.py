"""``badpo experiment``, ``badpo reproduce`` and ``badpo demo``: the paper's experiments
(:mod:`badpo.paper`), the one command module that reaches them. The pipeline, its backend and the
cure load torch and the engine: they are imported inside the command that runs them."""

from __future__ import annotations

import argparse
import time

from badpo.commands.parsing import Command
from badpo.core.config import load_config
from badpo.paper.config import ExperimentConfig, experiment_config_path

__all__ = ["PAPER"]


def _sweep_config() -> type:
    from badpo.paper.reproduce_plan import ReproduceConfig

    return ReproduceConfig


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
    from badpo.paper.pipeline import run_experiment  # loads torch and the engine

    config = load_config(ExperimentConfig, experiment_config_path(name_or_path), overrides)
    return run_experiment(config, render_only=render_only)


def _run_table(args: argparse.Namespace) -> int:
    from badpo.paper.cure.config import is_cure_config, load_cure_config

    path = experiment_config_path(args.config)
    if is_cure_config(path):  # kind: fixed_offset_cure, the table of the fixed-offset cure
        from badpo.paper.cure.backend import run_cure_config

        run_cure_config(load_cure_config(path, args.overrides), render_only=args.render_only)
        return 0
    _experiment(args.config, args.overrides, render_only=args.render_only)
    return 0


def _add_demo(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo", help="the whole effect on a laptop: DPO absorbs a planted bias, BA-DPO removes it",
        description="Build the tiny signed world, train the reference, run DPO, BA-DPO pooled and "
                    "BA-DPO theta_bar+eps_k at three seeds, evaluate, and print the table "
                    "(the built-in experiment 'tiny'; about 2.5 minutes on two CPU cores, 4 with the install). "
                    "The keys below are an experiment's; their defaults are the class's, which the "
                    "tiny experiment (src/badpo/paper/tiny.yaml) sets otherwise.",
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


def _add_reproduce(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "reproduce", help="every table of a sweep in one resumable command, into one report folder",
        description="Run each experiment a sweep config lists (what is logged is skipped, so an "
                    "interrupted sweep resumes), then gather every table.md / table.csv / plot into "
                    "the report folder with a README.md holding each table beside the paper's. One "
                    "progress view over the whole sweep: runs done / to run, elapsed, time left. "
                    "configs/reproduce_tiny.yaml is every tiny table (run from the repository root).",
        config_classes=[("sweep keys", _sweep_config)],
    )
    parser.add_argument("config", help="sweep YAML (badpo.paper.reproduce.ReproduceConfig keys)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="dotted overrides of the sweep, e.g. output_dir=runs/my_report")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--render-only", action="store_true",
                      help="train nothing: rebuild the report from the logged runs (all must exist)")
    mode.add_argument("--plan", action="store_true",
                      help="run and build nothing: per table, the runs logged and to run (keyed as the "
                           "sweep keys them), an estimated wall time and what it rests on, where the "
                           "report lands")
    return parser


def _run_reproduce(args: argparse.Namespace) -> int:
    from badpo.paper.backend import engine_backend
    from badpo.paper.cure.backend import cure_backend  # loads torch and the engine
    from badpo.paper.reproduce import ReproduceConfig, run_reproduce
    from badpo.paper.reproduce_plan import plan_sweep

    config = load_config(ReproduceConfig, args.config, args.overrides)
    if args.plan:
        print(plan_sweep(config, engine_backend(), cure_backend()).text(), end="")
        return 0
    result = run_reproduce(config, engine_backend(), cure_backend(), render_only=args.render_only)
    print(f"report: {result['report']} (sweep wall time {result['wall_s']:.0f} s)")
    return 0


PAPER = (Command("experiment", _add_experiment, _run_table),
         Command("reproduce", _add_reproduce, _run_reproduce), Command("demo", _add_demo, _run_demo))
