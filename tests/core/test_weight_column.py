"""The weight column: a finite number >= 0 on every row or on none, written only when set (a row
without one is byte for byte what it was, and so is its digest), and the audit says it does not read it."""

from __future__ import annotations

import math

import pytest

from badpo.core.judgments import (
    JudgmentError,
    judgment_digest,
    read_judgments,
    validate_judgments,
    write_judgments,
)
from badpo.core.label_counts import estimates_line, label_counts


def row(**overrides):
    return {"prompt": "p", "chosen": "a", "rejected": "b", "annotator": "x"} | overrides


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf, True, "2"])
def test_a_bad_weight_is_refused_naming_the_row_and_the_field(bad):
    with pytest.raises(JudgmentError, match=r"row 1, field 'weight': expected a finite number >= 0") as caught:
        validate_judgments([row(weight=1.0), row(weight=bad, annotator="y")])
    assert caught.value.field == "weight" and caught.value.row == 1


def test_a_weight_on_some_rows_only_is_refused():
    with pytest.raises(JudgmentError, match=r"row 1, field 'weight': missing, but row 0 gives one"):
        validate_judgments([row(weight=2), row(annotator="y")])


def test_written_only_when_set_and_the_digest_of_a_plain_row_is_unchanged(tmp_path):
    plain, weighted = validate_judgments([row()])[0], validate_judgments([row(weight=3)])[0]
    assert weighted.weight == 3.0 and isinstance(weighted.weight, float)
    write_judgments(tmp_path / "w.jsonl", [weighted])
    write_judgments(tmp_path / "p.jsonl", [plain])
    assert '"weight": 3.0' in (tmp_path / "w.jsonl").read_text()
    assert "weight" not in (tmp_path / "p.jsonl").read_text()
    assert read_judgments(tmp_path / "w.jsonl") == [weighted]
    # the digest the row had before the weight column existed (computed at the commit before it)
    assert judgment_digest(plain).hex() == "921ab5325e5ebc1b809cbb3c06e5a28e"
    assert judgment_digest(plain) != judgment_digest(weighted)


def test_the_audit_says_it_does_not_read_the_weights():
    line = estimates_line(label_counts(validate_judgments([row(weight=2.0), row(weight=0.5, annotator="y")])))
    assert line == "2 judgments' loss weights not read by the estimates (each counts once; training weighs them)"

