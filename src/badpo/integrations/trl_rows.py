"""Which rows of badpo's tables :class:`badpo.integrations.trl.BADPOTrainer` trains: a method row
whose view TRL's batch gives (:data:`TRL_LACKS` names what it may not), and a ``bias.level`` rule
that needs nothing beyond the batch (the tilt rules keep every judgment's last margin; refused).
Kept apart from the trainer so that the checks read without TRL installed."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError
from badpo.core.notices import BadpoWarning
from badpo.methods import METHODS, Arm, arm, get_arm, split_arm_name
from badpo.methods.baselines import ld_dpo_terms
from badpo.theta.level import orthogonal_step
from badpo.theta.options import TRL, check_init, check_level, check_level_has_theta, check_lr

__all__ = ["TRL_LACKS", "bias_level_of", "ld_method", "method_row", "orthogonal_of", "theta_options", "trl_refusal"]

# What a method row may ask for that TRL's batch (prompt, chosen, rejected, the annotator's row and
# g_w - g_l) does not hold: (does the row ask for it, what it needs)
TRL_LACKS: tuple[tuple[Callable[[Arm], bool], str], ...] = (
    (lambda row: row.type_policies, "trains several policies and mixes them (badpo.engine.mixture)"),
    (lambda row: row.step_statistic is not None, "needs a statistic over the whole optimizer step"),
)


def trl_refusal(name: str) -> str | None:
    """Why the method or arm ``name`` cannot train inside TRL, or None when it can."""
    row = get_arm(name)
    return next((f"method {name!r} cannot train inside TRL: it {why}; train it with badpo train"
                 for asks, why in TRL_LACKS if asks(row)), None)


def bias_level_of(level: str, name: str, row: Arm) -> str:
    """``level`` checked: a rule of :data:`LEVEL_RULES` this trainer runs, on a row with a theta."""
    check_level(level, TRL)
    check_level_has_theta(level, row.learns_theta, f"method {name!r}", TRL)
    return level


def _variant(bias: str | BiasChannel | None) -> str | None:
    return bias.variant if isinstance(bias, BiasChannel) else bias


def method_row(method: str | None, bias: str | BiasChannel | None) -> tuple[str, Arm]:
    """The arm to train, as (its name, the arm): ``method`` (a loss of METHODS) with the bias variant
    of ``bias`` (``none`` when a method is given without one; BA-DPO's ``shared_mean`` when neither
    is). An arm's old one name (``ba_dpo_pooled``) still works, with a notice. An arm TRL cannot
    train, or a bias of another variant than an old name says, is a one-line error."""
    variant, shuffled = _variant(bias), False
    if method is None:
        method, variant = "dpo", variant or "shared_mean"
    split = split_arm_name(method)
    if split is not None:
        old, (method, named, shuffled) = method, split
        if variant not in (None, named):
            raise ValueError(f"bias: method {old!r} is method {method!r} with the bias variant {named!r}, not "
                             f"{variant!r}; give method={method!r} and one bias")
        warnings.warn(f"method={old!r} is now method={method!r}, bias={named!r}"
                      + (" (shuffled ids)" if shuffled else "") + "; the old name works until the next release",
                      BadpoWarning, stacklevel=3)
        variant = named
    try:
        row = arm(method, variant or "none", shuffled)
    except ConfigError as error:
        raise ValueError(str(error).replace("bias.variant: ", "bias: ", 1)) from None
    refusal = trl_refusal(row.name)
    if refusal is not None:
        raise ValueError(f"method: {refusal}")
    return row.name, row


def ld_method(ld_alpha: float | None, method: str | None, method_params: Mapping[str, Any] | None,
              bias: str | BiasChannel | None) -> tuple[str | None, dict, str | BiasChannel | None]:
    """TRL's ``args.ld_alpha`` as badpo's LD-DPO: without a ``method``, LD-DPO with alpha = ld_alpha
    (of the bias variant, ``shared_mean`` by default); with one, it must be LD-DPO with that alpha.
    Returns the (method, method_params, bias) to train; as given when ld_alpha is None."""
    params = dict(method_params or {})
    if ld_alpha is None:
        return method, params, bias
    if method is None:
        method, bias = "ld_dpo", bias if bias is not None else "shared_mean"
    loss = METHODS.get((split_arm_name(method) or (method,))[0])
    if loss is None or loss.loss is not ld_dpo_terms:
        raise ValueError(f"args.ld_alpha: LD-DPO's weighting is the loss of method 'ld_dpo'; method {method!r} "
                         "is another; leave ld_alpha at None, or train ld_dpo")
    if params.setdefault("alpha", ld_alpha) != ld_alpha:
        raise ValueError(f"args.ld_alpha is {ld_alpha} and method_params.alpha is {params['alpha']}: give one")
    return method, params, bias


def orthogonal_of(level: str, bias: BiasChannel, row: Arm, micro_batch: int, last_batch: int = 0) -> bool:
    """Whether the trainer keeps the policy's gradient orthogonal to the declared attributes: the
    engine's answer (:func:`badpo.theta.level.orthogonal_step`; ``micro_batch``: judgments per
    device batch), its refusals naming this trainer's options. ``last_batch``: the judgments of an
    epoch's short last batch (0 where every batch is full); one with no more judgments than
    declared attributes gives the policy no gradient, which a warning says."""
    on = orthogonal_step(level, bias, row, micro_batch, TRL)
    if on and 0 < last_batch <= len(bias.declared):
        warnings.warn(f"bias_level: orthogonal: each epoch's last batch holds {last_batch} judgment(s), no more "
                      f"than the {len(bias.declared)} declared attribute(s), so the policy learns nothing from "
                      "it; set args.dataloader_drop_last=True to leave it out", BadpoWarning, stacklevel=3)
    return on


def theta_options(theta_lr: float, theta_init: str) -> str:
    """``theta_init``, once it and ``theta_lr`` are checked."""
    check_lr(theta_lr, TRL)
    check_init(theta_init, TRL, ("reference", "conditional", "zero"))
    return theta_init
