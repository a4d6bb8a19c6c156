"""Every command's ``--help`` lists its config keys with default and meaning, read from the config
classes (badpo.core.config_help), and no key a command takes is left without a meaning."""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Literal

import pytest

from badpo.cli import build_parser
from badpo.core.config_help import config_keys, field_comments, format_keys


@dataclass(frozen=True)
class Inner:
    """A nested section. More text."""

    size: int = 3  # how big


@dataclass(frozen=True)
class Sample:
    """A config for the test."""

    plain: int = 1  # a trailing comment
    # a comment above,
    # on two lines
    above: str = ""
    both: float | None = None  # above and trailing

    mode: Literal["a", "b"] = "a"  # a choice
    spelled: Literal["fast", "slow"] = "fast"  # fast: quick; slow: careful
    parts: tuple[float, float] = (0.9,
                                  0.99)  # a field on two lines
    inner: Inner = field(default_factory=Inner)
    items: list[Inner] = field(default_factory=list)  # the items
    bare: bool = True


def test_meanings_come_from_the_comments_beside_and_above_each_field():
    assert field_comments(Sample) == {
        "plain": "a trailing comment", "above": "a comment above, on two lines", "both": "above and trailing",
        "mode": "a choice", "spelled": "fast: quick; slow: careful", "parts": "a field on two lines",
        "inner": "", "items": "the items", "bare": ""}
    keys = {k.key: (k.default, k.meaning) for k in config_keys(Sample)}
    assert keys == {
        "plain": ("1", "a trailing comment"), "above": ('""', "a comment above, on two lines"),
        "both": ("null", "above and trailing"), "mode": ("a", "a choice (one of: a, b)"),
        "spelled": ("fast", "fast: quick; slow: careful"),  # the comment names every choice already
        "parts": ("[0.9, 0.99]", "a field on two lines"),
        "inner.*": ("", "A nested section"), "inner.size": ("3", "how big"),
        "items": ("[]", "the items"), "items[].size": ("3", "how big"),
        "bare": ("true", "")}


def test_a_class_without_source_lists_its_keys_and_defaults():
    made = dataclasses.make_dataclass("Made", [("n", int, dataclasses.field(default=2))])
    assert field_comments(made) == {} and [(k.key, k.default) for k in config_keys(made)] == [("n", "2")]
    assert "  n  2" in format_keys(made, width=80)


def _commands() -> dict[str, argparse.ArgumentParser]:
    """badpo's commands and ``python -m experiments``' (whose experiment is badpo's, cure aside)."""
    from experiments.commands import COMMANDS as EXPERIMENTS

    def choices(parser):
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    theirs = choices(build_parser(EXPERIMENTS, prog="python -m experiments"))
    return {**choices(build_parser()), "reproduce": theirs["reproduce"]}


def _classes(command: argparse.ArgumentParser) -> list[type]:
    return [config_class() for _, config_class in command.config_classes]


CONFIG_COMMANDS = ("build", "experiment", "demo", "reproduce", "sft", "train", "rm", "evaluate")


def test_every_key_a_command_takes_has_a_meaning():
    commands = _commands()
    assert {name for name, command in commands.items() if command.config_classes} == set(CONFIG_COMMANDS)
    missing = [f"{name}: {cls.__name__}.{k.key}" for name in CONFIG_COMMANDS for cls in _classes(commands[name])
               for k in config_keys(cls) if not k.meaning]
    assert missing == [], "write a trailing # comment on these fields"


@pytest.mark.parametrize("name", CONFIG_COMMANDS)
def test_help_lists_every_key_with_its_default(name, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    command = _commands()[name]
    text = command.format_help()
    for cls in _classes(command):
        for k in config_keys(cls):
            shown = k.default if len(k.default) <= 48 else k.default[:44]
            assert re.search(rf"^  {re.escape(k.key)} +{re.escape(shown)}", text, re.M), (name, k.key)


def test_train_help_says_what_a_key_means(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    text = _commands()["train"].format_help()
    assert re.search(r"^  optim\.lr +null +null: the stage's default, sft 1e-5 / train 5e-7", text, re.M)
    assert re.search(r"^  batching +per_judgment +what an item is \(one of: per_judgment, pair_grouped\)$", text, re.M)
    assert re.search(r"^  model\.\* +Which causal LM to load and how$", text, re.M)
    assert "dotted overrides of this command's config keys (listed below)" in text
