"""Which rows of badpo's tables :class:`badpo.integrations.trl.BADPOTrainer` trains: a method row
whose view TRL's batch gives (:data:`TRL_LACKS` names what it may not), and a ``bias.level`` rule
that needs nothing beyond the batch (the tilt rules keep every judgment's last margin; refused).
Kept apart from the trainer so that the checks read without TRL installed."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from badpo.core.bias import BiasChannel
from badpo.core.notices import BadpoWarning
from badpo.methods import METHODS, Method, get_method
from badpo.methods.baselines import ld_dpo_terms
from badpo.run_folder.external import method_of_variant
from badpo.theta.level import orthogonal_step
from badpo.theta.options import TRL, check_init, check_level, check_level_has_theta, check_lr

__all__ = ["TRL_LACKS", "bias_level_of", "ld_method", "method_row", "orthogonal_of", "theta_options", "trl_refusal"]

# What a method row may ask for that TRL's batch (prompt, chosen, rejected, the annotator's row and
# g_w - g_l) does not hold: (does the row ask for it, what it needs)
TRL_LACKS: tuple[tuple[Callable[[Method], bool], str], ...] = (
    (lambda row: row.type_policies, "trains several policies and mixes them (badpo.engine.mixture)"),
    (lambda row: row.step_statistic is not None, "needs a statistic over the whole optimizer step"),
)


def trl_refusal(name: str) -> str | None:
    """Why method ``name`` cannot train inside TRL, or None when it can."""
    row = get_method(name)
    return next((f"method {name!r} cannot train inside TRL: it {why}; train it with badpo train"
                 for asks, why in TRL_LACKS if asks(row)), None)


def bias_level_of(level: str, name: str, row: Method) -> str:
    """``level`` checked: a rule of :data:`LEVEL_RULES` this trainer runs, on a row with a theta."""
    check_level(level, TRL)
    check_level_has_theta(level, row.learns_theta, f"method {name!r}", TRL)
    return level


def method_row(method: str | None, bias: str | BiasChannel | None) -> tuple[str, Method]:
    """The row the loss comes from: ``method``, or BA-DPO of the bias variant (``dpo`` for ``none``;
    ``shared_mean`` when neither is given). A row TRL cannot train, or a bias of another variant
    than the row's, is a one-line error."""
    variant = bias.variant if isinstance(bias, BiasChannel) else bias
    if method is None:
        method = method_of_variant(variant or "shared_mean")
    refusal = trl_refusal(method)  # an unknown name: a ConfigError listing the known ones
    if refusal is not None:
        raise ValueError(f"method: {refusal}")
    row = get_method(method)
    if variant is not None and variant != row.bias_variant:
        raise ValueError(f"bias: method {method!r} learns the bias variant {row.bias_variant!r}, not "
                         f"{variant!r}; leave bias out, or give a channel of that variant")
    return method, row


def ld_method(ld_alpha: float | None, method: str | None, method_params: Mapping[str, Any] | None,
              bias: str | BiasChannel | None) -> tuple[str | None, dict]:
    """TRL's ``args.ld_alpha`` as badpo's LD-DPO row: without a ``method``, LD-DPO of the bias variant
    with alpha = ld_alpha; with one, it must be an LD-DPO row whose alpha is ld_alpha. Returns the
    (method, method_params) to train; as given when ld_alpha is None."""
    params = dict(method_params or {})
    if ld_alpha is None:
        return method, params
    if method is None:
        variant = (bias.variant if isinstance(bias, BiasChannel) else bias) or "shared_mean"
        method = "ld_dpo" if variant == "none" else f"ld_dpo_ba_{variant}"
    if method not in METHODS or METHODS[method].loss is not ld_dpo_terms:
        raise ValueError(f"args.ld_alpha: LD-DPO's weighting is the loss of the ld_dpo rows; method {method!r} "
                         "is another; leave ld_alpha at None, or train an ld_dpo row")
    if params.setdefault("alpha", ld_alpha) != ld_alpha:
        raise ValueError(f"args.ld_alpha is {ld_alpha} and method_params.alpha is {params['alpha']}: give one")
    return method, params


def orthogonal_of(level: str, bias: BiasChannel, row: Method, micro_batch: int, last_batch: int = 0) -> bool:
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
