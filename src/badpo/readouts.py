"""Readouts (paper, Appendix "Readouts"; Section 5.1 "Metrics"): pure metrics on numbers.

Every function takes arrays the engine has already computed (log-probs, margins, token counts,
flags) and returns floats or small dicts of floats. Nothing here runs a model; the model-facing
helpers that produce the inputs live in :mod:`badpo.readouts_model`.

Conventions.
- Attribute labels are a ``[C, q]`` 0/1 matrix, one row per candidate, one column per attribute
  name; a candidate carries attribute j when ``labels[c, j] == 1``.
- Arithmetic is float64 whatever the input dtype, so a readout does not depend on the precision
  the model ran in.
- A prediction by the sign of a logit counts a logit of exactly 0 as half right (a coin flip),
  so the reference policy, whose margin is 0 on every pair, reads 0.5 and not 0.
- An empty group gives ``nan`` with its count 0, never a silently dropped key.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from badpo._checks import (
    ArrayLike, as_float64, check_candidate_logprobs, check_finite, check_labels,
)
from badpo.data.names import NAME_POOL, read_signature

__all__ = [
    "candidate_probabilities", "attribute_probabilities", "attribute_logodds", "attribute_rate",
    "mean_attribute_rate", "whole_signature_rate", "mean_whole_signature_rate",
    "removal", "removal_per_seed", "student_t_quantile", "mean_ci",
    "heldout_accuracy", "vote_prediction", "theta_recovery", "kl_per_token",
    "reweighted_rate", "sampled_signature_rates",
    "weighted_mean_readouts", "mixture_vote_logits", "type_class_agreement",
]


# -------------------------------------------------------------------- rates from probabilities
def candidate_probabilities(candidate_logprobs: ArrayLike) -> Tensor:
    """Probabilities renormalised over the candidate set, ``[..., C]`` -> ``[..., C]`` float64.

    p_c = exp(lp_c - logsumexp(lp)). Example: lp = log(0.2), log(0.3), log(0.1) -> the set holds
    0.6 of the mass, so p = 0.2/0.6, 0.3/0.6, 0.1/0.6 = 1/3, 1/2, 1/6.
    """
    logps = check_candidate_logprobs(candidate_logprobs)
    return torch.softmax(logps, dim=-1)


def attribute_probabilities(candidate_logprobs: ArrayLike, labels: ArrayLike,
                            attribute_names: Sequence[str]) -> Tensor:
    """Per-prompt attribute rates ``[P, C]`` (or ``[C]``) -> ``[P, q]`` (or ``[q]``).

    The renormalised candidate probabilities summed over the candidates carrying each attribute.
    """
    probabilities = candidate_probabilities(candidate_logprobs)
    matrix = check_labels(labels, attribute_names, probabilities.shape[-1])
    return probabilities @ matrix


def attribute_logodds(candidate_logprobs: ArrayLike, labels: ArrayLike,
                      attribute_names: Sequence[str]) -> Tensor:
    """Per-prompt log-odds of each attribute, ``[P, C]`` -> ``[P, q]``.

    logit p_j = logsumexp(lp over carriers of j) - logsumexp(lp over the others), computed
    without forming 1 - p, so a rate of 0.9999999 keeps its digits. An attribute carried by all
    candidates or by none has log-odds +inf / -inf.
    """
    logps = check_candidate_logprobs(candidate_logprobs)
    matrix = check_labels(labels, attribute_names, logps.shape[-1]).bool()
    carriers = logps.unsqueeze(-1).masked_fill(~matrix, -math.inf)   # [..., C, q]
    others = logps.unsqueeze(-1).masked_fill(matrix, -math.inf)
    return torch.logsumexp(carriers, dim=-2) - torch.logsumexp(others, dim=-2)


def attribute_rate(candidate_logprobs: ArrayLike, labels: ArrayLike,
                   attribute_names: Sequence[str]) -> dict[str, float]:
    """Attribute rates at one prompt: ``candidate_logprobs`` [C] -> {attribute: rate}.

    Candidates may be any strings; a multi-token candidate's log-prob must be the sum over all
    its tokens (the full sequence probability), which is what the engine's
    ``continuation_logprobs`` returns. Average over prompts with :func:`mean_attribute_rate`.
    """
    logps = as_float64(candidate_logprobs, "candidate_logprobs")
    if logps.dim() != 1:
        raise ValueError(f"candidate_logprobs must be [C] for one prompt, got {tuple(logps.shape)}; "
                         "use mean_attribute_rate for [P, C]")
    rates = attribute_probabilities(logps, labels, attribute_names)
    return dict(zip(attribute_names, rates.tolist()))


def mean_attribute_rate(candidate_logprobs: ArrayLike, labels: ArrayLike,
                        attribute_names: Sequence[str]) -> dict[str, float]:
    """The rate of the paper: per-prompt rates ``[P, C]`` -> mean over the P prompts."""
    logps = as_float64(candidate_logprobs, "candidate_logprobs")
    if logps.dim() != 2 or logps.shape[0] == 0:
        raise ValueError(f"candidate_logprobs must be [P, C] with P >= 1, got {tuple(logps.shape)}")
    rates = attribute_probabilities(logps, labels, attribute_names).mean(dim=0)
    return dict(zip(attribute_names, rates.tolist()))


def _first_name_logprobs(signature_logprobs: ArrayLike) -> Tensor:
    """[..., F, S] whole-signature log-probs -> [..., F], marginalised over the S surnames."""
    logps = as_float64(signature_logprobs, "signature_logprobs")
    if logps.dim() < 2 or logps.shape[-1] == 0:
        raise ValueError("signature_logprobs must be [F, S] (first names x surnames) or [P, F, S], "
                         f"got {tuple(logps.shape)}")
    check_finite(logps, "signature_logprobs", allow_minus_inf=True)
    return torch.logsumexp(logps, dim=-1)


def whole_signature_rate(signature_logprobs: ArrayLike, labels: ArrayLike,
                         attribute_names: Sequence[str]) -> dict[str, float]:
    """Rates from whole signature lines at one prompt, ``[F, S]`` -> {attribute: rate}.

    ``signature_logprobs[f, s]`` is log p(first name f, " ", surname s, end of sequence | prompt,
    body, signature prefix). Marginalising over surnames (logsumexp over s) gives the log-prob of
    "first name f followed by some pool surname and the end"; these are renormalised over the
    first names as in :func:`attribute_rate`. A policy that moves a name's odds through the
    tokens after the first name shows here and not in the first-name readout.
    """
    logps = as_float64(signature_logprobs, "signature_logprobs")
    if logps.dim() != 2:
        raise ValueError(f"signature_logprobs must be [F, S] for one prompt, got {tuple(logps.shape)}")
    return attribute_rate(_first_name_logprobs(logps), labels, attribute_names)


def mean_whole_signature_rate(signature_logprobs: ArrayLike, labels: ArrayLike,
                              attribute_names: Sequence[str]) -> dict[str, float]:
    """:func:`whole_signature_rate` averaged over prompts, ``[P, F, S]`` -> {attribute: rate}."""
    logps = as_float64(signature_logprobs, "signature_logprobs")
    if logps.dim() != 3:
        raise ValueError(f"signature_logprobs must be [P, F, S], got {tuple(logps.shape)}")
    return mean_attribute_rate(_first_name_logprobs(logps), labels, attribute_names)


# ----------------------------------------------------------------------- removal and intervals
def removal(rate_dpo: float, rate_arm: float, rate_ref: float) -> float:
    """Share of DPO's shift the arm removes: (dpo - arm) / (dpo - ref); 0 is DPO, 1 the reference.

    Example: ref 0.50, DPO 0.96, arm 0.55 -> 0.41 / 0.46 = 0.8913.
    """
    for name, value in (("rate_dpo", rate_dpo), ("rate_arm", rate_arm), ("rate_ref", rate_ref)):
        if not math.isfinite(value):
            raise ValueError(f"{name} is {value}; expected a finite rate")
    if rate_dpo == rate_ref:
        raise ValueError(f"rate_dpo equals rate_ref ({rate_ref}): DPO moved nothing, removal undefined")
    return (rate_dpo - rate_arm) / (rate_dpo - rate_ref)


def removal_per_seed(rate_dpo: Mapping[Hashable, float], rate_arm: Mapping[Hashable, float],
                     rate_ref: float | Mapping[Hashable, float], level: float = 0.95) -> dict:
    """Removal per seed against the DPO run of the same seed, then averaged (Appendix Readouts).

    ``rate_ref`` is one number (the reference is trained once) or one per seed. Every seed of the
    arm needs a DPO run of that seed. Returns {"per_seed": {seed: removal}, **mean_ci(...)}.
    This is not the removal computed from the means over seeds: with reference 0.5, DPO 0.9 / 0.7
    and the arm 0.6 / 0.5 at two seeds, the seeds remove 0.3/0.4 = 0.75 and 0.2/0.2 = 1.0, mean
    0.875, while the means give (0.8 - 0.55)/(0.8 - 0.5) = 0.833.
    """
    if not rate_arm:
        raise ValueError("rate_arm: no seeds")
    per_seed = {}
    for seed, arm in rate_arm.items():
        if seed not in rate_dpo:
            raise ValueError(f"seed {seed!r}: the arm has a run but DPO has none to compare with")
        if isinstance(rate_ref, Mapping):
            if seed not in rate_ref:
                raise ValueError(f"seed {seed!r}: no reference rate for this seed")
            reference = rate_ref[seed]
        else:
            reference = rate_ref
        per_seed[seed] = removal(rate_dpo[seed], arm, reference)
    return {"per_seed": per_seed, **mean_ci(list(per_seed.values()), level)}


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta I_x(a, b) (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 10_000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < eps:
            return fraction
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def _regularised_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) = B(x; a, b) / B(a, b), for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (a * math.log(x) + b * math.log1p(-x)
                 + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def _student_t_two_sided_tail(t: float, df: float) -> float:
    """P(|T| > t) for T ~ Student t with df degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    return _regularised_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def student_t_quantile(level: float, df: float) -> float:
    """The t with P(|T| <= t) = level, i.e. the (1 + level)/2 quantile of Student t.

    Bisection on the exact tail (regularised incomplete beta). Closed forms to check it by hand:
    df = 1 gives tan(pi * level / 2) (12.7062 at 0.95); df = 2 gives
    (2p - 1) / sqrt(2 p (1 - p)) with p = (1 + level)/2 (4.3027 at 0.95).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    tail = 1.0 - level
    low, high = 0.0, 1.0
    while _student_t_two_sided_tail(high, df) > tail:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if _student_t_two_sided_tail(middle, df) > tail:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def mean_ci(values: ArrayLike, level: float = 0.95) -> dict[str, float]:
    """Mean and Student-t interval over seeds: {"mean", "half_width", "low", "high", "sd", "n"}.

    half_width = t_{(1+level)/2, n-1} * sd / sqrt(n), sd with n - 1 in the denominator. One value
    has no interval: its half_width, sd, low and high are nan.
    Example: 1, 2, 3 -> mean 2, sd 1, half_width 4.3027 / sqrt(3) = 2.4841.
    """
    array = as_float64(values, "values").flatten()
    if array.numel() == 0:
        raise ValueError("values: no values to average")
    check_finite(array, "values")
    n, mean = array.numel(), float(array.mean())
    if n == 1:
        return {"mean": mean, "half_width": math.nan, "low": math.nan, "high": math.nan,
                "sd": math.nan, "n": 1}
    sd = float(array.std(unbiased=True))
    half_width = student_t_quantile(level, n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "half_width": half_width, "low": mean - half_width,
            "high": mean + half_width, "sd": sd, "n": n}


# --------------------------------------------------------------------- held-out judgment metrics
def _sign_accuracy(logits: Tensor) -> float:
    """Share of logits > 0, a logit of exactly 0 counting one half; nan when empty."""
    if logits.numel() == 0:
        return math.nan
    return float(((logits > 0).double() + 0.5 * (logits == 0).double()).mean())


def _check_rows(values: ArrayLike, name: str, rows: int | None = None) -> Tensor:
    array = as_float64(values, name)
    if array.dim() != 1 or (rows is not None and array.shape[0] != rows):
        expected = f"[{rows}]" if rows is not None else "[N]"
        raise ValueError(f"{name} must have shape {expected}, got {tuple(array.shape)}")
    check_finite(array, name)
    return array


def _attribute_matrix(values: ArrayLike, name: str, rows: int) -> Tensor:
    array = as_float64(values, name)
    if array.dim() == 1:
        array = array.unsqueeze(-1)
    if array.dim() != 2 or array.shape[0] != rows:
        raise ValueError(f"{name} must have shape [{rows}] or [{rows}, q], got {tuple(array.shape)}")
    check_finite(array, name)
    return array


def heldout_accuracy(margins: ArrayLike, g_w: ArrayLike, g_l: ArrayLike) -> dict[str, float]:
    """Accuracy of the implicit-reward margin u on held-out judgments, same- vs cross-group.

    ``margins`` [N] is u per judgment, oriented chosen minus rejected, so the label is predicted
    right when u > 0. ``g_w``/``g_l`` [N] or [N, q] are the attribute values of the chosen and
    rejected responses; a pair is cross-group when they differ on any attribute (pass one column
    for one attribute). Returns same/cross accuracy, the gap cross - same and both counts.
    """
    u = _check_rows(margins, "margins")
    chosen = _attribute_matrix(g_w, "g_w", u.shape[0])
    rejected = _attribute_matrix(g_l, "g_l", u.shape[0])
    if chosen.shape != rejected.shape:
        raise ValueError(f"g_w has shape {tuple(chosen.shape)} but g_l has {tuple(rejected.shape)}")
    cross = (chosen != rejected).any(dim=-1)
    same_accuracy, cross_accuracy = _sign_accuracy(u[~cross]), _sign_accuracy(u[cross])
    return {"same_accuracy": same_accuracy, "cross_accuracy": cross_accuracy,
            "gap": cross_accuracy - same_accuracy,
            "n_same": int((~cross).sum()), "n_cross": int(cross.sum())}


def vote_prediction(margins: ArrayLike, bias_logits: ArrayLike, cross_mask: ArrayLike,
                    classes: Sequence[str] | None = None) -> dict:
    """Share of held-out cross-group votes predicted by the sign of u + b (Appendix on votes).

    ``bias_logits`` [N] is b = theta_k . (g_w - g_l) with the arm's own theta_k (zeros for DPO;
    the planted theta_k for the ceiling). Only rows with ``cross_mask`` true are scored.
    ``classes`` [N] (the voter's class) adds a per-class accuracy.
    Returns {"accuracy", "n", "per_class": {class: {"accuracy", "n"}}}.
    """
    u = _check_rows(margins, "margins")
    b = _check_rows(bias_logits, "bias_logits", u.shape[0])
    mask = torch.as_tensor(np.asarray(cross_mask))
    if mask.shape != u.shape or mask.dtype != torch.bool:
        raise ValueError(f"cross_mask must be a boolean [{u.shape[0]}] array, got "
                         f"{mask.dtype} {tuple(mask.shape)}")
    logits = u + b
    result: dict = {"accuracy": _sign_accuracy(logits[mask]), "n": int(mask.sum()), "per_class": {}}
    if classes is not None:
        if isinstance(classes, str) or len(classes) != u.shape[0]:
            raise ValueError(f"classes must give one class per judgment ({u.shape[0]})")
        labels = np.asarray(classes, dtype=object)
        for label in sorted(set(labels[mask.numpy()].tolist()), key=str):
            rows = mask & torch.as_tensor(labels == label)
            result["per_class"][label] = {"accuracy": _sign_accuracy(logits[rows]), "n": int(rows.sum())}
    return result


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r; nan when either side is constant (e.g. the pooled arm's identical theta_k)."""
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / denominator if denominator > 0 else math.nan


def theta_recovery(learned: Mapping[str, ArrayLike], planted: Mapping[str, ArrayLike],
                   classes: Mapping[str, str], attribute_names: Sequence[str]) -> dict:
    """Correlation of learned with planted theta_k per attribute, and the class means of both.

    ``learned``/``planted`` map annotator id -> [q] vector and must cover the same ids;
    ``classes`` maps every id to its class. Returns {"pearson": {attribute: r},
    "learned_class_means": {class: {attribute: mean}}, "planted_class_means": {...}, "n"}.
    """
    if set(learned) != set(planted):
        only_learned = sorted(set(learned) - set(planted))[:5]
        only_planted = sorted(set(planted) - set(learned))[:5]
        raise ValueError(f"learned and planted cover different annotators: only learned "
                         f"{only_learned}, only planted {only_planted}")
    ids = sorted(learned)
    if len(ids) < 2:
        raise ValueError("theta_recovery needs at least two annotators")
    missing = [a for a in ids if a not in classes]
    if missing:
        raise ValueError(f"classes: no class for annotators {missing[:5]}")
    q = len(attribute_names)

    def matrix(source: Mapping[str, ArrayLike], name: str) -> np.ndarray:
        rows = []
        for annotator in ids:
            row = np.asarray(source[annotator], dtype=np.float64).reshape(-1)
            if row.shape != (q,) or not np.isfinite(row).all():
                raise ValueError(f"{name}[{annotator!r}] must be {q} finite values, got {row.tolist()}")
            rows.append(row)
        return np.stack(rows)

    learned_matrix, planted_matrix = matrix(learned, "learned"), matrix(planted, "planted")
    labels = np.asarray([classes[a] for a in ids], dtype=object)

    def class_means(values: np.ndarray) -> dict:
        return {c: dict(zip(attribute_names, values[labels == c].mean(axis=0).tolist()))
                for c in sorted(set(labels.tolist()), key=str)}

    return {"pearson": {name: _pearson(learned_matrix[:, j], planted_matrix[:, j])
                        for j, name in enumerate(attribute_names)},
            "learned_class_means": class_means(learned_matrix),
            "planted_class_means": class_means(planted_matrix), "n": len(ids)}


# ----------------------------------------------------------------------------- generations
def kl_per_token(policy_token_logps: ArrayLike, reference_token_logps: ArrayLike,
                 mask: ArrayLike) -> float:
    """Monte Carlo KL(pi || pi_ref) per token on the policy's own samples, ``[N, T]`` each.

    The mean over generated tokens (mask 1) of log pi(y_t) - log pi_ref(y_t), with y drawn from
    pi: unbiased for the per-token KL, and it can come out slightly negative when the two are
    close. Tokens are pooled over sequences, so a long generation weighs more than a short one.
    """
    policy = as_float64(policy_token_logps, "policy_token_logps")
    reference = as_float64(reference_token_logps, "reference_token_logps")
    weights = as_float64(mask, "mask")
    if policy.shape != reference.shape or policy.shape != weights.shape:
        raise ValueError(f"shapes differ: policy {tuple(policy.shape)}, reference "
                         f"{tuple(reference.shape)}, mask {tuple(weights.shape)}")
    off = ~((weights == 0) | (weights == 1))
    if off.any():
        raise ValueError(f"mask{[int(i) for i in off.nonzero()[0]]} is not 0 or 1")
    keep = weights.bool()
    if not keep.any():
        raise ValueError("mask selects no token")
    check_finite(policy[keep], "policy_token_logps (masked)")
    check_finite(reference[keep], "reference_token_logps (masked)")
    return float((policy[keep] - reference[keep]).mean())


def reweighted_rate(flags: ArrayLike, token_counts: ArrayLike, reference_token_counts: ArrayLike,
                    bins: int = 5) -> dict:
    """A flag rate (e.g. markdown) reweighted onto the reference's token-count distribution.

    Bin edges are the reference counts' quantiles at 0, 1/bins, ..., 1; a count falls in bin b
    when edge_b <= count < edge_{b+1} (the last bin is closed; counts outside the reference range
    go to the end bins). The rate is sum_b w_b * rate_b with w_b the reference's share in bin b
    and rate_b the policy's flag rate there, so shortening answers alone cannot lower it.
    Empty bins: a bin where the reference has mass but the policy has no generation is dropped
    and the remaining weights are renormalised; the result reports how many bins and how much
    reference mass were dropped, so the reader can judge. Returns {"rate", "raw_rate",
    "bin_edges", "reference_share", "bin_rate", "bin_count", "empty_bins", "dropped_mass"}.
    """
    flag = _check_rows(flags, "flags")
    counts = _check_rows(token_counts, "token_counts", flag.shape[0])
    reference = _check_rows(reference_token_counts, "reference_token_counts")
    if flag.numel() == 0 or reference.numel() == 0:
        raise ValueError("flags and reference_token_counts must be non-empty")
    if not ((flag == 0) | (flag == 1)).all():
        raise ValueError(f"flags[{int((~((flag == 0) | (flag == 1))).nonzero()[0])}] is not 0 or 1")
    if not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    edges = np.quantile(reference.numpy(), np.linspace(0.0, 1.0, bins + 1))
    inner = edges[1:-1]
    reference_bin = np.searchsorted(inner, reference.numpy(), side="right")
    policy_bin = np.searchsorted(inner, counts.numpy(), side="right")
    share = np.bincount(reference_bin, minlength=bins) / reference.numel()
    count = np.bincount(policy_bin, minlength=bins)
    flagged = np.bincount(policy_bin, weights=flag.numpy(), minlength=bins)
    rate = np.divide(flagged, count, out=np.full(bins, np.nan), where=count > 0)
    empty = (share > 0) & (count == 0)
    kept = share * (count > 0)
    if kept.sum() == 0:
        raise ValueError(f"no generation falls in a bin the reference occupies (bin edges "
                         f"{edges.tolist()}); the distributions do not overlap")
    return {"rate": float((kept * np.nan_to_num(rate)).sum() / kept.sum()),
            "raw_rate": float(flag.mean()), "bin_edges": edges.tolist(),
            "reference_share": share.tolist(), "bin_rate": rate.tolist(),
            "bin_count": count.tolist(), "empty_bins": int(empty.sum()),
            "dropped_mass": float(share[empty].sum())}


def sampled_signature_rates(texts: Sequence[str], token_counts: ArrayLike | None = None) -> dict:
    """Readouts from sampled signatures: signing rate and the woman/black share among signed.

    A text is signed when its last line is a signature ``--- First Last``
    (:func:`badpo.data.names.read_signature`); the shares are over the texts signed with a pool
    first name. Returns {"n", "signed", "signing_rate", "signed_pool", "woman_share",
    "black_share"} (shares nan when no pool name is signed) and "mean_tokens" when
    ``token_counts`` [N] is given. Example: "a\n\n--- Emily Reed", "b", "c\n\n--- Zed Ray",
    "d\n\n--- Latoya Reed" -> signing rate 3/4, signed_pool 2, woman 1, black 1/2.
    Sampled rates saturate and depend on the decoder (paper, "Reading the signature from
    probabilities, not samples"); the probability readout is the reported rate.
    """
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of generations, not a single string")
    signatures = []
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"texts[{index}] is {type(text).__name__}, expected str")
        signatures.append(read_signature(text))
    n = len(signatures)
    if n == 0:
        raise ValueError("texts: no generations")
    signed = [s for s in signatures if s is not None]
    cells = [NAME_POOL[first] for first, _ in signed if first in NAME_POOL]
    result = {"n": n, "signed": len(signed), "signing_rate": len(signed) / n,
              "signed_pool": len(cells),
              "woman_share": sum(c[0] for c in cells) / len(cells) if cells else math.nan,
              "black_share": sum(c[1] for c in cells) / len(cells) if cells else math.nan}
    if token_counts is not None:
        result["mean_tokens"] = float(_check_rows(token_counts, "token_counts", n).mean())
    return result


# -------------------------------------------------------------------- a mixture of type policies
_DISAGREE = object()  # a non-numeric value the K readouts do not share: left out of their mean


def weighted_mean_readouts(readouts: Sequence[Mapping], weights: ArrayLike) -> dict:
    """The w-weighted mean of K policies' readouts (EM-DPO's mixture, Baselines appendix), key by key.

    ``readouts`` are K nested mappings of the same shape; a number is averaged with ``weights``
    [K] (non-negative, summing to 1); a nested mapping recursively; any other value (a string, a
    list) is kept when all K agree and left out otherwise; a key some policy lacks is left out.
    Counts (``n``) are averaged like any number, so they are kept only when equal. A ``None``
    (a JSON null, e.g. an undefined rate) in any policy gives ``None``. Example: readouts
    {"a": 1, "b": {"c": 0.5}} and {"a": 3, "b": {"c": 1.0}}, w = (0.25, 0.75) -> {"a": 2.5,
    "b": {"c": 0.875}}.
    """
    w = as_float64(weights, "weights")
    if w.ndim != 1 or len(w) != len(readouts) or len(w) == 0:
        raise ValueError(f"weights must be [K] with K = {len(readouts)} readouts, got shape {w.shape}")
    if (w < 0).any() or abs(float(w.sum()) - 1.0) > 1e-9:
        raise ValueError(f"weights must be non-negative and sum to 1, got {w.tolist()}")

    def mean(values: list):
        if all(isinstance(v, Mapping) for v in values):
            shared = [k for k in values[0] if all(k in v for v in values[1:])]
            merged = {k: mean([v[k] for v in values]) for k in shared}
            return {k: v for k, v in merged.items() if v is not _DISAGREE}
        if any(v is None for v in values):
            return None
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            if any(isinstance(v, float) and math.isnan(v) for v in values):
                return math.nan
            return math.fsum(float(wk) * float(v) for wk, v in zip(w, values))
        return values[0] if all(v == values[0] for v in values[1:]) else _DISAGREE

    return mean(list(readouts))


def mixture_vote_logits(type_margins: ArrayLike, type_probabilities: ArrayLike) -> Tensor:
    """The logit of a voter's probability of the recorded vote under its own mixture of types.

    ``type_margins`` [K, N] are u_k of each type policy on each judgment; ``type_probabilities``
    [N, K] the voter's gamma (rows sum to 1). p = sum_k gamma_k sigmoid(u_k), returned as
    log p - log(1 - p) [N], so that its sign predicts the vote as u does for one policy. Example:
    u = (2, -1), gamma = (0.5, 0.5) -> p = (0.88080 + 0.26894) / 2 = 0.57487, logit 0.30175.
    """
    u = torch.as_tensor(np.asarray(type_margins, dtype=np.float64))
    gamma = torch.as_tensor(np.asarray(type_probabilities, dtype=np.float64))
    if u.ndim != 2 or gamma.shape != (u.shape[1], u.shape[0]):
        raise ValueError(f"type_margins must be [K, N] and type_probabilities [N, K], got "
                         f"{tuple(u.shape)} and {tuple(gamma.shape)}")
    check_finite(u, "type_margins")
    if (gamma < 0).any() or not torch.allclose(gamma.sum(dim=1), torch.ones(gamma.shape[0], dtype=torch.float64)):
        raise ValueError("type_probabilities: every row must be non-negative and sum to 1")
    # log p and log(1 - p) each as a log-sum-exp, exact for margins of any size
    log_p = torch.logsumexp(gamma.T.log() + torch.nn.functional.logsigmoid(u), dim=0)
    log_q = torch.logsumexp(gamma.T.log() + torch.nn.functional.logsigmoid(-u), dim=0)
    return log_p - log_q


def type_class_agreement(type_probabilities: Mapping[str, ArrayLike], classes: Mapping[str, str]) -> dict:
    """Whether EM's types recover the annotator classes: each annotator's most probable type
    against its (planted) class, over the annotators in both mappings.

    Returns {"n", "purity", "adjusted_rand"}: purity = the share of annotators whose type's
    majority class is their own; the adjusted Rand index (Hubert and Arabie 1985) is 1 for the
    same partition and about 0 for an unrelated one. Example: types (0, 0, 1, 1), classes
    (A, A, B, A) -> purity 3/4; pairs agreeing beyond chance give ARI 0.0 here (index 1, expected
    1, max 2.5).
    """
    shared = [a for a in type_probabilities if a in classes]
    if len(shared) < 2:
        raise ValueError("type_class_agreement needs at least two annotators with a type and a class")
    types = [int(np.argmax(np.asarray(type_probabilities[a], dtype=np.float64))) for a in shared]
    labels = [classes[a] for a in shared]
    table: dict[tuple, int] = {}
    for t, c in zip(types, labels):
        table[(t, c)] = table.get((t, c), 0) + 1
    majority = {}
    for (t, c), count in table.items():
        majority[t] = max(majority.get(t, 0), count)

    def pairs(count: int) -> float:
        return count * (count - 1) / 2

    index = sum(pairs(c) for c in table.values())
    by_type = sum(pairs(types.count(t)) for t in set(types))
    by_class = sum(pairs(labels.count(c)) for c in set(labels))
    expected = by_type * by_class / pairs(len(shared))
    top = (by_type + by_class) / 2
    adjusted = (index - expected) / (top - expected) if top != expected else 1.0
    return {"n": len(shared), "purity": sum(majority.values()) / len(shared), "adjusted_rand": adjusted}
