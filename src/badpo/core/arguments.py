"""What the command line refuses rather than silently resolves: an option that takes one value
given twice (``-c a.yaml -c b.yaml`` kept the second), one field mapped twice by ``--column``
(the last won), and the column mapping spelled the other command's way (``--column`` on a training
command, ``columns.FIELD=COLUMN`` on audit), answered with a hint; and a ``KEY=VALUE`` written before a
command's positional (``evaluate max_prompts=2 RUN``), which argparse took for the positional, is
put back among the overrides. Standard library only."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence

__all__ = ["Once", "column_pairs", "column_overrides", "hint", "overrides_once", "overrides_put_back"]

_OVERRIDE = re.compile(r"^[A-Za-z_][\w.\-]*=")  # a dotted config key, then =


class Once(argparse.Action):
    """An option that takes one value: given twice, it is an error naming both values."""

    def __call__(self, parser, namespace, values, option_string=None):
        previous = getattr(namespace, self.dest, None)
        if previous is not None and previous != self.default:
            parser.error(f"{option_string} given twice ({previous!r} and {values!r}); give it once")
        setattr(namespace, self.dest, values)


def column_pairs(items: Sequence[str]) -> dict[str, str]:
    """``--column FIELD=COLUMN`` options as {field: column}; a malformed one, or a field given
    twice, is an error naming it."""
    pairs: dict[str, str] = {}
    for item in items:
        field, sep, column = item.partition("=")
        if not (sep and field and column):
            raise ValueError(f"--column {item!r}: expected FIELD=COLUMN, e.g. annotator=worker_id")
        if field.startswith("columns."):  # the config key's spelling, given to the option
            raise ValueError(f"--column {item!r}: the option takes FIELD=COLUMN without 'columns.' "
                             f"(--column {field.removeprefix('columns.')}={column})")
        if field in pairs and pairs[field] != column:
            raise ValueError(f"--column {field}: given twice ({pairs[field]!r} and {column!r}); map each field once")
        pairs[field] = column
    return pairs


# commands whose column mapping is a config key (columns.FIELD=COLUMN), and those that take --column
CONFIG_COLUMNS = ("train", "sft", "rm", "experiment", "reproduce")
OPTION_COLUMNS = ("audit", "evaluate")
POSITIONAL_CONFIG = ("experiment", "reproduce")  # the config file is their first argument, not -c


def hint(command: str | None, message: str, argv: Sequence[str], program: str = "badpo") -> str:
    """``message`` (an argparse error) with a hint when the column mapping was spelled the other
    command's way; ``program``: what runs the command (``badpo``, ``python -m experiments``)."""
    said = f"{program} {command}"
    if command in POSITIONAL_CONFIG and ("-c" in argv or "--config" in argv):
        return f"{message} ({said} takes its config file as its first argument: {said} FILE [KEY=VALUE ...], not -c)"
    if command == "demo" and ("-c" in argv or "--config" in argv):
        return f"{message} ({said} takes no config file, only KEY=VALUE overrides of the tiny experiment)"
    if command in CONFIG_COLUMNS and "--column" in argv:
        return f"{message} ({said} maps a column with the config key columns.FIELD=COLUMN, not --column)"
    if command in OPTION_COLUMNS and any(arg.startswith("columns.") for arg in argv):
        return f"{message} ({said} maps a column with --column FIELD=COLUMN, not columns.FIELD=COLUMN)"
    return message


def overrides_once(overrides: Sequence[str]) -> None:
    """A config key given twice on one command line with two values is an error naming both: the
    last won silently, as a YAML key given twice did (``train columns.annotator=a --column
    annotator=b`` is one key twice too). The same value twice says nothing new."""
    seen: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            continue  # not an override: the config reader names it
        key = key.strip()
        if key in seen and seen[key] != value:
            raise ValueError(f"{key}: given twice ({seen[key]!r} and {value!r}); give it once")
        seen[key] = value


def column_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the overrides that are not ``columns.FIELD=COLUMN``, those as ``FIELD=COLUMN``): for a
    command that maps columns with ``--column``, the config spelling read as the same thing."""
    rest, columns = [], []
    for item in overrides:
        (columns.append(item.removeprefix("columns.")) if item.startswith("columns.") else rest.append(item))
    return rest, columns


def _looks_like_override(token: object) -> bool:
    """A ``KEY=VALUE`` token that is not a path that exists (a file may be named ``a=b``)."""
    return isinstance(token, str) and bool(_OVERRIDE.match(token)) and not os.path.exists(token)


def overrides_put_back(namespace: argparse.Namespace, positionals: Sequence[str]) -> None:
    """argparse fills a command's positionals (``positionals``: their dests, in order) with the
    first words it meets, so ``evaluate max_prompts=2 RUN`` read ``max_prompts=2`` as the run and
    ``RUN`` as an override. Put each word back where it belongs: the words that are not ``KEY=VALUE``
    fill the positionals, in order, and the others are overrides. Left as parsed when the counts
    do not fit (the command's own checks then name what is wrong)."""
    overrides = getattr(namespace, "overrides", None)
    filled = [dest for dest in positionals if getattr(namespace, dest, None) is not None]
    if not overrides or not any(_looks_like_override(getattr(namespace, dest)) for dest in filled):
        return
    words = [getattr(namespace, dest) for dest in filled] + list(overrides)
    plain = [word for word in words if not _looks_like_override(word)]
    if len(plain) != len(filled):
        return
    for dest, word in zip(filled, plain):
        setattr(namespace, dest, word)
    namespace.overrides = [word for word in words if _looks_like_override(word)]
