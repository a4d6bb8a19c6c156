"""The ordered-logit likelihood of graded labels (ties and strengths), worked by hand: it is BA-DPO's
loss exactly without ties and strengths, its categories' probabilities sum to 1, a tie's does not
depend on which side is called chosen, and it is finite far out."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from badpo.core.losses import graded_loss


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_without_ties_and_strengths_it_is_ba_dpos_loss_exactly():
    z = torch.tensor([-3.0, -0.2, 0.0, 0.7, 12.0], dtype=torch.float64)
    assert torch.equal(graded_loss(z, torch.ones(5, dtype=torch.long)), -F.logsigmoid(z))


def test_each_grade_is_worked_by_hand():
    """tau = 0.5, one strength gap 1.0 (cuts 0.5 and 1.5), z = 0.8."""
    z, tau, gap = 0.8, 0.5, 1.0
    grades = torch.tensor([0, 1, 2])
    losses = graded_loss(torch.full((3,), z, dtype=torch.float64), grades, tau,
                         torch.tensor([gap], dtype=torch.float64))
    tie = _sigmoid(z + tau) - _sigmoid(z - tau)
    weak = _sigmoid(z - tau) - _sigmoid(z - tau - gap)
    strong = _sigmoid(z - tau - gap)
    assert losses.tolist() == pytest.approx([-math.log(tie), -math.log(weak), -math.log(strong)], abs=1e-12)


def test_the_categories_sum_to_one_and_a_tie_has_no_orientation():
    """Over a grade's five outcomes (the rejected side better at 2 or 1 is the chosen side's grade
    seen from the other orientation, logit -z)."""
    tau, gaps = 0.4, torch.tensor([0.9], dtype=torch.float64)
    for z in (-2.5, -0.1, 0.0, 0.3, 4.0):
        forward = graded_loss(torch.full((3,), z, dtype=torch.float64), torch.tensor([0, 1, 2]), tau, gaps)
        backward = graded_loss(torch.full((3,), -z, dtype=torch.float64), torch.tensor([0, 1, 2]), tau, gaps)
        total = sum(math.exp(-v) for v in forward.tolist()) + sum(math.exp(-v) for v in backward[1:].tolist())
        assert total == pytest.approx(1.0, abs=1e-12)
        assert float(forward[0]) == pytest.approx(float(backward[0]), abs=1e-12)


def test_far_logits_and_gradients_are_finite_and_match_the_plain_formula():
    z = torch.tensor([-60.0, 0.2, 60.0], dtype=torch.float64, requires_grad=True)
    tau = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    losses = graded_loss(z, torch.tensor([0, 0, 1]), tau)
    losses.sum().backward()
    assert torch.isfinite(losses).all() and torch.isfinite(z.grad).all() and torch.isfinite(tau.grad)
    plain = -torch.log(torch.sigmoid(z[1] + tau) - torch.sigmoid(z[1] - tau))
    assert float(losses[1]) == pytest.approx(float(plain), abs=1e-12)
    with pytest.raises(ValueError, match="grade must lie in 0..1"):
        graded_loss(z.detach(), torch.tensor([0, 2, 1]))
