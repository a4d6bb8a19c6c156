"""The three forms a judgment row comes in, read by every reader (badpo.data.sources): chosen/rejected
with ``tie`` and ``strength``, A/B with a numeric preference (HelpSteer3's convention) and A/B with
MultiPref's five labels; recognised without a mapping, mapped with ``columns.FIELD=COLUMN``, counted,
and a source that mixes them (or a preference that is neither) refused naming the file, row and field.
Every expected judgment is written out by hand."""

from __future__ import annotations

import json

import pytest

from badpo.core.config import ConfigError
from badpo.core.judgments import Judgment, JudgmentError
from badpo.data.sources import ColumnMap, read_judgment_source


def jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def ab(preference, i=0, **more):
    return {"prompt": f"q{i}", "response_a": f"A{i}", "response_b": f"B{i}", "preference": preference,
            "annotator": "k1", **more}


def test_the_numeric_ab_form(tmp_path):
    """-2: A better, strength 2; 3: B, 3; 0: a tie, A first; 1.0 reads as 1; "-1" (a CSV's text) as -1."""
    loaded = read_judgment_source(jsonl(tmp_path / "ab.jsonl", [ab(-2, 0), ab(3, 1), ab(0, 2), ab(1.0, 3),
                                                                 ab("-1", 4)]))
    assert loaded.rows == [Judgment("q0", "A0", "B0", "k1", strength=2), Judgment("q1", "B1", "A1", "k1", strength=3),
                           Judgment("q2", "A2", "B2", "k1", tie=True), Judgment("q3", "B3", "A3", "k1", strength=1),
                           Judgment("q4", "A4", "B4", "k1", strength=1)]
    assert loaded.forms == {"ab_numeric": 5}


def test_multipref_labels_in_overall_pref_or_preference(tmp_path):
    rows = [ab(None, 0, overall_pref="A-is-slightly-better"), ab(None, 1, overall_pref="B-is-clearly-better"),
            ab(None, 2, overall_pref="Tie"), ab(None, 3, overall_pref="A-is-clearly-better"),
            ab(None, 4, overall_pref="B-is-slightly-better")]
    for row in rows:
        del row["preference"]
    loaded = read_judgment_source(jsonl(tmp_path / "mp.jsonl", rows))
    assert loaded.rows == [Judgment("q0", "A0", "B0", "k1", strength=1), Judgment("q1", "B1", "A1", "k1", strength=2),
                           Judgment("q2", "A2", "B2", "k1", tie=True), Judgment("q3", "A3", "B3", "k1", strength=2),
                           Judgment("q4", "B4", "A4", "k1", strength=1)]
    assert loaded.forms == {"ab_labels": 5}
    assert read_judgment_source(jsonl(tmp_path / "p.jsonl", [ab("Tie")])).rows == [
        Judgment("q0", "A0", "B0", "k1", tie=True)]


def test_the_chosen_rejected_form_with_tie_and_strength(tmp_path):
    rows = [{"prompt": "q", "chosen": "x", "rejected": "y", "annotator": "k", "strength": 2},
            {"prompt": "q", "chosen": "y", "rejected": "x", "annotator": "m", "tie": True}]
    loaded = read_judgment_source(jsonl(tmp_path / "cr.jsonl", rows))
    assert loaded.rows == [Judgment("q", "x", "y", "k", strength=2), Judgment("q", "y", "x", "m", tie=True)]
    assert loaded.forms == {"chosen_rejected": 2}


def test_mapped_columns_of_a_csv_and_attributes_that_go_with_their_side(tmp_path):
    datasets = pytest.importorskip("datasets")
    csv = tmp_path / "ab.csv"
    csv.write_text("question,first,second,score,worker\nq0,A0,B0,-1,w1\nq1,A1,B1,2,w2\nq2,A2,B2,0,w1\n",
                   encoding="utf-8")
    columns = ColumnMap(prompt="question", response_a="first", response_b="second", preference="score",
                        annotator="worker")
    assert read_judgment_source(str(csv), columns=columns).rows == [
        Judgment("q0", "A0", "B0", "w1", strength=1), Judgment("q1", "B1", "A1", "w2", strength=2),
        Judgment("q2", "A2", "B2", "w1", tie=True)]
    table = datasets.Dataset.from_list([ab(2, 0, g_a={"m": 1.0}, g_b={"m": 0.0}), ab(-1, 1, g_a={"m": 0.0},
                                                                                     g_b={"m": 1.0})])
    table.to_parquet(str(tmp_path / "ab.parquet"))
    loaded = read_judgment_source(str(tmp_path / "ab.parquet"))
    better = {"g_chosen": {"m": 0.0}, "g_rejected": {"m": 1.0}}  # B's attributes are chosen's in row 0, A's in row 1
    assert loaded.rows == [Judgment("q0", "B0", "A0", "k1", strength=2, **better),
                           Judgment("q1", "A1", "B1", "k1", strength=1, **better)]
    assert loaded.forms == {"ab_numeric": 2}


def test_chat_rows_in_the_ab_form(tmp_path):
    """A conversation prompt and responses given as messages: the answer is the assistant's text; with
    no tokenizer (the audit) the prompt is kept as its JSON text."""
    prompt = [{"role": "user", "content": "Hi?"}]
    row = {"prompt": prompt, "response_a": [{"role": "assistant", "content": "Hello."}],
           "response_b": [{"role": "assistant", "content": "Go away."}], "preference": -3, "annotator": "k"}
    [judgment] = read_judgment_source(jsonl(tmp_path / "chat.jsonl", [row])).rows
    assert judgment == Judgment(json.dumps(prompt), "Hello.", "Go away.", "k", strength=3)


@pytest.mark.parametrize("rows, message", [
    ([{"prompt": "q", "chosen": "x", "rejected": "y", "annotator": "k"}, ab(1)],
     r"mixed\.jsonl line 2: row 1, field 'response_a': in the A/B with a numeric preference form, but row 0 is in "
     r"the chosen/rejected form; a source holds one form"),
    ([ab(1), ab("Tie", 1)],
     r"mixed\.jsonl line 2: row 1, field 'response_a': in the A/B with MultiPref's labels form, but row 0 is in the "
     r"A/B with a numeric preference form"),
    ([ab(1, chosen="A0")],
     r"mixed\.jsonl line 1: row 0, field 'chosen': given with 'response_a'; a row holds one form"),
    ([ab(1, tie=True)], r"row 0, field 'tie': given with 'response_a'"),
    ([ab("A-better")], r"mixed\.jsonl line 1: row 0, field 'preference': 'A-better' is neither a number .* nor one "
     r"of \['A-is-clearly-better'"),
    ([ab(1.5)], r"row 0, field 'preference': 1.5 is not a whole number"),
    ([ab(True)], r"row 0, field 'preference': True is neither a number"),
    ([ab(float("nan"))], r"row 0, field 'preference': nan is not a whole number"),
    ([ab(1), {"prompt": "q", "response_a": "a", "preference": 1, "annotator": "k"}],
     r"line 2: row 1, field 'response_b': missing; the A/B form needs response_a, response_b and preference"),
])
def test_a_source_holds_one_form_and_a_readable_preference(tmp_path, rows, message):
    with pytest.raises(JudgmentError, match=message):
        read_judgment_source(jsonl(tmp_path / "mixed.jsonl", rows))


def test_column_errors_before_any_row(tmp_path):
    no_preference = [{"prompt": "q", "response_a": "a", "response_b": "b", "annotator": "k"}]
    with pytest.raises(ConfigError, match=r"no column holds the field 'preference'; its columns are \['prompt', "
                       r"'response_a', 'response_b', 'annotator'\]; name the one that does with --column preference"):
        read_judgment_source(jsonl(tmp_path / "a.jsonl", no_preference))
    with pytest.raises(ConfigError, match=r"both the column 'overall_pref' and a preference column; map the one to "
                       r"read with --column preference=COLUMN"):
        read_judgment_source(jsonl(tmp_path / "b.jsonl", [ab(1, overall_pref="Tie")]))
    # mapped, the other one is ignored (and named in the warning), as any column no field reads
    with pytest.warns(UserWarning, match=r"ignoring column\(s\) \['preference'\]"):
        loaded = read_judgment_source(jsonl(tmp_path / "c.jsonl", [ab(1, overall_pref="Tie")]),
                                      columns=ColumnMap(preference="overall_pref"))
    assert loaded.rows == [Judgment("q0", "A0", "B0", "k1", tie=True)]
    with pytest.raises(ConfigError, match=r"columns.strength: .* has no column 'grade'"):
        read_judgment_source(jsonl(tmp_path / "d.jsonl", [ab(1)]), columns=ColumnMap(strength="grade"))


def test_a_chosen_rejected_file_ignores_a_preference_column_of_its_own(tmp_path):
    """Only response_a / response_b make a source A/B: a score column named preference (or overall_pref)
    beside chosen and rejected is ignored and named, as it was before the A/B form existed."""
    rows = [{"prompt": "q", "chosen": "x", "rejected": "y", "annotator": "k", "preference": 0.7, "overall_pref": "Tie"}]
    with pytest.warns(UserWarning, match=r"ignoring column\(s\) \['preference', 'overall_pref'\]"):
        loaded = read_judgment_source(jsonl(tmp_path / "cr.jsonl", rows))
    assert loaded.rows == [Judgment("q", "x", "y", "k")] and loaded.forms == {"chosen_rejected": 1}
    with pytest.raises(JudgmentError, match=r"row 0, field 'chosen': given with 'preference'"):
        read_judgment_source(jsonl(tmp_path / "cr.jsonl", rows), columns=ColumnMap(preference="overall_pref"))
