"""The crowd-label builders on small fixtures written by hand from the published schemas (no network):
HelpSteer3's individual preferences (tests/fixtures/helpsteer3/preference/train.jsonl) and PRISM's
rated opening turns (tests/fixtures/prism/conversations.jsonl). Every count and judgment below is
read off the fixture by hand.

HelpSteer3, six rows: row 0 (general) votes -3, -1, 0; row 1 (code) 2, 1; row 2 has a three-turn
context (left out, 2 votes); row 3 two identical responses (left out, 1 vote); row 4 (stem) -1, 0,
-2; row 5 (multilingual) 0, 0. So 13 votes, 10 judgments: 4 ties, strength 1: 3 (rows 0, 1, 4),
strength 2: 2 (rows 1, 4), strength 3: 1 (row 0), over 4 prompts.

PRISM, four conversations: c1 (user1) chose "Try a stir-fry." (80) over "Pasta." (60) and "Nothing."
(20), tied with "Soup." (80), and has one later turn; c2 (user2) chose "Rarely; honesty matters." (70)
over "Sometimes, ..." (55), a copy of its text (left out) and "Never." rated 90 (left out: above the
chosen); c3 has no chosen response (left out); c4 (user3) chose the chicken joke (30) over "Knock
knock." (25), an empty response (left out), and has two later turns. So 5 judgments, 1 a tie.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from badpo.cli import main
from badpo.core.judgments import Judgment, read_judgments
from badpo.corpora.helpsteer3 import HelpSteer3Config, build_helpsteer3, helpsteer3_judgments
from badpo.corpora.prism import PrismConfig, build_prism, prism_judgments
from badpo.data.hub import CorpusSchemaError, load_split

FIXTURES = Path(__file__).parents[1] / "fixtures"
HS3 = FIXTURES / "helpsteer3" / "preference"
PRISM = FIXTURES / "prism" / "conversations.jsonl"


def hs3_rows():
    return load_split(str(HS3), "train")


def hs3_hash(*texts):
    return "hs3:" + hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest()[:16]


def test_helpsteer3_judgments_by_hand():
    judgments, counts = helpsteer3_judgments(hs3_rows(), HelpSteer3Config())
    assert counts == {"rows": 6, "votes": 13, "left_out_multi_turn_rows": 1, "left_out_empty_rows": 0,
                      "left_out_identical_rows": 1, "left_out_ties": 0}
    prime, wrong = "7 is prime.", "8 is prime."
    pair = hs3_hash("Name a prime.", prime, wrong)
    same = {"prompt_id": hs3_hash("Name a prime."), "pair_id": pair, "pair_type": "general"}
    assert judgments[:3] == [Judgment("Name a prime.", prime, wrong, f"{pair}/0", strength=3, **same),
                             Judgment("Name a prime.", prime, wrong, f"{pair}/1", strength=1, **same),
                             Judgment("Name a prime.", prime, wrong, f"{pair}/2", tie=True, **same)]
    copy, reverse = "Use lst[::-1] for a reversed copy.", "lst.reverse() returns the reversed list."
    assert [(j.chosen, j.rejected, j.strength, j.pair_type) for j in judgments[3:5]] == [
        (copy, reverse, 2, "code"), (copy, reverse, 1, "code")]
    assert [(j.prompt, j.chosen, j.tie, j.strength) for j in judgments[5:]] == [
        ("What is 2+2?", "4", False, 1), ("What is 2+2?", "4", True, None), ("What is 2+2?", "4", False, 2),
        ("Bonjour ?", "Bonjour !", True, None), ("Bonjour ?", "Bonjour !", True, None)]


def test_helpsteer3_options():
    without_ties, counts = helpsteer3_judgments(hs3_rows(), HelpSteer3Config(keep_ties=False))
    assert len(without_ties) == 6 and counts["left_out_ties"] == 4 and not any(j.tie for j in without_ties)
    plain, _ = helpsteer3_judgments(hs3_rows(), HelpSteer3Config(keep_strength=False))
    assert [j.strength for j in plain] == [None] * 10 and sum(j.tie for j in plain) == 4
    slots, _ = helpsteer3_judgments(hs3_rows(), HelpSteer3Config(annotators="position"))
    assert [j.annotator for j in slots] == [f"hs3-position-{k}" for k in (0, 1, 2, 0, 1, 0, 1, 2, 0, 1)]


def bad_hs3(**change):
    row = dict(hs3_rows()[0])
    row.update(change)
    return [hs3_rows()[1], row]


@pytest.mark.parametrize("rows, message", [
    (bad_hs3(individual_preference=[{"score": 4}]), r"row 1, field 'individual_preference\[0\]\.score': expected an "
     r"integer from -3 to 3, got 4"),
    (bad_hs3(individual_preference=[{"score": True}]), r"row 1, field 'individual_preference\[0\]\.score'"),
    (bad_hs3(individual_preference=None), r"row 1, field 'individual_preference': expected a list"),
    (bad_hs3(overall_preference="A"), r"row 1, field 'overall_preference': expected an integer from -3 to 3"),
    (bad_hs3(context=[{"role": "assistant", "content": "x"}]), r"row 1, field 'context\[0\]\.role': the last turn "
     r"is the 'assistant''s"),
    (bad_hs3(context="Name a prime."), r"row 1, field 'context': expected a non-empty list"),
    (bad_hs3(response2=7), r"row 1, field 'response2': expected a string, got 7"),
])
def test_helpsteer3_refuses_a_row_off_the_schema_naming_row_and_field(rows, message):
    with pytest.raises(CorpusSchemaError, match=r"^hs3\.jsonl " + message):
        helpsteer3_judgments(rows, HelpSteer3Config(), "hs3.jsonl")


def test_helpsteer3_builds_from_its_published_jsonl_gz(tmp_path, capsys):
    gz = tmp_path / "snapshot" / "preference"
    gz.mkdir(parents=True)
    with gzip.open(gz / "train.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write((HS3 / "train.jsonl").read_text(encoding="utf-8"))
    assert main(["build", "helpsteer3", str(tmp_path / "out"), f"source={gz}", "heldout_fraction=0.25"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"helpsteer3 from {gz}: 10 judgments (")
    assert "left out: multi_turn_rows 1, identical_rows 1" in printed
    train, heldout = (read_judgments(tmp_path / "out" / f"{name}.jsonl") for name in ("train", "heldout"))
    assert sorted(train + heldout, key=repr) == sorted(helpsteer3_judgments(hs3_rows(), HelpSteer3Config())[0],
                                                       key=repr)
    assert {j.prompt_id for j in train}.isdisjoint({j.prompt_id for j in heldout}) and len(
        {j.prompt_id for j in heldout}) == 1  # floor(0.25 * 4 + 0.5) of the 4 prompts
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    both = [stats["labels"][side] for side in ("train", "heldout")]
    assert sum(s["ties"] for s in both) == 4 and sum(s["strengths"].get("1", 0) for s in both) == 3
    build_helpsteer3(HelpSteer3Config(source=str(gz), heldout_fraction=0.25), tmp_path / "again")
    for name in ("train.jsonl", "heldout.jsonl", "stats.json"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_prism_judgments_by_hand():
    judgments, counts = prism_judgments(load_split(str(PRISM), "train"), PrismConfig())
    assert counts == {"conversations": 4, "left_out_later_turns": 3, "left_out_openings_without_one_choice": 1,
                      "left_out_empty_prompts": 0, "left_out_empty_responses": 1, "left_out_identical_pairs": 1,
                      "left_out_chosen_scored_lower": 1, "left_out_ties": 0}
    cook, lie, joke = "What should I cook tonight?", "Is lying ever right?", "Tell me a joke."
    assert judgments == [
        Judgment(cook, "Try a stir-fry.", "Pasta.", "user1", prompt_id="c1", pair_id="c1/0/0-1", pair_type="unguided"),
        Judgment(cook, "Try a stir-fry.", "Soup.", "user1", prompt_id="c1", pair_id="c1/0/0-2", pair_type="unguided",
                 tie=True),
        Judgment(cook, "Try a stir-fry.", "Nothing.", "user1", prompt_id="c1", pair_id="c1/0/0-3",
                 pair_type="unguided"),
        Judgment(lie, "Rarely; honesty matters.", "Sometimes, to protect someone.", "user2", prompt_id="c2",
                 pair_id="c2/0/1-0", pair_type="values guided"),
        Judgment(joke, "Why did the chicken cross the road?", "Knock knock.", "user3", prompt_id="c4",
                 pair_id="c4/0/0-2", pair_type="unguided")]
    without_ties, counts = prism_judgments(load_split(str(PRISM), "train"), PrismConfig(keep_ties=False))
    assert len(without_ties) == 4 and counts["left_out_ties"] == 1


def bad_prism(change):
    row = json.loads(PRISM.read_text().splitlines()[0])
    change(row)
    return [row]


@pytest.mark.parametrize("change, message", [
    (lambda row: row.pop("user_id"), r"field 'user_id': expected a non-empty string, got None"),
    (lambda row: row.update(conversation_history="hello"), r"field 'conversation_history': expected a list of turns"),
    (lambda row: row["conversation_history"][1].update(role="assistant"),
     r"field 'conversation_history\[1\]\.role': expected one of \['user', 'model'\], got 'assistant'"),
    (lambda row: row["conversation_history"][2].update(score=101),
     r"field 'conversation_history\[2\]\.score': expected a rating from 1 to 100, got 101"),
    (lambda row: row["conversation_history"][2].update(if_chosen="no"),
     r"field 'conversation_history\[2\]\.if_chosen': expected true/false, got 'no'"),
    (lambda row: row["conversation_history"][1].update(turn=0.5), r"field 'conversation_history\[1\]\.turn'"),
    (lambda row: row["conversation_history"][1].update(role="user"),
     r"field 'conversation_history': the opening turn \(turn 0\) has 2 user prompts, not one"),
])
def test_prism_refuses_a_row_off_the_schema_naming_row_and_field(change, message):
    with pytest.raises(CorpusSchemaError, match=r"^prism\.jsonl row 0 \(conversation_id 'c1'\), " + message):
        prism_judgments(bad_prism(change), PrismConfig(), "prism.jsonl")


def test_prism_builds_by_participant(tmp_path, capsys):
    assert main(["build", "prism", str(tmp_path / "out"), f"source={PRISM}", "heldout_fraction=0.34"]) == 0
    assert capsys.readouterr().out.startswith(f"prism from {PRISM}: 5 judgments (")
    stats = build_prism(PrismConfig(source=str(PRISM), heldout_fraction=0.34), tmp_path / "again")
    assert (stats["prompts_train"], stats["prompts_heldout"], stats["annotators"]) == (2, 1, 3)
    assert stats["labels"]["train"]["ties"] + stats["labels"]["heldout"]["ties"] == 1
    assert (tmp_path / "again" / "train.jsonl").read_bytes() == (tmp_path / "out" / "train.jsonl").read_bytes()
