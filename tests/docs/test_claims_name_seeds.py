"""The front door's claims say what they rest on (issue 49 item 2): every paragraph of the README,
docs/real_model.md and docs/demo.md that gives a percentage names the seeds it was measured at
("one seed", "three seeds", "seed 42", ...), so a figure of one run cannot read as a settled one.
docs/results.md, the long log of every table, is not held to it yet: its figures stand beside their
tables, whose captions give the seeds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/real_model.md", "docs/demo.md")
PERCENT = re.compile(r"\d\s?%")


def claims(text: str) -> list[str]:
    """The prose paragraphs of ``text`` that give a percentage (code blocks and tables left out)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [p.strip() for p in re.split(r"\n\s*\n", text)
            if PERCENT.search(p) and not p.lstrip().startswith(("|", "#"))]


def unseeded(text: str) -> list[str]:
    return [p for p in claims(text) if not re.search(r"\bseeds?\b", p)]


def test_the_check_finds_a_percentage_without_its_seeds():
    page = "Intro.\n\nBA-DPO removes 95% of the shift.\n\nAt three seeds it removes 92–100%.\n\n| 95% |\n"
    assert unseeded(page) == ["BA-DPO removes 95% of the shift."]


@pytest.mark.parametrize("page", PAGES)
def test_every_percentage_on_the_front_pages_names_its_seeds(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    assert claims(text), f"{page}: no figure found (has the page moved?)"
    missing = unseeded(text)
    assert not missing, f"{page}: paragraphs with a percentage and no seeds:\n" + "\n".join(m[:200] for m in missing)
