"""The policy's step kept orthogonal to the declared attributes (``bias.level: orthogonal``).

**Why.** In the BA-DPO logit u_i + theta . a_i (a_i = g(y_w) - g(y_l)) the policy's own lean
along the attributes, c (u_i = q_i + c . a_i, q_i what it learned about quality), enters only
through the sum c + theta: the labels cannot split it. Gradient descent moves both by the same
residual, so whenever the labels ask for more level than theta holds (quality the policy learns
raises the level the labels imply given its margins, docs/theta.md), c climbs beside theta,
split by their rates. The paper means theta to take all of it and the policy to keep the
reference's lean (c = 0). Here theta does: on every micro-batch the gradient reaching the
policy's log-probs has its least-squares component along the batch's a_i removed, so the step
moves c by nothing and q by its partial (Frisch-Waugh) gradient, the one the joint fit of q and
theta gives. It is theta profiled out of the policy's step: the limit of a theta learned
infinitely faster than the policy. Theta's own gradient is unchanged.

**What it assumes.** That the attribute's linear share of the labels is all bias: quality that
goes with an attribute within a batch is taken from the policy's step too (BA-DPO's own
assumption, made here for every step, not only on average).

**Cost.** A pseudo-inverse of a ``[J, d]`` matrix per side (chosen, rejected) and micro-batch,
on the same directions (one could serve both; it is a small matrix). The step gives up d of the
micro-batch's independent directions: its distinct pairs, where a pair's judgments share their
sides (``pair_grouped``) or stand as rows of their own (``per_judgment``, where one pair's rows
move the policy along one direction). So a micro-batch of few pairs loses a visible share of its
quality signal, and one of d pairs or fewer loses all of it: the config checks refuse
``micro_batch_size`` <= d, which counts items and so cannot see a per-judgment micro-batch that
holds few distinct pairs.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["orthogonal_to", "project_out"]


def project_out(gradient: Tensor, directions: Tensor) -> Tensor:
    """``gradient`` ``[J]`` less its least-squares fit on the columns of ``directions`` ``[J, d]``
    (in float64; a zero or repeated column is handled by the pseudo-inverse). The result r has
    ``directions.T @ r == 0``."""
    d, g = directions.double(), gradient.double()
    return (g - d @ (torch.linalg.pinv(d) @ g)).to(gradient.dtype)


class _Orthogonal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values: Tensor, directions: Tensor) -> Tensor:
        ctx.save_for_backward(directions)
        return values.view_as(values)

    @staticmethod
    def backward(ctx, gradient: Tensor) -> tuple[Tensor, None]:
        (directions,) = ctx.saved_tensors
        return project_out(gradient, directions), None


def orthogonal_to(values: Tensor, directions: Tensor) -> Tensor:
    """``values`` ``[J]`` unchanged; the gradient that flows back through them is
    :func:`project_out` of ``directions`` ``[J, d]`` (detached: no gradient reaches them)."""
    if values.shape[0] != directions.shape[0]:
        raise ValueError(f"orthogonal_to: {values.shape[0]} values against {directions.shape[0]} rows of directions")
    return _Orthogonal.apply(values, directions.detach())
