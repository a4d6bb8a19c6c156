"""Readouts (paper, Appendix "Readouts"; Section 5.1 "Metrics"): pure metrics on numbers.

Every function takes arrays the engine has already computed (log-probs, margins, token counts,
flags) and returns floats or small dicts of floats. Nothing here runs a model; the model-facing
helpers that produce the inputs live in :mod:`badpo.readouts.model`; what runs over seeds add up
to (removal, the interval of a mean) is :mod:`badpo.comparing.over_seeds`.

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
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from badpo.core.array_checks import (
    ArrayLike,
    as_float64,
    check_candidate_logprobs,
    check_finite,
    check_labels,
)
from badpo.core.attributes import word_count
from badpo.core.markdown import has_markdown
from badpo.core.names import NAME_POOL, read_signature

__all__ = [
    "candidate_probabilities", "attribute_probabilities", "attribute_logodds", "attribute_rate",
    "mean_attribute_rate", "whole_signature_rate", "mean_whole_signature_rate",
    "heldout_accuracy", "reward_tilt", "vote_prediction", "theta_recovery", "kl_per_token",
    "reweighted_rate", "sampled_signature_rates", "candidate_readout", "sampled_text_rates",
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


def reward_tilt(attribute_rewards: ArrayLike, counterpart_rewards: ArrayLike) -> dict[str, float]:
    """A reward model's tilt toward an attribute on counterfactual pairs: the same response with
    the attribute (signed with a woman-coded name, say) and with its counterpart (a man-coded one).

    ``[N]`` rewards of each side, pair i in row i. Returns the mean difference attribute minus
    counterpart, the share of pairs where the attribute side scores higher (a tie counts one
    half, so a model blind to the attribute reads 0.5) and the count.
    """
    with_attribute = _check_rows(attribute_rewards, "attribute_rewards")
    difference = with_attribute - _check_rows(counterpart_rewards, "counterpart_rewards", with_attribute.shape[0])
    mean = float(difference.mean()) if difference.numel() else math.nan
    return {"mean_difference": mean, "share_higher": _sign_accuracy(difference), "n": int(difference.numel())}


def vote_prediction(margins: ArrayLike, bias_logits: ArrayLike, cross_mask: ArrayLike,
                    classes: Sequence[str] | None = None) -> dict:
    """Share of held-out cross-group votes predicted by the sign of u + b (Appendix on votes).

    ``bias_logits`` [N] is b = theta_k . (g_w - g_l) with the arm's own theta_k (zeros for DPO;
    the planted theta_k for the ceiling). Only rows with ``cross_mask`` true are scored.
    ``classes`` [N] (the voter's class) adds a per-class accuracy; rows whose class is None count
    in the overall figure only.
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
        for label in sorted(set(labels[mask.numpy()].tolist()) - {None}, key=str):
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
    (:func:`badpo.core.names.read_signature`); the shares are over the texts signed with a pool
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


# ------------------------------------------------------------ length and format with the body fixed
def candidate_readout(candidate_logprobs: ArrayLike, values: Mapping[str, ArrayLike],
                      running_logprobs: ArrayLike | None = None, stops: ArrayLike | None = None,
                      log_odds: Sequence[str] = ()) -> dict[str, float]:
    """What a policy's distribution over a fixed set of whole responses says, averaged over prompts.

    ``candidate_logprobs`` [P, C] is log p(candidate + EOS | prompt) of C whole responses to each
    prompt that share one body and differ in what the readout measures (a markdown bullet in front,
    an ending after). ``values`` maps a name to each candidate's number, [P, C] or [C] for every
    prompt alike (a word count, a 0/1 flag). Returns, as means over the prompts, "mass" (the
    policy's probability on the set: a run-on policy leaves it, and the other readouts then
    describe a shrinking part of it), "log_mass", and each value's expectation under the candidate
    probabilities renormalised over the set (:func:`candidate_probabilities`).

    With ``running_logprobs`` [P, C] (log p(candidate | prompt), no EOS) and ``stops`` [P, C] or [C]
    (1 at the candidates where a shorter answer ends and a longer one goes on), also
    "eos_at_stops": p(EOS | the response so far is a stop point) = sum over stops of p(c + EOS) /
    sum over stops of p(c), the stop points weighted by how likely the policy writes them.

    For each name in ``log_odds`` (a 0/1 value with both sides in every prompt), also
    "NAME_log_odds": the mean over prompts of log p(flag 1) - log p(flag 0). Its shift from the
    reference is the policy's own lean on the flag (its implicit reward of 1 over 0, the scale a
    bias theta * g lives on); a mean probability saturates where DPO drives it near 1, and a share
    of DPO's shift read on it counts a residual lean for more than the same share of log-odds.

    Example, two prompts, three candidates with words (2, 4, 9), markdown (0, 1, 1), stops (1, 1, 0):
    lp = log (0.1, 0.3, 0.1) has mass 0.5 and renormalised p = (0.2, 0.6, 0.2), words 0.4 + 2.4 +
    1.8 = 4.6, markdown 0.8, and with running log (0.4, 0.5, 0.3) a stop rate (0.1 + 0.3) / (0.4 +
    0.5) = 4/9; lp = log (0.2, 0.2, 0.4) has mass 0.8, p = (0.25, 0.25, 0.5), words 6.0, markdown
    0.75, and with running log (0.8, 0.2, 0.5) a stop rate 0.4 / 1.0. Means: mass 0.65, log_mass
    (log 0.5 + log 0.8) / 2 = -0.4581, words 5.3, markdown 0.775, eos_at_stops 0.4222.
    """
    logps = check_candidate_logprobs(candidate_logprobs)
    if logps.dim() != 2:
        raise ValueError(f"candidate_logprobs must be [P, C], got {tuple(logps.shape)}")
    probabilities = candidate_probabilities(logps)

    def per_candidate(value: ArrayLike, name: str) -> Tensor:
        array = as_float64(value, name)
        if array.shape == logps.shape[-1:]:
            array = array.expand_as(logps)
        if array.shape != logps.shape:
            raise ValueError(f"{name} must be [C] or [P, C] = {tuple(logps.shape)}, got {tuple(array.shape)}")
        check_finite(array, name, allow_minus_inf=name == "running_logprobs")
        return array

    log_mass = torch.logsumexp(logps, dim=-1)
    result = {"mass": float(log_mass.exp().mean()), "log_mass": float(log_mass.mean())}
    for name, value in values.items():
        result[name] = float((probabilities * per_candidate(value, f"values[{name!r}]")).sum(dim=-1).mean())
    for name in log_odds:
        result[f"{name}_log_odds"] = _mean_log_odds(logps, per_candidate(values[name], f"values[{name!r}]"), name)
    if (running_logprobs is None) != (stops is None):
        raise ValueError("running_logprobs and stops come together")
    if running_logprobs is not None:
        result["eos_at_stops"] = _eos_at_stops(logps, per_candidate(running_logprobs, "running_logprobs"),
                                               per_candidate(stops, "stops"))
    return result


def _eos_at_stops(logps: Tensor, running: Tensor, marks: Tensor) -> float:
    """Mean over prompts of sum over stops of p(c + EOS) / sum over stops of p(c); all [P, C]."""
    if (running < logps - 1e-9).any():
        raise ValueError("running_logprobs: a candidate is less likely without its EOS than with it")
    if not ((marks == 0) | (marks == 1)).all() or not marks.bool().any(dim=-1).all():
        raise ValueError("stops: 0/1 marks with at least one stop point per prompt")
    off = ~marks.bool()
    rate = (torch.logsumexp(logps.masked_fill(off, -math.inf), dim=-1)
            - torch.logsumexp(running.masked_fill(off, -math.inf), dim=-1)).exp()
    return float(rate.mean())


def _mean_log_odds(logps: Tensor, flags: Tensor, name: str) -> float:
    """Mean over prompts of log sum p(flag 1) - log sum p(flag 0); [P, C] log-probs and 0/1 flags."""
    on = flags == 1
    if not (on | (flags == 0)).all() or not (on.any(dim=-1) & (~on).any(dim=-1)).all():
        raise ValueError(f"log_odds: values[{name!r}] must be 0/1 with both in every prompt")
    return float((torch.logsumexp(logps.masked_fill(~on, -math.inf), dim=-1)
                  - torch.logsumexp(logps.masked_fill(on, -math.inf), dim=-1)).mean())


def sampled_text_rates(texts: Sequence[str], ended: ArrayLike, token_counts: ArrayLike) -> dict:
    """Length and format as the samples show them, beside :func:`candidate_readout`: a tiny policy
    that learned to avoid EOS runs on to the token limit, and then its sampled length measures the
    collapse, not the bias; the EOS rate says how far that went.

    ``ended`` [N] is 1 where the sample stopped with EOS (0: cut at the token limit), ``token_counts``
    [N] its tokens without EOS. Returns {"n", "eos_rate", "markdown_rate" (raw share with
    :func:`badpo.core.markdown.has_markdown`), "mean_words" (whitespace words, as the length attribute
    counts), "mean_tokens"}. Example: "1 2", "- 1 2 as asked", "1 2 1 2 1 2" ended (1, 1, 0) with
    2, 5, 6 tokens: eos_rate 2/3, markdown_rate 1/3, mean_words (2 + 5 + 6)/3 = 13/3, mean_tokens 13/3.
    """
    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts: give a non-empty sequence of generations")
    stops = _check_rows(ended, "ended", len(texts))
    if not ((stops == 0) | (stops == 1)).all():
        raise ValueError("ended: every entry must be 0 or 1")
    counts = _check_rows(token_counts, "token_counts", len(texts))
    return {"n": len(texts), "eos_rate": float(stops.mean()),
            "markdown_rate": float(np.mean([has_markdown(t) for t in texts])),
            "mean_words": float(np.mean([word_count(t) for t in texts])), "mean_tokens": float(counts.mean())}
