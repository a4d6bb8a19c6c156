"""Loss weights with state: what a method's ``weighting`` builds (Group-DRO, Crowd-PrefRL), and
the protocol the loop reads (EM-DPO's :class:`badpo.methods.em.TypeWeights` follows it too)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import torch
from torch import Tensor

from badpo.core.config import ConfigError
from badpo.methods.baselines import GroupParams


class Weighting(Protocol):
    """Per-judgment loss weights that may move between optimizer steps; checkpointed."""

    def weights(self, judgments: Tensor, step_judgments: Tensor) -> Tensor:
        """``[J]`` weights of ``judgments`` within the step (the step's weights sum to the loss's
        normaliser)."""

    def observe(self, judgments: Tensor, losses: Tensor) -> None:
        """See one micro-batch's per-judgment losses."""

    def update(self, reduce: Callable[[Tensor], Tensor]) -> dict[str, Any]:
        """After the optimizer step (``reduce`` sums over processes); returns what to log."""

    def summary(self) -> dict[str, Any]:
        """What ``run.json`` keeps of the weights at the end ({} when nothing moved)."""

    def state_dict(self) -> dict[str, Tensor]: ...

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None: ...


class GroupWeights:
    """Loss weights q_g over groups, moved by exponentiated gradient after every optimizer step.

    Step objective: sum over the groups present in the step of q'_g L_g, with L_g the group's
    mean loss in the step and q' the weights renormalised over those groups, so a judgment of
    group g weighs q'_g N / n_g (N judgments in the step, n_g of them in g; the weights of a step
    sum to N, so one group gives every judgment weight 1: DPO). After the step
    q_g <- q_g exp(direction * eta * L_g) for the groups present, then q is renormalised:
    direction +1 moves weight toward the highest-loss group (Group-DRO), -1 away from it
    (Crowd-PrefRL). The state is q (checkpointed); the step's loss sums are scratch.

    Logged after each update: q itself (``group_weight``), or above 12 groups its largest and
    smallest value, and ``group_weight_sd``, the population sd of G q, the weights on the scale of
    the paper's "weight sd 15 and 6 around a mean of 1" (all the weight on one of G groups: sqrt(G - 1)).
    """

    def __init__(self, judgment_group: Tensor, names: tuple[str, ...], eta: float, direction: int):
        self.judgment_group, self.names = judgment_group.long(), names
        self.eta, self.direction = eta, direction
        self.q = torch.full((len(names),), 1.0 / len(names), dtype=torch.float64)
        self._loss_sums = torch.zeros(len(names), dtype=torch.float64)
        self._counts = torch.zeros(len(names), dtype=torch.float64)

    def weights(self, judgments: Tensor, step_judgments: Tensor) -> Tensor:
        """``[J]`` float32 weights of ``judgments`` (on their device) within the step."""
        counts = torch.bincount(self.judgment_group[step_judgments.cpu()], minlength=len(self.names))
        present = counts > 0
        q = torch.where(present, self.q, torch.zeros_like(self.q))
        per_judgment = q / q.sum() * len(step_judgments) / counts.clamp(min=1)
        return per_judgment[self.judgment_group[judgments.cpu()]].float().to(judgments.device)

    def observe(self, judgments: Tensor, losses: Tensor) -> None:
        groups = self.judgment_group[judgments.cpu()]
        self._loss_sums.index_add_(0, groups, losses.detach().double().cpu())
        self._counts.index_add_(0, groups, torch.ones(len(groups), dtype=torch.float64))

    def update(self, reduce: Callable[[Tensor], Tensor]) -> dict[str, Any]:
        """Apply the step's group losses (summed over processes by ``reduce``); returns the log."""
        sums, counts = reduce(self._loss_sums), reduce(self._counts)
        present = counts > 0
        mean_loss = torch.where(present, sums / counts.clamp(min=1), torch.zeros_like(sums))
        logits = self.q.log() + self.direction * self.eta * mean_loss
        self.q = torch.softmax(logits, dim=0)
        self._loss_sums.zero_()
        self._counts.zero_()
        # the spread on the paper's scale, weights around a mean of 1 (G q): "weight sd 15 and 6"
        spread = {"group_weight_sd": float((self.q * len(self.names)).std(unbiased=False))}
        if len(self.names) > 12:  # per annotator: the spread, not every weight
            return {"group_weight_max": float(self.q.max()), "group_weight_min": float(self.q.min()), **spread}
        return {"group_weight": dict(zip(self.names, self.q.tolist())), **spread}

    def summary(self) -> dict[str, Any]:
        """Every group's final weight q_g (they sum to 1), whatever the group count: the log keeps
        only the spread above 12 groups, and which annotator a collapsed weighting landed on is
        in this."""
        return {"group_weights": dict(zip(self.names, self.q.tolist()))}

    def state_dict(self) -> dict[str, Tensor]:
        return {"q": self.q.clone()}

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        self.q = state["q"].to(torch.float64).clone()


def group_weights(direction: int):
    """The ``weighting`` of a group method: +1 Group-DRO, -1 Crowd-PrefRL."""

    def build(params: GroupParams, annotator_index: Tensor, annotators: tuple[str, ...],
              classes: Mapping[str, str] | None) -> GroupWeights:
        if params.groups == "annotators":
            return GroupWeights(annotator_index, annotators, params.eta, direction)
        if classes is None:
            raise ConfigError("method_params.groups: 'classes' needs an annotator_class on every "
                              "judgment; use groups=annotators")
        names = tuple(sorted(set(classes.values())))
        of_annotator = torch.tensor([names.index(classes[a]) for a in annotators])
        return GroupWeights(of_annotator[annotator_index], names, params.eta, direction)

    return build
