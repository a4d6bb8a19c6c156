"""Preference methods as data: each arm of the paper is one row of ``METHODS``.

A method is a component with a documented contract (the training loop reads these fields and
never branches on a method's name):

* ``loss(batch, params) -> LossTerms``: a pure function of one micro-batch's
  :class:`~badpo.methods.view.JudgmentBatch` — summed policy and reference log-probs, the bias
  logit, and only the extra views the method asks for in ``needs`` (:class:`Needs`) — returning
  one loss per judgment.
* ``params``: a frozen dataclass of its typed parameters, read from ``method_params`` in the
  config and checked like every other section (``method_params.alpha`` ...).
* ``weighting``: optional loss weights per judgment with state (Group-DRO's group weights),
  updated after each optimizer step, logged and checkpointed (:class:`Weighting`).
* ``takes_bias``: the loss adds the bias logit, so the method trains with every bias variant
  (``bias.variant``, a setting, not part of the method: an arm is a method with a variant,
  :mod:`badpo.methods.arms`). EM-DPO does not: its type policies would each need their own theta.
* ``step_statistic``: an optional hook over the whole step (see :class:`Method`).
* ``type_policies``: the arm trains several policies (EM-DPO + MinMax-DPO); ``badpo.engine.mixture``
  orchestrates them above the one-policy loop (the maths: :mod:`badpo.methods.em`).
* ``level_link(params)``: how the loss depends on its logit (bias included), which the level step
  of ``bias.trusted_level`` minimises in (:mod:`badpo.core.level_step`): logistic for the DPO family,
  squared for IPO. The loss returns that logit as ``LossTerms.logits``.
* ``reference_free``: the loss reads no reference log-probs (SimPO); its logit at the start is then
  not 0, and theta's start fits the labels around it (:func:`logit_at_start`, for every row alike:
  R-DPO's length term is its logit at the start too).

Options that mean the same for every arm with a learned theta (warm start, declared subset,
fixed offset) live in ``TrainConfig.bias``. Adding a method: docs/internals.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from badpo.core.config import ConfigError, from_dict
from badpo.core.level_step import LOGISTIC, Link, squared
from badpo.methods.baselines import (
    CrowdParams,
    GroupParams,
    IPOParams,
    LDParams,
    NoParams,
    RDPOParams,
    SimPOParams,
    ba_dpo_terms,
    ipo_terms,
    ld_dpo_terms,
    r_dpo_terms,
    sampo_terms,
    simpo_terms,
)
from badpo.methods.em import EMParams
from badpo.methods.view import JudgmentBatch, LossTerms, Needs, StepView
from badpo.methods.weighting import Weighting, group_weights


def logistic_link(params: Any) -> Link:
    """The DPO family's and Bradley-Terry's loss -log sigmoid(z) as a function of its logit z."""
    return LOGISTIC


@dataclass(frozen=True)
class Method:
    """One method: its loss, typed parameters, extra views and weighting (module docstring).

    ``step_statistic(StepView,
    params)``, if given, is computed once per optimizer step before its micro-batches and reaches
    the loss as ``JudgmentBatch.step_statistic`` (a statistic over the whole step, as a KTO-like
    reference point needs).
    """

    description: str
    loss: Callable[[JudgmentBatch, Any], LossTerms] = ba_dpo_terms
    params: type = NoParams
    needs: Needs = Needs()
    weighting: Callable[..., Weighting] | None = None  # (params, annotator_index, annotators, classes)
    type_policies: bool = False  # several policies, trained by badpo.engine.mixture (EM-DPO)
    takes_bias: bool = True  # the loss adds the bias logit: it trains with every bias.variant
    step_statistic: Callable[[StepView, Any], Any] | None = None
    level_link: Callable[[Any], Link] = logistic_link  # the loss's link (module docstring)
    reference_free: bool = False  # the loss reads no reference log-probs (module docstring)

    def parse_params(self, values: Mapping[str, Any]) -> Any:
        """``method_params`` as this method's typed parameters; unknown keys name the method."""
        if self.params is NoParams and values:
            raise ConfigError(f"method_params: this method takes no parameters, got {sorted(values)}")
        return from_dict(self.params, values, prefix="method_params")


def ipo_link(params: IPOParams) -> Link:
    """IPO's loss (h + b - 1/(2 tau))^2 as a function of its logit h + b."""
    return squared(1.0 / (2.0 * params.tau))


METHODS: dict[str, Method] = {
    "dpo": Method("DPO: -log sigmoid(u + b), u the log-ratio margin, b the bias logit (0 without a bias "
                  "variant: DPO; BA-DPO with one)"),
    "r_dpo": Method(
        "R-DPO: alpha (|y_w| - |y_l|) in tokens added to the DPO logit (Park et al. 2024)",
        loss=r_dpo_terms, params=RDPOParams, needs=Needs(lengths=True),
    ),
    "sampo": Method(
        "SamPO: the longer response's token log-ratios down-sampled to the shorter's count (Lu et al. "
        "2024)", loss=sampo_terms, needs=Needs(token_logratios=True, sample_seeds=True),
    ),
    "ld_dpo": Method(
        "LD-DPO: the log-ratio of tokens past the pair's shared length weighted by alpha (Liu et al. "
        "2024; TRL's ld_alpha)", loss=ld_dpo_terms, params=LDParams, needs=Needs(token_logratios=True),
    ),
    "simpo": Method(
        "SimPO: beta (log pi(y_w) / |y_w| - log pi(y_l) / |y_l|) - gamma, no reference (Meng et al. "
        "2024)", loss=simpo_terms, params=SimPOParams, needs=Needs(lengths=True), reference_free=True,
    ),
    "group_dro_dpo": Method(
        "Group-DRO DPO: group loss weights moved toward the highest-loss group (eta 0.5)",
        params=GroupParams, weighting=group_weights(+1),
    ),
    "crowd_prefrl": Method(
        "Crowd-PrefRL: annotator loss weights moved away from the highest-loss annotator",
        params=CrowdParams, weighting=group_weights(-1),
    ),
    # IPO's squared loss with the bias logit inside the margin (BA-IPO with a variant; its theta is on
    # the scale of IPO's log-ratio margin h, not of a Bradley-Terry logit: docs/training.md)
    "ipo": Method("IPO: (h + b - 1/(2 tau))^2, h the log-ratio margin, summed or per token (Azar et al. 2024; "
                  "TRL's loss_type='ipo' is margin: per_token, tau = beta)",
                  loss=ipo_terms, params=IPOParams, needs=Needs(lengths=True), level_link=ipo_link),
    "em_dpo": Method(
        "EM-DPO + MinMax-DPO: K type policies, annotator type probabilities by EM, mixture weights "
        "minimising the largest regret (Chidambaram et al. 2024)",
        params=EMParams, type_policies=True, takes_bias=False,
    ),
}


def logit_at_start(method: Method, params: Any, reference_chosen: Tensor, reference_rejected: Tensor,
                   chosen_lengths: Tensor, rejected_lengths: Tensor, beta: float) -> Tensor:
    """``[N]`` each judgment's logit under the method's own loss with the policy at the reference and
    no bias (detached): 0 for the DPO family, R-DPO's length term, SimPO's length-normalised reference
    margin minus gamma. theta's start fits the labels around it (:mod:`badpo.theta.start`). Per-token
    log-ratios are 0 at the reference, one per response token; a step statistic is the one of a step
    whose policy is the reference; a loss that returns no logit has 0."""
    n = len(reference_chosen)
    views: dict[str, Any] = {}
    if method.needs.token_logratios:
        views.update(chosen_token_logratios=tuple(torch.zeros(int(k)) for k in chosen_lengths),
                     rejected_token_logratios=tuple(torch.zeros(int(k)) for k in rejected_lengths))
    if method.needs.sample_seeds:
        views["sample_seeds"] = torch.zeros(n, dtype=torch.long)
    if method.step_statistic is not None:  # the statistic of a step whose policy is the reference
        step = StepView(judgments=torch.arange(n), reference_chosen=reference_chosen,
                        reference_rejected=reference_rejected, bias_logit=torch.zeros(n, dtype=reference_chosen.dtype),
                        beta=beta, policy_logprobs=lambda: (reference_chosen, reference_rejected))
        views["step_statistic"] = method.step_statistic(step, params)
    batch = JudgmentBatch(policy_chosen=reference_chosen, policy_rejected=reference_rejected,
                          reference_chosen=reference_chosen, reference_rejected=reference_rejected,
                          bias_logit=torch.zeros(n, dtype=reference_chosen.dtype), beta=beta,
                          chosen_lengths=chosen_lengths, rejected_lengths=rejected_lengths, **views)
    with torch.no_grad():
        logits = method.loss(batch, params).logits
    return torch.zeros(n, dtype=reference_chosen.dtype) if logits is None else logits.detach()


def logit_is_zero_at_start(method: Method, params: Any) -> bool:
    """Whether the method's logit is 0 with the policy at the reference whatever the responses and
    their lengths (the DPO family, IPO with either margin), so that theta's start reads the labels
    alone; R-DPO's length term and SimPO's reference-free margin are not (:func:`logit_at_start` on
    responses of unequal lengths and log-probs, the one definition)."""
    chosen, rejected = torch.tensor([-3.0, -1.0, -7.0]), torch.tensor([-2.0, -5.0, -1.0])
    logits = logit_at_start(method, params, chosen, rejected, torch.tensor([1, 2, 5]), torch.tensor([4, 2, 1]), 0.1)
    return bool((logits == 0).all())


def get_method(name: str) -> Method:
    """The method called ``name`` (a loss; the bias variant is ``bias.variant``); an unknown name is a
    ConfigError listing the known ones."""
    if name not in METHODS:
        raise ConfigError(f"method: unknown method {name!r}; choose one of {sorted(METHODS)}")
    return METHODS[name]
