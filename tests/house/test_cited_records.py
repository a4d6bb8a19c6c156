"""Every record a page cites exists (issue 74 item 1, in part): a ``results/...`` path named in inline
code in README.md or docs/*.md is a committed file or folder, so a figure's reference to its record
cannot point at nothing (a record moved or never committed breaks a test, not a reader's check).
A path with a placeholder (``results/level_rule/smol_multipref_logodds_seedS/``, ``{...}``, ``*``)
names a family and is not checked."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED = re.compile(r"`(results/[^`\s]*)`")


def cited() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for match in CITED.finditer(page.read_text(encoding="utf-8")):
            path = match.group(1).rstrip("/.,;:)")
            if not re.search(r"[*{}<>]|seedS\b|/S/|_S\b", path):
                found.append((page.name, path))
    return found


def test_every_cited_record_exists():
    paths = cited()
    assert len(paths) > 100
    assert [f"{page}: {path}" for page, path in paths if not (ROOT / path).exists()] == []
