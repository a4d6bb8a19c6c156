"""Theta's level that quality does not shrink: a logistic fit with a per-pair random effect.

**Why.** With the policy at the reference every margin is 0, so a fit of the labels explains them
by theta . a alone (:func:`badpo.core.level_step.reference_start`). Quality is left out, and a logistic
coefficient with a term left out shrinks toward 0 (it is not collapsible): for q ~ N(0, tau^2),
E sigma(q + x) ~ sigma(x / sqrt(1 + pi tau^2 / 8)), so quality worth 2 logits leaves about 60%
of the level. Real preference data carry strong quality differences: the shrinkage is the typical
case, not an edge case.

**The model.** Pair p compares two responses; every judgment of it sees the same quality
difference q_p (first side minus second, in its first-seen orientation), drawn N(0, tau^2)
independently of the attributes. Judgment i of pair p chose the first side (s_i = +1) or the
second (s_i = -1), with a_i = g(chosen) - g(rejected) and a fixed offset o_i:

    P(judgment i as recorded | q_p) = sigma(s_i q_p + theta . a_i + o_i)

and the judgments of a pair are independent given q_p. Integrating q_p out pair by pair,

    log L(theta, tau) = sum_p log E_v prod_{i in p} sigma(s_i tau v + theta . a_i + o_i),  v ~ N(0, 1),

by quadrature (a trapezoid rule whose step follows tau). At tau = 0 this is the plain fit (the
marginal level). For a fixed tau, log L is concave in theta (the integrand is log-concave jointly
in (theta, v): Prekopa), so theta is Newton's; tau is a golden-section search of the profile.

**What identifies tau.** How much more a pair's annotators agree than theta . a explains: a pair
judged once says nothing about tau. With too few pairs judged twice or more the fit falls back to
the marginal level and says so (``identified`` False), with the factor a typical spread would put
on it.

**What it assumes** (docs/theta.md, "Where theta starts"): quality independent of the
attributes within a pair's orientation (quality that goes with an attribute is read as bias here,
as by every method that sees only labels; quality that goes against it raises the level);
annotators that differ in theta_k but share their noise (one pooled level, the annotators'
disagreement beyond quality read as theirs); a normal quality spread. Only the logistic link
shrinks: least squares (IPO's squared link) is collapsible and keeps the plain fit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from badpo.core.pair_cells import PairCells, pair_cells

__all__ = ["PairEffectFit", "pair_effect_level", "pair_log_likelihood", "pair_quality", "MAX_CONDITIONAL_ATTRIBUTES",
           "MIN_REPEATED_PAIRS", "MIN_REPEATED_SHARE", "TYPICAL_SPREAD"]

TAIL = 8.5  # the quadrature grid spans [-TAIL, TAIL] standard deviations of the quality
MAX_SPREAD = 12.0  # tau's search interval [0, MAX_SPREAD] logits: past ~10 every pair is unanimous
MIN_REPEATED_PAIRS = 30  # fewer pairs judged at least twice: tau is not identified, fall back
MIN_REPEATED_SHARE = 0.2  # nor when under this share of the judgments sit in such pairs
TYPICAL_SPREAD = 2.0  # the quality spread the fallback's note quotes (logits; MultiPref-like data)
# attributes past which the spread is not fitted: each Newton step costs pairs x nodes x d^2 and the
# profile takes ~25 of them (200 regex attributes on 7,200 judgments took minutes and GBs, issue 76)
MAX_CONDITIONAL_ATTRIBUTES = 32


@dataclass(frozen=True)
class PairEffectFit:
    """The conditional level (``level``, ``[d]``) with its standard errors, the quality spread
    ``spread`` (tau, logits), the marginal level (tau = 0: today's reference start) and what
    identified them. ``identified`` False: ``level`` is the marginal one and ``note`` says why."""

    level: list[float]
    se: list[float]
    spread: float
    marginal: list[float]
    pairs: int
    repeated_pairs: int
    identified: bool
    note: str | None = None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _nodes(spread: float) -> tuple[Tensor, Tensor]:
    """Nodes v_m and log-weights of E f(v) ~ sum_m w_m f(v_m) for v ~ N(0, 1): the trapezoid rule
    on a uniform grid over [-8.5, 8.5] (the normal's mass outside is 2e-17). For an integrand
    analytic in a strip of half-width d its error falls as exp(-2 pi d / h); prod sigma(s tau v + x)
    has its poles pi / tau away from the real axis, so a step h = min(0.25, pi / (5 tau)) keeps the
    error near e^-10pi at every tau (Gauss-Hermite's 48 nodes were off by 1e-2 at tau = 5)."""
    step = min(0.25, math.pi / (5 * max(float(spread), 1e-12)))
    half = math.ceil(TAIL / step)
    v = torch.arange(-half, half + 1, dtype=torch.float64) * step
    return v, torch.log(torch.full_like(v, step)) - v ** 2 / 2 - 0.5 * math.log(2 * math.pi)


def pair_log_likelihood(theta: Tensor, spread: Tensor | float, directions: Tensor, pair: Tensor,
                        side: Tensor, offsets: Tensor) -> Tensor:
    """log L(theta, tau) of the module docstring, a float64 scalar (differentiable in both).

    ``directions`` ``[n, d]`` are the a_i, ``pair`` ``[n]`` the pair index of each judgment (0..P-1),
    ``side`` ``[n]`` +1 where the judgment chose its pair's first side, -1 where the second,
    ``offsets`` ``[n]`` the o_i. Computed on the distinct pairs (:mod:`badpo.core.pair_cells`)."""
    cells = pair_cells(directions.double().reshape(len(pair), -1), pair, side, offsets)
    return _cells_log_likelihood(theta, spread, cells)


def _cells_joint(theta: Tensor, spread: Tensor | float, cells: PairCells) -> tuple[Tensor, Tensor, Tensor]:
    """(log of node m's weight times distinct pair u's likelihood given v_m ``[U, M]``; each cell's
    x = tau v + theta . b + c ``[C, M]``; the nodes v)."""
    v, log_w = _nodes(float(spread.detach()) if isinstance(spread, Tensor) else float(spread))
    x = spread * v[None, :] + (cells.b @ theta.double())[:, None] + cells.c[:, None]
    f = cells.k[:, None] * F.logsigmoid(x) + cells.l[:, None] * F.logsigmoid(-x)
    return _segment_sum(f, cells.bounds) + log_w[None, :], x, v


def _cells_log_likelihood(theta: Tensor, spread: Tensor | float, cells: PairCells) -> Tensor:
    joint, _, _ = _cells_joint(theta, spread, cells)
    return (cells.weight * torch.logsumexp(joint, dim=1)).sum()


def _pair_joint(theta: Tensor, spread: Tensor | float, directions: Tensor, pair: Tensor, side: Tensor,
                offsets: Tensor) -> tuple[Tensor, Tensor]:
    """(log of node m's weight times pair p's likelihood given v_m, ``[P, M]``; the nodes v_m):
    what both the likelihood (its logsumexp) and the pairs' posterior quality (its softmax) read.
    ``pair`` holds indices 0..P-1."""
    v, log_w = _nodes(float(spread.detach()) if isinstance(spread, Tensor) else float(spread))
    z = (side.double()[:, None] * spread * v[None, :] + (directions.double() @ theta)[:, None]
         + offsets.double()[:, None])  # [n, M]
    per_pair = torch.zeros(int(pair.max()) + 1 if len(pair) else 0, len(v), dtype=torch.float64)
    return per_pair.index_add(0, pair, F.logsigmoid(z)) + log_w[None, :], v


def pair_quality(theta: Tensor, spread: float, directions: Tensor, pair: Tensor, side: Tensor,
                 offsets: Tensor | None = None) -> Tensor:
    """E[q_p | the pair's judgments] under the model at (theta, tau), one value per judgment
    (its pair's, in the pair's first-seen orientation), ``[n]`` float64: what the labels say of
    each pair's quality once theta . a has explained its share. The policy learns from the labels
    alone, so the quality it can learn is a function of them; this is that function's best guess.
    Arguments as :func:`pair_log_likelihood`; 0 everywhere at tau = 0 (no spread, no signal)."""
    if spread <= 0 or len(pair) == 0:
        return torch.zeros(len(pair), dtype=torch.float64)
    _, dense = torch.unique(pair, return_inverse=True)
    a = directions.double().reshape(len(pair), -1)
    o = torch.zeros(len(pair), dtype=torch.float64) if offsets is None else offsets
    joint, v = _pair_joint(theta.double(), spread, a, dense, side, o)
    return (spread * torch.softmax(joint, dim=1) @ v)[dense]


def _newton_in_theta(theta: Tensor, spread: float, cells: PairCells, iterations: int = 50) -> tuple[Tensor, float]:
    """argmax_theta log L(theta, tau) for a fixed tau, by Newton with backtracking (concave), on the
    distinct pairs (weights w_u). With pi_um the posterior weight of node m in pair u and
    G_um = sum_{cells j of u} (k_j sigma(-x_jm) - l_j sigma(x_jm)) b_j, grad = sum_u w_u E_pi G, and the
    Hessian is -sum_j w_u(j) E_pi[(k_j + l_j) sigma(x) sigma(-x)] b_j b_j^T + sum_u w_u Cov_pi(G)."""
    b, w, member = cells.b, cells.weight, cells.member

    def terms(point: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        joint, x, _ = _cells_joint(point, spread, cells)
        return x, joint, (w * torch.logsumexp(joint, dim=1)).sum()

    for _ in range(iterations):
        x, joint, value = terms(theta)
        post = torch.softmax(joint, dim=1)  # [U, M]
        r = cells.k[:, None] * torch.sigmoid(-x) - cells.l[:, None] * torch.sigmoid(x)  # [C, M]
        g = _segment_sum(r[:, :, None] * b[:, None, :], cells.bounds)  # G_um, [U, M, d]
        mean_g = torch.einsum("um,umd->ud", post, g)
        gradient = (w[:, None] * mean_g).sum(0)
        curvature = (post[member] * (cells.k + cells.l)[:, None] * torch.sigmoid(x) * torch.sigmoid(-x)).sum(1)
        hessian = (-(b * (curvature * w[member])[:, None]).T @ b
                   + torch.einsum("u,um,umd,ume->de", w, post, g, g) - (w[:, None] * mean_g).T @ mean_g)
        try:
            step = torch.linalg.solve(-hessian, gradient)
        except RuntimeError:
            return theta, float(value)
        if step.abs().max() < 1e-9 or float(gradient @ step) < 1e-10:  # converged: what is left
            return theta, float(value)                                   # is below float noise
        t = 1.0
        while t > 1e-6 and terms(theta + t * step)[2] < value + 1e-4 * t * float(gradient @ step):
            t /= 2.0  # Armijo backtracking
        theta = theta + t * step
    return theta, float(terms(theta)[2])


def _segment_sum(x: Tensor, bounds: Tensor) -> Tensor:
    """Sums of the row blocks [bounds[p], bounds[p + 1]) of ``x`` (float64: a cumulative sum's
    differences lose ~1e-13 of the total, far below a fit's tolerance; index_add is 10x slower)."""
    total = torch.cat([torch.zeros_like(x[:1]), x.cumsum(0)])
    return total[bounds[1:]] - total[bounds[:-1]]


def _golden(profile, low: float, high: float, tol: float = 1e-3) -> float:
    """The maximiser of a unimodal ``profile`` on [low, high] by golden-section search."""
    ratio = (math.sqrt(5) - 1) / 2
    x1, x2 = high - ratio * (high - low), low + ratio * (high - low)
    f1, f2 = profile(x1), profile(x2)
    while high - low > tol:
        if f1 < f2:
            low, x1, f1 = x1, x2, f2
            x2 = low + ratio * (high - low)
            f2 = profile(x2)
        else:
            high, x2, f2 = x2, x1, f1
            x1 = high - ratio * (high - low)
            f1 = profile(x1)
    return (low + high) / 2


def _repeated(pair: Tensor, n_pairs: int) -> tuple[int, float]:
    """Pairs judged at least twice, and the share of the judgments that sit in them."""
    counts = torch.bincount(pair, minlength=n_pairs)
    repeated = counts >= 2
    return int(repeated.sum()), float(counts[repeated].sum()) / max(len(pair), 1)


def pair_effect_level(directions: Tensor, pair: Tensor, side: Tensor, offsets: Tensor | None = None) -> PairEffectFit:
    """The level theta of the module's model, its quality spread tau and the marginal level.

    Arguments as :func:`pair_log_likelihood` (``offsets`` default 0). Coordinates that no judgment
    touches are 0 with a NaN error. Falls back to the marginal fit (``identified`` False) when fewer
    than :data:`MIN_REPEATED_PAIRS` pairs, or under :data:`MIN_REPEATED_SHARE` of the judgments, have
    two judgments or more. Raises ValueError when no finite fit exists (an attribute side that won
    every, or none, of its judgments): see ``reference_start`` for the one-line refusals."""
    a = directions.double().reshape(len(pair), -1)
    o = torch.zeros(len(pair), dtype=torch.float64) if offsets is None else offsets.double()
    _, pair = torch.unique(pair, return_inverse=True)  # dense 0..P-1
    n_pairs = int(pair.max()) + 1 if len(pair) else 0
    d = a.shape[1]
    touched = (a != 0).any(dim=0)
    level, se = torch.zeros(d, dtype=torch.float64), torch.full((d,), float("nan"), dtype=torch.float64)
    if not touched.any():
        return PairEffectFit(level.tolist(), se.tolist(), 0.0, level.tolist(), n_pairs, 0, False,
                             "no judgment differs in a declared attribute")
    a_t, s = a[:, touched], side.double()
    scale = a_t.abs().amax(dim=0)  # fit on a column scale of 1, so the iterations act on logits
    a_s = a_t / scale
    cells = pair_cells(a_s, pair, s, o)  # the distinct pairs: the likelihood's whole input
    marginal, _ = _newton_in_theta(torch.zeros(a_s.shape[1], dtype=torch.float64), 0.0, cells)
    _check_finite(marginal)
    repeated, share = _repeated(pair, n_pairs)
    shrunk = (f"the level is the marginal fit, which quality shrinks toward 0 (at a spread of {TYPICAL_SPREAD:g} "
              f"logits the true level would be {math.sqrt(1 + math.pi * TYPICAL_SPREAD ** 2 / 8):.2f}x this one)")
    if repeated < MIN_REPEATED_PAIRS or share < MIN_REPEATED_SHARE or a_s.shape[1] > MAX_CONDITIONAL_ATTRIBUTES:
        level[touched] = marginal / scale
        se[touched] = _standard_errors(marginal, 0.0, cells, with_spread=False) / scale
        why = (f"{a_s.shape[1]} attributes are more than the {MAX_CONDITIONAL_ATTRIBUTES} the quality spread is "
               "fitted with" if a_s.shape[1] > MAX_CONDITIONAL_ATTRIBUTES else
               f"only {repeated} pairs ({share:.0%} of the judgments) were judged twice or more, so the "
               "quality spread is not identified")
        return PairEffectFit(level.tolist(), se.tolist(), 0.0, level.tolist(), n_pairs, repeated, False,
                             f"{why}: {shrunk}")
    found: dict[float, Tensor] = {}

    def profile(spread: float) -> float:
        start = found[min(found, key=lambda t: abs(t - spread))] if found else marginal
        theta, value = _newton_in_theta(start.clone(), spread, cells)
        found[spread] = theta
        return value

    spread = _golden(profile, 0.0, MAX_SPREAD)
    if profile(0.0) >= profile(spread):  # the boundary: no spread beyond chance agreement
        spread = 0.0
    theta = found[spread]
    _check_finite(theta)
    level[touched] = theta / scale
    marginal_level = torch.zeros(d, dtype=torch.float64)
    marginal_level[touched] = marginal / scale
    se[touched] = _standard_errors(theta, spread, cells, with_spread=spread > 0) / scale
    return PairEffectFit(level.tolist(), se.tolist(), spread, marginal_level.tolist(), n_pairs, repeated, True)


def _check_finite(theta: Tensor) -> None:
    if not torch.isfinite(theta).all() or theta.abs().max() > 30:
        raise ValueError("no finite fit (an attribute's side won every, or none, of its judgments)")


def _standard_errors(theta: Tensor, spread: float, cells: PairCells, with_spread: bool) -> Tensor:
    """sqrt(diag(inverse observed information)) of theta, tau's uncertainty included when fitted."""
    d = len(theta)

    def negative(params: Tensor) -> Tensor:
        tau = params[d] if with_spread else spread
        return -_cells_log_likelihood(params[:d], tau, cells)

    point = torch.cat([theta, torch.tensor([spread], dtype=torch.float64)]) if with_spread else theta
    information = torch.autograd.functional.hessian(negative, point)
    try:
        return torch.linalg.inv(information).diagonal()[:d].clamp_min(0).sqrt()
    except RuntimeError:
        return torch.full((d,), float("nan"), dtype=torch.float64)
