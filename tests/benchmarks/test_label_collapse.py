"""benchmarks/label_collapse.py: the pooled fit by hand, and the bias a tiny world's labels show
with and without its quality explained, against the audit's own offline log-odds."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from badpo.corpora.tiny_multipref import TinyMultiPrefConfig
from fixtures.benchmarks import load_benchmark

module = load_benchmark("label_collapse")


def test_with_no_offset_the_fit_is_the_log_odds_of_the_wins():
    # 3 judgments won by the attribute's side, 1 lost, 2 not cross-group: theta = log(3 / 1)
    delta_g = np.array([1.0, 1.0, 1.0, -1.0, 0.0, 0.0])
    assert module.pooled_fit(np.zeros(6), delta_g)[0] == pytest.approx(math.log(3.0), abs=1e-10)


def test_an_offset_the_wins_already_explain_leaves_less_to_theta():
    # one win each way, the first with offset 1: log s(1 + t) + log s(-t) is stationary where
    # 1 - s(1 + t) = 1 - s(-t), i.e. 1 + t = -t: theta = -0.5 (without the offset it would be 0)
    delta_g, offset = np.array([1.0, -1.0]), np.array([1.0, 0.0])
    assert module.pooled_fit(offset, delta_g)[0] == pytest.approx(-0.5, abs=1e-10)


@pytest.fixture(scope="module")
def world(tmp_path_factory, build_tiny_multipref):
    out = tmp_path_factory.mktemp("tiny_multipref")
    build_tiny_multipref(TinyMultiPrefConfig(n_prompts=300, n_eval_prompts=20), out)
    return out


def test_the_labels_show_less_bias_with_quality_left_unexplained(world):
    """Nothing else in the logit: the audit's offline log-odds of the same judgments (an
    independent path); with the planted q in it, a larger theta, near the planted mean."""
    table = module.collapse_table(world, "markdown")
    gate = json.loads((world / "gate.json").read_text(encoding="utf-8"))
    assert table["nothing_else"] == pytest.approx(gate["markdown"]["all"]["log_odds"], abs=1e-6)
    assert table["cross_group"] == gate["markdown"]["all"]["cross"]
    assert table["given_quality"] > table["nothing_else"] + 0.1
    assert abs(table["given_quality"] - table["planted_mean_on_cross"]) < 0.2


def test_with_the_whole_planted_logit_given_no_pooled_bias_is_left(world):
    """q, the other attributes' planted terms and the attribute's own planted theta_k * delta_g are
    the logit the votes were drawn with: a pooled theta fitted on top of all three is about 0, and
    the coefficient of q given the planted terms about 1 (a sign or column error in any term moves
    one of them by about the bias's size)."""
    terms = module.oriented_terms(world, "markdown")
    offset = terms["quality"] + terms["others"] + terms["planted"]
    assert abs(module.pooled_fit(offset, terms["delta_g"])[0]) < 0.15
    assert abs(module.pooled_fit(terms["others"] + terms["planted"], terms["quality"])[0] - 1.0) < 0.15  # q's scale


def test_the_joint_fit_of_two_attributes_by_hand():
    # two independent attributes, each won 3 : 1 on its own rows: theta = (log 3, log 3) jointly
    delta = np.array([[1, 0], [1, 0], [1, 0], [-1, 0], [0, 1], [0, 1], [0, 1], [0, -1]], dtype=float)
    assert module.pooled_fit(np.zeros(8), delta) == pytest.approx([math.log(3.0)] * 2, abs=1e-10)
