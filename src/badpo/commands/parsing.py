"""What every command shares: its row, its parser, the config arguments and the column mapping."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from badpo.core.arguments import Once, column_pairs, hint, overrides_once, overrides_put_back
from badpo.core.config import from_dict
from badpo.data.sources import ColumnMap

__all__ = ["Command", "CommandParser", "ConfigClass", "TopParser", "add_config_args", "column_map"]

# a config class a command's --help lists, behind a function that imports it when the help is shown
ConfigClass = Callable[[], type]


def refuse(prog: str, message: str) -> NoReturn:
    """An argument error as one line, exit status 2, as every other refusal of the command line:
    argparse's own prints the whole usage block above it, which named no more than the message."""
    sys.stderr.write(f"{prog}: error: {message} (see {prog} --help)\n")
    raise SystemExit(2)


@dataclass(frozen=True)
class Command:
    """One row of :data:`badpo.cli.COMMANDS`: ``add(subparsers)`` adds its parser (named as the
    command), ``run(args)`` runs it and returns the exit status."""

    name: str
    add: Callable[[argparse._SubParsersAction], argparse.ArgumentParser]
    run: Callable[[argparse.Namespace], int]


class CommandParser(argparse.ArgumentParser):
    """A command's parser. ``any_order``: options and positionals in any order (``RUN --heldout F
    max_prompts=2``; plain argparse fills every positional at the first one it meets, so an
    override after an option is refused). ``config_classes``: (title, function returning a config
    class) whose keys ``--help`` lists with their defaults and meanings
    (:mod:`badpo.core.config_help`, read from the classes themselves), called only when the help
    is shown."""

    def __init__(self, *args, any_order: bool = True, config_classes: Sequence[tuple[str, ConfigClass]] = (),
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.any_order, self.config_classes = any_order, tuple(config_classes)
        self._intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        if not self.any_order or self._intermixing:  # parse_known_intermixed_args calls back in here
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            namespace, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        positionals = [a.dest for a in self._actions if not a.option_strings and a.nargs in (None, "?")]
        overrides_put_back(namespace, positionals)  # KEY=VALUE before a positional
        try:
            overrides_once(getattr(namespace, "overrides", None) or ())
        except ValueError as error:
            self.error(str(error))
        return namespace, extras

    argv: Sequence[str] = ()  # the command line being parsed (badpo.cli.main sets it), for error()'s hint

    def error(self, message: str) -> NoReturn:
        *program, command = self.prog.split()
        refuse(self.prog, hint(command, message, self.argv, " ".join(program)))

    def format_help(self) -> str:
        from badpo.core.config_help import format_keys

        listings = [format_keys(config_class(), title, given=self._keys_given())
                    for title, config_class in self.config_classes]
        return "\n".join([super().format_help(), *listings])

    def _keys_given(self) -> str:
        """How this command takes its config keys: experiment and reproduce take the file as their
        first argument and demo takes none (their help said "-c FILE", which they refuse)."""
        if "-c" in self._option_string_actions:
            return "-c FILE and/or KEY=VALUE"
        if any(action.dest == "config" and not action.option_strings for action in self._actions):
            return "the CONFIG file and/or KEY=VALUE"
        return "KEY=VALUE"


class TopParser(argparse.ArgumentParser):
    """badpo's own parser: it reports a command's unrecognized arguments, with the same hint, in
    the command's name when the command is known and nothing unknown came before it (``badpo
    --nonsense train`` named train, whose options never held ``--nonsense``)."""

    def error(self, message: str) -> NoReturn:
        argv = CommandParser.argv
        at = next((i for i, arg in enumerate(argv) if not arg.startswith("-")), len(argv))
        command = argv[at] if at < len(argv) else None
        commands = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})
        unknown_before = [arg for arg in argv[:at] if arg.split("=")[0] not in self._option_string_actions]
        prog = f"{self.prog} {command}" if command in commands and not unknown_before else self.prog
        refuse(prog, hint(command, message, argv, self.prog))


def add_config_args(parser: argparse.ArgumentParser, example: str) -> None:
    parser.add_argument("--config", "-c", default=None, action=Once, help="YAML config file (once)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help=f"dotted overrides of this command's config keys (listed below), e.g. {example}")


def column_map(items: Sequence[str]) -> ColumnMap:
    """``--column FIELD=COLUMN`` options as the ``columns`` section of a config."""
    return from_dict(ColumnMap, column_pairs(items), prefix="columns")
