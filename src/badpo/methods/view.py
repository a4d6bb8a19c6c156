"""The view of one micro-batch a method's loss sees, and the extra views it may ask for.

A method asks for more than the summed log-probs and the bias logit through :class:`Needs`, typed
flags checked when the table is built, so a misspelt view is an error at import, not a loss that
silently never sees its lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor


@dataclass(frozen=True)
class Needs:
    """The optional views of a :class:`JudgmentBatch` a method asks the engine for."""

    lengths: bool = False  # response token counts (R-DPO)
    token_logratios: bool = False  # per-token log pi - log pi_ref of each response (SamPO); costs a
    # per-token reference cache
    sample_seeds: bool = False  # one seed per judgment, the same whatever the micro-batch split


@dataclass(frozen=True)
class JudgmentBatch:
    """The J judgments of one micro-batch as a method's loss sees them (all ``[J]`` on one device).

    ``chosen_lengths`` / ``rejected_lengths`` (response tokens, ``Needs.lengths``) and
    ``chosen_token_logratios`` / ``rejected_token_logratios`` (per judgment, the response's
    per-token log pi - log pi_ref, ``Needs.token_logratios``) and ``sample_seeds``
    (``Needs.sample_seeds``: a seed per judgment that depends only on the run's seed, the step
    and the judgment, so a draw is the same whatever the micro-batch split and after a resume)
    are None unless asked for. ``step_statistic`` is what the method's ``step_statistic`` hook
    computed over the whole optimizer step (None without one).
    """

    policy_chosen: Tensor
    policy_rejected: Tensor
    reference_chosen: Tensor
    reference_rejected: Tensor
    bias_logit: Tensor
    beta: float
    sample_seeds: Tensor | None = None
    chosen_lengths: Tensor | None = None
    rejected_lengths: Tensor | None = None
    chosen_token_logratios: tuple[Tensor, ...] | None = None
    rejected_token_logratios: tuple[Tensor, ...] | None = None
    step_statistic: Any = None


@dataclass(frozen=True)
class StepView:
    """The whole optimizer step, for a method whose loss needs a statistic over it (a KTO-like
    reference point): every judgment of the step, on every process, with its summed reference
    log-probs and bias logit ``[N]``, and ``policy_logprobs()`` -> (chosen ``[N]``, rejected
    ``[N]``), a no-grad forward of the step's sequences computed only if called."""

    judgments: Tensor
    reference_chosen: Tensor
    reference_rejected: Tensor
    bias_logit: Tensor
    beta: float
    policy_logprobs: Any


@dataclass(frozen=True)
class LossTerms:
    """Per-judgment losses and the detached implicit rewards logged beside them, each ``[J]``;
    ``logits`` (``[J]``, with its gradient): the logit the loss is a function of through the method's
    ``level_link``, bias logit included (BA-DPO: u + b), which the level step reads detached
    (:mod:`badpo.core.level_step`) and the ordered logit of ties and strengths grades
    (:mod:`badpo.theta.graded`); None from a loss that has none."""

    losses: Tensor
    chosen_rewards: Tensor
    rejected_rewards: Tensor
    logits: Tensor | None = None


def sample_seeds(seed: int, step: int, judgments: Tensor) -> Tensor:
    """One int64 seed per judgment from (run seed, step, judgment index): a fixed affine hash, so
    a judgment's draw does not depend on its micro-batch or on resuming."""
    base = (seed * 1_000_003 + step * 97_409) % (2**31 - 1)
    return (judgments.long().cpu() * 2_654_435_761 + base) % (2**31 - 1)
