"""The documentation's own links hold: every relative Markdown link in README.md, docs/ and
results/README.md names a file that exists, and a ``#anchor`` names a heading of that file (as
GitHub makes anchors: lower case, punctuation dropped, spaces to hyphens). A page moved or a
heading renamed breaks a test, not a reader's click."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "results" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(page: Path) -> str:
    """A page without its code: fenced blocks and inline code hold no headings or links."""
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))  # headings keep their code
    return {anchor(m.group(1)) for m in re.finditer(r"(?m)^#{1,6} +(.+?)\s*$", text)}


def test_github_anchors_hand_worked():
    assert anchor("Flags while a pool is labelled: `badpo audit --stream` (tiny world)") == \
        "flags-while-a-pool-is-labelled-badpo-audit---stream-tiny-world"
    assert anchor("The fixed-offset cure at tiny scale (Table tab:offset)") == \
        "the-fixed-offset-cure-at-tiny-scale-table-taboffset"


def test_every_relative_link_names_a_file_and_a_heading_that_exist():
    broken = []
    for page in PAGES:
        for target in LINK.findall(prose(page)):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
