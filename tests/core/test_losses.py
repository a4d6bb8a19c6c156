"""Tests for badpo.core.losses: hand-worked values, DPO as the b = 0 case, and the paper's gradients.

The hand-worked batch (beta = 0.5, so every product below is exact in binary):

====  =========  =========  =========  =========  ===============  ===  ====  ==============
row   pi(y_w)    ref(y_w)   pi(y_l)    ref(y_l)   log-ratios w, l   u    b     u + b
====  =========  =========  =========  =========  ===============  ===  ====  ==============
A     -10        -12        -15        -13        +2, -2            2    0     2
B     -20        -20        -30        -30         0,  0            0    0     0
C      -8        -10         -9         -9        +2,  0            1   -3    -2
D     -11        -10         -9        -10        -1, +1           -1    1     0
====  =========  =========  =========  =========  ===============  ===  ====  ==============

u = 0.5 * (ratio_w - ratio_l). Loss = -log sigmoid(x) = log(1 + e^-x):
  x =  2: e^-2 = 0.135335283, log(1.135335283) = 0.126928011
  x =  0: log 2 = 0.693147181
  x = -2: log(1 + e^2) = 2 + log(1 + e^-2) = 2.126928011
so the losses are (0.126928, 0.693147, 2.126928, 0.693147).
Rewards beta * ratio: chosen (1, 0, 1, -0.5), rejected (-1, 0, 0, 0.5).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from badpo.core.bias import BiasChannel
from badpo.core.losses import ba_dpo_loss, dpo_loss, dpo_margin, ipo_loss, rdpo_length_term

BETA = 0.5


def hand_batch(dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, ...]:
    """(policy_chosen, policy_rejected, reference_chosen, reference_rejected, bias) of the table."""
    def t(values: list[float]) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype)

    return (
        t([-10, -20, -8, -11]), t([-15, -30, -9, -9]),
        t([-12, -20, -10, -10]), t([-13, -30, -9, -10]),
        t([0, 0, -3, 1]),
    )


def random_batch(generator: torch.Generator, size: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """Four [size] tensors of plausible summed log-probs (tens of nats)."""
    return [-30 * torch.rand(size, generator=generator, dtype=dtype) - 1 for _ in range(4)]


def test_margin_and_losses_match_the_hand_worked_table() -> None:
    pc, pr, rc, rr, bias = hand_batch()
    torch.testing.assert_close(dpo_margin(pc, pr, rc, rr, BETA), torch.tensor([2.0, 0.0, 1.0, -1.0],
                                                                              dtype=torch.float64))
    losses, chosen_rewards, rejected_rewards = ba_dpo_loss(pc, pr, rc, rr, bias, BETA)
    expected = torch.tensor([0.126928, 0.693147, 2.126928, 0.693147], dtype=torch.float64)
    torch.testing.assert_close(losses, expected, atol=1e-6, rtol=0)
    assert torch.equal(chosen_rewards, torch.tensor([1.0, 0.0, 1.0, -0.5], dtype=torch.float64))
    assert torch.equal(rejected_rewards, torch.tensor([-1.0, 0.0, 0.0, 0.5], dtype=torch.float64))
    assert not chosen_rewards.requires_grad and not rejected_rewards.requires_grad


def test_rewards_are_detached_even_when_the_policy_requires_grad() -> None:
    pc, pr, rc, rr, bias = hand_batch()
    pc.requires_grad_(True)
    losses, chosen_rewards, _ = ba_dpo_loss(pc, pr, rc, rr, bias, BETA)
    assert losses.requires_grad and not chosen_rewards.requires_grad


def test_zero_bias_is_dpo_exactly() -> None:
    """Remark dpo_special: theta = 0 gives DPO bit for bit (eq. dpo_loss written out here)."""
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        pc, pr, rc, rr = random_batch(generator, 64, dtype)
        written_out = -F.logsigmoid(0.1 * ((pc - rc) - (pr - rr)))
        for bias in (torch.zeros(64, dtype=dtype), 0.0):
            assert torch.equal(ba_dpo_loss(pc, pr, rc, rr, bias, 0.1)[0], written_out)
        assert torch.equal(dpo_loss(pc, pr, rc, rr, 0.1)[0], written_out)


def test_scalar_bias_broadcasts_and_a_growing_shape_is_refused() -> None:
    pc, pr, rc, rr, _ = hand_batch()
    scalar = ba_dpo_loss(pc, pr, rc, rr, torch.tensor(0.25, dtype=torch.float64), BETA)[0]
    full = ba_dpo_loss(pc, pr, rc, rr, torch.full((4,), 0.25, dtype=torch.float64), BETA)[0]
    assert torch.equal(scalar, full)
    with pytest.raises(ValueError, match="bias_logit"):
        ba_dpo_loss(pc, pr, rc, rr, torch.zeros(4, 1, dtype=torch.float64), BETA)


def test_mismatched_log_prob_shapes_are_refused() -> None:
    pc, pr, rc, rr, _ = hand_batch()
    with pytest.raises(ValueError, match="reference_rejected_logps"):
        dpo_margin(pc, pr, rc, rr[:3], BETA)
    with pytest.raises(ValueError, match=r"\[B\]"):
        dpo_margin(pc[None], pr[None], rc[None], rr[None], BETA)


def test_large_logits_stay_finite_in_float32() -> None:
    """-log sigmoid(x) computed as -log(sigmoid(x)) is inf at x = -200 in float32; ours is 200."""
    zeros = torch.zeros(2)
    losses = ba_dpo_loss(zeros, zeros, zeros, zeros, torch.tensor([200.0, -200.0]), 0.1)[0]
    assert losses[0] == 0.0
    torch.testing.assert_close(losses[1], torch.tensor(200.0))


def test_float64_gradcheck() -> None:
    generator = torch.Generator().manual_seed(1)
    inputs = [t.requires_grad_(True) for t in random_batch(generator, 5, torch.float64)]
    bias = torch.randn(5, generator=generator, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda pc, pr, rc, rr, b: ba_dpo_loss(pc, pr, rc, rr, b, 0.1)[0], (*inputs, bias)
    )


def test_policy_gradient_carries_the_weight_sigmoid_of_minus_u_minus_b() -> None:
    """Eq. grad_policy: d loss_i / d log pi(y_w) = -beta sigma(-u - b); d / d log pi(y_l) = +beta sigma(-u - b)."""
    generator = torch.Generator().manual_seed(2)
    pc, pr, rc, rr = random_batch(generator, 16, torch.float64)
    pc.requires_grad_(True)
    pr.requires_grad_(True)
    bias = torch.randn(16, generator=generator, dtype=torch.float64)
    beta = 0.1
    ba_dpo_loss(pc, pr, rc, rr, bias, beta)[0].sum().backward()
    u = beta * ((pc - rc) - (pr - rr)).detach()
    weight = torch.sigmoid(-u - bias)
    torch.testing.assert_close(pc.grad, -beta * weight, atol=1e-14, rtol=0)
    torch.testing.assert_close(pr.grad, beta * weight, atol=1e-14, rtol=0)
    # The weight really depends on b: a bias favouring the winner teaches less than DPO.
    pc.grad = None
    dpo_loss(pc, pr, rc, rr, beta)[0].sum().backward()
    favoured = bias > 0
    assert favoured.any()
    assert torch.all(-pc.grad[favoured] > beta * weight[favoured])


def test_theta_gradient_matches_the_closed_form_of_eq_grad_bias() -> None:
    """Eq. grad_bias, for q = 2: dL/dtheta_k = -(n_k/N) mean over D_k of sigma(-u - b_k) Delta g.

    The loss is the batch mean over N = 13 judgments by three annotators with unequal shares.
    """
    generator = torch.Generator().manual_seed(3)
    channel = BiasChannel("per_annotator", ["woman", "black"], ["k9", "k2", "k5"]).double()
    with torch.no_grad():
        channel.annotator_theta.copy_(torch.randn(3, 2, generator=generator, dtype=torch.float64))
    ids = ["k9"] * 6 + ["k2"] * 4 + ["k5"] * 3
    attr_diff = torch.randint(-1, 2, (13, 2), generator=generator).double()
    pc, pr, rc, rr = random_batch(generator, 13, torch.float64)
    index = channel.annotator_index(ids)
    bias = channel(index, attr_diff)
    ba_dpo_loss(pc, pr, rc, rr, bias, 0.1)[0].mean().backward()

    u = dpo_margin(pc, pr, rc, rr, 0.1)
    weight = torch.sigmoid(-u - bias.detach())
    for row, annotator in enumerate(channel.annotators):
        mine = index == row
        share = int(mine.sum()) / len(ids)
        closed_form = -share * (weight[mine, None] * attr_diff[mine]).mean(dim=0)
        torch.testing.assert_close(channel.annotator_theta.grad[row], closed_form, atol=1e-14, rtol=0)
        assert closed_form.abs().sum() > 0, f"{annotator}: degenerate test data"


def test_rdpo_length_term_adds_alpha_times_the_length_difference() -> None:
    """alpha = 0.005: lengths (120 vs 100, 100 vs 100, 50 vs 90) give 0.1, 0, -0.2."""
    term = rdpo_length_term(torch.tensor([120, 100, 50]), torch.tensor([100, 100, 90]), 0.005)
    torch.testing.assert_close(term, torch.tensor([0.1, 0.0, -0.2]), atol=1e-7, rtol=0)
    # A longer winner lowers the loss: its preference is explained by the term, not learned.
    zeros = torch.zeros(3)
    losses = ba_dpo_loss(zeros, zeros, zeros, zeros, term, 0.1)[0]
    assert losses[0] < losses[1] < losses[2]
    with pytest.raises(ValueError, match="rejected_lengths"):
        rdpo_length_term(torch.tensor([1, 2]), torch.tensor([1]), 0.005)


def test_ipo_loss_hand_values() -> None:
    """tau = 0.5 so the target is 1/(2 tau) = 1; log-ratio margins h = 4, 0, 2, -2 give 9, 1, 1, 9."""
    pc, pr, rc, rr, _ = hand_batch()
    expected = torch.tensor([9.0, 1.0, 1.0, 9.0], dtype=torch.float64)
    assert torch.equal(ipo_loss(pc, pr, rc, rr, tau=0.5), expected)
    with pytest.raises(ValueError, match="tau"):
        ipo_loss(pc, pr, rc, rr, tau=0.0)
