"""EM-DPO + MinMax-DPO: the pure maths of the arm (vote halves, the E-step posterior, the
utilities, the minimax mixture) and the M-step's weights. ``badpo.engine.mixture`` trains the
type policies above the one-policy loop."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from badpo.core.config import ConfigError

MAX_TYPES = 10  # the minimax solver enumerates C(2K, K) bases: 184,756 at K = 10


@dataclass(frozen=True)
class EMParams:
    types: int = 3  # K type policies (the paper: the planted number of classes)
    rounds: int = 4  # EM rounds: an M-step on one half of the votes, then an E-step on the other
    round_steps: int = 200  # optimizer steps of each type policy per round
    # continue: each type's policy goes on from round to round and into the final phase (its
    # weights and AdamW moments; each part keeps its own warmup and cosine); restart: every round
    # and the final phase start again from the reference (badpo.engine.mixture)
    policies: Literal["continue", "restart"] = "continue"

    def __post_init__(self) -> None:
        for key, low, high in (("types", 1, MAX_TYPES), ("rounds", 1, None), ("round_steps", 1, None)):
            value = getattr(self, key)
            if value < low or (high is not None and value > high):
                bound = f"[{low}, {high}]" if high is not None else f">= {low}"
                raise ConfigError(f"method_params.{key}: must be {'in ' if high else ''}{bound}, "
                                  f"got {value}")

    @property
    def continues(self) -> bool:
        """Each type's policy goes on from its previous part rather than from the reference."""
        return self.policies == "continue"

    def total_steps(self, steps: int) -> int:
        """Optimizer steps of the whole arm: K x (rounds x round_steps + steps)."""
        return self.types * (self.rounds * self.round_steps + steps)



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

    def summary(self) -> dict[str, Any]:
        """Nothing moved (the type probabilities are the E-step's, in the mixture's own record)."""
        return {}

    def state_dict(self) -> dict[str, Tensor]:
        return {"log_probability": self.log_probability.clone()}

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        self.log_probability = state["log_probability"].double().clone()
