"""The audit says what labels it read and what its estimates did with them: the rows of each form, the
ties (left out of the estimates, in one line), the wins at each strength (read as wins, in the same
line); ``--json`` holds the ties under ``ties`` and the rest under ``labels``. Discover leaves the ties
out of its screen alike; the stream audit and the estimates themselves refuse a tie rather than read
it as a win. The file is six A/B judgments worked out by hand."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest

from badpo.auditing import discover_report
from badpo.auditing.discover import Discovery, DiscoverySettings
from badpo.auditing.estimates import audit
from badpo.auditing.stream import StreamAudit
from badpo.auditing.terminal_table import format_audit
from badpo.cli import main
from badpo.core.attributes import resolve_attributes
from badpo.core.judgments import Judgment, JudgmentError

# annotator, preference (negative: A better; 0: a tie), m of A, m of B
ROWS = [("k1", -2, 1, 0), ("k1", 0, 1, 0), ("k2", 1, 1, 0), ("k2", -1, 0, 1), ("k3", 3, 0, 1), ("k3", 0, 0, 1)]


def ab_rows():
    return [{"prompt": f"q{i}", "response_a": f"answer A{i}", "response_b": f"answer B{i}", "preference": preference,
             "annotator": annotator, "g_a": {"m": a}, "g_b": {"m": b}} for i, (annotator, preference, a, b)
            in enumerate(ROWS)]


def wins_by_hand() -> list[Judgment]:
    """The four non-ties as plain wins: rows 0 and 3 to A, rows 2 and 4 to B."""
    def side(i, winner):
        m = {"A": ROWS[i][2], "B": ROWS[i][3]}
        loser = "B" if winner == "A" else "A"
        return Judgment(f"q{i}", f"answer {winner}{i}", f"answer {loser}{i}", ROWS[i][0],
                        g_chosen={"m": float(m[winner])}, g_rejected={"m": float(m[loser])})
    return [side(0, "A"), side(2, "B"), side(3, "A"), side(4, "B")]


LABELS = {"rows": 6, "forms": {"ab_numeric": 6}, "ties": 2, "plain_wins": 0, "strengths": {"1": 2, "2": 1, "3": 1}}


def test_the_audit_prints_and_writes_the_labels_and_leaves_the_ties_out(tmp_path, capsys):
    path, out = tmp_path / "ab.jsonl", tmp_path / "audit.json"
    path.write_text("".join(json.dumps(row) + "\n" for row in ab_rows()), encoding="utf-8")
    assert main(["audit", str(path), "-a", "given:m", "--json", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == ("labels: 6 judgments (rows by form: ab_numeric 6); 2 ties; 0 plain wins; strength 1: 2, "
                          "strength 2: 1, strength 3: 1")
    assert printed[1] == ("2 ties left out of the estimates: a tie prefers neither side and their likelihood "
                          "reads wins only (that of a tie is not written yet); 4 graded wins (strength 1: 2, "
                          "strength 2: 1, strength 3: 1) read as plain wins of the chosen side")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = audit(wins_by_hand(), resolve_attributes(["given:m"]), start=True)
    expected = dataclasses.replace(expected, labels=LABELS)
    assert "\n".join(printed[2:]) + "\n" == format_audit(expected)
    written = json.loads(out.read_text())
    assert written["ties"] == 2 and written["labels"] == LABELS and written["n_judgments"] == 4
    assert out.read_text() == expected.to_json()


def test_a_file_of_ties_only_is_refused_in_one_line(tmp_path, cli_error):
    path = tmp_path / "ties.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ab_rows() if row["preference"] == 0))
    assert "every one of the 2 judgments is a tie; the audit's estimates read wins only" in cli_error(
        ["audit", str(path), "-a", "given:m"])


@dataclasses.dataclass(frozen=True)
class Found:
    """What the stubbed screen returns: the one field discover_source fills in."""

    labels: dict | None = None


@pytest.mark.parametrize("whole", [False, True])
def test_discover_screens_the_wins_and_says_it_left_the_ties_out(tmp_path, monkeypatch, whole):
    """The screen itself is stubbed: what matters is what it is handed, and the line printed."""
    path = tmp_path / "ab.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ab_rows()), encoding="utf-8")
    handed = []
    monkeypatch.setattr(discover_report, "discover", lambda judgments, *args: handed.extend(judgments) or Found())
    monkeypatch.setattr(discover_report, "format_discovery", lambda result: "found\n")
    if whole:
        monkeypatch.setattr(discover_report, "judgment_stream", lambda *args: None)
    result, text = discover_report.discover_source(str(path), progress=False)
    assert result.labels == LABELS  # --json holds them:
    empty = Discovery(0, 0, 0, 0, DiscoverySettings(), 0, 0, (), (), (), labels=LABELS).to_dict()
    assert (empty["ties"], empty["labels"]) == (2, LABELS)
    assert [(j.prompt, j.strength) for j in handed] == [("q0", 2), ("q2", 1), ("q3", 1), ("q4", 3)]
    assert text.splitlines() == [
        "2 ties left out of the screen: a tie prefers neither side and their likelihood reads wins only (that of "
        "a tie is not written yet); 4 graded wins (strength 1: 2, strength 2: 1, strength 3: 1) read as plain "
        "wins of the chosen side", "found"]


def test_the_stream_audit_and_the_estimates_refuse_a_tie():
    stream = StreamAudit(["given:m"])
    tie = {"prompt": "q", "chosen": "a", "rejected": "b", "annotator": "k", "tie": True,
           "g_chosen": {"m": 1}, "g_rejected": {"m": 0}}
    with pytest.raises(JudgmentError, match=r"^pool\.jsonl line 3: row 0, field 'tie': a tie; the stream audit "
                       r"\(--stream\) does not take ties or strengths yet"):
        stream.update([tie], source="pool.jsonl", first_line=3)
    graded = {**tie, "tie": False, "strength": 2}
    with pytest.raises(JudgmentError, match=r"row 0, field 'strength': a win of strength 2; the stream audit"):
        stream.update([graded])
    with pytest.raises(JudgmentError, match=r"^row 1, field 'tie': a tie; the audit's estimates read wins only"):
        audit([Judgment("q", "a", "b", "k"), Judgment("q", "a", "b", "m", tie=True)], resolve_attributes(["length"]))
