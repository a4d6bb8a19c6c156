"""The TRL page's table of DPOConfig options (docs/trl.md, "Every DPOConfig option") names every
option DPOConfig adds to TrainingArguments, each once, so a TRL that adds one shows here first."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="TRL is the optional extra 'trl' (installed by the 'test' extra)")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "trl.md"


def documented_options() -> list[str]:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("**Every `DPOConfig` option.**"))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("| Option |"))
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows.append(re.findall(r"`([^`]+)`", line.split("|")[1])[0])
    return rows


def test_the_table_names_every_option_dpoconfig_adds_once():
    from transformers import TrainingArguments
    from trl import DPOConfig

    inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
    own = {f.name for f in dataclasses.fields(DPOConfig) if f.name not in inherited}
    rows = documented_options()
    assert len(rows) == len(set(rows)) and set(rows) == own
