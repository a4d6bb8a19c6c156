"""No CSV cell badpo writes runs as a spreadsheet formula (issue 49, item 9): an annotator id
``=HYPERLINK(...)`` went verbatim into ``annotators.csv``."""

from __future__ import annotations

import csv
import re

import pytest

from badpo.cli import main
from badpo.core.judgments import validate_judgments, write_judgments
from badpo.core.outputs import spreadsheet_safe

HOSTILE = ["=HYPERLINK(\"http://x\",\"y\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tlead", "\rlead"]


@pytest.mark.parametrize("cell", HOSTILE)
def test_text_that_starts_like_a_formula_gets_a_quote(cell):
    assert spreadsheet_safe(cell) == "'" + cell


@pytest.mark.parametrize("cell", ["-0.5", "+1e-3", "+inf", "nan", "k0", "", 3, -2.5, None])
def test_numbers_and_plain_text_are_kept(cell):
    assert spreadsheet_safe(cell) == cell


def test_the_audit_report_quotes_a_hostile_annotator_id(tmp_path, capsys):
    ids = ["=HYPERLINK(\"http://evil\",\"x\")", "@cmd", "plain"]
    rows = [{"prompt": f"p{i}", "chosen": f"a{i}", "rejected": f"b{i}", "annotator": ids[i % 3],
             "g_chosen": {"tag": float(i % 2)}, "g_rejected": {"tag": float(1 - i % 2)}} for i in range(24)]
    data = tmp_path / "judgments.jsonl"
    write_judgments(data, validate_judgments(rows))
    assert main(["audit", str(data), "-a", "tag=given:tag", "--report", str(tmp_path / "report")]) == 0
    with open(tmp_path / "report" / "annotators.csv", encoding="utf-8", newline="") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert {"'=HYPERLINK(\"http://evil\",\"x\")", "'@cmd", "plain"} <= set(cells)
    assert not any(cell.startswith(("=", "+", "@", "\t", "\r")) for cell in cells)
    assert all(re.fullmatch(r"-(?:\d+\.?\d*(?:e[+-]?\d+)?|inf)", cell) for cell in cells if cell.startswith("-"))
