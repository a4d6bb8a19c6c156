"""experiments/analyses/level_given_margins.py: the level on top of given margins, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from badpo.core.judgments import Judgment
from fixtures.benchmarks import load_analysis

module = load_analysis("level_given_margins")


def test_with_margins_of_zero_the_level_is_the_log_odds_of_the_wins():
    difference = torch.tensor([1.0, 1.0, 1.0, -1.0, 0.0])
    assert module.fitted_level(torch.zeros(5), difference) == pytest.approx(math.log(3.0), abs=1e-9)


def test_margins_that_already_carry_the_log_odds_leave_no_level():
    # the same wins, but each margin already log 3 toward the attribute side: nothing is left
    difference = torch.tensor([1.0, 1.0, 1.0, -1.0])
    assert module.fitted_level(math.log(3.0) * difference, difference) == pytest.approx(0.0, abs=1e-6)


def test_the_difference_is_chosen_minus_rejected_markdown():
    judgments = [Judgment(prompt="p", chosen="- a b", rejected="a b", annotator="k"),
                 Judgment(prompt="p", chosen="a b", rejected="- a b", annotator="k"),
                 Judgment(prompt="p", chosen="a b", rejected="a c", annotator="k")]
    assert module.attribute_difference(judgments, "markdown").tolist() == [1.0, -1.0, 0.0]
