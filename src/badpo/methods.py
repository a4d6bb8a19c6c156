"""Preference methods as data: each arm of the paper is one entry of ``METHODS``.

An arm is the per-judgment loss it optimises, the bias variant it learns, and whether the
annotator ids are replaced by random ones (Appendix "Arms"). The training loop reads these
fields and never branches on the method's name. Options that mean the same for every arm with
a learned theta (warm start, declared subset, fixed offset) live in ``TrainConfig.bias``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from badpo.config import ConfigError
from badpo.losses import ba_dpo_loss

# (policy_chosen, policy_rejected, reference_chosen, reference_rejected, bias_logit, beta)
#   -> (losses [B], chosen_rewards [B], rejected_rewards [B]); see badpo.losses.ba_dpo_loss.
LossFn = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor, float], tuple[Tensor, Tensor, Tensor]]


@dataclass(frozen=True)
class Method:
    """One arm: its loss, the bias variant it learns, and the shuffled-ids control switch."""

    bias_variant: str  # a badpo.bias.VARIANTS entry; "none" learns no theta
    description: str
    loss: LossFn = ba_dpo_loss
    shuffle_annotators: bool = False  # reassign every judgment to a uniformly random annotator

    @property
    def learns_theta(self) -> bool:
        return self.bias_variant != "none"


METHODS: dict[str, Method] = {
    "dpo": Method(
        "none", "DPO: BA-DPO with every theta_k frozen at 0 (a bias.fixed_offset still applies)"
    ),
    "ba_dpo_pooled": Method("pooled", "BA-DPO, one theta per attribute shared by every judgment"),
    "ba_dpo_shared_mean": Method(
        "shared_mean", "BA-DPO, theta_k = theta_bar + eps_k with the shared mean its own parameter"
    ),
    "ba_dpo_per_annotator": Method("per_annotator", "BA-DPO, a free theta_k per annotator (BARP)"),
    "ba_dpo_class_offsets": Method(
        "class_offsets", "BA-DPO, theta_k = theta_bar + delta_c + eps_k (needs annotator classes)"
    ),
    "ba_dpo_shuffled_ids": Method(
        "per_annotator",
        "control: free theta_k, each judgment assigned a uniformly random annotator index",
        shuffle_annotators=True,
    ),
}


def get_method(name: str) -> Method:
    """The arm called ``name``; an unknown name is a ConfigError listing the known ones."""
    if name not in METHODS:
        raise ConfigError(f"method: unknown method {name!r}; choose one of {sorted(METHODS)}")
    return METHODS[name]
