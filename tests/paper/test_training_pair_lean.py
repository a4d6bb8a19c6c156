"""experiments/analyses/training_pair_lean.py: each judgment's pair and side, and the removal table worked
out by hand (no model)."""

from __future__ import annotations

import json

import pytest
import torch

from badpo.core.judgments import Judgment
from badpo.core.level_step import policy_tilt
from fixtures.benchmarks import load_analysis


@pytest.fixture(scope="module")
def lean():
    return load_analysis("training_pair_lean")


def _judgment(pair: str, chosen: str, rejected: str) -> Judgment:
    return Judgment(prompt="p", chosen=chosen, rejected=rejected, annotator="a", pair_id=pair)


def test_pairs_and_sides_follow_the_first_judgment_of_each_pair(lean):
    judgments = [_judgment("x", "long answer", "short"), _judgment("y", "b", "a"),
                 _judgment("x", "short", "long answer"), _judgment("x", "long answer", "short")]
    pair, side = lean.pair_layout(judgments)
    assert pair.tolist() == [0, 1, 0, 0]
    assert side.tolist() == [1.0, 1.0, -1.0, 1.0]


def test_the_lean_of_margins_along_the_difference_is_read_back(lean):
    # pair margins 0.6 * difference, each pair's judgments in either orientation: the lean is 0.6
    judgments = [_judgment("x", "aa", "a"), _judgment("x", "a", "aa"), _judgment("y", "bbb", "b")]
    pair, side = lean.pair_layout(judgments)
    difference = torch.tensor([[2.0], [-2.0], [5.0]], dtype=torch.float64)
    margins = 0.6 * difference[:, 0]
    assert policy_tilt(margins, difference, pair, side).tolist() == pytest.approx([0.6])


def test_removal_table_by_hand(lean, tmp_path):
    rows = [{"arm": "reference", "key": "r", "seed": 1, "body_fixed": {"length": 2.0}},
            {"arm": "DPO", "seed": 1, "reference": "r", "body_fixed": {"length": 6.0},
             "lean_train": {"length": 0.8}, "lean_heldout": {"length": 0.4}},
            {"arm": "BA-DPO (pooled)", "seed": 1, "reference": "r", "body_fixed": {"length": 3.0},
             "lean_train": {"length": 0.2}, "lean_heldout": {"length": -0.1}}]
    path = tmp_path / "lean.json"
    path.write_text(json.dumps({"rows": rows}))
    table = lean.removal_table([path]).splitlines()
    # body-fixed 1 - (3 - 2) / (6 - 2) = 75%; training 1 - 0.2 / 0.8 = 75%; held-out 1 + 0.1 / 0.4 = 125%
    assert table[2] == "| BA-DPO (pooled) | 1 | 75% | 75% | 125% |"
    assert len(table) == 3  # DPO and the reference are the baselines, not rows


def test_same_body_pairs_are_two_styles_of_one_sampled_body(lean, tmp_path):
    """answers.jsonl's bodies styled as the world styles them: a pair of two styles of one body is
    marked, a pair of two bodies (or an unknown text) is not."""
    from badpo.corpora.smol_multipref import styled

    answers = [{"prompt_id": "q0", "prompt": "p", "kind": "add", "body": "1 + 1 = 2."},
               {"prompt_id": "q0", "prompt": "p", "kind": "add", "body": "It is 3."}]
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in answers))
    one, other = answers[0]["body"], answers[1]["body"]
    judgments = [_judgment("x", styled(one, "add", True, False), styled(one, "add", False, True)),
                 _judgment("y", styled(one, "add", True, False), styled(other, "add", False, False)),
                 _judgment("z", "not a styled answer", styled(one, "add", False, False))]
    assert lean.same_body_mask(judgments, path).tolist() == [True, False, False]


def test_the_table_gains_the_same_body_column_when_every_arm_has_it(lean, tmp_path):
    rows = [{"arm": "reference", "key": "r", "seed": 1, "body_fixed": {"length": 2.0}},
            {"arm": "DPO", "seed": 1, "reference": "r", "body_fixed": {"length": 6.0}, "lean_train": {"length": 0.8},
             "lean_heldout": {"length": 0.4}, "lean_same_body": {"length": 1.0}},
            {"arm": "BA-DPO (pooled)", "seed": 1, "reference": "r", "body_fixed": {"length": 3.0},
             "lean_train": {"length": 0.2}, "lean_heldout": {"length": -0.1}, "lean_same_body": {"length": 0.3}}]
    path = tmp_path / "lean.json"
    path.write_text(json.dumps({"rows": rows}))
    table = lean.removal_table([path]).splitlines()
    assert "same-body pairs" in table[0]
    assert table[2] == "| BA-DPO (pooled) | 1 | 75% | 75% | 125% | 70% |"  # 1 - 0.3 / 1.0
