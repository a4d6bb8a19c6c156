"""The docs' tables are functions of the committed records (issue 37 item 7): every table under
results/ re-renders from its run records and layout with the library's table code, byte for byte,
and a table in README.md or docs/*.md that cites a results/ folder holds that folder's numbers.

Nothing is left out of the comparison: the committed tables carry no timing line. A doc table may
relabel its rows ("BA-DPO (pooled), default start"), so its rows are compared by their values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from badpo.experiment.records import read_records
from badpo.experiment.tables import read_layout, render_tables

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
LAYOUTS = sorted(RESULTS.rglob("layout.json"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED_WITHIN = 25  # lines above a doc table in which its results/ folder is named

pytestmark = pytest.mark.slow


def runs_of(folder: Path) -> Path:
    """The records a layout renders from: its folder's runs/, or a parent's (a diagnostic table
    such as smol_gpu/warm_start shares its parent's runs)."""
    for candidate in (folder, *folder.parents):
        if (candidate / "runs").is_dir():
            return candidate / "runs"
        if candidate == RESULTS:
            break
    raise AssertionError(f"{folder}: no runs/ folder for its layout.json")


def test_every_record_folder_has_the_layout_its_table_renders_from():
    with_records = [folder.parent for folder in RESULTS.glob("*/runs")]
    assert with_records and all((folder / "layout.json").is_file() for folder in with_records), with_records


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda path: str(path.parent.relative_to(RESULTS)))
def test_a_committed_table_re_renders_from_its_records(layout):
    markdown, csv_text = render_tables(read_records(runs_of(layout.parent)), read_layout(layout))
    assert markdown == (layout.parent / "table.md").read_text(encoding="utf-8")
    assert csv_text == (layout.parent / "table.csv").read_text(encoding="utf-8")


def markdown_tables(text: str) -> list[tuple[int, list[str]]]:
    """(index of the header line, the table's lines) of every markdown table in ``text``."""
    tables, current, start = [], [], 0
    for index, line in enumerate([*text.splitlines(), ""]):
        if line.startswith("|"):
            if not current:
                start = index
            current.append(line)
        elif current:
            tables.append((start, current))
            current = []
    return tables


def values(row: str) -> tuple[str, ...]:
    """A row's cells after its label."""
    return tuple(cell.strip() for cell in row.strip().strip("|").split("|"))[1:]


def committed_tables() -> dict[str, list[tuple[str, set[tuple[str, ...]]]]]:
    """folder (relative to results/) -> [(header line, the value rows of that table)]."""
    found: dict[str, list[tuple[str, set[tuple[str, ...]]]]] = {}
    for layout in LAYOUTS:
        text = (layout.parent / "table.md").read_text(encoding="utf-8")
        folder = layout.parent.relative_to(RESULTS).as_posix()
        found[folder] = [(lines[0], {values(row) for row in lines[2:]}) for _, lines in markdown_tables(text)]
    return found


def cited_doc_tables() -> list[tuple[str, str, list[str], list[tuple[str, set]]]]:
    """(where, folder, doc table lines, that folder's tables of the same header) for every doc
    table under a mention of a results/ folder whose table.md has a table of its header."""
    committed, cited = committed_tables(), []
    for doc in DOCS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        for start, table in markdown_tables("\n".join(lines)):
            above = "\n".join(lines[max(0, start - CITED_WITHIN):start])
            for folder in dict.fromkeys(re.findall(r"results/([\w/]+?)/?[`\s,;)]", above)):
                same = [entry for entry in committed.get(folder, []) if entry[0] == table[0]]
                if same:
                    cited.append((f"{doc.name}:{start + 1}", folder, table, same))
    return cited


CITED = cited_doc_tables()


def test_the_docs_cite_committed_tables():
    cited = {folder for _, folder, _, _ in CITED}
    assert {"demo", "smol_cpu", "smol_gpu", "tiny_multipref_init"} <= cited, cited


@pytest.mark.parametrize("where, folder, table, same", CITED, ids=[where for where, *_ in CITED])
def test_a_doc_table_citing_a_record_holds_its_numbers(where, folder, table, same):
    for row in table[2:]:
        assert any(values(row) in rows for _, rows in same), f"{where}: {row} is not in results/{folder}/table.md"
