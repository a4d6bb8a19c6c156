"""The commands of ``python -m experiments``: ``experiment`` (badpo's, which here also takes the
fixed-offset cure's config) and ``reproduce`` (every table of a sweep). Torch and the engine load
inside the command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from badpo.commands.experiment import EXPERIMENT
from badpo.commands.parsing import Command
from badpo.core.config import load_config
from badpo.experiment.config import ExperimentConfig, experiment_config_path

__all__ = ["COMMANDS", "main"]


def _sweep_config() -> type:
    from experiments.reproduce_plan import ReproduceConfig

    return ReproduceConfig


def _run_experiment(args: argparse.Namespace) -> int:
    from experiments.cure.config import is_cure_config, load_cure_config

    path = experiment_config_path(args.config)
    if is_cure_config(path):  # kind: fixed_offset_cure, the table of the fixed-offset cure
        from experiments.cure.backend import run_cure_config

        run_cure_config(load_cure_config(path, args.overrides), render_only=args.render_only)
        return 0
    from badpo.experiment.pipeline import run_experiment  # loads torch and the engine

    run_experiment(load_config(ExperimentConfig, path, args.overrides), render_only=args.render_only)
    return 0


def _add_reproduce(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "reproduce", help="every table of a sweep in one resumable command, into one report folder",
        description="Run each experiment a sweep config lists (what is logged is skipped, so an "
                    "interrupted sweep resumes), then gather every table.md / table.csv / plot into "
                    "the report folder with a README.md holding each table beside the paper's. One "
                    "progress view over the whole sweep: runs done / to run, elapsed, time left. "
                    "experiments/configs/reproduce_tiny.yaml is every tiny table (run from the repository root).",
        config_classes=[("sweep keys", _sweep_config)],
    )
    parser.add_argument("config", help="sweep YAML (experiments.reproduce_plan.ReproduceConfig keys)")
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
    from badpo.experiment.backend import engine_backend
    from experiments.cure.backend import cure_backend  # loads torch and the engine
    from experiments.reproduce import run_reproduce
    from experiments.reproduce_plan import ReproduceConfig, plan_sweep

    config = load_config(ReproduceConfig, args.config, args.overrides)
    if args.plan:
        print(plan_sweep(config, engine_backend(), cure_backend()).text(), end="")
        return 0
    result = run_reproduce(config, engine_backend(), cure_backend(), render_only=args.render_only)
    print(f"report: {result['report']} (sweep wall time {result['wall_s']:.0f} s)")
    return 0


# badpo experiment's parser (the same arguments), run here so that a cure's config is taken too
_BADPO_EXPERIMENT = next(row for row in EXPERIMENT if row.name == "experiment")
COMMANDS = (Command("experiment", _BADPO_EXPERIMENT.add, _run_experiment),
            Command("reproduce", _add_reproduce, _run_reproduce))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m experiments``: these commands through badpo's own front door."""
    from badpo.cli import main as badpo_main

    return badpo_main(argv, commands=COMMANDS, prog="python -m experiments",
                      description="The paper's experiments on top of badpo: the fixed-offset cure and reproduce.")
