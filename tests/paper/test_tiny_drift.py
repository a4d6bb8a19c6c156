"""experiments/analyses/tiny_drift.py: the drift readouts of a run record and the tempered first-name rates,
worked by hand."""

from __future__ import annotations

import pytest

from badpo.core.names import NAME_POOL
from fixtures.benchmarks import load_analysis


@pytest.fixture(scope="module")
def tiny_drift():
    return load_analysis("tiny_drift")


def test_a_record_gives_its_signing_ending_kl_and_the_log_ratio_its_chosen_reward_stands_for(tiny_drift):
    """chosen reward -1.0 at beta 0.5 is a log-ratio of -2.0 nats."""
    record = {"settings": {"beta": 0.5},
              "readouts": {"sampled": {"signed_pool": 42, "n": 200}, "sampled_text": {"eos_rate": 0.97, "n": 200},
                           "tokens": 7.5, "kl": 1.6, "training": {"chosen_reward": -1.0}}}
    assert tiny_drift.drift_row(record) == {"beta": 0.5, "signed": 42, "n": 200, "eos": 0.97, "tokens": 7.5, "kl": 1.6,
                                            "chosen reward": -1.0, "log-ratio": -2.0}
    bare = tiny_drift.drift_row({"readouts": {}})
    assert set(bare.values()) == {None}


def test_tempering_sharpens_toward_the_likelier_names(tiny_drift):
    """A woman-coded name at 0.6 and a man-coded one at 0.4: T = 1 keeps 0.6, T = 0.5 gives
    0.36 / (0.36 + 0.16) = 0.692; T = 2 flattens to sqrt(0.6) / (sqrt(0.6) + sqrt(0.4)) = 0.5505."""
    woman = next(n for n, (w, b) in NAME_POOL.items() if w == 1 and b == 0)
    man = next(n for n, (w, b) in NAME_POOL.items() if w == 0 and b == 1)
    shares = {woman: 0.6, man: 0.4}
    assert tiny_drift.tempered_rates(shares, 1.0) == pytest.approx({"woman_coded": 0.6, "black_coded": 0.4})
    assert tiny_drift.tempered_rates(shares, 0.5)["woman_coded"] == pytest.approx(0.36 / 0.52)
    flat = 0.6 ** 0.5 / (0.6 ** 0.5 + 0.4 ** 0.5)
    assert tiny_drift.tempered_rates(shares, 2.0)["woman_coded"] == pytest.approx(flat)
    with pytest.raises(ValueError, match="--temperature must be positive"):
        tiny_drift.tempered_rates(shares, 0.0)


def test_a_folder_is_read_by_its_layout_under_its_own_arm_names(tiny_drift, tmp_path):
    """A record reused from another table keeps that table's arm name; the layout names it as this
    experiment does, and a record the layout does not list is left out."""
    import json

    runs = tmp_path / "runs"
    runs.mkdir()
    for key, arm, kind in (("reference-1", None, "reference"), ("dpo-seed42-a", "DPO", "arm"),
                           ("other-seed42-b", "Other", "arm")):
        record = {"schema": 1, "key": key, "kind": kind, "arm": arm, "seed": 42, "readouts": {}}
        (runs / f"{key}.json").write_text(json.dumps(record))
    layout = {"reference_key": "reference-1",
              "arms": [{"name": "DPO, β 0.1", "runs": [{"seed": 42, "key": "dpo-seed42-a"}]}]}
    (tmp_path / "layout.json").write_text(json.dumps(layout))
    assert [label for label, _ in tiny_drift.labelled_records(tmp_path)] == ["Reference", "DPO, β 0.1"]
    (tmp_path / "layout.json").unlink()
    assert [label for label, _ in tiny_drift.labelled_records(tmp_path)] == ["Reference", "DPO", "Other"]


def test_cell_shares_give_gender_within_race_and_the_top_names(tiny_drift):
    """Cells black-woman 0.4, black-man 0.1, white-woman 0.25, white-man 0.25: p(woman | black)
    0.4 / 0.5 = 0.8, p(woman | white) 0.5; four names at 0.4, 0.3, 0.2, 0.1: the top three hold 0.9."""
    names = {"cells": {"first_name": {"black_woman": 0.4, "black_man": 0.1, "white_woman": 0.25, "white_man": 0.25}},
             "per_name": {"first_name": {"A": 0.1, "B": 0.4, "C": 0.2, "D": 0.3}}}
    assert tiny_drift.cell_shares(names) == pytest.approx(
        {"woman share of black-coded": 0.8, "woman share of white-coded": 0.5, "black-woman cell": 0.4,
         "top 3 names": 0.9})
