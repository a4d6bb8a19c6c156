"""``badpo sft``, ``badpo train`` and ``badpo rm``: one config, one training run. The three share a
parser and a run, so they are one table, :data:`TRAININGS`, each row naming its config class (for
``--help``) and its call of :mod:`badpo.api`, which resolves the config; both behind functions that
import the engine (and torch) only when called."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from badpo.commands.parsing import Command, ConfigClass, add_config_args
from badpo.core.arguments import column_pairs, overrides_once
from badpo.core.config import ConfigError, read_settings

__all__ = ["TRAINING", "TRAININGS", "Training"]


@dataclass(frozen=True)
class Training:
    """One training command: what its help says, an example of its overrides, its config class and
    its function of :mod:`badpo.api` (a config, or None and the keys as overrides: a result whose
    ``folder`` the command prints)."""

    name: str
    help: str
    description: str
    example: str  # KEY=VALUE overrides its help shows (each a key of its config: a test holds that)
    config_class: ConfigClass
    call: Callable[[], Callable[..., Any]]  # -> badpo.api.sft / train / rm


def _sft_config() -> type:
    from badpo.engine.settings import SFTConfig

    return SFTConfig


def _train_config() -> type:
    from badpo.engine.settings import TrainConfig

    return TrainConfig


def _rm_config() -> type:
    from badpo.engine.settings import RMConfig

    return RMConfig


def _api_sft() -> Callable[..., Any]:
    from badpo.api import sft

    return sft


def _api_train() -> Callable[..., Any]:
    from badpo.api import train

    return train


def _api_rm() -> Callable[..., Any]:
    from badpo.api import rm

    return rm


TRAININGS: tuple[Training, ...] = (
    Training("sft", "train the SFT reference (one epoch on one response per pair)",
             "Fine-tune the shared reference on the majority-chosen responses; see configs/sft_*.yaml.",
             "epochs=2 output_dir=runs/my_sft", _sft_config, _api_sft),
    Training("train", "one preference run (a method, with or without a bias variant) at one seed",
             "Preference stage from the SFT reference; see configs/train_*.yaml and badpo.methods for the "
             "methods.", "steps=200 runtime.seed=7", _train_config, _api_train),
    Training("rm", "train a Bradley-Terry reward model, plain or bias-adjusted (a bias variant)",
             "Reward model (scalar head on any sequence-classification backbone) on judgments, with "
             "theta_k . dg added to the reward margin; see configs/rm_*.yaml and docs/reward_models.md.",
             "bias.variant=pooled steps=200", _rm_config, _api_rm),
)


def _add_training(row: Training, subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(row.name, help=row.help, description=row.description,
                                   config_classes=[("config keys", row.config_class)])
    add_config_args(parser, row.example)
    parser.add_argument("--column", action="append", default=[], metavar="FIELD=COLUMN",
                        help="the same as the config key columns.FIELD=COLUMN (repeatable)")
    return parser


def _run_training(row: Training, args: argparse.Namespace) -> int:
    mapped = [f"columns.{field}={column}" for field, column in column_pairs(args.column).items()]
    overrides_once([*args.overrides, *mapped])  # columns.FIELD=a and --column FIELD=b: one key twice
    settings = read_settings(args.config, [*args.overrides, *mapped])  # --column: columns.FIELD=COLUMN
    if not isinstance(settings.get("data", ""), str):  # a file or a Hub id: rows in memory are the API's
        raise ConfigError(f"data: expected str, got {settings['data']!r}")
    call = row.call()
    # without -c every key not given is the paper's: the API says so when it is given no config
    result = call(None, **settings) if args.config is None else call(settings)
    print(result.folder)
    return 0


TRAINING = tuple(Command(row.name, functools.partial(_add_training, row), functools.partial(_run_training, row))
                 for row in TRAININGS)
