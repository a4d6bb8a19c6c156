"""Every `badpo` command in README.md's and docs/*.md's bash blocks is a command badpo accepts as
written (issue 75 item 1): its options and arguments parse with the command line's own parser, and
the config keys it overrides (``key=value`` of sft, train and rm, with ``-c`` a shipped config) are
keys of that command's config, with values of their type. Nothing is run: the tour trains for
hours on a CPU. A placeholder the page says to fill in (``...``, ``$v``, ``<run>``) is left out of the
check; the rest of the line is checked."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from badpo.cli import build_parser
from badpo.core.config import load_config
from badpo.engine.settings import RMConfig, SFTConfig, TrainConfig

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONFIG_CLASSES = {"sft": SFTConfig, "train": TrainConfig, "rm": RMConfig}
PLACEHOLDER = re.compile(r"\.\.\.|\$[A-Za-z{]|<[a-z_-]+>|^[A-Z][A-Z_]+$")  # ..., $v, <run>, DATA


def bash_commands(page: Path) -> list[tuple[int, str]]:
    """(line, command) for every line of a ```bash block that calls badpo, continuations joined."""
    found, inside, pending, start = [], False, "", 0
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            inside = line.strip() == "```bash"
            continue
        if not inside:
            continue
        if not pending:
            start = number
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        command, pending = pending.strip(), ""
        words = command.split()
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # OMP_NUM_THREADS=2 badpo ...
            words = words[1:]
        if words[:1] == ["badpo"]:
            found.append((start, " ".join(words)))
    return found


COMMANDS = [(f"{page.name}:{line}", command) for page in PAGES for line, command in bash_commands(page)]


def filled(words: list[str]) -> list[str]:
    """The words a check can read: placeholders left out, and an override whose value is one."""
    return [w for w in words if not PLACEHOLDER.search(w.partition("=")[2] if "=" in w and not w.startswith("-")
                                                       else w)]


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[where for where, _ in COMMANDS])
def test_each_command_on_the_pages_parses_as_written(where, command):
    words = filled(shlex.split(command, comments=True)[1:])
    try:
        args = build_parser().parse_args(words)
    except SystemExit:
        pytest.fail(f"{where}: `{command}` is not a command badpo accepts (see `badpo {words[0]} --help`)")
    config_class = CONFIG_CLASSES.get(args.command)
    config = getattr(args, "config", None)
    if config_class is not None and (config is None or (ROOT / config).exists()):
        overrides = [o for o in args.overrides if "=" in o]
        loaded = load_config(config_class, ROOT / config if config else None, overrides)  # unknown, ill-typed: an error
        if isinstance(loaded, TrainConfig):
            loaded.arm  # noqa: B018 (a known method and bias variant)


def test_the_pages_hold_commands_to_check():
    assert len(COMMANDS) > 40 and {c.split()[1] for _, c in COMMANDS} >= {"audit", "train", "sft", "evaluate",
                                                                           "compare", "experiment"}
