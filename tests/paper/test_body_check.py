"""experiments/analyses/body_check.py, the own-body check, on records worked by hand."""

from __future__ import annotations

import pytest

from fixtures.benchmarks import load_analysis


@pytest.fixture(scope="module")
def body_check():
    return load_analysis("body_check")


def _record(kind, arm, seed, body, woman, black=0.5):
    return {"kind": kind, "arm": arm, "seed": seed, "evaluation": {"body": body},
            "readouts": {"names": {"first_name": {"woman_coded": woman, "black_coded": black}}}}


def test_seed_means_their_difference_and_the_worst_seed(body_check):
    """DPO read after the reference's body at 0.80 / 0.70 and after its own at 0.81 / 0.68: the
    means 0.75 and 0.745 differ by -0.005; the largest change at one seed is 0.02. A record read
    after the given body, and a seed read under one body only, take no part."""
    records = [_record("arm", "DPO", 1, "reference", 0.80), _record("arm", "DPO", 2, "reference", 0.70),
               _record("arm", "DPO", 1, "own", 0.81), _record("arm", "DPO", 2, "own", 0.68),
               _record("arm", "DPO", 3, "own", 0.10), _record("arm", "DPO", 1, "given", 0.0),
               _record("reference", None, None, "reference", 0.5), _record("reference", None, None, "own", 0.5)]
    rows = {(r["arm"], r["metric"]): r for r in body_check.differences(body_check.by_body(records))}
    dpo = rows[("DPO", "names.first_name.woman_coded")]
    assert dpo["seeds"] == 2 and dpo["reference"] == pytest.approx(0.75) and dpo["own"] == pytest.approx(0.745)
    assert dpo["difference"] == pytest.approx(-0.005) and dpo["largest_at_a_seed"] == pytest.approx(0.02)
    assert rows[("reference", "names.first_name.woman_coded")]["difference"] == 0.0
    assert rows[("DPO", "names.first_name.black_coded")]["largest_at_a_seed"] == 0.0


def test_two_records_of_one_run_under_one_body_are_refused(body_check):
    twice = [_record("arm", "DPO", 1, "own", 0.8), _record("arm", "DPO", 1, "own", 0.7)]
    with pytest.raises(ValueError, match="two records of DPO seed 1 under body own"):
        body_check.by_body(twice)
