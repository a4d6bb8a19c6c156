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

from badpo.core.level import LOGISTIC, Link, squared

__all__ = ["MARGIN_LOSSES", "NOT_OF_THE_MARGIN", "Margins", "MarginLoss", "margin_losses", "pair_margins",
           "start_link", "weighted_loss"]


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
    (``badpo.core.level``), given beta."""

    loss: Callable[[Margins], Tensor]
    link: Callable[[float], Link]


def _logistic(beta: float) -> Link:
    return LOGISTIC


def _ipo_link(beta: float) -> Link:
    return squared(1.0 / (2.0 * beta))


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


MARGIN_LOSSES: dict[str, MarginLoss] = {
    "sigmoid": MarginLoss(lambda m: -F.logsigmoid(m.logit), _logistic),
    "hinge": MarginLoss(lambda m: torch.relu(1 - m.logit), _logistic),
    "ipo": MarginLoss(lambda m: (m.per_token + m.bias - 1 / (2 * m.beta)) ** 2, _ipo_link),
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
    """The loss types of ``args`` (a ``DPOConfig``: ``loss_type``, ``loss_weights``, ``discopop_tau``)
    with their weights; None for TRL's default (``sigmoid`` alone, weight 1), where the method row's
    own loss is used. ``own_loss``: the method row has a loss of its own (IPO, R-DPO, SamPO, the
    weighted baselines), which does not combine with another loss type."""
    loss_types, loss_weights, discopop_tau = args.loss_type, args.loss_weights, args.discopop_tau
    names = [loss_types] if isinstance(loss_types, str) else list(loss_types)
    weights = [1.0] * len(names) if loss_weights is None else [float(w) for w in loss_weights]  # as many: DPOConfig
    if not names:
        raise ValueError("args.loss_type: an empty list; give at least one loss type (TRL's default: 'sigmoid')")
    bad = [w for w in weights if not math.isfinite(w)]
    if bad:  # a NaN or infinite weight trains a non-finite policy while the logged loss can read 0
        raise ValueError(f"args.loss_weights: every weight must be finite, got {loss_weights}")
    for name in names:
        if name in NOT_OF_THE_MARGIN:
            raise ValueError(f"args.loss_type: {name!r} {NOT_OF_THE_MARGIN[name]}, so BA-DPO's bias cannot "
                             f"enter it; use one of {sorted(MARGIN_LOSSES)}")
        if name not in MARGIN_LOSSES:
            raise ValueError(f"args.loss_type: unknown loss type {name!r}; BADPOTrainer takes "
                             f"{sorted(MARGIN_LOSSES)}")
    if "discopop" in names and (not math.isfinite(discopop_tau) or discopop_tau == 0):
        raise ValueError(f"args.discopop_tau: must be finite and non-zero, got {discopop_tau}")
    if names == ["sigmoid"] and weights == [1.0]:
        return None
    if own_loss:
        raise ValueError(f"args.loss_type: method {method_name!r} has its own loss; other loss types than "
                         f"'sigmoid' ({names}) combine with dpo and the ba_dpo_<variant> rows only")
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
                 bias_logit: Tensor, beta: float, label_smoothing: float, discopop_tau: float) -> Margins:
    """The margins of a ``[chosen; rejected]`` batch: log-ratios ``[B]`` each, ``completion_mask``
    ``[2B, T]`` (its row sums count a completion's tokens, as TRL counts them)."""
    chosen_tokens, rejected_tokens = completion_mask.sum(dim=1).clamp(min=1.0).chunk(2)
    per_token = chosen_logratios / chosen_tokens - rejected_logratios / rejected_tokens
    logit = beta * (chosen_logratios - rejected_logratios) + bias_logit
    return Margins(logit, per_token, bias_logit, beta, label_smoothing, discopop_tau)
