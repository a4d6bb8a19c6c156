"""The losses of the paper's arms and baselines, with their typed parameters.

Every loss is a pure function ``(JudgmentBatch, params) -> LossTerms`` and adds the bias logit
to its own logit, so every baseline runs with every bias variant.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from badpo.core.config import ConfigError
from badpo.core.losses import ba_dpo_loss, dpo_margin, ipo_loss, rdpo_length_term
from badpo.methods.view import JudgmentBatch, LossTerms


# --------------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class NoParams:
    """A method without parameters of its own."""


@dataclass(frozen=True)
class RDPOParams:
    alpha: float = 0.005  # length term per token (the paper's value; R-DPO published 0.02)


@dataclass(frozen=True)
class IPOParams:
    tau: float = 0.1  # IPO's regularisation: the margin is regressed to 1 / (2 tau)
    # summed: each response's log-ratio summed over its tokens (Azar et al., the paper's); per_token:
    # averaged over them, as TRL's loss_type="ipo" (which is this row with tau = its beta)
    margin: Literal["summed", "per_token"] = "summed"

    def __post_init__(self) -> None:
        if not self.tau > 0:
            raise ConfigError(f"method_params.tau: must be > 0, got {self.tau}")


@dataclass(frozen=True)
class SimPOParams:
    gamma: float = 0.5  # the target margin subtracted from the logit (TRL's simpo_gamma default)

    def __post_init__(self) -> None:
        if not self.gamma >= 0:
            raise ConfigError(f"method_params.gamma: must be >= 0, got {self.gamma}")


@dataclass(frozen=True)
class LDParams:
    alpha: float = 0.5  # weight of the tokens past the pair's shared length: 1 is DPO, 0 cuts them off

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"method_params.alpha: must be in [0, 1] (1 is DPO), got {self.alpha}")


@dataclass(frozen=True)
class GroupParams:
    groups: Literal["classes", "annotators"] = "classes"  # one loss weight per class or annotator
    eta: float = 0.5  # exponentiated-gradient step of the group weights

    def __post_init__(self) -> None:
        if not self.eta > 0:
            raise ConfigError(f"method_params.eta: must be > 0, got {self.eta}")


@dataclass(frozen=True)
class CrowdParams(GroupParams):
    groups: Literal["classes", "annotators"] = "annotators"


# --------------------------------------------------------------------------------------- losses
def ba_dpo_terms(batch: JudgmentBatch, params: Any = None) -> LossTerms:
    """-log sigmoid(u + b): DPO with the bias logit (eq. barp_dpo_loss)."""
    losses, chosen_rewards, rejected_rewards = ba_dpo_loss(
        batch.policy_chosen, batch.policy_rejected, batch.reference_chosen, batch.reference_rejected,
        batch.bias_logit, batch.beta)
    logits = dpo_margin(batch.policy_chosen, batch.policy_rejected, batch.reference_chosen,
                        batch.reference_rejected, batch.beta) + batch.bias_logit  # u + b, with its gradient
    return LossTerms(losses, chosen_rewards, rejected_rewards, logits)


def r_dpo_terms(batch: JudgmentBatch, params: RDPOParams) -> LossTerms:
    """R-DPO: -log sigmoid(u + alpha (|y_w| - |y_l|) + b), lengths in response tokens (EOS
    included); alpha = 0 is BA-DPO (DPO without a bias)."""
    term = rdpo_length_term(batch.chosen_lengths, batch.rejected_lengths, params.alpha)
    return ba_dpo_terms(dataclasses.replace(batch, bias_logit=batch.bias_logit + term.to(batch.bias_logit)))


def ipo_terms(batch: JudgmentBatch, params: IPOParams) -> LossTerms:
    """IPO: (h + b - 1 / (2 tau))^2 with h the log-ratio margin (u at beta = 1), each response's
    log-ratio summed over its tokens or, with ``margin: per_token``, averaged over them (TRL's); the
    bias logit enters the margin (b = 0 under ``ipo``: plain IPO). Rewards are logged at the config's
    beta."""
    chosen_ratio = batch.policy_chosen - batch.reference_chosen
    rejected_ratio = batch.policy_rejected - batch.reference_rejected
    if params.margin == "per_token":
        chosen_ratio = chosen_ratio / batch.chosen_lengths.to(chosen_ratio)
        rejected_ratio = rejected_ratio / batch.rejected_lengths.to(rejected_ratio)
    zeros = torch.zeros_like(chosen_ratio)
    losses = ipo_loss(chosen_ratio, rejected_ratio, zeros, zeros, params.tau, bias_logit=batch.bias_logit)
    logits = chosen_ratio - rejected_ratio + batch.bias_logit  # h + b, IPO's squared link, with its gradient
    return LossTerms(losses, batch.beta * chosen_ratio.detach(), batch.beta * rejected_ratio.detach(), logits)


def simpo_terms(batch: JudgmentBatch, params: SimPOParams) -> LossTerms:
    """SimPO (Meng et al. 2024), reference-free: -log sigmoid(beta (log pi(y_w) / |y_w| - log pi(y_l)
    / |y_l|) - gamma + b), lengths in response tokens (EOS included); the rewards are the
    length-normalised beta log pi. The reference log-probs are not read."""
    chosen_rewards = batch.beta * batch.policy_chosen / batch.chosen_lengths.to(batch.policy_chosen)
    rejected_rewards = batch.beta * batch.policy_rejected / batch.rejected_lengths.to(batch.policy_rejected)
    logits = chosen_rewards - rejected_rewards - params.gamma + batch.bias_logit
    return LossTerms(-F.logsigmoid(logits), chosen_rewards.detach(), rejected_rewards.detach(), logits)


def ld_dpo_terms(batch: JudgmentBatch, params: LDParams) -> LossTerms:
    """LD-DPO (Liu et al. 2024, TRL's ``ld_alpha``): each response's log-ratio is its sum over the
    pair's shared length l = min(|y_w|, |y_l|) tokens (EOS included) plus alpha times its sum over the
    tokens past l; then -log sigmoid(beta (chosen - rejected) + b). The weighting is linear, so
    weighting the policy's and the reference's log-probs apart, as TRL does, gives the same ratios."""
    chosen, rejected = [], []
    for c, r in zip(batch.chosen_token_logratios, batch.rejected_token_logratios):
        shared = min(len(c), len(r))
        chosen.append(c[:shared].sum() + params.alpha * c[shared:].sum())
        rejected.append(r[:shared].sum() + params.alpha * r[shared:].sum())
    return _ratio_terms(torch.stack(chosen), torch.stack(rejected), batch)


def _ratio_terms(chosen_ratio: Tensor, rejected_ratio: Tensor, batch: JudgmentBatch) -> LossTerms:
    """-log sigmoid(beta (chosen_ratio - rejected_ratio) + b) from the responses' summed log-ratios."""
    zeros = torch.zeros_like(chosen_ratio)
    losses, chosen_rewards, rejected_rewards = ba_dpo_loss(
        chosen_ratio, rejected_ratio, zeros, zeros, batch.bias_logit, batch.beta)
    logits = batch.beta * (chosen_ratio - rejected_ratio) + batch.bias_logit  # with its gradient
    return LossTerms(losses, chosen_rewards, rejected_rewards, logits)


def sampo_terms(batch: JudgmentBatch, params: Any = None) -> LossTerms:
    """SamPO: the longer response's per-token log-ratios are down-sampled, without replacement, to
    the shorter response's token count (positions drawn with the judgment's ``sample_seeds``), so
    both contribute equally many terms to u; then -log sigmoid(u + b). Equal lengths: DPO."""
    chosen, rejected = [], []
    for i, (c, r) in enumerate(zip(batch.chosen_token_logratios, batch.rejected_token_logratios)):
        c, r = _down_sample(c, r, int(batch.sample_seeds[i]))
        chosen.append(c.sum())
        rejected.append(r.sum())
    return _ratio_terms(torch.stack(chosen), torch.stack(rejected), batch)


def _down_sample(chosen: Tensor, rejected: Tensor, seed: int) -> tuple[Tensor, Tensor]:
    """Keep every term of the shorter side and ``len(shorter)`` terms of the longer, drawn
    uniformly without replacement (kept in their order)."""
    if len(chosen) == len(rejected):
        return chosen, rejected
    generator = torch.Generator().manual_seed(seed)
    longer, shorter = (chosen, rejected) if len(chosen) > len(rejected) else (rejected, chosen)
    keep = torch.randperm(len(longer), generator=generator)[: len(shorter)].sort().values
    sampled = longer[keep.to(longer.device)]
    return (sampled, rejected) if longer is chosen else (chosen, sampled)
