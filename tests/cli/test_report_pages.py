"""``report.html`` of ``badpo audit --report``, ``badpo audit --discover --report`` and ``badpo compare
--out``, opened in a real headless browser (tests/fixtures/browser.py): it renders at phone width
without a console error, the screenshot is not blank, the page fetches nothing and runs nothing,
and the numbers of its tables are those of the report's JSON."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from badpo.cli import main
from badpo.comparing.compare_runs import compare_runs
from badpo.core.judgments import validate_judgments, write_judgments
from fixtures.browser import render
from fixtures.discover_worlds import signed_world
from fixtures.runs import write_pair


class Tables(HTMLParser):
    """Every table of a page by its id (``""`` for one without): rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.current: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.current = self.tables.setdefault(dict(attrs).get("id") or f"#{len(self.tables)}", [])
        elif tag == "tr" and self.current is not None:
            self.current.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.current is not None:
            self.current[-1].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "table":
            self.current = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def rendered_tables(chromium: str, page: Path, out: Path) -> dict[str, list[list[str]]]:
    """Render the page and check what every report page must hold; return its tables."""
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and not any(f'{a}="http' in text for a in ("src", "href")) and "url(" not in text
    shown = render(chromium, page, out)
    assert shown.console == [], shown.console
    pixels = imread(shown.screenshot)
    assert pixels.shape[1] >= 400 and float(np.std(pixels[..., :3])) > 0.05  # text and plots, not one colour
    parser = Tables()
    parser.feed(shown.dom)
    return parser.tables


def test_the_audit_page_renders_with_every_annotator_of_audit_json(chromium, tmp_path):
    data = tmp_path / "judgments.jsonl"
    write_judgments(data, validate_judgments(signed_world(0, n_pairs=300)))
    report = tmp_path / "audit"
    assert main(["audit", str(data), "-a", "names", "--report", str(report)]) == 0
    tables = rendered_tables(chromium, report / "report.html", tmp_path)
    document = json.loads((report / "audit.json").read_text())
    header, *rows = tables["annotators-0"]
    annotators = document["attributes"][0]["annotators"]
    assert header[:3] == ["annotator", "class", "judgments"] and len(rows) == len(annotators)
    for row, expected in zip(rows, annotators, strict=True):
        assert row[0] == expected["annotator"] and int(row[2]) == expected["judgments"]
        for column in ("estimate", "low", "high"):
            value = row[header.index(column)]
            assert (value == "" and expected[column] is None) or float(value) == pytest.approx(expected[column],
                                                                                               abs=5e-4)


def test_the_discover_page_renders_with_the_findings_of_discover_json(chromium, tmp_path):
    data = tmp_path / "judgments.jsonl"
    write_judgments(data, validate_judgments(signed_world(1)))
    report = tmp_path / "found"
    assert main(["audit", str(data), "--discover", "--report", str(report)]) == 0
    tables = rendered_tables(chromium, report / "report.html", tmp_path)
    findings = json.loads((report / "discover.json").read_text())["findings"]
    assert findings, "the signed world's planted bias is found"
    header, *rows = tables["findings"]
    assert [row[0] for row in rows] == [f["name"] for f in findings]
    for row, finding in zip(rows, findings, strict=True):
        assert [float(row[header.index(c)]) for c in ("effect", "low", "high")] == pytest.approx(finding["effect"],
                                                                                                  abs=5e-4)


def test_the_compare_page_renders_with_the_rates_of_compare_json(chromium, tmp_path):
    comparison = compare_runs(write_pair(tmp_path), out=tmp_path / "cmp").comparison
    tables = rendered_tables(chromium, tmp_path / "cmp" / "report.html", tmp_path)
    first = next(rows for rows in tables.values() if rows and rows[0][0] == "run")
    header = first[0]
    checked = 0
    for row in first[1:]:
        run = next((r for r in comparison["runs"] if r["label"] == row[0]), None)
        for column, (heading, cell) in enumerate(zip(header, row)):
            if run is None or column == 0:
                continue  # the reference's row; the run's name
            if heading == "removed":
                if cell.endswith("]"):
                    removal = run["attributes"][header[column - 1]]["removal"]
                    assert cell == (f"{100 * removal['value']:.0f}% [{100 * removal['low']:.0f}, "
                                    f"{100 * removal['high']:.0f}]"), (row[0], heading)
                    checked += 1
            else:
                rate = run["attributes"][heading]["rate"]
                assert cell == f"{rate['value']:.3f} [{rate['low']:.3f}, {rate['high']:.3f}]", (row[0], heading)
                checked += 1
    assert checked == 5  # DPO's two rates, BA-DPO's two rates and its one measurable removal
