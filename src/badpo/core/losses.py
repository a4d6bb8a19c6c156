"""Preference objectives on summed response log-probabilities: DPO, BA-DPO and baseline logit terms.

Pure torch functions, one value per example, no reduction: the caller decides how to average
(the paper averages over judgments, eq. barp_dpo_loss). Every log-prob input is a ``[B]`` tensor
of the log-probability of a whole response, summed over its tokens.

Equation labels refer to the paper (``ba-dpo-paper.tex``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["dpo_margin", "ba_dpo_loss", "dpo_loss", "rdpo_length_term", "ipo_loss", "bt_loss", "graded_loss"]


def _check_logps(**logps: Tensor) -> torch.Size:
    """All four log-prob tensors must be 1-D and share one shape; returns it."""
    shapes = {name: tuple(t.shape) for name, t in logps.items()}
    first_name, first_shape = next(iter(shapes.items()))
    for name, shape in shapes.items():
        if len(shape) != 1:
            raise ValueError(f"{name} must be a [B] tensor of summed log-probs, got shape {shape}")
        if shape != first_shape:
            raise ValueError(f"{name} has shape {shape} but {first_name} has {first_shape}")
    return torch.Size(first_shape)


def dpo_margin(
    policy_chosen_logps: Tensor,
    policy_rejected_logps: Tensor,
    reference_chosen_logps: Tensor,
    reference_rejected_logps: Tensor,
    beta: float,
) -> Tensor:
    """The DPO margin u (eq. shorthand), shape ``[B]``.

    u = beta * [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))],
    the difference of the implicit rewards of eq. reward_reparam (log Z cancels).
    """
    _check_logps(
        policy_chosen_logps=policy_chosen_logps,
        policy_rejected_logps=policy_rejected_logps,
        reference_chosen_logps=reference_chosen_logps,
        reference_rejected_logps=reference_rejected_logps,
    )
    chosen_log_ratio = policy_chosen_logps - reference_chosen_logps
    rejected_log_ratio = policy_rejected_logps - reference_rejected_logps
    return beta * (chosen_log_ratio - rejected_log_ratio)


def ba_dpo_loss(
    policy_chosen_logps: Tensor,
    policy_rejected_logps: Tensor,
    reference_chosen_logps: Tensor,
    reference_rejected_logps: Tensor,
    bias_logit: Tensor | float,
    beta: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-example BA-DPO loss -log sigmoid(u + b_k) (eq. barp_dpo_loss).

    ``bias_logit`` is b_k = theta_k . (g(y_w) - g(y_l)) for each judgment (eq. shorthand), a ``[B]``
    tensor or anything that broadcasts to ``[B]`` without growing it (a float, a 0-d tensor).
    With b = 0 this is DPO exactly (remark dpo_special). The gradient w.r.t. the policy carries
    the weight sigmoid(-u - b) (eq. grad_policy); w.r.t. b it is -sigmoid(-u - b) (eq. grad_bias).

    Returns ``(losses [B], chosen_rewards [B], rejected_rewards [B])``; the rewards are the
    detached implicit rewards beta * (log pi - log pi_ref), for logging.
    """
    margin = dpo_margin(
        policy_chosen_logps, policy_rejected_logps,
        reference_chosen_logps, reference_rejected_logps, beta,
    )
    if isinstance(bias_logit, Tensor) and (
        torch.broadcast_shapes(margin.shape, bias_logit.shape) != margin.shape
    ):
        raise ValueError(
            f"bias_logit of shape {tuple(bias_logit.shape)} does not broadcast to the batch shape "
            f"{tuple(margin.shape)}; pass one logit per judgment"
        )
    # -log sigmoid via logsigmoid: stable for large |u + b| (no log(0), no exp overflow).
    losses = -F.logsigmoid(margin + bias_logit)
    chosen_rewards = beta * (policy_chosen_logps - reference_chosen_logps).detach()
    rejected_rewards = beta * (policy_rejected_logps - reference_rejected_logps).detach()
    return losses, chosen_rewards, rejected_rewards


def dpo_loss(
    policy_chosen_logps: Tensor,
    policy_rejected_logps: Tensor,
    reference_chosen_logps: Tensor,
    reference_rejected_logps: Tensor,
    beta: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-example DPO loss (eq. dpo_loss): BA-DPO with every theta_k frozen at zero."""
    return ba_dpo_loss(
        policy_chosen_logps, policy_rejected_logps,
        reference_chosen_logps, reference_rejected_logps,
        0.0, beta,
    )


def rdpo_length_term(chosen_lengths: Tensor, rejected_lengths: Tensor, alpha: float) -> Tensor:
    """R-DPO's length term alpha * (|y_w| - |y_l|) in tokens, to add to the DPO logit; ``[B]``.

    Pass it as ``bias_logit`` to :func:`ba_dpo_loss`. Sign: R-DPO maximises E[r] - alpha |y| under
    the KL penalty, so the optimal policy gives r = beta log(pi / pi_ref) + alpha |y| + beta log Z
    and the Bradley-Terry logit becomes u + alpha (|y_w| - |y_l|). A longer winner thus raises
    the logit and lowers its policy weight sigmoid(-u - term): the length preference is
    explained by the term instead of learned (the "penalty" acts on the implicit reward).
    The paper's Baselines appendix states the same: the term is *added* to the logit.
    """
    if chosen_lengths.shape != rejected_lengths.shape or chosen_lengths.dim() != 1:
        raise ValueError(
            f"chosen_lengths {tuple(chosen_lengths.shape)} and rejected_lengths "
            f"{tuple(rejected_lengths.shape)} must be [B] tensors of the same shape"
        )
    length_difference = chosen_lengths - rejected_lengths
    if not length_difference.is_floating_point():  # token counts usually arrive as integers
        length_difference = length_difference.to(torch.get_default_dtype())
    return alpha * length_difference


def ipo_loss(
    policy_chosen_logps: Tensor,
    policy_rejected_logps: Tensor,
    reference_chosen_logps: Tensor,
    reference_rejected_logps: Tensor,
    tau: float,
    bias_logit: Tensor | float = 0.0,
) -> Tensor:
    """Per-example IPO loss (h + b - 1/(2 tau))^2 with h the log-ratio difference (u at beta = 1); ``[B]``.
    IPO regresses the margin to a finite target instead of pushing it to infinity, so it
    needs no bias term to stop: it is the squared form the DESIGN lists among the baselines.
    ``bias_logit`` b enters the margin as in BA-DPO (b = 0: IPO).
    """
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    log_ratio_margin = dpo_margin(
        policy_chosen_logps, policy_rejected_logps,
        reference_chosen_logps, reference_rejected_logps, 1.0,
    )
    return (log_ratio_margin + bias_logit - 1.0 / (2.0 * tau)) ** 2


def bt_loss(chosen_rewards: Tensor, rejected_rewards: Tensor, bias_logit: Tensor | float = 0.0) -> Tensor:
    """Per-example Bradley-Terry loss of a reward model with the bias term, ``[B]``:
    -log sigmoid(r(x, y_w) - r(x, y_l) + b_k), b_k = theta_k . (g(y_w) - g(y_l)).

    ``chosen_rewards`` / ``rejected_rewards`` are ``[B]`` scalar rewards; ``bias_logit`` is ``[B]``
    or broadcasts to it without growing it. The bias term is additive to the reward (paper,
    Conclusion), so the bias is explained by theta instead of being scored as quality; with
    r = beta * (log pi - log pi_ref) this is the BA-DPO loss (eq. barp_dpo_loss) exactly.
    """
    if chosen_rewards.dim() != 1 or chosen_rewards.shape != rejected_rewards.shape:
        raise ValueError(f"chosen_rewards {tuple(chosen_rewards.shape)} and rejected_rewards "
                         f"{tuple(rejected_rewards.shape)} must be [B] tensors of the same shape")
    shape = chosen_rewards.shape
    if isinstance(bias_logit, Tensor) and torch.broadcast_shapes(shape, bias_logit.shape) != shape:
        raise ValueError(f"bias_logit of shape {tuple(bias_logit.shape)} does not broadcast to the batch "
                         f"shape {tuple(shape)}; pass one logit per judgment")
    return -F.logsigmoid(chosen_rewards - rejected_rewards + bias_logit)


def graded_loss(logits: Tensor, grade: Tensor, tie_strength: Tensor | float = 0.0,
                strength_gaps: Tensor | None = None) -> Tensor:
    """Per-example negative log-likelihood of a graded label on the judgment's logit z (u + b_k,
    oriented chosen minus rejected), ``[B]``: Davidson's model for ties, an ordered logit for the
    strength of a decisive vote.

    ``grade`` ``[B]`` (integers): 0 a tie, g in 1..L "chosen better at strength g" (1 the weakest; a
    plain win is grade 1 with L = 1). With nu = ``tie_strength`` >= 0 and D = e^(z/2) + e^(-z/2) + nu,

        P(tie) = nu / D,     P(chosen wins) = e^(z/2) / D,     P(rejected wins) = e^(-z/2) / D,

    so a decisive vote follows sigmoid(z) whatever nu: theta keeps its Bradley-Terry meaning, and
    leaving the ties out is conditioning, not a change of model. A win's strength, given the win, is
    an ordered logit with cuts 0 = c_0 < c_1 < ... < c_{L-1} (``strength_gaps`` ``[L - 1]``, each > 0,
    their running sums; None: L = 1):

        P(strength >= g | win) = sigmoid(z - c_{g-1}) / sigmoid(z).

    With no tie and no strength (nu = 0, L = 1) this is -log sigmoid(z), BA-DPO's loss, exactly
    (the same expression is computed). A difference sigmoid(a) - sigmoid(b), a - b = gap > 0, is
    taken in log space as log sigmoid(b) + log sigmoid(-a) + log(expm1(gap)).
    """
    if logits.dim() != 1 or grade.shape != logits.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and grade {tuple(grade.shape)} must be [B] tensors "
                         "of the same shape")
    nu = torch.as_tensor(tie_strength, dtype=logits.dtype, device=logits.device)
    gaps = (torch.zeros(0, dtype=logits.dtype, device=logits.device) if strength_gaps is None
            else strength_gaps.to(logits))
    levels = gaps.numel() + 1
    if int(grade.min()) < 0 or int(grade.max()) > levels:
        raise ValueError(f"grade must lie in 0..{levels} (0 a tie, 1..{levels} a strength), got "
                         f"{int(grade.min())}..{int(grade.max())}")
    grade = grade.long()
    if not bool(nu > 0) and bool((grade == 0).any()):
        raise ValueError("a tie (grade 0) needs a tie strength nu > 0: at nu = 0 a tie has probability 0")
    if bool(nu > 0):  # -log P(win) = log D - z/2, -log P(tie) = log D - log nu
        log_d = torch.logsumexp(torch.stack([logits / 2, -logits / 2, nu.log().expand_as(logits)]), dim=0)
        losses = torch.where(grade == 0, log_d - nu.log(), log_d - logits / 2)
    else:
        losses = -F.logsigmoid(logits)  # no tie is possible: P(win) = sigmoid(z)
    if levels == 1:
        return losses
    cuts = torch.cat([torch.zeros(1, dtype=logits.dtype, device=logits.device), torch.cumsum(gaps, 0)])
    won = grade > 0
    g = grade.clamp(min=1)
    below = cuts[g - 1]
    top = g == levels
    above = cuts[g.clamp(max=levels - 1)]
    gap = torch.where(top, torch.ones_like(below), above - below)  # the top grade's is unused: kept finite
    given_win = torch.where(  # -log P(strength g | win)
        top, -F.logsigmoid(logits - below),
        -(F.logsigmoid(logits - above) + F.logsigmoid(below - logits) + torch.log(torch.expm1(gap))))
    return losses + torch.where(won, given_win + F.logsigmoid(logits), torch.zeros_like(losses))
