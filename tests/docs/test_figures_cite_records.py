"""Every figure a reader meets names where it comes from (issue 74 item 1): a prose paragraph of
README.md or docs/*.md that states a measured figure (a percentage, a speed-up, a time, a memory
size, a number read to two decimals) carries its source in the paragraph itself, one of

* a committed record, ``results/...`` (in inline code or a link; test_cited_records checks it exists),
* the paper's own figure, cited as ``(paper, Table 2)`` / ``(paper, §4)`` / ``(paper, Appendix C)``,
* a dataset's card, cited as ``(dataset card: ...)``,
* ``(no record)``, said to the reader, for a figure measured once and not kept, or
* ``<!-- not measured: why -->``, for a number that is a setting or arithmetic, not a measurement.

Tables are left out: the generated ones are rendered from their records (test_committed_tables,
test_headline_table) and their captions name the folder. Code blocks are left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]

# a percentage (not an interval's level: "95% interval", "95% profile-likelihood interval"), a multiple (1.5x,
# 3×), a time (40 s, 6 min, 12 ms), a memory size (3.1 GiB) or a number read to two decimals or more
# (0.964, +0.22, −1.02: settings are written to one, 0.1, 2.5); a package's version is not a figure
FIGURE = re.compile(r"\d\s?%(?![\s*]+([\w-]+[\s*]+){0,2}(interval|CI)\b)|\d(\.\d+)?\s?[×x](?![\w\d])"
                    r"|\b\d+(\.\d+)?\s?(s|min|ms|h|GiB|MiB|GB|MB)\b|(?<![\w.`/=-])[+−-]?\d+\.\d{2,}(?![\w`/-]|\.\d)")
VERSION = re.compile(r"(?i)\b(torch|trl|transformers|accelerate|peft|datasets|python|tokenizers|mkdocs|gguf)"
                     r"\s+\d+\.\d+")
SOURCE = re.compile(r"results/|\(paper, (Table|Figure|§|Appendix|Section)|\(dataset card|\(no record"
                    r"|<!-- not measured: [^>]+-->")


def paragraphs(text: str) -> list[str]:
    """The prose paragraphs of a page: code blocks, tables and headings left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [p.strip() for p in re.split(r"\n\s*\n", text)
            if p.strip() and not p.lstrip().startswith(("|", "#"))]


def unsourced(text: str) -> list[str]:
    return [p for p in paragraphs(text) if FIGURE.search(VERSION.sub("", p)) and not SOURCE.search(p)]


def test_the_check_finds_a_figure_without_its_source():
    page = ("Intro, no figure.\n\nBA-DPO removes 95% of the shift.\n\n"
            "It removes 92% (`results/demo/table.md`).\n\nA step takes 1.5x as long (no record).\n\n"
            "The warmup is 10% of the steps. <!-- not measured: a setting -->\n\n"
            "The paper removes half (paper, Table 3): 50%.\n\nAbout 40 s on two cores.\n\n| 95% |\n\n"
            "```\n99%\n```\n")
    assert unsourced(page) == ["BA-DPO removes 95% of the shift.", "About 40 s on two cores."]


def test_a_figure_is_a_number_with_its_unit():
    assert FIGURE.search("3.1 GiB") and FIGURE.search("1.5x faster") and FIGURE.search("3× the loss")
    assert FIGURE.search("in 6 min") and FIGURE.search("12%") and FIGURE.search("KL 0.078")
    assert FIGURE.search("a shift of −1.02") and not FIGURE.search("beta 0.1") and not FIGURE.search("v1.2.3")
    assert unsourced("Needs TRL 1.16 and torch 2.13.0.") == [] and unsourced("KL 0.078.") == ["KL 0.078."]
    assert not FIGURE.search("the 2x2 table") and not FIGURE.search("seeds 42 and 123") and not FIGURE.search("box")
    assert not FIGURE.search("mean ± 95% Student-t interval") and not FIGURE.search("a 95% interval over seeds")
    assert not FIGURE.search("its 95% **profile-likelihood interval**")
    assert FIGURE.search("removes 95% of the shift, inside its interval")


@pytest.mark.parametrize("page", PAGES)
def test_every_figure_on_a_page_names_its_source(page):
    missing = unsourced((ROOT / page).read_text(encoding="utf-8"))
    assert not missing, f"{page}: paragraphs with a figure and no source:\n" + "\n---\n".join(m[:300] for m in missing)
