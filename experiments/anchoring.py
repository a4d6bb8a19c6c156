"""The common offset and its anchor (paper, Appendix "The common offset and the choice of anchor").

The labels fix a_k + theta_k (the policy's tilt toward the attribute plus each annotator's
bias) but not how the shared level splits between the two (Corollary "Reward-bias
degeneracy"). Reference anchoring, the default, needs no code: every run starts at the
reference, so the tilt stays near 0 and theta_bar takes the level. This module holds the
other anchor, a target rate t, and the two ways to apply it:

- at sampling time, in closed form: add the log-odds shift s to the candidates that carry the
  attribute (:func:`tilt_logprobs`), s = c/beta with c from eq. anchor_tilt or, when the
  reference's log-odds vary across prompts, from the 1-D search :func:`solve_shift_for_rate`;
  with several attributes at once, from the joint root find :func:`solve_joint_shift` (each
  attribute solved alone overshoots when the attributes are correlated under the policy);
- in training, with a fixed offset b = -beta * s in the bias logit on the policy's own answers
  re-signed in both orders (:func:`fixed_offset_pairs`, :func:`fixed_offset_for_shift`),
  which drives the policy's margin to u = -b. The policy reaches the intended shift only up
  to a deficit left by the training budget; :func:`fit_calibration` fits the line
  achieved = slope * intended + intercept on a few offsets and :func:`invert_calibration`
  gives the intended shift that achieves the one wanted. When the trained stage couples the
  coordinates (an offset on one attribute moves the other's readout),
  :func:`fit_affine_calibration` fits achieved = A intended + c with a q x q matrix A, and
  :func:`invert_affine_calibration` solves it for the intended shift.

Sign convention: shifts s are signed log-odds (positive moves toward the attribute); the
offset that produces s is -beta * s. Curing a policy that over-signs (rate 0.967 -> 0.5) needs
s = -3.38 and the offset +0.338 on that coordinate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from badpo.core.array_checks import ArrayLike, as_float64, check_candidate_logprobs, check_labels
from badpo.core.judgments import Judgment, validate_judgments
from badpo.core.names import CELLS, NAME_ATTRIBUTES, NAME_POOL, read_signature, sign, strip_signature
from badpo.readouts.metrics import attribute_logodds

__all__ = [
    "NAME_ATTRIBUTES", "logit", "target_tilt", "tilted_rate", "solve_shift_for_rate",
    "tilted_rates", "solve_joint_shift", "shifts_for_target", "fit_calibration", "invert_calibration",
    "fit_affine_calibration", "invert_affine_calibration", "MAX_CALIBRATION_CONDITION", "tilt_logprobs",
    "fixed_offset_for_shift", "fixed_offset_pairs",
]


def logit(p: float) -> float:
    """log(p / (1 - p)) for p in (0, 1); the edges are an error (infinite log-odds)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"rate {p} must lie strictly between 0 and 1")
    return math.log(p) - math.log1p(-p)


def target_tilt(reference_rate: float, target: float, beta: float) -> float:
    """The tilt c(t) = beta * [logit t - logit p] that moves rate p to target t (eq. anchor_tilt).

    Exact when the log-odds are the same at every prompt. The paper's worked example, beta 0.1:
    the 8B reference at p = 0.465 has logit -0.1402, so c(0.5) = 0.1 * 0.1402 = 0.014; the 8B DPO
    policy at 0.967 has logit 3.378, so c(0.5) = -0.338 (offset b = +0.34).
    """
    if not beta > 0:
        raise ValueError(f"beta must be positive, got {beta}")
    return beta * (logit(target) - logit(reference_rate))


def _logodds(logodds_per_prompt: ArrayLike) -> np.ndarray:
    values = as_float64(logodds_per_prompt, "logodds_per_prompt")
    if values.dim() != 1 or values.numel() == 0:
        raise ValueError(f"logodds_per_prompt must be a non-empty [P] array, got {tuple(values.shape)}")
    bad = ~torch.isfinite(values)
    if bad.any():
        index = int(bad.nonzero()[0])
        raise ValueError(f"logodds_per_prompt[{index}] is {values[index].item()}: a prompt whose rate "
                         "is exactly 0 or 1 cannot be moved by a finite shift")
    return values.numpy()


def _mean_sigmoid(logodds: np.ndarray, shift: float) -> float:
    """mean_i sigmoid(l_i + shift), with exp taken of -|z| only, so nothing overflows."""
    z = logodds + shift
    small = np.exp(-np.abs(z))
    return float(np.mean(np.where(z >= 0, 1.0 / (1.0 + small), small / (1.0 + small))))


def tilted_rate(logodds_per_prompt: ArrayLike, shift: float) -> float:
    """The rate after adding ``shift`` to every prompt's log-odds: mean_i sigmoid(l_i + shift).

    Example: log-odds 0 and log(3) (rates 1/2 and 3/4, mean 5/8), shift log(3) -> rates 3/4 and
    9/10, mean 0.825.
    """
    if not math.isfinite(shift):
        raise ValueError(f"shift must be finite, got {shift}")
    return _mean_sigmoid(_logodds(logodds_per_prompt), shift)


def solve_shift_for_rate(logodds_per_prompt: ArrayLike, target: float,
                         tolerance: float = 1e-12) -> float:
    """The one shift s with mean_i sigmoid(l_i + s) = target (paper: the 1-D search of c(t)/beta).

    The rate is continuous and strictly increasing in s, and bracketed without search: since
    sigmoid(min l + s) <= rate(s) <= sigmoid(max l + s), the root lies in
    [logit t - max l, logit t - min l]. Bisection then halves that interval to ``tolerance``.
    With one prompt (or equal log-odds) the root is logit t - l, eq. anchor_tilt divided by beta.
    """
    logodds = _logodds(logodds_per_prompt)
    if not 0.0 < target < 1.0:
        raise ValueError(f"target rate {target} must lie strictly between 0 and 1")
    low, high = logit(target) - float(logodds.max()), logit(target) - float(logodds.min())
    while high - low > tolerance:
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if _mean_sigmoid(logodds, middle) < target:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def _joint_inputs(candidate_logprobs: ArrayLike, labels: ArrayLike, values: Sequence[float],
                  what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checked float64 arrays: log-probs [P, C], labels [C, q] and one value per attribute [q]."""
    logps = check_candidate_logprobs(candidate_logprobs)
    if logps.dim() != 2:
        raise ValueError(f"candidate_logprobs must be [P, C], got {tuple(logps.shape)}")
    vector = as_float64(values, what).reshape(-1)
    if not torch.isfinite(vector).all():
        raise ValueError(f"{what} must be finite, got {vector.tolist()}")
    matrix = check_labels(labels, [f"column {j}" for j in range(len(vector))], logps.shape[-1])
    return logps.numpy(), matrix.numpy(), vector.numpy()


def _tilted(logps: np.ndarray, labels: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt, the tilted candidate probabilities [P, C] and each attribute's rate [P, q]."""
    z = logps + labels @ shift
    z = z - z.max(axis=1, keepdims=True)  # each row holds a finite entry (checked on entry)
    weights = np.exp(z)
    weights /= weights.sum(axis=1, keepdims=True)
    return weights, weights @ labels


def _tilt_moments(logps: np.ndarray, labels: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean tilted rate [q] and its Jacobian [q, q] at ``shift``.

    Per prompt the tilted distribution is p_s(c) proportional to p(c) exp(s . g_c); its mean of
    g is the gradient of the log-partition A_i(s) and its covariance the Hessian, so the mean
    over prompts is the gradient of the convex (1/P) sum_i A_i, and its Jacobian the mean
    covariance (centred before squaring, so nothing cancels).
    """
    weights, rates = _tilted(logps, labels, shift)
    centred = labels[None, :, :] - rates[:, None, :]  # [P, C, q]
    jacobian = np.einsum("pc,pcj,pck->jk", weights, centred, centred) / len(logps)
    return rates.mean(axis=0), jacobian


def tilted_rates(candidate_logprobs: ArrayLike, labels: ArrayLike, shift: Sequence[float]) -> list[float]:
    """The mean rate of each attribute after the tilt exp(shift . g) at every prompt, ``[P, C]``.

    The same numbers as ``mean_attribute_rate(tilt_logprobs(...))``, without naming the attributes.
    """
    logps, matrix, vector = _joint_inputs(candidate_logprobs, labels, shift, "shift")
    return _tilt_moments(logps, matrix, vector)[0].tolist()


def _line_step(logps: np.ndarray, labels: np.ndarray, targets: np.ndarray, shift: np.ndarray,
               step: np.ndarray) -> float:
    """How far along the Newton ``step`` the convex dual is lowest, in (0, 1].

    Along the line the dual's derivative is (rate(s + a d) - t) . d: increasing in a (convexity)
    and negative at a = 0 for a Newton direction. The full step is taken when the derivative is
    still <= 0 at a = 1; else the sign change is bisected. The derivative is read from rates,
    not from differences of the dual, so it keeps its digits near the root.
    """
    def slope(a: float) -> float:
        return float((_tilted(logps, labels, shift + a * step)[1].mean(axis=0) - targets) @ step)

    if slope(1.0) <= 0.0:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if slope(middle) < 0.0 else (low, middle)
    return high


def solve_joint_shift(candidate_logprobs: ArrayLike, labels: ArrayLike, targets: Sequence[float],
                      tolerance: float = 1e-12, max_steps: int = 100) -> list[float]:
    """The shift s [q] whose tilt brings every attribute's mean rate to its target at once.

    Candidate log-probs ``[P, C]``, 0/1 ``labels`` ``[C, q]``. At each prompt the tilt is
    p_s(c) proportional to p(c) exp(s . g_c) (:func:`tilt_logprobs`), so the mean rate r(s) is the
    gradient of the convex F(s) = mean_i log sum_c p_i(c) exp(s . g_c), and r(s) = t is the
    minimum of the dual F(s) - s . t. Newton's method on that dual, each step cut to the line
    minimum (:func:`_line_step`), converges from s = 0 for any t inside the rates the tilt can
    reach (with every combination of attributes carried at every prompt: any t in (0, 1)^q); a
    target outside them, or on their edge, needs an infinite shift and is a ``ValueError``. Solving each attribute
    alone and applying both misses: it assumes the attributes independent under the policy.
    With one attribute this is the 1-D search :func:`solve_shift_for_rate`, used as such.
    """
    logps, matrix, wanted = _joint_inputs(candidate_logprobs, labels, targets, "targets")
    if not ((wanted > 0.0) & (wanted < 1.0)).all():
        raise ValueError(f"target rates {wanted.tolist()} must lie strictly between 0 and 1")
    if len(wanted) == 1:
        logodds = attribute_logodds(logps, matrix, ["column 0"])[:, 0]
        return [solve_shift_for_rate(logodds, float(wanted[0]), tolerance)]
    shift = np.zeros(len(wanted))
    for _ in range(max_steps):
        rates, jacobian = _tilt_moments(logps, matrix, shift)
        residual = rates - wanted
        if np.abs(residual).max() <= tolerance:
            return shift.tolist()
        try:
            step = -np.linalg.solve(jacobian, residual)
        except np.linalg.LinAlgError:
            step = np.full_like(shift, np.nan)
        if not np.isfinite(step).all():
            break
        shift = shift + _line_step(logps, matrix, wanted, shift, step) * step
    raise ValueError(f"no finite shift brings the rates to {wanted.tolist()} (reached "
                     f"{_tilt_moments(logps, matrix, shift)[0].tolist()} at shift {shift.tolist()}): the "
                     "targets lie outside, or on the edge of, the rates the tilt can reach")


def shifts_for_target(candidate_logprobs: ArrayLike, labels: ArrayLike, attribute_names: Sequence[str],
                      target: float | Mapping[str, float]) -> dict[str, float]:
    """s*(t) per attribute from candidate log-probs ``[P, C]`` (paper: the search on 300 prompts).

    ``target`` is one rate for every attribute or {attribute: rate}. The shifts are solved
    jointly (:func:`solve_joint_shift`): applied together through :func:`tilt_logprobs` they
    bring every attribute to its target, however correlated the attributes are under the policy.
    One attribute gives the 1-D search :func:`solve_shift_for_rate`.
    """
    if isinstance(attribute_names, str):
        raise ValueError(f"attribute_names must be a sequence of names, not the string {attribute_names!r}")
    wanted = ([target[name] for name in attribute_names] if isinstance(target, Mapping)
              else [target] * len(attribute_names))
    check_labels(labels, attribute_names, as_float64(candidate_logprobs, "candidate_logprobs").shape[-1])
    return dict(zip(attribute_names, solve_joint_shift(candidate_logprobs, labels, wanted)))


def fit_calibration(intended: ArrayLike, achieved: ArrayLike) -> tuple[float, float]:
    """Least-squares line achieved = slope * intended + intercept, returned as (slope, intercept).

    The paper's seed-42 gender points (intended 3.39, 4.42, 5.13 -> achieved 2.24, 3.13, 3.79):
    means 4.3133 and 3.0533, Sxy = 1.36077, Sxx = 1.53087, slope 0.8889, intercept -0.7808 (the
    paper prints 0.888 and -0.777 from the unrounded shifts).
    """
    x = as_float64(intended, "intended").numpy()
    y = as_float64(achieved, "achieved").numpy()
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"intended {x.shape} and achieved {y.shape} must be equal-length 1-D arrays")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("intended and achieved must be finite")
    if len(np.unique(x)) < 2:
        raise ValueError("fit_calibration needs at least two distinct intended shifts")
    dx = x - x.mean()
    slope = float(dx @ (y - y.mean()) / (dx @ dx))
    return slope, float(y.mean() - slope * x.mean())


def invert_calibration(achieved: float, slope: float, intercept: float) -> float:
    """The intended shift whose achieved shift is ``achieved``: (achieved - intercept) / slope.

    Example with the paper's gender line: achieving 3.39 needs (3.39 + 0.777) / 0.888 = 4.693.
    """
    if not math.isfinite(slope) or slope == 0.0:
        raise ValueError(f"slope {slope} cannot be inverted: the offset does not move the policy")
    return (achieved - intercept) / slope


MAX_CALIBRATION_CONDITION = 1e6  # past it, rounding and noise set the fit or its inverse, not the points


def _shift_matrix(values: ArrayLike, what: str) -> np.ndarray:
    """A finite float64 [n, q] array of shifts (one row a point, one column an attribute)."""
    matrix = as_float64(values, what).numpy()
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"{what} must be a non-empty [n, q] array, got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{what} must be finite")
    return matrix


def fit_affine_calibration(intended: ArrayLike, achieved: ArrayLike,
                           max_condition: float = MAX_CALIBRATION_CONDITION) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares achieved = A @ intended + c over n points: ``intended``, ``achieved`` [n, q]
    -> (A [q, q], c [q]).

    The per-coordinate line cannot see a stage that couples the attributes: A's off-diagonal
    entries carry how an offset on one attribute moves the other's readout. Exactly determined by
    q + 1 points whose intended shifts span the q coordinates (s*, then s* moved along each axis);
    more points are fitted by least squares. Points that do not span them (scaled copies of one
    s*, whose centred shifts are collinear) leave A unidentified: a ``ValueError`` with the
    condition number of the centred intended shifts.
    """
    x, y = _shift_matrix(intended, "intended"), _shift_matrix(achieved, "achieved")
    if x.shape != y.shape:
        raise ValueError(f"intended {x.shape} and achieved {y.shape} must have the same shape [n, q]")
    n, q = x.shape
    if n < q + 1:
        raise ValueError(f"an affine calibration in {q} coordinates needs at least {q + 1} points, got {n}")
    centred = x - x.mean(axis=0)
    condition = float(np.linalg.cond(centred))
    if not condition <= max_condition:
        raise ValueError(f"the intended shifts do not span the {q} coordinates (condition number {condition:.3g} "
                         f"> {max_condition:g}): move each coordinate on its own")
    coefficients, *_ = np.linalg.lstsq(np.hstack([x, np.ones((n, 1))]), y, rcond=None)  # [q + 1, q]
    return coefficients[:q].T.copy(), coefficients[q].copy()


def invert_affine_calibration(achieved: ArrayLike, matrix: ArrayLike, intercept: ArrayLike,
                              max_condition: float = MAX_CALIBRATION_CONDITION) -> np.ndarray:
    """The intended shift [q] whose achieved shift is ``achieved`` [q]: A^-1 (achieved - c), with
    A [q, q] and c [q] from :func:`fit_affine_calibration`. An A too ill-conditioned to invert
    (the offset barely moves some direction of the readout) is a ``ValueError`` with its
    condition number."""
    a = as_float64(matrix, "A").numpy()
    q = a.shape[0] if a.ndim == 2 else -1
    wanted, c = as_float64(achieved, "achieved").numpy(), as_float64(intercept, "c").numpy()
    if a.shape != (q, q) or wanted.shape != (q,) or c.shape != (q,):
        raise ValueError(f"A {a.shape}, achieved {wanted.shape} and c {c.shape} must be [q, q], [q] and [q]")
    if not (np.isfinite(a).all() and np.isfinite(wanted).all() and np.isfinite(c).all()):
        raise ValueError("A, achieved and c must be finite")
    condition = float(np.linalg.cond(a))
    if not condition <= max_condition:
        raise ValueError(f"A = {np.round(a, 3).tolist()} cannot be inverted (condition number {condition:.3g} > "
                         f"{max_condition:g}): the offset does not move the policy in some direction")
    return np.linalg.solve(a, wanted - c)


def tilt_logprobs(candidate_logprobs: ArrayLike, labels: ArrayLike, shift: Sequence[float]) -> Tensor:
    """Sampling-time tilt: lp_c + labels[c] . shift, ``[..., C]`` -> ``[..., C]`` float64.

    ``labels`` is the ``[C, q]`` 0/1 attribute matrix and ``shift`` one log-odds shift per column.
    Renormalising the result (as every readout does) multiplies each carrier of attribute j by
    exp(shift_j), i.e. pi_c(y) proportional to pi(y) exp(c delta_g(y) / beta) (Corollary
    "Target anchoring") with shift = c / beta. With one attribute the per-prompt log-odds move by
    exactly shift_j.
    """
    logps = check_candidate_logprobs(candidate_logprobs)
    vector = as_float64(shift, "shift").reshape(-1)
    if not torch.isfinite(vector).all():
        raise ValueError(f"shift must be finite, got {vector.tolist()}")
    columns = [f"column {j}" for j in range(len(vector))]
    matrix = check_labels(labels, columns, logps.shape[-1])
    return logps + matrix @ vector


def fixed_offset_for_shift(shift: Sequence[float], beta: float) -> list[float]:
    """The fixed offset b = -beta * s per coordinate that trains the log-odds shift s.

    On a pair that differs only in the attribute, taken in both orders, the loss
    -log sigma(u + b) - log sigma(-u - b) is minimised at u = -b, and u = beta * s for a shift s
    of the carrier's log-odds. Pass the result as ``BiasChannel(variant="none",
    fixed_offset=...)``. Example: s = -3.38, beta = 0.1 -> b = 0.338.
    """
    if not beta > 0:
        raise ValueError(f"beta must be positive, got {beta}")
    values = [float(s) for s in shift]
    if not all(math.isfinite(s) for s in values):
        raise ValueError(f"shift must be finite, got {values}")
    return [-beta * s for s in values]


def _partner_cell(cell: str, coordinate: int) -> str:
    """The cell that differs from ``cell`` in one coordinate (0: woman_coded, 1: black_coded)."""
    values = list(NAME_POOL[CELLS[cell][0]])
    values[coordinate] = 1 - values[coordinate]
    return next(c for c in CELLS if NAME_POOL[CELLS[c][0]] == tuple(values))


def fixed_offset_pairs(prompts: Sequence[str], answers: Sequence[str], seed: int,
                       annotator: str = "fixed_offset",
                       prompt_ids: Sequence[str] | None = None) -> list[Judgment]:
    """Training rows of the fixed-offset cure from a policy's own answers (paper, "Setting").

    For every answer signed with a pool first name (others are skipped: the paper keeps only
    these, 2,659 of 3,000 at seed 42): its first name is replaced by a name from a random cell,
    and, for each coordinate of :data:`NAME_ATTRIBUTES`, by a name from the cell differing in that
    coordinate only, with the same surname and body; each such pair is emitted in both orders.
    So an answer gives 2 coordinates x 2 orders = 4 rows, all by ``annotator``, with
    ``pair_type`` "offset", a ``pair_id`` shared by the two orders, and ``g_chosen``/
    ``g_rejected`` set. The labels are arbitrary by design: with both orders present only the
    fixed offset of ``BiasChannel(variant="none", fixed_offset=...)`` is learned. Deterministic
    in ``seed``. ``prompt_ids`` (default "offset-<i>", i the answer's index) support splits.
    """
    if isinstance(prompts, str) or isinstance(answers, str):
        raise ValueError("prompts and answers must be sequences of strings, not single strings")
    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    if prompt_ids is not None and len(prompt_ids) != len(answers):
        raise ValueError(f"{len(prompt_ids)} prompt_ids but {len(answers)} answers")
    rng = np.random.default_rng(seed)
    cells = tuple(CELLS)
    rows = []
    for index, (prompt, answer) in enumerate(zip(prompts, answers)):
        if not isinstance(answer, str):
            raise ValueError(f"answers[{index}] is {type(answer).__name__}, expected str")
        signature = read_signature(answer)
        if signature is None or signature[0] not in NAME_POOL:
            continue
        body, surname = strip_signature(answer), signature[1]
        base_cell = cells[rng.integers(len(cells))]
        base = CELLS[base_cell][rng.integers(len(CELLS[base_cell]))]
        prompt_id = prompt_ids[index] if prompt_ids is not None else f"offset-{index}"
        for coordinate, attribute in enumerate(NAME_ATTRIBUTES):
            partner_names = CELLS[_partner_cell(base_cell, coordinate)]
            partner = partner_names[rng.integers(len(partner_names))]
            sides = [(sign(body, name, surname), dict(zip(NAME_ATTRIBUTES, map(float, NAME_POOL[name]))))
                     for name in (base, partner)]
            for (chosen, g_chosen), (rejected, g_rejected) in (sides, sides[::-1]):
                rows.append({"prompt": prompt, "chosen": chosen, "rejected": rejected,
                             "annotator": annotator, "prompt_id": prompt_id,
                             "pair_id": f"offset-{index}-{attribute}", "pair_type": "offset",
                             "g_chosen": g_chosen, "g_rejected": g_rejected})
    return validate_judgments(rows)
