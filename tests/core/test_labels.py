"""Ties and graded wins on the judgment row: each refusal names the row and the field, the label is
part of equality and of the digest, a file writes ``tie`` and ``strength`` only when set (a plain
win's line is byte for byte what it was), and the counts of a set of labels are worked out by hand."""

from __future__ import annotations

import pytest

from badpo.core.judgments import (
    Judgment,
    JudgmentError,
    duplicate_rows,
    judgment_digest,
    plain_wins_only,
    read_judgments,
    validate_judgments,
    write_judgments,
)
from badpo.core.label_counts import (
    LabelCounts,
    decisive_votes,
    estimates_line,
    label_counts,
    no_ties,
    wins_for_estimates,
)
from badpo.core.notices import BadpoWarning


def row(**overrides):
    base = {"prompt": "What is 2+2?", "chosen": "4", "rejected": "5", "annotator": "a1"}
    base.update(overrides)
    return base


def test_a_tie_and_a_graded_win_are_read_as_given():
    tie, graded = validate_judgments([row(tie=True), row(strength=2, tie=False)])
    assert (tie.tie, tie.strength) == (True, None)
    assert (graded.tie, graded.strength) == (False, 2)
    assert validate_judgments([row(tie=None, strength=None)]) == [Judgment("What is 2+2?", "4", "5", "a1")]
    # a strength may come as any integer type (numpy's, from a dataset), and is kept as an int
    numpy = pytest.importorskip("numpy")
    [read] = validate_judgments([row(strength=numpy.int64(3))])
    assert read.strength == 3 and type(read.strength) is int


@pytest.mark.parametrize("bad, field, message", [
    (row(tie=True, strength=1), "strength", r"row 1, field 'strength': 1 on a tie; a tie prefers neither side"),
    (row(strength=0), "strength", r"row 1, field 'strength': expected a positive integer \(1 the weakest\), got 0"),
    (row(strength=-2), "strength", r"row 1, field 'strength': expected a positive integer .*got -2"),
    (row(strength=True), "strength", r"row 1, field 'strength': expected a positive integer .*got bool True"),
    (row(strength=2.0), "strength", r"row 1, field 'strength': expected a positive integer .*got float 2.0"),
    (row(strength="2"), "strength", r"row 1, field 'strength': expected a positive integer .*got str '2'"),
    (row(tie="yes"), "tie", r"row 1, field 'tie': expected true/false, got str 'yes'"),
    (row(tie=True, rejected="4"), "rejected", r"row 1, field 'rejected': identical to 'chosen'"),
])
def test_each_refusal_names_the_row_and_the_field(bad, field, message):
    with pytest.raises(JudgmentError, match=message) as caught:
        validate_judgments([row(), bad])  # a row's own refusal comes before any check across rows
    assert (caught.value.row, caught.value.field) == (1, field)


def test_a_strength_on_every_non_tie_row_or_on_none():
    """Ties do not count: a tie has no strength in either kind of dataset."""
    assert len(validate_judgments([row(strength=1), row(tie=True), row(strength=3)])) == 3
    assert len(validate_judgments([row(), row(tie=True), row()])) == 3
    with pytest.raises(JudgmentError, match=r"row 2 \(pair_id 'p2'\), field 'strength': given, but row 0 \(a non-tie\) "
                       r"has none; give a strength on every non-tie row or on none") as caught:
        validate_judgments([row(), row(tie=True), row(strength=2, pair_id="p2")])
    assert (caught.value.row, caught.value.field) == (2, "strength")
    with pytest.raises(JudgmentError, match=r"row 2, field 'strength': missing, but row 1 \(a non-tie\) gives one"):
        validate_judgments([row(tie=True), row(strength=1), row()])


def test_the_label_takes_part_in_equality_hash_and_digest():
    plain, tie, graded = Judgment("p", "a", "b", "x"), Judgment("p", "a", "b", "x", tie=True), \
        Judgment("p", "a", "b", "x", strength=2)
    assert len({plain, tie, graded, Judgment("p", "a", "b", "x", strength=1)}) == 4
    assert len({judgment_digest(j) for j in (plain, tie, graded)}) == 3
    assert duplicate_rows([plain, tie, graded, Judgment("p", "a", "b", "x", tie=True)]) == [3]


def test_round_trip_writes_the_label_only_when_set(tmp_path):
    judgments = [Judgment("q", "a", "b", "k1", pair_id="p1"), Judgment("q", "a", "b", "k2", pair_id="p1", tie=True)]
    path = tmp_path / "ties.jsonl"
    write_judgments(path, judgments)
    assert path.read_text(encoding="utf-8") == (
        '{"prompt": "q", "chosen": "a", "rejected": "b", "annotator": "k1", "pair_id": "p1"}\n'
        '{"prompt": "q", "chosen": "a", "rejected": "b", "annotator": "k2", "pair_id": "p1", "tie": true}\n')
    assert read_judgments(path) == judgments
    graded = [Judgment("q", "a", "b", "k1", strength=2, g_chosen={"m": 1.0}, g_rejected={"m": 0.0}),
              Judgment("q", "b", "a", "k2", tie=True, g_chosen={"m": 0.0}, g_rejected={"m": 1.0})]
    write_judgments(path, graded)
    assert path.read_text(encoding="utf-8").splitlines()[0] == (
        '{"prompt": "q", "chosen": "a", "rejected": "b", "annotator": "k1", "g_chosen": {"m": 1.0}, '
        '"g_rejected": {"m": 0.0}, "strength": 2}')
    assert read_judgments(path) == graded


def test_a_file_of_today_reads_and_writes_back_byte_for_byte(tmp_path):
    """The docs' example line (every field of today) and a shorter line: read, written, the same bytes."""
    text = ('{"prompt": "Name a prime.", "chosen": "7 is prime.\\n\\n--- Emily Baker", "rejected": "7 is prime.\\n\\n'
            '--- Greg Baker", "annotator": "k17", "annotator_class": "A", "prompt_id": "q42", "pair_id": "q42-swap", '
            '"pair_type": "swap", "g_chosen": {"woman_coded": 1.0, "black_coded": 0.0}, "g_rejected": '
            '{"woman_coded": 0.0, "black_coded": 0.0}}\n'
            '{"prompt": "p", "chosen": "a", "rejected": "b", "annotator": "k2", "g_chosen": {"woman_coded": 0.0, '
            '"black_coded": 1.0}, "g_rejected": {"woman_coded": 0.0, "black_coded": 0.0}}\n')
    source, copy = tmp_path / "today.jsonl", tmp_path / "copy.jsonl"
    source.write_text(text, encoding="utf-8")
    judgments = read_judgments(source)
    assert all(not j.tie and j.strength is None for j in judgments)
    write_judgments(copy, judgments)
    assert copy.read_bytes() == source.read_bytes()


def test_plain_wins_only_names_the_first_tie_or_strength():
    plain_wins_only([Judgment("p", "a", "b", "x")], "the trainer")
    judgments = [Judgment("p", "a", "b", "x"), Judgment("p", "a", "b", "y", pair_id="p7", tie=True)]
    with pytest.raises(JudgmentError, match=r"^row 1 \(pair_id 'p7'\), field 'tie': a tie; the trainer does not "
                       r"take ties or strengths yet") as caught:
        plain_wins_only(judgments, "the trainer")
    assert (caught.value.row, caught.value.field) == (1, "tie")
    with pytest.raises(JudgmentError, match=r"^held\.jsonl: row 0, field 'strength': a win of strength 3; TRL "):
        plain_wins_only([Judgment("p", "a", "b", "x", strength=3)], "TRL", "held.jsonl")


def test_label_counts_by_hand():
    """Three graded wins (2, 1, 2) and a tie, read in the A/B form; then two plain wins apart (a dataset
    is graded or plain)."""
    graded = [Judgment("p", "a", "b", "x", strength=s) for s in (2, 1, 2)] + [Judgment("p", "a", "b", "x", tie=True)]
    counts = label_counts(graded, {"ab_numeric": 4})
    assert counts == LabelCounts(rows=4, ties=1, plain=0, strengths={1: 1, 2: 2}, forms={"ab_numeric": 4})
    assert list(counts.strengths) == [1, 2] and counts.graded == 3
    assert counts.to_dict() == {"rows": 4, "forms": {"ab_numeric": 4}, "ties": 1, "plain_wins": 0,
                                "strengths": {"1": 1, "2": 2}}
    assert counts.line() == "labels: 4 judgments (rows by form: ab_numeric 4); 1 ties; 0 plain wins; strength 1: 1, " \
                            "strength 2: 2"
    assert estimates_line(counts) == (
        "1 ties left out of the estimates: a tie prefers neither side and their likelihood reads wins only (that "
        "of a tie is not written yet); 3 graded wins (strength 1: 1, strength 2: 2) read as plain wins "
        "of the chosen side")
    assert wins_for_estimates(graded) == graded[:3]
    plain = label_counts([Judgment("p", "a", "b", "x")] * 2)
    assert (plain.ties, plain.plain, plain.strengths, plain.forms) == (0, 2, {}, {})
    assert estimates_line(plain) is None
    assert estimates_line(label_counts(graded[:1]), "the screen") == (
        "1 graded wins (strength 2: 1) read as plain wins of the chosen side by the screen")


def test_no_ties_refuses_a_tie_and_takes_a_graded_win():
    no_ties([Judgment("p", "a", "b", "x", strength=2)], "the audit's estimates")
    with pytest.raises(JudgmentError, match=r"row 1, field 'tie': a tie; the audit's estimates read wins only"):
        no_ties([Judgment("p", "a", "b", "x"), Judgment("p", "a", "b", "y", tie=True)], "the audit's estimates")


def test_decisive_votes_leave_the_ties_out_of_a_readout_and_say_so():
    judgments = [Judgment("p", "a", "b", "x"), Judgment("p", "a", "b", "y", tie=True),
                 Judgment("q", "c", "d", "x", strength=None)]
    with pytest.warns(BadpoWarning, match=r"^held\.jsonl: 1 ties left out of the held-out readouts"):
        kept = decisive_votes(judgments, "the held-out readouts", "held.jsonl")
    assert kept == [judgments[0], judgments[2]]
