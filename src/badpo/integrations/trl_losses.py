"""TRL's loss types inside :class:`badpo.integrations.trl.BADPOTrainer`: ``DPOConfig.loss_type`` (a
name or a list, weighted by ``loss_weights``) for every TRL loss that is a function of the DPO
margin, with theta's term added where that margin enters. With theta = 0 each is TRL's own loss on
the same batch (tests/integrations/test_trl_loss_types.py).

Where the bias enters. The margin of a judgment is z = beta * (r_w - r_l) with r the summed
log-ratio log pi - log pi_ref of a completion; the bias logit b = theta_k . (g(y_w) - g(y_l)) is
added to it, z + b, as in BA-DPO's -log sigmoid(u + b). TRL's ``ipo`` and ``sigmoid_norm`` read
the margin of the log-ratios averaged per completion token instead (TRL's choice); ``ipo`` takes it
unscaled, (m + b - 1/(2 beta))^2 as badpo's BA-IPO, and ``sigmoid_norm`` scaled, -log
sigmoid(beta m + b). A loss that is not a function of the margin has no place for b and is refused
by name (:data:`NOT_OF_THE_MARGIN`): it would let the policy learn from the labels what theta is
there to explain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from badpo.core.constraints import FLOAT32_MAX
from badpo.core.level_step import LOGISTIC, Link, squared
from badpo.core.losses import ipo_loss

__all__ = ["DIVERGENCES", "MARGIN_LOSSES", "NOT_OF_THE_MARGIN", "Margins", "MarginLoss", "margin_losses",
           "pair_margins", "start_link", "weighted_loss", "wpo_weights"]


@dataclass(frozen=True)
class Margins:
    """One batch's margins, each ``[B]``: ``logit`` = beta (r_w - r_l) + b; ``per_token`` = r_w / n_w
    - r_l / n_l with n a completion's tokens (TRL's length-normalised margin, unscaled); ``bias`` = b."""

    logit: Tensor
    per_token: Tensor
    bias: Tensor
    beta: float
    label_smoothing: float
    discopop_tau: float


@dataclass(frozen=True)
class MarginLoss:
    """One TRL loss type as a function of the margins; ``link``: the link of theta's start
    (``badpo.core.level_step``), given beta; ``method``: where badpo's method table has the same
    loss, its row and parameters given beta (one name, one margin: TRL's ``ipo`` is the ``ipo`` row
    with the per-token margin; tested equal in BADPOTrainer)."""

    loss: Callable[[Margins], Tensor]
    link: Callable[[float], Link]
    method: Callable[[float], tuple[str, dict]] | None = None


def _logistic(beta: float) -> Link:
    return LOGISTIC


def _ipo_link(beta: float) -> Link:
    return squared(1.0 / (2.0 * beta))


def _ipo(m: Margins) -> Tensor:
    """(h + b - 1/(2 beta))^2 on the per-token margin h: the ``ipo`` row's loss (core.losses.ipo_loss)."""
    zeros = torch.zeros_like(m.per_token)
    return ipo_loss(m.per_token, zeros, zeros, zeros, m.beta, bias_logit=m.bias)


def _robust(m: Margins) -> Tensor:
    """Label noise eps removed in expectation: ((1 - eps) l(z) - eps l(-z)) / (1 - 2 eps), l = -log sigmoid."""
    eps = m.label_smoothing
    return (-(1 - eps) * F.logsigmoid(m.logit) + eps * F.logsigmoid(-m.logit)) / (1 - 2 * eps)


def _exo_pair(m: Margins) -> Tensor:
    """KL from the model's two-way softmax sigmoid(+-z) to the target (1 - eps, eps)."""
    eps = torch.tensor(m.label_smoothing, device=m.logit.device)
    won, lost = F.logsigmoid(m.logit), F.logsigmoid(-m.logit)
    return torch.sigmoid(m.logit) * (won - torch.log1p(-eps)) + torch.sigmoid(-m.logit) * (lost - torch.log(eps))


def _discopop(m: Margins) -> Tensor:
    """The logistic loss blended into exp(-z) as z grows, the blend sigmoid(z / tau)."""
    blend = torch.sigmoid(m.logit / m.discopop_tau)
    return -F.logsigmoid(m.logit) * (1 - blend) + torch.exp(-m.logit) * blend


def _alpha_score(logratio: Tensor, alpha: float) -> Tensor:
    """f'(t) = (t^(alpha - 1) - 1) / (alpha - 1) at t = exp(r); r itself at alpha = 1 (its limit). The
    exponent is capped at 80, where exp is still finite in float32, as TRL caps it."""
    if abs(alpha - 1.0) < 1e-6:
        return logratio
    work = logratio if logratio.dtype == torch.float64 else logratio.float()  # half precision: in float32
    exponent = ((alpha - 1.0) * work).clamp(max=80.0)
    return (torch.expm1(exponent) / (alpha - 1.0)).to(logratio.dtype)


# f-divergences (Wang et al. 2023, TRL's f_divergence_type): each completion's log-ratio r = log pi/pi_ref
# is scored by f'(pi / pi_ref) before the margin is taken; the reverse KL's score is r itself (DPO). Every
# score is 0 at r = 0, so the margin is 0 with the policy at the reference and theta's start is unchanged.
DIVERGENCES: dict[str, Callable[[Tensor, float], Tensor]] = {
    "reverse_kl": lambda r, alpha: r,
    "forward_kl": lambda r, alpha: -torch.expm1(-r),  # 1 - 1/t
    "js_divergence": lambda r, alpha: math.log(2.0) + F.logsigmoid(r),  # log(2t / (t + 1))
    "alpha_divergence": _alpha_score,
}


MARGIN_LOSSES: dict[str, MarginLoss] = {
    "sigmoid": MarginLoss(lambda m: -F.logsigmoid(m.logit), _logistic, lambda beta: ("dpo", {})),
    "hinge": MarginLoss(lambda m: torch.relu(1 - m.logit), _logistic),
    "ipo": MarginLoss(_ipo, _ipo_link, lambda beta: ("ipo", {"margin": "per_token", "tau": beta})),
    "exo_pair": MarginLoss(_exo_pair, _logistic),
    "robust": MarginLoss(_robust, _logistic),
    "discopop": MarginLoss(_discopop, _logistic),
    "sigmoid_norm": MarginLoss(lambda m: -F.logsigmoid(m.beta * m.per_token + m.bias), _logistic),
}

_EACH_ON_ITS_OWN = "scores the chosen and the rejected completion each on its own, not their margin"
NOT_OF_THE_MARGIN: dict[str, str] = {
    "nca_pair": _EACH_ON_ITS_OWN,
    "bco_pair": _EACH_ON_ITS_OWN,
    "sppo_hard": _EACH_ON_ITS_OWN,
    "apo_zero": _EACH_ON_ITS_OWN,
    "apo_down": "scores the chosen completion on its own beside the margin",
    "aot": "pairs the batch's sorted margins, not each judgment's own",
    "aot_unpaired": "pairs the batch's sorted log-ratios, not each judgment's own",
    "sft": "raises the chosen completions' likelihood, which carries the annotators' bias with no "
           "place for theta to explain it",
}


def margin_losses(args, method_name: str, own_loss: bool) -> tuple[tuple[MarginLoss, float], ...] | None:
    """The loss types of ``args`` (a ``DPOConfig``: ``loss_type``, ``loss_weights``, ``discopop_tau``,
    ``f_divergence_type``) with their weights; None for TRL's default (``sigmoid`` alone, weight 1, the
    reverse KL), where the method row's own loss is used. ``own_loss``: the method row has a loss of
    its own (IPO, R-DPO, SamPO, the weighted baselines), which does not combine with another loss
    type or an f-divergence."""
    loss_types, loss_weights, discopop_tau = args.loss_type, args.loss_weights, args.discopop_tau
    names = [loss_types] if isinstance(loss_types, str) else list(loss_types)
    weights = [1.0] * len(names) if loss_weights is None else [float(w) for w in loss_weights]  # as many: DPOConfig
    if not names:
        raise ValueError("args.loss_type: an empty list; give at least one loss type (TRL's default: 'sigmoid')")
    bad = [w for w in weights if not abs(w) <= FLOAT32_MAX]  # NaN, inf, or inf once in float32 (1e39)
    if bad:  # such a weight trains a non-finite policy while the logged loss can read 0
        raise ValueError(f"args.loss_weights: every weight must be finite in float32 (|w| <= {FLOAT32_MAX:.4g}), "
                         f"got {loss_weights}")
    for name in names:
        if name in NOT_OF_THE_MARGIN:
            raise ValueError(f"args.loss_type: {name!r} {NOT_OF_THE_MARGIN[name]}, so BA-DPO's bias cannot "
                             f"enter it; use one of {sorted(MARGIN_LOSSES)}")
        if name not in MARGIN_LOSSES:
            raise ValueError(f"args.loss_type: unknown loss type {name!r}; BADPOTrainer takes "
                             f"{sorted(MARGIN_LOSSES)}")
    if "discopop" in names and (not math.isfinite(discopop_tau) or discopop_tau == 0):
        raise ValueError(f"args.discopop_tau: must be finite and non-zero, got {discopop_tau}")
    divergence = args.f_divergence_type
    if divergence not in DIVERGENCES:
        raise ValueError(f"args.f_divergence_type: unknown divergence {divergence!r}; BADPOTrainer takes "
                         f"{sorted(DIVERGENCES)}")
    if names == ["sigmoid"] and weights == [1.0] and divergence == "reverse_kl":
        return None
    if own_loss:
        what = (f"the f-divergence {divergence!r}" if names == ["sigmoid"] and weights == [1.0]
                else f"other loss types than 'sigmoid' ({names})")
        option = "args.f_divergence_type" if what.startswith("the f") else "args.loss_type"
        raise ValueError(f"{option}: method {method_name!r} has its own loss; {what} combine with method "
                         "'dpo' only")
    return tuple((MARGIN_LOSSES[name], weight) for name, weight in zip(names, weights, strict=True))


def start_link(losses: Sequence[tuple[MarginLoss, float]], beta: float) -> Link:
    """The one link of theta's start for these loss types; loss types of two links have none."""
    links = {loss.link(beta) for loss, weight in losses if weight != 0}
    if len(links) != 1:
        raise ValueError("theta_init: the loss types mix IPO's squared loss with a logistic one, which "
                         "give theta no common start; pass theta_init='zero' or a ready BiasChannel")
    return links.pop()


def weighted_loss(losses: Sequence[tuple[MarginLoss, float]], margins: Margins) -> Tensor:
    """Per judgment, the weighted sum of the loss types ``[B]``; its mean is TRL's weighted sum of means."""
    total = torch.zeros_like(margins.logit)
    for loss, weight in losses:
        total = total + weight * loss.loss(margins)
    return total


def pair_margins(chosen_logratios: Tensor, rejected_logratios: Tensor, completion_mask: Tensor,
                 bias_logit: Tensor, args) -> Margins:
    """The margins of a ``[chosen; rejected]`` batch: log-ratios ``[B]`` each, scored by the
    f-divergence of ``args`` (:data:`DIVERGENCES`), ``completion_mask`` ``[2B, T]`` (its row sums
    count a completion's tokens, as TRL counts them); ``args``: a ``DPOConfig`` (``beta``,
    ``label_smoothing``, ``discopop_tau``, ``f_divergence_type``, ``f_alpha_divergence_coef``)."""
    score = DIVERGENCES[args.f_divergence_type]
    alpha, beta = args.f_alpha_divergence_coef, args.beta
    chosen_logratios, rejected_logratios = score(chosen_logratios, alpha), score(rejected_logratios, alpha)
    chosen_tokens, rejected_tokens = completion_mask.sum(dim=1).clamp(min=1.0).chunk(2)
    per_token = chosen_logratios / chosen_tokens - rejected_logratios / rejected_tokens
    logit = beta * (chosen_logratios - rejected_logratios) + bias_logit
    return Margins(logit, per_token, bias_logit, beta, args.label_smoothing, args.discopop_tau)


def wpo_weights(token_logps: Tensor, log_sum_sq_probs: Tensor, completion_mask: Tensor) -> Tensor:
    """WPO's weight of each judgment ``[B]`` (Zhou et al. 2024, eq. 2; TRL's ``use_weighting``): for each
    completion, exp of the mean over its tokens of log p(token) - log sum_v p(v)^2 (the token's
    probability against the policy's own expected one), the chosen's times the rejected's; no gradient.
    ``token_logps`` and ``log_sum_sq_probs`` ``[2B, T-1]`` from the policy's forward, ``completion_mask``
    ``[2B, T]``."""
    mask = completion_mask[:, 1:].to(token_logps.dtype)  # position t predicts token t + 1
    with torch.no_grad():
        aligned = (token_logps - log_sum_sq_probs) * mask
        weights = torch.exp(aligned.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0))
    chosen, rejected = weights.chunk(2)
    return chosen * rejected
