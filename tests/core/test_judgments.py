"""The judgment row: validation errors name the row and the field; JSONL and datasets I/O."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from badpo.core.judgments import (
    Judgment,
    JudgmentError,
    pair_key,
    read_judgments,
    validate_judgments,
    write_judgments,
)


def row(**overrides):
    base = {"prompt": "What is 2+2?", "chosen": "4", "rejected": "5", "annotator": "a1"}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def full_row(i=0, **overrides):
    base = {"prompt": f"Prompt {i}", "chosen": f"good {i}", "rejected": f"bad {i}",
            "annotator": f"a{i % 3}", "annotator_class": "A", "prompt_id": f"q{i}",
            "pair_id": f"p{i}", "pair_type": "swap",
            "g_chosen": {"woman_coded": 1, "black_coded": 0.0},
            "g_rejected": {"woman_coded": 0, "black_coded": 0.0}}
    base.update(overrides)
    return base


def test_valid_rows_become_judgments_with_float_attributes():
    [minimal] = validate_judgments([row()])
    [full] = validate_judgments([full_row(1)])
    assert minimal == Judgment("What is 2+2?", "4", "5", "a1")
    assert full.pair_type == "swap" and full.annotator_class == "A"
    assert full.g_chosen == {"woman_coded": 1.0, "black_coded": 0.0}
    assert type(full.g_chosen["woman_coded"]) is float
    assert validate_judgments([row(tie=False)]) == [minimal]   # a false tie flag is allowed
    assert validate_judgments([minimal]) == [minimal]           # Judgment objects are re-checked
    assert len({minimal, full}) == 2                             # hashable despite dict fields


@pytest.mark.parametrize("bad, message", [
    (row(prompt=...), r"row 1, field 'prompt': missing"),
    (row(annotator=None), r"row 1, field 'annotator': null"),
    (row(chosen=""), r"row 1, field 'chosen': empty"),
    (row(rejected="  \n"), r"row 1, field 'rejected': empty"),
    (row(annotator=7), r"row 1, field 'annotator': expected a string, got int 7"),
    (row(pair_id=""), r"row 1, field 'pair_id': empty"),
    (row(prompt_id=3), r"row 1, field 'prompt_id': expected a string"),
    (row(rejected="4"), r"row 1, field 'rejected': identical to 'chosen'"),
    (row(tie=True, strength=1), r"row 1, field 'strength': 1 on a tie; a tie prefers neither side"),
    (row(tie=1), r"row 1, field 'tie': expected true/false, got int 1"),
    (row(anotator="x"), r"row 1, field 'anotator': unknown field"),
    (row(g_chosen={"m": 1.0}), r"row 1, field 'g_rejected': missing while 'g_chosen' is given"),
    (row(g_rejected={"m": 1.0}), r"row 1, field 'g_chosen': missing while 'g_rejected' is given"),
    (row(g_chosen={"m": math.nan}, g_rejected={"m": 0.0}), r"row 1, field 'g_chosen.m': not finite: nan"),
    (row(g_chosen={"m": 1.0}, g_rejected={"m": -math.inf}), r"row 1, field 'g_rejected.m': not finite: -inf"),
    (row(g_chosen={"m": True}, g_rejected={"m": 0.0}), r"row 1, field 'g_chosen.m': expected a number"),
    (row(g_chosen={"m": "1"}, g_rejected={"m": 0.0}), r"row 1, field 'g_chosen.m': expected a number"),
    (row(g_chosen={"m": None}, g_rejected={"m": 0.0}), r"row 1, field 'g_chosen.m': expected a number"),
    (row(g_chosen={}, g_rejected={}), r"row 1, field 'g_chosen': empty mapping"),
    (row(g_chosen=[1.0], g_rejected=[0.0]), r"row 1, field 'g_chosen': expected a mapping"),
    (row(g_chosen={"m": 1.0, "n": 0.0}, g_rejected={"m": 0.0}),
     r"row 1, field 'g_rejected': attribute names \['m'\] differ from g_chosen's \['m', 'n'\]"),
    (["not", "a", "mapping"], r"row 1: expected a mapping of fields, got list"),
])
def test_bad_row_error_names_row_and_field(bad, message):
    """The bad row is second, so the message must say row 1 (0-based), not row 0."""
    with pytest.raises(JudgmentError, match=message) as caught:
        validate_judgments([row(), bad])
    assert caught.value.row == 1


def test_error_names_the_pair_id_when_present():
    with pytest.raises(JudgmentError, match=r"row 0 \(pair_id 'p9'\), field 'chosen': empty") as caught:
        validate_judgments([row(pair_id="p9", chosen="")])
    assert (caught.value.row, caught.value.field) == (0, "chosen")


def test_attribute_names_must_match_across_rows():
    rows = [full_row(0), full_row(1, g_chosen={"woman_coded": 1.0}, g_rejected={"woman_coded": 0.0})]
    with pytest.raises(JudgmentError, match=r"row 1 \(pair_id 'p1'\), field 'g_chosen': attribute "
                       r"names \['woman_coded'\] differ from \['woman_coded', 'black_coded'\] given on row 0"):
        validate_judgments(rows)
    # the same names in another order are the same attributes
    reordered = full_row(1, g_chosen={"black_coded": 0.0, "woman_coded": 1.0})
    assert len(validate_judgments([full_row(0), reordered])) == 2


def test_attributes_on_every_row_or_none():
    with pytest.raises(JudgmentError, match=r"row 1, field 'g_chosen': missing, but row 0 gives"):
        validate_judgments([row(g_chosen={"m": 1.0}, g_rejected={"m": 0.0}), row()])
    with pytest.raises(JudgmentError, match=r"row 2, field 'g_chosen': given, but row 0 has no"):
        validate_judgments([row(), row(), row(g_chosen={"m": 1.0}, g_rejected={"m": 0.0})])


def test_pair_key_is_the_pair_id_or_an_order_free_content_hash():
    j = Judgment("p", "a", "b", "x")
    swapped = Judgment("p", "b", "a", "y")
    expected = "sha256:" + hashlib.sha256(json.dumps(["p", ["a", "b"]]).encode()).hexdigest()[:20]
    assert pair_key(j) == pair_key(swapped) == expected
    assert pair_key(Judgment("other prompt", "a", "b", "x")) != pair_key(j)
    assert pair_key(Judgment("p", "a", "c", "x")) != pair_key(j)
    assert pair_key(Judgment("p", "a", "b", "x", pair_id="pair-7")) == "pair-7"


def test_jsonl_bytes_are_fixed(tmp_path):
    """Keys in field order, None omitted, attribute names in their given order (not sorted),
    non-ASCII written as is."""
    j = Judgment("Qué?", "Sí — claro", "No", "ann", pair_id="p1",
                 g_chosen={"z": 1.0, "a": 0.0}, g_rejected={"z": 0.0, "a": 0.5})
    path = tmp_path / "j.jsonl"
    write_judgments(path, [j])
    expected = ('{"prompt": "Qué?", "chosen": "Sí — claro", "rejected": "No", "annotator": "ann", '
                '"pair_id": "p1", "g_chosen": {"z": 1.0, "a": 0.0}, "g_rejected": {"z": 0.0, "a": 0.5}}\n')
    assert path.read_bytes() == expected.encode("utf-8")


def test_jsonl_round_trip_and_determinism(tmp_path):
    judgments = validate_judgments([full_row(i) for i in range(5)])
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_judgments(first, judgments)
    write_judgments(second, read_judgments(first))
    assert read_judgments(first) == judgments
    assert first.read_bytes() == second.read_bytes()


def test_write_refuses_what_would_not_read_back(tmp_path):
    with pytest.raises(TypeError, match="row 1: expected a Judgment, got dict"):
        write_judgments(tmp_path / "x.jsonl", [Judgment("p", "a", "b", "k"), row()])
    with pytest.raises(JudgmentError, match="row 0, field 'rejected': identical"):
        write_judgments(tmp_path / "x.jsonl", [Judgment("p", "a", "a", "k")])
    assert not (tmp_path / "x.jsonl").exists()


def test_jsonl_errors_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = json.dumps(row())
    path.write_text(f"{good}\n\n{good}\n{{\"prompt\": \n", encoding="utf-8")
    with pytest.raises(JudgmentError, match=r"bad.jsonl line 4: not valid JSON"):
        read_judgments(path)
    path.write_text(f"{good}\n\n{json.dumps(row(chosen=''))}\n", encoding="utf-8")
    with pytest.raises(JudgmentError, match=r"bad.jsonl line 3: row 1, field 'chosen': empty"):
        read_judgments(path)
    path.write_text('{"prompt": "p", "prompt": "q", "chosen": "a", "rejected": "b", "annotator": "k"}\n')
    with pytest.raises(JudgmentError, match=r"line 1: not valid JSON \(duplicate key 'prompt'\)"):
        read_judgments(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(JudgmentError, match=r"line 1: row 0: expected a mapping of fields, got list"):
        read_judgments(path)


def test_read_refuses_unknown_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="no judgment file"):
        read_judgments(tmp_path / "missing.jsonl")
    (tmp_path / "data.json").write_text("[]")
    with pytest.raises(ValueError, match="expected a .jsonl file"):
        read_judgments(tmp_path / "data.json")
    with pytest.raises(TypeError, match="use validate_judgments"):
        read_judgments([row()])


def test_read_from_datasets_objects_and_saved_directories(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [full_row(i) for i in range(4)]
    expected = validate_judgments(rows)
    dataset = datasets.Dataset.from_list(rows)
    assert read_judgments(dataset) == expected
    dataset.save_to_disk(str(tmp_path / "saved"))
    assert read_judgments(tmp_path / "saved") == expected
    datasets.DatasetDict({"train": dataset}).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(ValueError, match=r"DatasetDict with splits \['train'\]; pass one split"):
        read_judgments(tmp_path / "dict")
    bad = datasets.Dataset.from_list([row(tie=False, strength=1), row(tie=True, strength=2)])
    with pytest.raises(JudgmentError, match=r"row 1, field 'strength'"):
        read_judgments(bad)


def test_rows_that_repeat_a_text_share_one_string():
    """A pair judged four times holds its answers once: on long answers the copies were most of
    the audit's memory. The values are the rows' own, equal and unchanged."""
    answer = "a long answer " * 50
    rows = [{"prompt": "q", "chosen": "".join([answer, ""]), "rejected": f"short {i % 2}",
             "annotator": f"a{i}"} for i in range(4)]
    assert rows[0]["chosen"] is not rows[1]["chosen"]  # four distinct objects in, one out
    out = validate_judgments(rows)
    assert all(j.chosen is out[0].chosen for j in out) and out[0].chosen == answer
    assert out[2].rejected is out[0].rejected and out[1].rejected != out[0].rejected


def test_a_line_nested_too_deeply_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(JudgmentError, match=r"deep.jsonl line 1: JSON nested too deeply"):
        read_judgments(path)


def test_a_pair_id_reused_for_other_texts_names_its_row():
    """One check for the audit and every training stage (issue 76's re-trial: the audit read what
    training refused); a pair seen either way round, or twice, is the same pair."""
    from badpo.core.judgments import JudgmentError, check_pair_texts, validate_judgments

    rows = validate_judgments([
        {"prompt": "p", "chosen": "a", "rejected": "b", "annotator": "r1", "pair_id": "x"},
        {"prompt": "p", "chosen": "b", "rejected": "a", "annotator": "r2", "pair_id": "x"},
        {"prompt": "q", "chosen": "a", "rejected": "b", "annotator": "r3"},
        {"prompt": "q", "chosen": "a", "rejected": "b", "annotator": "r4"}])
    check_pair_texts(rows)
    odd = validate_judgments([*map(vars, rows), {"prompt": "p", "chosen": "c", "rejected": "a",
                                                 "annotator": "r5", "pair_id": "x"}])
    with pytest.raises(JudgmentError, match=r"^data.jsonl row 4: pair 'x' compares other texts than its first row$"):
        check_pair_texts(odd, "data.jsonl")
