"""The level step: trusted annotators set the shared level of theta (``bias.trusted_level``).

**Setting.** Judgment i has a pre-bias logit z_i (BA-DPO: the margin u_i; a reward model: the
reward difference; R-DPO: u_i plus its length term), a bias logit b_i = (theta_k(i) + offset) . a_i
with a_i = g(y_w) - g(y_l) on the declared coordinates, and a loss l(z_i + b_i) whose shape is the
method's *link*: logistic, l(z) = log(1 + e^-z) (DPO, Bradley-Terry), or squared,
l(z) = (z - 1/(2 tau))^2 (IPO). T is the set of judgments by trusted annotators (theta_k fixed),
U the rest.

**The flat direction.** Move the policy's margins by s . a_i (s in R^d: a shift of the policy
along the attributes, what a policy that absorbed bias carries) and every untrusted theta_k by
delta. The loss becomes

    L(s, delta) = sum_T l(z_i + b_i + s . a_i) + sum_U l(z_i + b_i + (s + delta) . a_i).

Without trusted judgments L depends on s + delta only: the level is not identified (Corollary
"Reward-bias degeneracy"). With them the minimiser is unique (when the two sums are strictly
convex in their argument) and decouples into two d-dimensional problems, because the trusted sum
depends on s alone and the untrusted one on s + delta alone:

    s_hat = argmin_s sum_T l(z_i + b_i + s . a_i)    (how far the margins are off along a,
                                                       measured by unbiased annotators)
    t_hat = argmin_t sum_U l(z_i + b_i + t . a_i)    (the untrusted judgments' own best shift)
    delta_hat = t_hat - s_hat.

**Why a step, and what it does.** Gradient descent separates s from delta only through the
trusted judgments' share of the *policy's* gradient, so it crawls along the flat direction; theta's
own Adam then sets the level wherever the policy's margins happen to be (the paper's reference
anchoring, Appendix "The common offset and the choice of anchor": the policy keeps the
reference's tilt). The level step holds the margins z fixed and moves every untrusted theta_k by
delta_hat: the level the joint minimiser has along the flat direction, counted from the trusted
annotators' zero (*trusted anchoring*). Applied once to the trained model it only re-counts the
saved theta_k. Applied after every optimizer step it also changes the policy's anchor: after the
step both sums of L have their minimum in s at s_hat (the untrusted sum at s + delta_hat = t_hat),
so the whole data, not only the trusted judgments, pulls the policy's margins by s_hat along a.
That is the joint minimiser's policy, whose tilt toward the attribute is whatever the trusted
annotators' own judgments show, their sampling noise included (a noise of 0.09 in the logit is
0.9 in the policy's log-odds at beta = 0.1). The deviations eps_k and the trusted values are
left as they are.

**Noise.** s_hat carries the trusted judgments' sampling noise: for one attribute, z = 0 and a
logistic link it is the log-odds log(w / (n - w)) of the trusted annotators' n cross-group
judgments (w for the coded side), standard error sqrt(1/w + 1/(n - w)). t_hat carries the larger
untrusted set's. A level cannot be set to better than the trusted judgments allow.

**What it cannot do.** The level is relative to the policy's margins: quality the margins do not
yet explain attenuates every logistic coefficient toward 0, the trusted and the untrusted alike,
and no shift along a removes that (docs/measurements.md, "Trusted annotators").

Each minimisation is Newton's method with backtracking in float64. A coordinate that no
judgment of the set touches (a_ij = 0 for all i) has no estimate (NaN); so does every coordinate
when no finite minimiser is found (a separable set: every trusted judgment went one way).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["Link", "LOGISTIC", "squared", "offset_mle", "level_shift", "tilt_shift", "policy_tilt",
           "reference_start", "NoFiniteStart"]


@dataclass(frozen=True)
class Link:
    """How a judgment's loss depends on its logit z (bias included): l(z), l'(z), l''(z)."""

    name: str
    target: float = 0.0  # the squared link's target; unused by the logistic link

    def loss(self, z: Tensor) -> Tensor:
        if self.name == "logistic":
            return F.softplus(-z)
        return (z - self.target) ** 2

    def grad(self, z: Tensor) -> Tensor:
        if self.name == "logistic":
            return -torch.sigmoid(-z)
        return 2.0 * (z - self.target)

    def curvature(self, z: Tensor) -> Tensor:
        if self.name == "logistic":
            return torch.sigmoid(z) * torch.sigmoid(-z)
        return torch.full_like(z, 2.0)


STEP_TOL = 1e-6  # a converged Newton step, in logits (a separable set's step stays near 1 / |a|)
LOGISTIC = Link("logistic")  # -log sigmoid(z): DPO, BA-DPO, R-DPO, SamPO, Bradley-Terry


def squared(target: float) -> Link:
    """(z - target)^2: IPO's link, target 1 / (2 tau)."""
    return Link("squared", float(target))


def offset_mle(logits: Tensor, directions: Tensor, link: Link, *, max_iter: int = 50,
               tol: float = 1e-9, limit: float = 20.0) -> Tensor:
    """argmin over x in R^d of sum_i l(logits_i + x . directions_i), ``[d]`` float64.

    ``logits`` is ``[n]``, ``directions`` ``[n, d]``. Coordinates no direction touches are NaN;
    every coordinate is NaN when no minimiser with |x_j| <= ``limit`` is found in ``max_iter``
    Newton steps (separation drives a logistic x to infinity; ``limit`` logits is far beyond any
    real bias). Converged when the largest gradient entry is below ``tol`` times n and the Newton
    step below :data:`STEP_TOL`: the gradient alone vanishes on a separable set too, once every
    logit is ~20 out on the tail (taken for a minimiser at x = 20.7 - z, it set a level 18 logits
    off on SmolLM2, results/smol_multipref/abl_multipref/).
    """
    z = logits.detach().double().flatten()
    a = directions.detach().double()
    a = a.reshape(len(z), a.shape[-1] if a.dim() > 1 else 1)  # an empty set keeps its d columns
    result = torch.full((a.shape[1],), float("nan"), dtype=torch.float64)
    touched = (a != 0).any(dim=0)
    if not touched.any():
        return result
    a = a[:, touched]
    x = torch.zeros(a.shape[1], dtype=torch.float64)

    def total(point: Tensor) -> Tensor:
        return link.loss(z + a @ point).sum()

    for _ in range(max_iter):
        shifted = z + a @ x
        gradient = a.T @ link.grad(shifted)
        hessian = a.T @ (link.curvature(shifted)[:, None] * a)
        try:
            step = torch.linalg.solve(hessian, gradient)
        except RuntimeError:  # singular: the directions are collinear on this set
            return result
        # Converged: a vanishing gradient *and* Newton step. On a separable set the gradient
        # vanishes too (every logit far out on the tail) while the step stays near 1 / |a|.
        if gradient.abs().max() <= tol * max(len(z), 1) and step.abs().max() <= STEP_TOL:
            result[touched] = x
            return result
        x = _backtrack(total, x, step, gradient)
        if x.abs().max() > limit:
            return result
    return result


def _backtrack(total, x: Tensor, step: Tensor, gradient: Tensor) -> Tensor:
    """x - t * step with t halved until the Armijo condition holds (t >= 2^-30)."""
    before, slope = total(x), float(gradient @ step)
    t = 1.0
    for _ in range(30):
        candidate = x - t * step
        if total(candidate) <= before - 1e-4 * t * slope:
            return candidate
        t /= 2.0
    return x - t * step


def level_shift(logits: Tensor, directions: Tensor, trusted: Tensor, link: Link) -> tuple[Tensor, Tensor]:
    """(delta_hat, s_hat), ``[d]`` float64 each: the shift of every untrusted theta_k that puts the
    level at the joint minimiser along the flat direction, and the trusted judgments' own shift
    (module docstring). ``logits`` ``[n]`` are z_i + b_i with the current theta, ``directions``
    ``[n, d]`` the a_i, ``trusted`` ``[n]`` bool. NaN where either set has no estimate."""
    trusted = trusted.bool()
    s_hat = offset_mle(logits[trusted], directions[trusted], link)
    t_hat = offset_mle(logits[~trusted], directions[~trusted], link)
    return t_hat - s_hat, s_hat


def policy_tilt(margins: Tensor, directions: Tensor, pair: Tensor, side: Tensor,
                quality: Tensor | None = None) -> Tensor:
    """How far the policy's margins lean toward the attributes, ``[d]`` float64: the least-squares
    coefficients, without intercept, of each pair's margin on its attribute difference, both read
    in the pair's first-seen orientation and each pair counted once.

    ``margins`` ``[n]`` are the judgments' pre-bias logits z_i (chosen minus rejected), ``directions``
    ``[n, d]`` their a_i, ``pair`` ``[n]`` pair indices and ``side`` ``[n]`` +1 where the judgment
    chose its pair's first side: s_i z_i and s_i a_i are the pair's margin and difference, averaged
    over its judgments (their margins can be of different ages). Quality independent of the
    attributes within a pair's orientation has mean 0 at every attribute difference, so it does not
    move the estimate; the reference's margins are all 0, so its tilt is 0. NaN where no pair
    differs in a coordinate.

    ``quality`` ``[n]`` (optional): each judgment's pair's quality as the labels tell it, already in
    the pair's first-seen orientation (:func:`badpo.core.pair_level.pair_quality`). It joins the
    regression as one more column, so the lean is read at fixed labelled quality: where quality goes
    with or against an attribute, the quality the policy learned leans along it too, and without the
    column that lean would be counted as bias (or, against it, hide some)."""
    side = side.double()
    _, dense = torch.unique(pair, return_inverse=True)
    count = torch.zeros(int(dense.max()) + 1 if len(dense) else 0, dtype=torch.float64).index_add(
        0, dense, torch.ones(len(dense), dtype=torch.float64))

    def per_pair(values: Tensor) -> Tensor:
        total = torch.zeros(len(count), values.shape[1], dtype=torch.float64).index_add(0, dense, values)
        return total / count[:, None]

    m = per_pair((side * margins.double())[:, None])
    a = per_pair(side[:, None] * directions.double())
    result = torch.full((a.shape[1],), float("nan"), dtype=torch.float64)
    touched = (a != 0).any(dim=0)
    if not touched.any():
        return result
    design = a[:, touched]
    if quality is not None and bool((quality != 0).any()):
        design = torch.cat([design, per_pair(quality.double()[:, None])], dim=1)
    result[touched] = torch.linalg.lstsq(design, m).solution[:int(touched.sum()), 0]
    return result


def tilt_shift(logits: Tensor, margins: Tensor, directions: Tensor, pair: Tensor, side: Tensor,
               link: Link, quality: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(delta_hat, tilt), ``[d]`` float64 each: the level step with reference anchoring as its
    anchor (``bias.level: tilt``). The anchor's own shift of the margins is minus the policy's
    tilt (:func:`policy_tilt`): the shift that takes the policy back to the reference's lean. So
    delta_hat = t_hat + tilt, t_hat the judgments' own best shift of the level given the margins
    (``logits`` are z_i + b_i with the current theta). After the step the whole data pulls the
    policy's margins by -tilt along a, as trusted anchoring pulls them by s_hat: the lean the
    policy took goes to theta (read at fixed labelled quality when ``quality`` is given). NaN where
    either has no estimate."""
    tilt = policy_tilt(margins, directions, pair, side, quality)
    return offset_mle(logits, directions, link) + tilt, tilt


def _why_alone(column: Tensor) -> str:
    """Why one attribute's level has no finite fit: its side won every, or none, of the judgments
    that differ in it; or, where it did not, a few differences that dwarf the rest (a ``given:``
    value of 1e25 beside values near 1 leaves the fit only the rows at that scale)."""
    moved = column[column != 0]
    if bool((moved > 0).all()) or bool((moved < 0).all()):
        return "no finite fit (the attribute's side won every, or none, of its cross-group judgments)"
    size = moved.abs()
    return (f"no finite fit: the attribute's side won {int((moved > 0).sum())} of {moved.numel()} judgments that "
            f"differ in it, but its largest difference ({float(size.max()):.4g}) is "
            f"{float(size.max() / size.median()):.3g} times the median ({float(size.median()):.4g}), so those "
            "few rows decide the fit alone; give the values on a comparable scale")


class NoFiniteStart(ValueError):
    """:func:`reference_start` has no finite start: ``coordinates`` (0-based) are to blame, ``why``."""

    def __init__(self, coordinates: list[int], why: str) -> None:
        super().__init__(f"{coordinates}: {why}")
        self.coordinates, self.why = coordinates, why


def reference_start(directions: Tensor, logits: Tensor, link: Link) -> list[float]:
    """Theta's shared level at the conditional optimum of the loss with the policy at the reference.

    There every margin is 0 and judgment i's logit is ``logits_i`` (its fixed offset, if any) plus
    the level's term x . a_i, so the start is :func:`offset_mle` on ``directions`` ``[n, d]``, each
    column scaled to a largest |a| of 1 first (so that the search's bound is on the logit, not on
    x: a ``given:`` attribute of size 0.01 may need x = 100). A coordinate no judgment touches has
    no signal and starts at 0. No finite start is a :class:`NoFiniteStart` naming the coordinates
    to blame: those whose side won every, or none, of their cross-group judgments on their own,
    else all of them (collinear on these judgments). Why start here:
    docs/theta.md, "Where theta starts".
    """
    a = directions.double().reshape(len(logits), -1)
    scale = a.abs().amax(dim=0).clamp_min(1e-300)
    touched = (a != 0).any(dim=0)
    fit = offset_mle(logits, a / scale, link)
    if touched.any() and fit[touched].isnan().any():
        alone = [j for j in range(a.shape[1]) if touched[j]
                 and offset_mle(logits, a[:, j:j + 1] / scale[j], link).isnan().any()]
        if alone:
            raise NoFiniteStart(alone, _why_alone(a[:, alone[0]]))
        raise NoFiniteStart([j for j in range(a.shape[1]) if touched[j]], "no finite joint fit (the "
                            "attributes are collinear on these judgments: their levels cannot be told apart)")
    return (torch.nan_to_num(fit, nan=0.0) / scale).tolist()
