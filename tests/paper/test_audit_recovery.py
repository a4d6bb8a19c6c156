"""experiments/analyses/audit_recovery.py: the audit's r against planted theta_k, by hand."""

from __future__ import annotations

import json

import pytest

from fixtures.benchmarks import load_analysis

module = load_analysis("audit_recovery")


def test_recovery_is_pearson_over_the_annotators_both_hold():
    planted = {"a": {"k1": 0.0, "k2": 1.0, "k3": 2.0, "k4": 5.0}}
    estimates = {"a": {"k1": 1.0, "k2": 2.0, "k3": 4.0}}  # k4 unestimated: left out
    # x = (1, 2, 4), y = (0, 1, 2): centred (-4/3, -1/3, 5/3) and (-1, 0, 1); r = 3 / sqrt(42/9 * 2)
    expected = 3.0 / (42.0 / 9.0 * 2.0) ** 0.5
    assert module.recovery(estimates, planted)["a"] == {"pearson": pytest.approx(expected, abs=1e-12), "n": 3}
    assert module.recovery({"a": {"k1": 1.0}}, planted)["a"] == {"pearson": None, "n": 1}


def test_planted_theta_reads_each_attribute_column(tmp_path):
    (tmp_path / "planted.json").write_text(json.dumps({
        "attribute_names": ["x", "y"],
        "annotators": [{"annotator": "k1", "theta": [0.5, -1.0]}, {"annotator": "k2", "theta": [2.0, 3.0]}]}))
    assert module.planted_theta(tmp_path) == {"x": {"k1": 0.5, "k2": 2.0}, "y": {"k1": -1.0, "k2": 3.0}}
