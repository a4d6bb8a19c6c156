"""experiments/analyses/group_weights.py: whom a weighting favoured, against the planted theta, by hand."""

from __future__ import annotations

import pytest

from fixtures.benchmarks import load_analysis


@pytest.fixture(scope="module")
def group_weights():
    return load_analysis("group_weights")


def test_the_heaviest_annotators_come_with_their_planted_theta_and_its_rank(group_weights):
    """Weights a 0.9, b 0.1, c 0; theta a 2, b 0, c 1: a is heaviest and the most biased (rank 1),
    b is next (rank 3 of 3); weighted mean 0.9 * 2 + 0.1 * 0 = 1.8 against the plain mean 1.0."""
    report = group_weights.weight_report({"a": 0.9, "b": 0.1, "c": 0.0}, {"a": 2.0, "b": 0.0, "c": 1.0}, top=2)
    assert report["top"] == [{"annotator": "a", "weight": 0.9, "theta": 2.0, "rank": 1},
                             {"annotator": "b", "weight": 0.1, "theta": 0.0, "rank": 3}]
    assert report["weighted_theta"] == pytest.approx(1.8) and report["mean_theta"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="without a planted theta"):
        group_weights.weight_report({"z": 1.0}, {"a": 2.0})


def test_the_planted_column_is_the_attributes(group_weights):
    planted = {"attribute_names": ["length", "markdown"],
               "annotators": [{"annotator": "a", "theta": [0.5, 1.5]}, {"annotator": "b", "theta": [2.0, 0.1]}]}
    assert group_weights.planted_theta(planted, "markdown") == {"a": 1.5, "b": 0.1}
    with pytest.raises(ValueError, match="--attribute: 'names' is not planted"):
        group_weights.planted_theta(planted, "names")
