"""experiments/analyses/level_decomposition.py: the fits' identities, worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fixtures.benchmarks import load_analysis


@pytest.fixture(scope="module")
def level():
    return load_analysis("level_decomposition")


def test_one_attribute_without_offset_is_the_log_odds_of_the_wins(level):
    """x = +1 on 3 judgments and -1 on 1 (every row a win of its chosen side): the attribute side
    won 3 of 4, so θ = log 3, and its s.e. is sqrt(1/3 + 1) as for a 2x2 count."""
    x = np.array([[1.0], [1.0], [1.0], [-1.0]])
    theta, se = level.logistic_fit(x, np.zeros(4))
    assert theta[0] == pytest.approx(math.log(3), abs=1e-10)
    assert se[0] == pytest.approx(math.sqrt(1 / 3 + 1), abs=1e-10)


def test_the_expected_fit_returns_the_truth_when_the_fit_holds_the_true_offset(level):
    """Labels at their planted probabilities, the true offset in the fit and one θ for everyone:
    the expected fit is that θ exactly (the score is zero there), whatever the offsets are."""
    rng = np.random.default_rng(0)
    x = rng.choice([-1.0, 0.0, 1.0], size=(200, 2))
    x[:, 0] = np.where(x[:, 0] == 0, 1.0, x[:, 0])  # every row cross-group on the first attribute
    offset = rng.normal(0, 2, size=200)
    truth = np.array([0.9, -0.4])
    assert level.expected_fit(x, offset, offset + x @ truth) == pytest.approx(truth, abs=1e-9)


def test_leaving_out_an_independent_offset_shrinks_the_expected_level(level):
    """Non-collapsibility: q = +-2 independent of x, left out of the fit, pulls θ = 1 toward 0;
    with q in the fit it is 1 again. By hand for x = 1 on every row: the fit is logit of the mean
    of sigmoid(1 + q) over q = +2, -2, i.e. logit((0.952574 + 0.268941) / 2) = 0.4544."""
    x = np.ones((4, 1))
    q = np.array([2.0, -2.0, 2.0, -2.0])
    shrunk = level.expected_fit(x, np.zeros(4), q + 1.0)[0]
    mean = (1 / (1 + math.exp(-3)) + 1 / (1 + math.exp(1))) / 2
    assert shrunk == pytest.approx(math.log(mean / (1 - mean)), abs=1e-9)
    assert level.expected_fit(x, q, q + 1.0)[0] == pytest.approx(1.0, abs=1e-9)


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory, build_tiny_multipref):
    from badpo.corpora.tiny_multipref import TinyMultiPrefConfig

    out = tmp_path_factory.mktemp("tiny_multipref")
    build_tiny_multipref(TinyMultiPrefConfig(n_prompts=300, n_eval_prompts=20), out)
    return out


def test_a_tiny_world_is_rebuilt_and_its_whole_planted_logit_leaves_no_level(level, tiny_world):
    """The tiny MultiPref world rebuilt from its config (checked against source.jsonl inside):
    with q and every annotator's planted term as the offset nothing is left for a pooled level
    (a sign or orientation error in either leaves about the bias's size), and leaving q out
    shrinks the expected markdown level (the world's non-collapsibility, issue 35)."""
    x, q, planted_theta, names = level.judgment_arrays(tiny_world, level.rebuilt_truth(tiny_world))
    theta, _ = level.logistic_fit(x, q + (planted_theta * x).sum(axis=1))
    assert names == ["length", "markdown"] and np.abs(theta).max() < 0.15
    result = level.decompose(x, q, planted_theta, names)
    assert result["quality_expected"]["markdown"] > result["u0_expected"]["markdown"] + 0.1
