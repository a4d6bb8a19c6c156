"""The likelihood of graded labels (Davidson's ties, an ordered logit for a win's strength), worked by
hand: it is BA-DPO's loss exactly without ties and strengths, a decisive vote follows sigmoid(z)
whatever the tie strength, its outcomes' probabilities sum to 1, a tie does not depend on which side
is called chosen, and it is finite far out with finite gradients."""

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
    """nu = 1, one strength gap 1.0, z = 0.8: D = e^0.4 + e^-0.4 + 1."""
    z, nu, gap = 0.8, 1.0, 1.0
    d = math.exp(z / 2) + math.exp(-z / 2) + nu
    win = math.exp(z / 2) / d
    weak = win * (_sigmoid(z) - _sigmoid(z - gap)) / _sigmoid(z)
    strong = win * _sigmoid(z - gap) / _sigmoid(z)
    losses = graded_loss(torch.full((3,), z, dtype=torch.float64), torch.tensor([0, 1, 2]), nu,
                         torch.tensor([gap], dtype=torch.float64))
    assert losses.tolist() == pytest.approx([-math.log(nu / d), -math.log(weak), -math.log(strong)], abs=1e-12)


def test_a_decisive_vote_follows_sigmoid_z_whatever_the_tie_strength():
    """P(chosen wins) / (P(chosen wins) + P(rejected wins)) = sigmoid(z) for every nu."""
    for nu in (0.3, 1.0, 4.0):
        for z in (-2.0, 0.0, 1.5):
            win = math.exp(-float(graded_loss(torch.tensor([z], dtype=torch.float64), torch.tensor([1]), nu)))
            loss = math.exp(-float(graded_loss(torch.tensor([-z], dtype=torch.float64), torch.tensor([1]), nu)))
            assert win / (win + loss) == pytest.approx(_sigmoid(z), abs=1e-12)


def test_the_outcomes_sum_to_one_and_a_tie_has_no_orientation():
    """Over the five outcomes (the rejected side better at 2 or 1 is the chosen side's grade seen
    from the other orientation, logit -z)."""
    nu, gaps = 0.7, torch.tensor([0.9], dtype=torch.float64)
    for z in (-2.5, -0.1, 0.0, 0.3, 4.0):
        forward = graded_loss(torch.full((3,), z, dtype=torch.float64), torch.tensor([0, 1, 2]), nu, gaps)
        backward = graded_loss(torch.full((3,), -z, dtype=torch.float64), torch.tensor([0, 1, 2]), nu, gaps)
        total = sum(math.exp(-v) for v in forward.tolist()) + sum(math.exp(-v) for v in backward[1:].tolist())
        assert total == pytest.approx(1.0, abs=1e-12)
        assert float(forward[0]) == pytest.approx(float(backward[0]), abs=1e-12)


def test_far_logits_and_gradients_are_finite():
    z = torch.tensor([-60.0, 0.2, 60.0, 5.0, -40.0], dtype=torch.float64, requires_grad=True)
    nu = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
    gaps = torch.tensor([0.5, 1.2], dtype=torch.float64, requires_grad=True)
    losses = graded_loss(z, torch.tensor([0, 0, 3, 1, 2]), nu, gaps)
    losses.sum().backward()
    for value in (losses, z.grad, nu.grad, gaps.grad):
        assert torch.isfinite(value).all()
    with pytest.raises(ValueError, match="grade must lie in 0..1"):
        graded_loss(z.detach(), torch.tensor([0, 2, 1, 1, 1]))


def test_a_tie_without_a_tie_strength_is_refused():
    with pytest.raises(ValueError, match="a tie .* needs a tie strength nu > 0"):
        graded_loss(torch.tensor([0.5], dtype=torch.float64), torch.tensor([0]), 0.0)
