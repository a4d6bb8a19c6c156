"""``badpo <command>``: argv -> config -> one library call. Nothing else lives here.

Each command is a pair ``_add_<name>(subparsers)`` / ``_cmd_<name>(args)`` registered in
``COMMANDS``. Heavy imports happen inside the command so that ``badpo --help`` is instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", default=None, help="YAML config file")
    parser.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="dotted overrides, e.g. train.steps=200"
    )


COMMANDS: tuple = ()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="badpo", description="Bias-adjusted preference optimization (BA-DPO)."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add, run in COMMANDS:
        add(subparsers).set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
