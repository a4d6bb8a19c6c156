"""Preference methods as data: each arm of the paper is one row of ``METHODS``.

A method is a component with a documented contract (the training loop reads these fields and
never branches on a method's name):

* ``loss(batch, params) -> LossTerms``: a pure function of one micro-batch's
  :class:`JudgmentBatch` — summed policy and reference log-probs, the bias logit, and only the
  extra views the method lists in ``needs`` — returning one loss per judgment.
* ``params``: a frozen dataclass of its typed parameters, read from ``method_params`` in the
  config and checked like every other section (``method_params.alpha`` ...).
* ``weighting``: optional loss weights per judgment with state (Group-DRO's group weights),
  updated after each optimizer step, logged and checkpointed (:class:`GroupWeights`).
* ``bias_variant``: the :mod:`badpo.core.bias` variant it learns (``none``: theta frozen at 0), and
  ``shuffle_annotators`` for the shuffled-ids control.
* ``type_policies``: the arm trains several policies (EM-DPO + MinMax-DPO); ``badpo.engine.mixture``
  orchestrates them above the one-policy loop, each policy's M-step weighted by
  :class:`TypeWeights`. The pure maths of that arm (vote halves, the E-step posterior, the utilities
  and the minimax mixture) is the last section of this module.

Options that mean the same for every arm with a learned theta (warm start, declared subset,
fixed offset) live in ``TrainConfig.bias``. Every loss adds the bias logit to its DPO logit, so
each method runs with every bias variant; where that makes no sense it is said in the row.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from badpo.core.bias import VARIANT_FACTS
from badpo.core.config import ConfigError, from_dict
from badpo.core.losses import ba_dpo_loss, ipo_loss, rdpo_length_term

# the optional views of a JudgmentBatch, named by what a method lists in ``needs``
NEEDS = ("lengths", "token_logratios", "sample_seeds")


@dataclass(frozen=True)
class JudgmentBatch:
    """The J judgments of one micro-batch as a method's loss sees them (all ``[J]`` on one device).

    ``chosen_lengths`` / ``rejected_lengths`` (response tokens, ``needs: lengths``) and
    ``chosen_token_logratios`` / ``rejected_token_logratios`` (per judgment, the response's
    per-token log pi - log pi_ref, ``needs: token_logratios``) and ``sample_seeds``
    (``needs: sample_seeds``: a seed per judgment that depends only on the run's seed, the step
    and the judgment, so a draw is the same whatever the micro-batch split and after a resume)
    are None unless asked for.
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


@dataclass(frozen=True)
class LossTerms:
    """Per-judgment losses and the detached implicit rewards logged beside them, each ``[J]``."""

    losses: Tensor
    chosen_rewards: Tensor
    rejected_rewards: Tensor


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

    def __post_init__(self) -> None:
        if not self.tau > 0:
            raise ConfigError(f"method_params.tau: must be > 0, got {self.tau}")


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


MAX_TYPES = 10  # the minimax solver enumerates C(2K, K) bases: 184,756 at K = 10


@dataclass(frozen=True)
class EMParams:
    types: int = 3  # K type policies (the paper: the planted number of classes)
    rounds: int = 4  # EM rounds: an M-step on one half of the votes, then an E-step on the other
    round_steps: int = 200  # optimizer steps of each type policy per round

    def __post_init__(self) -> None:
        for key, low, high in (("types", 1, MAX_TYPES), ("rounds", 1, None), ("round_steps", 1, None)):
            value = getattr(self, key)
            if value < low or (high is not None and value > high):
                bound = f"[{low}, {high}]" if high is not None else f">= {low}"
                raise ConfigError(f"method_params.{key}: must be {'in ' if high else ''}{bound}, "
                                  f"got {value}")

    def total_steps(self, steps: int) -> int:
        """Optimizer steps of the whole arm: K x (rounds x round_steps + steps)."""
        return self.types * (self.rounds * self.round_steps + steps)


# --------------------------------------------------------------------------------------- losses
def ba_dpo_terms(batch: JudgmentBatch, params: Any = None) -> LossTerms:
    """-log sigmoid(u + b): DPO with the bias logit (eq. barp_dpo_loss)."""
    return LossTerms(*ba_dpo_loss(batch.policy_chosen, batch.policy_rejected, batch.reference_chosen,
                                  batch.reference_rejected, batch.bias_logit, batch.beta))


def r_dpo_terms(batch: JudgmentBatch, params: RDPOParams) -> LossTerms:
    """R-DPO: -log sigmoid(u + alpha (|y_w| - |y_l|) + b), lengths in response tokens (EOS
    included); alpha = 0 is BA-DPO (DPO without a bias)."""
    term = rdpo_length_term(batch.chosen_lengths, batch.rejected_lengths, params.alpha)
    return ba_dpo_terms(dataclasses.replace(batch, bias_logit=batch.bias_logit + term.to(batch.bias_logit)))


def ipo_terms(batch: JudgmentBatch, params: IPOParams) -> LossTerms:
    """IPO: (h + b - 1 / (2 tau))^2 with h the log-ratio margin (u at beta = 1); the bias logit
    enters the margin (b = 0 under ``ipo``: plain IPO). Rewards are logged at the config's beta."""
    losses = ipo_loss(batch.policy_chosen, batch.policy_rejected, batch.reference_chosen,
                      batch.reference_rejected, params.tau, bias_logit=batch.bias_logit)
    return LossTerms(losses, batch.beta * (batch.policy_chosen - batch.reference_chosen).detach(),
                     batch.beta * (batch.policy_rejected - batch.reference_rejected).detach())


def sampo_terms(batch: JudgmentBatch, params: Any = None) -> LossTerms:
    """SamPO: the longer response's per-token log-ratios are down-sampled, without replacement, to
    the shorter response's token count (positions drawn with the judgment's ``sample_seeds``), so
    both contribute equally many terms to u; then -log sigmoid(u + b). Equal lengths: DPO."""
    chosen, rejected = [], []
    for i, (c, r) in enumerate(zip(batch.chosen_token_logratios, batch.rejected_token_logratios)):
        c, r = _down_sample(c, r, int(batch.sample_seeds[i]))
        chosen.append(c.sum())
        rejected.append(r.sum())
    chosen_ratio, rejected_ratio = torch.stack(chosen), torch.stack(rejected)
    zeros = torch.zeros_like(chosen_ratio)
    losses, chosen_rewards, rejected_rewards = ba_dpo_loss(
        chosen_ratio, rejected_ratio, zeros, zeros, batch.bias_logit, batch.beta)
    return LossTerms(losses, chosen_rewards, rejected_rewards)


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


# ------------------------------------------------------------------------------ group weights
class GroupWeights:
    """Loss weights q_g over groups, moved by exponentiated gradient after every optimizer step.

    Step objective: sum over the groups present in the step of q'_g L_g, with L_g the group's
    mean loss in the step and q' the weights renormalised over those groups, so a judgment of
    group g weighs q'_g N / n_g (N judgments in the step, n_g of them in g; the weights of a step
    sum to N, so one group gives every judgment weight 1: DPO). After the step
    q_g <- q_g exp(direction * eta * L_g) for the groups present, then q is renormalised:
    direction +1 moves weight toward the highest-loss group (Group-DRO), -1 away from it
    (Crowd-PrefRL). The state is q (checkpointed); the step's loss sums are scratch.
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
        if len(self.names) > 12:  # per annotator: the spread, not every weight
            return {"group_weight_max": float(self.q.max()), "group_weight_min": float(self.q.min())}
        return {"group_weight": dict(zip(self.names, self.q.tolist()))}

    def state_dict(self) -> dict[str, Tensor]:
        return {"q": self.q.clone()}

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        self.q = state["q"].to(torch.float64).clone()


def _group_weights(direction: int):
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


# ----------------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Method:
    """One arm: its loss, typed parameters, extra views, weighting, and bias variant."""

    bias_variant: str  # a badpo.core.bias.VARIANTS entry; "none" learns no theta
    description: str
    loss: Callable[[JudgmentBatch, Any], LossTerms] = ba_dpo_terms
    params: type = NoParams
    needs: frozenset[str] = frozenset()
    weighting: Callable[..., GroupWeights] | None = None  # (params, annotator_index, annotators, classes)
    shuffle_annotators: bool = False  # reassign every judgment to a uniformly random annotator
    type_policies: bool = False  # several policies, trained by badpo.engine.mixture (EM-DPO)

    @property
    def learns_theta(self) -> bool:
        return self.bias_variant != "none"

    def parse_params(self, values: Mapping[str, Any]) -> Any:
        """``method_params`` as this method's typed parameters; unknown keys name the method."""
        if self.params is NoParams and values:
            raise ConfigError(f"method_params: this method takes no parameters, got {sorted(values)}")
        return from_dict(self.params, values, prefix="method_params")


LEARNED_VARIANTS = tuple(v.name for v in VARIANT_FACTS.values() if v.learns_theta)

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
    "r_dpo": Method(
        "none", "R-DPO: alpha (|y_w| - |y_l|) in tokens added to the DPO logit (Park et al. 2024)",
        loss=r_dpo_terms, params=RDPOParams, needs=frozenset({"lengths"}),
    ),
    "sampo": Method(
        "none", "SamPO: the longer response's token log-ratios down-sampled to the shorter's count "
        "(Lu et al. 2024)", loss=sampo_terms, needs=frozenset({"token_logratios", "sample_seeds"}),
    ),
    "group_dro_dpo": Method(
        "none", "Group-DRO DPO: group loss weights moved toward the highest-loss group (eta 0.5)",
        params=GroupParams, weighting=_group_weights(+1),
    ),
    "crowd_prefrl": Method(
        "none", "Crowd-PrefRL: annotator loss weights moved away from the highest-loss annotator",
        params=CrowdParams, weighting=_group_weights(-1),
    ),
    "ipo": Method("none", "IPO: (h - 1/(2 tau))^2, h the log-ratio margin (Azar et al. 2024)",
                  loss=ipo_terms, params=IPOParams),
    # BA-IPO: IPO's squared loss with the bias logit inside the margin, one row per learned
    # variant as for BA-DPO, so that `method=` alone names the arm (its theta is on the scale of
    # IPO's log-ratio margin h, not of a Bradley-Terry logit: docs/training.md)
    **{f"ba_ipo_{variant}": Method(
        variant, f"BA-IPO ({variant}): (h + theta_k . dg - 1/(2 tau))^2", loss=ipo_terms,
        params=IPOParams) for variant in LEARNED_VARIANTS},
    "em_dpo": Method(
        "none", "EM-DPO + MinMax-DPO: K type policies, annotator type probabilities by EM, mixture "
        "weights minimising the largest regret (Chidambaram et al. 2024)",
        params=EMParams, type_policies=True,
    ),
}
# Each single-policy baseline with a learned bias: its loss already adds the bias logit, so the
# combination is the baseline's row with a learned variant (e.g. r_dpo_ba_shared_mean corrects
# length by alpha and explains a declared name bias by theta). em_dpo has none: its type policies
# would each need their own theta, which the paper's EM-DPO does not have.
METHODS.update({
    f"{name}_ba_{variant}": dataclasses.replace(
        METHODS[name], bias_variant=variant, description=f"{METHODS[name].description}; plus BA-DPO's "
        f"bias logit ({variant})")
    for name in ("r_dpo", "sampo", "group_dro_dpo", "crowd_prefrl") for variant in LEARNED_VARIANTS
})


def get_method(name: str) -> Method:
    """The arm called ``name``; an unknown name is a ConfigError listing the known ones."""
    if name not in METHODS:
        raise ConfigError(f"method: unknown method {name!r}; choose one of {sorted(METHODS)}")
    return METHODS[name]


def sample_seeds(seed: int, step: int, judgments: Tensor) -> Tensor:
    """One int64 seed per judgment from (run seed, step, judgment index): a fixed affine hash, so
    a judgment's draw does not depend on its micro-batch or on resuming."""
    base = (seed * 1_000_003 + step * 97_409) % (2**31 - 1)
    return (judgments.long().cpu() * 2_654_435_761 + base) % (2**31 - 1)



# ------------------------------------------------------------ EM-DPO and MinMax-DPO: pure maths
# Notation: A annotators, K types (one policy each), N votes (judgments); gamma[a, k] is the
# probability that annotator a is of type k; u_k(j) the DPO margin of type k's policy on vote j.
def vote_halves(annotator_index: Tensor, annotators: int, seed: int) -> Tensor:
    """``[N]`` 0 / 1: each annotator's votes, in a random order drawn from ``seed``, go alternately
    to half 0 and half 1 (half 0 takes the odd one). EM-DPO's rounds train on one half and score
    the other, swapping every round."""
    index = annotator_index.long().cpu().numpy()
    if len(index) and not 0 <= index.min() <= index.max() < annotators:
        raise ValueError(f"vote_halves: annotator indices must lie in [0, {annotators})")
    keys = np.random.default_rng([seed, 0x4A1F]).random(len(index))
    order = np.lexsort((keys, index))  # by annotator, then in random order
    first = np.searchsorted(index[order], index[order], side="left")  # each group's first position
    half = np.empty(len(index), dtype=np.int64)
    half[order] = (np.arange(len(index)) - first) % 2
    return torch.from_numpy(half)


def initial_type_probabilities(annotators: int, types: int, seed: int) -> Tensor:
    """``[A, K]`` float64: every annotator's gamma drawn from a flat Dirichlet(1, ..., 1), seeded.
    Random, so that the K type policies differ from the first M-step on (equal gammas would train
    K equal policies, which the E-step could never tell apart)."""
    draws = np.random.default_rng([seed, 0xD1]).dirichlet(np.ones(types), size=annotators)
    return torch.from_numpy(draws)


def annotator_loglik(margins: Tensor, annotator_index: Tensor, annotators: int) -> tuple[Tensor, Tensor]:
    """(``[A, K]`` sum over each annotator's votes of log sigmoid(u_k), ``[A]`` its vote count) for
    ``margins`` ``[H, K]`` of H votes cast by ``annotator_index`` ``[H]``; float64."""
    index = annotator_index.long().cpu()
    logliks = torch.nn.functional.logsigmoid(margins.double().cpu())
    total = torch.zeros(annotators, margins.shape[1], dtype=torch.float64).index_add_(0, index, logliks)
    return total, torch.bincount(index, minlength=annotators).double()


def type_log_posterior(loglik: Tensor, prior: Tensor) -> Tensor:
    """The E-step: log gamma ``[A, K]`` with gamma[a, k] proportional to prior[k] exp(loglik[a, k]).

    Computed as a log-softmax over k (the log-sum-exp subtracts each row's maximum), so an
    annotator with hundreds of votes, whose log-likelihoods are far below -745, still gets exact
    finite log-probabilities rather than 0 / 0. A prior of 0 is raised to the smallest float64, so
    a type nobody holds keeps finite (vanishing) probabilities.
    """
    tiny = torch.finfo(torch.float64).tiny
    log_prior = prior.double().clamp(min=tiny).log()
    return torch.log_softmax(loglik.double() + log_prior[None, :], dim=1)


def type_utilities(loglik: Tensor, votes: Tensor, probabilities: Tensor) -> Tensor:
    """U ``[K, K]``: U[k, j] = sum_a gamma[a, k] loglik[a, j] / sum_a gamma[a, k] votes[a], the mean
    log sigmoid(u_j) of policy j over type k's votes (each annotator's counted with its
    probability of type k). A type with no vote gets a row of 0 (no regret either way)."""
    gamma = probabilities.double()
    weighted = gamma.T @ loglik.double()
    counts = gamma.T @ votes.double()
    return torch.where(counts[:, None] > 0, weighted / counts.clamp(min=1e-300)[:, None],
                       torch.zeros_like(weighted))


def minimax_weights(utilities) -> tuple[np.ndarray, np.ndarray]:
    """MinMax-DPO: mixture weights w on the simplex minimising max_k R_k(w), with the regret
    R_k(w) = max_j U[k, j] - sum_j w_j U[k, j]; returns (w ``[J]``, R(w) ``[K]``), float64.

    Solved exactly: with G = U - max_j U[k, j] (row-wise), this is the linear programme
    max t s.t. G w >= t, sum w = 1, w >= 0, whose optimum is attained at a basic solution: w > 0
    on a set S of policies, the constraints of a set T of |S| types tight. Every (S, T) pair's
    square system [G_TS -1; 1 0] (w_S, t) = (0, 1) is solved; each solution with w_S >= 0 is a
    point of the simplex, scored by its true min_k (G w)_k, and the best is kept. Ties (several
    optimal points) are averaged, which stays optimal (the optimal set is convex) and gives a
    symmetric U a symmetric w. Cost: sum_s C(K, s)^2 = C(2K, K) small solves (19 at K = 3).
    """
    regret_free = np.asarray(utilities, dtype=np.float64)
    if regret_free.ndim != 2 or 0 in regret_free.shape or not np.isfinite(regret_free).all():
        raise ValueError(f"minimax_weights: utilities must be a finite [K, J] matrix, got {regret_free}")
    gains = regret_free - regret_free.max(axis=1, keepdims=True)  # -R_k of each pure policy
    types, policies = gains.shape
    tolerance = 1e-12 * max(1.0, float(np.abs(gains).max()))
    candidates = []
    for size in range(1, min(types, policies) + 1):
        system, rhs = np.zeros((size + 1, size + 1)), np.zeros(size + 1)
        system[:size, size], system[size, :size], rhs[size] = -1.0, 1.0, 1.0
        for support in itertools.combinations(range(policies), size):
            for tight in itertools.combinations(range(types), size):
                system[:size, :size] = gains[np.ix_(tight, support)]
                try:
                    solution = np.linalg.solve(system, rhs)
                except np.linalg.LinAlgError:  # singular: not a basis
                    continue
                w_support = solution[:size]
                if not np.isfinite(w_support).all() or (w_support < -tolerance).any():
                    continue
                w = np.zeros(policies)
                w[list(support)] = np.clip(w_support, 0.0, None)
                candidates.append(w / w.sum())
    points = np.array(candidates)
    values = (points @ gains.T).min(axis=1)
    optimal = np.unique(np.round(points[values >= values.max() - tolerance], 12), axis=0)
    w = optimal.mean(axis=0)
    w /= w.sum()
    return w, -(gains @ w) + 0.0  # + 0.0: no -0.0


class TypeWeights:
    """The M-step of one type policy: fixed loss weights, vote j weighing its annotator's
    probability gamma_j of the type, renormalised over the step to sum to the step's judgment
    count N: w_j = N gamma_j / sum_step gamma. The step's loss is then the gamma-weighted mean of
    its DPO losses (equal gammas, as at K = 1, give every weight 1: DPO). Built from log gamma
    (float64, the maximum of the step subtracted), so a step whose gammas all underflow is still
    weighted by their ratios. Nothing moves between steps; the weights are checkpointed with the
    run like any weighting's state."""

    def __init__(self, log_probability: Tensor):
        self.log_probability = log_probability.double().cpu()

    def weights(self, judgments: Tensor, step_judgments: Tensor) -> Tensor:
        step = self.log_probability[step_judgments.cpu()]
        top = step.max()
        total = torch.exp(step - top).sum()
        shares = torch.exp(self.log_probability[judgments.cpu()] - top) / total
        return (shares * len(step_judgments)).float().to(judgments.device)

    def observe(self, judgments: Tensor, losses: Tensor) -> None:
        """Nothing to observe: the weights are fixed for the run."""

    def update(self, reduce: Callable[[Tensor], Tensor]) -> dict[str, Any]:
        return {}

    def state_dict(self) -> dict[str, Tensor]:
        return {"log_probability": self.log_probability.clone()}

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        self.log_probability = state["log_probability"].double().clone()

__all__ = ["METHODS", "NEEDS", "Method", "JudgmentBatch", "LossTerms", "GroupWeights", "get_method",
           "sample_seeds", "ba_dpo_terms", "r_dpo_terms", "ipo_terms", "sampo_terms", "EMParams",
           "TypeWeights", "vote_halves", "initial_type_probabilities", "annotator_loglik",
           "type_log_posterior", "type_utilities", "minimax_weights"]
