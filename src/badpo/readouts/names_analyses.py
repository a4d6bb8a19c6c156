"""Analyses of the names readouts (paper, Appendix "Reading the signature from probabilities, not
samples", and the cure's results): pure functions of per-name shares and the pool's coding.

A run's names readouts record, for every first name of the pool, the share of its signature mass
that name carries (:func:`per_name_shares`):

- from probabilities (``names.per_name.first_name``, ``names.per_name.whole_signature``): the
  name's probability at the signature position with the body fixed, renormalised over the pool
  and averaged over the prompts; the shares sum to 1;
- from samples (``sampled.per_name``: how many answers were signed with the name, over
  ``sampled.n`` answers): the share of *all* answers signed with the name, so an unsigned answer,
  or one signed with a name outside the pool, counts as carrying no coded name (the paper's
  "with unsigned ones counted as not black-coded"); these shares sum to the pool-signing rate.

A coding is a 0/1 matrix ``[N, q]``: which of the N names carries each of the q attributes (the
pool's ``woman_coded`` and ``black_coded``). The **shift** of attribute j is
``sum_n c_nj (p_n - r_n)``: the policy's share on the names coded j minus the reference's. Given
several policy runs (seeds), it is the mean of their shifts, which is the shift of their mean
shares, since it is linear in the shares.

**Relabelling null.** Is a shift evidence that the policy moved toward what the coding marks, or
would any coding of the pool with as many coded names show one as large? The names are relabelled
at random: a permutation of the pool gives name n the coding of name perm(n), every attribute at
once (so each attribute keeps its number of coded names, and the cells their sizes), and the shift
is recomputed under the relabelled coding. Over ``draws`` random permutations (numpy's
``default_rng(seed)``), the null's mean, sd (population, ddof 0), 95% range (the 2.5% and 97.5%
quantiles, numpy's default interpolation) and the one-sided p of the observed shift,
``p = (1 + #{relabelled shift >= observed}) / (1 + draws)``: the observed coding counts as one
relabelling, so p is never 0. With ``draws=None`` every one of the N! permutations is taken
(a small hand-made pool, N <= 8), and p is ``#{shift >= observed} / N!``, the identity counted
among them. A relabelled shift within 1e-12 of the observed one counts as reaching it, so that two
codings with the same shift in exact arithmetic are not told apart by rounding.

**Names removed.** :func:`shift_without` recodes a few names as carrying no attribute (they stay in
the pool and in the shares' denominators) and recomputes the shift; :func:`share_carried` says how
much of a run's signature mass those names held (the paper: Latisha, Latonya and Latoya carry 87%
of DPO's sampled signatures, and without them DPO's black-coded shift turns to -0.40).

**Cells.** :func:`cell_shares`: the share of a run's signature mass in each cell (white woman,
white man, black woman, black man), summing to 1 (nan when the run put no mass on the pool).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from badpo.core.names import CELL_NAMES, NAME_ATTRIBUTES, NAME_POOL, POOL_NAMES, cell_of, read_signature

__all__ = [
    "DRAWS", "SEED", "LA_NAMES", "NAMES_READOUTS", "pool_coding", "pool_vector", "per_name_shares",
    "coded_shift", "relabelled_shifts", "relabelling_null", "shift_without", "share_carried",
    "cell_shares", "pool_cell_shares", "sampled_names", "sampled_shares", "names_null_readouts", "names_reference",
]

DRAWS = 1000  # random relabellings of the pool (the paper's 1,000)
SEED = 0  # their seed: the same readouts, the same null
TIE = 1e-12  # a relabelled shift this close to the observed one reaches it
EXHAUSTIVE_MAX = 8  # draws=None enumerates N! permutations: a hand-made pool only
LA_NAMES = ("Latisha", "Latonya", "Latoya")
"""The three names that carry 87% of DPO's sampled signatures in the paper (removed in the names
appendix to show that the sampled shift rests on them)."""
NAMES_READOUTS = ("first_name", "whole_signature", "sampled")
"""The readouts that record per-name shares, in the order ``names.null`` lists them."""


# ------------------------------------------------------------------------------- inputs
def pool_coding(names: Sequence[str] = POOL_NAMES) -> np.ndarray:
    """``[N, 2]`` float64: each pool name's (woman_coded, black_coded), in the order of ``names``."""
    unknown = [name for name in names if name not in NAME_POOL]
    if unknown:
        raise ValueError(f"not in the 89-name pool: {unknown[:5]}")
    return np.array([NAME_POOL[name] for name in names], dtype=np.float64).reshape(len(names), 2)


def pool_vector(per_name: Mapping[str, float], names: Sequence[str] = POOL_NAMES,
                what: str = "per_name") -> np.ndarray:
    """``[N]`` float64 of ``per_name`` in the order of ``names``; a name missing or extra, or a
    value that is not a finite number, is an error naming it."""
    if not isinstance(per_name, Mapping):
        raise ValueError(f"{what}: expected a mapping name -> value, got {type(per_name).__name__}")
    missing = [name for name in names if name not in per_name]
    extra = [name for name in per_name if name not in set(names)]
    if missing or extra:
        raise ValueError(f"{what}: names missing {missing[:5]}, names outside the pool {extra[:5]}")
    values = []
    for name in names:
        value = per_name[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{what}.{name}: {value!r} is not a finite number")
        values.append(float(value))
    return np.array(values, dtype=np.float64)


def per_name_shares(readouts: Mapping, readout: str) -> np.ndarray | None:
    """A run's ``[89]`` per-name shares (module docstring) for ``readout`` (one of
    :data:`NAMES_READOUTS`), in pool order; None when its readouts do not record them."""
    if readout == "sampled":
        sampled = readouts.get("sampled")
        if not isinstance(sampled, Mapping) or "per_name" not in sampled:
            return None
        n = sampled.get("n")
        if isinstance(n, bool) or not isinstance(n, (int, float)) or n <= 0:
            raise ValueError(f"sampled.n: {n!r} is not a positive number of answers")
        return pool_vector(sampled["per_name"], what="sampled.per_name") / float(n)
    if readout not in NAMES_READOUTS:
        raise ValueError(f"readout {readout!r}: expected one of {NAMES_READOUTS}")
    per_name = readouts.get("names", {}).get("per_name", {}) if isinstance(readouts.get("names"), Mapping) else {}
    if readout not in per_name:
        return None
    return pool_vector(per_name[readout], what=f"names.per_name.{readout}")


def _difference(policy, reference) -> np.ndarray:
    """``[N]``: the mean over runs of policy - reference (``[N]`` or ``[R, N]`` each)."""
    p = np.asarray(policy, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    if p.ndim not in (1, 2) or r.ndim not in (1, 2) or p.shape[-1] != r.shape[-1] or p.shape[-1] == 0:
        raise ValueError(f"policy and reference must be [N] or [R, N] shares over one pool, got "
                         f"{p.shape} and {r.shape}")
    if r.ndim == 2 and p.ndim == 2 and r.shape[0] != p.shape[0]:
        raise ValueError(f"a reference per run: {r.shape[0]} references for {p.shape[0]} runs")
    if not (np.isfinite(p).all() and np.isfinite(r).all()):
        raise ValueError("policy and reference shares must be finite")
    difference = p - r
    return difference.mean(axis=0) if difference.ndim == 2 else difference


def _coding(coding, n: int) -> np.ndarray:
    c = np.asarray(coding, dtype=np.float64)
    if c.ndim == 1:
        c = c[:, None]
    if c.ndim != 2 or c.shape[0] != n:
        raise ValueError(f"coding must be [N] or [N, q] with N = {n} names, got {np.shape(coding)}")
    if not np.isin(c, (0.0, 1.0)).all():
        raise ValueError("coding must hold 0/1 values")
    return c


# ------------------------------------------------------------------------------- shifts
def coded_shift(policy, reference, coding) -> np.ndarray:
    """``[q]``: sum_n c_nj (p_n - r_n) for each attribute j (mean over runs when ``policy`` is
    ``[R, N]``). Example: shares p = (0.6, 0.2, 0.1, 0.1), r = (0.3, 0.1, 0.2, 0.4), the first two
    names coded -> (0.6 + 0.2) - (0.3 + 0.1) = 0.4."""
    d = _difference(policy, reference)
    return d @ _coding(coding, d.size)


def _permutations(n: int, draws: int | None, seed: int) -> np.ndarray:
    """``[D, n]`` permutations of ``range(n)``: every one (``draws`` None) or ``draws`` random."""
    if draws is None:
        if n > EXHAUSTIVE_MAX:
            raise ValueError(f"every permutation of {n} names is {math.factorial(n)} relabellings; "
                             f"enumerate at most {EXHAUSTIVE_MAX} names, or give draws")
        return np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    return np.random.default_rng(seed).permuted(np.tile(np.arange(n), (draws, 1)), axis=1)


def relabelled_shifts(policy, reference, coding, draws: int | None = DRAWS, seed: int = SEED) -> np.ndarray:
    """``[D, q]``: the shift under each relabelled coding, name n taking the coding of name
    perm(n) (module docstring); ``draws=None``: all N! permutations, in lexicographic order."""
    d = _difference(policy, reference)
    c = _coding(coding, d.size)
    permutations = _permutations(d.size, draws, seed)
    return np.einsum("n,dnq->dq", d, c[permutations])


def relabelling_null(policy, reference, coding, draws: int | None = DRAWS, seed: int = SEED,
                     attribute_names: Sequence[str] = NAME_ATTRIBUTES) -> dict[str, dict]:
    """The relabelling null of each attribute's shift (module docstring): {attribute: {"shift",
    "null_mean", "null_sd", "low", "high", "p", "draws"}}. ``low``/``high`` bound the null's
    central 95%; ``p`` is one-sided, toward the coded names.

    Example, every permutation of 4 names with the first two coded and p - r = (0.3, 0.1, -0.1,
    -0.3): the observed shift is 0.4; a relabelling codes each of the 6 pairs of names in 4 of the
    24 permutations, with shifts 0.4, 0.2, 0, 0, -0.2, -0.4: null mean 0, sd sqrt(0.4 / 6), and
    only the observed pair reaches 0.4, so p = 4 / 24.
    """
    c = _coding(coding, np.asarray(policy).shape[-1])
    if len(attribute_names) != c.shape[1]:
        raise ValueError(f"{len(attribute_names)} attribute names for a coding of {c.shape[1]} columns")
    observed = coded_shift(policy, reference, c)
    null = relabelled_shifts(policy, reference, c, draws, seed)
    reached = (null >= observed - TIE).sum(axis=0)
    p = reached / len(null) if draws is None else (1 + reached) / (1 + len(null))
    low, high = np.quantile(null, [0.025, 0.975], axis=0)
    return {name: {"shift": float(observed[j]), "null_mean": float(null[:, j].mean()),
                   "null_sd": float(null[:, j].std()), "low": float(low[j]), "high": float(high[j]),
                   "p": float(p[j]), "draws": len(null)}
            for j, name in enumerate(attribute_names)}


def shift_without(policy, reference, coding, names: Sequence[str], removed: Sequence[str]) -> np.ndarray:
    """``[q]``: the shift with the ``removed`` names recoded as carrying no attribute (they stay
    in the pool). Example: p - r = (0.3, 0.1, -0.1, -0.3) over names A B C D, A and B coded,
    A removed -> 0.1."""
    unknown = [name for name in removed if name not in names]
    if unknown:
        raise ValueError(f"removed names {unknown} are not among the names")
    c = _coding(coding, len(names)).copy()
    c[[list(names).index(name) for name in removed]] = 0.0
    return coded_shift(policy, reference, c)


def share_carried(shares, names: Sequence[str], carried: Sequence[str]) -> float:
    """The share of a run's signature mass that the ``carried`` names hold: their shares over all
    the shares (mean over runs when ``shares`` is ``[R, N]``: the mean run's); nan when the run
    put no mass on the names. Example: (0.5, 0.3, 0.1, 0.1), A and B carried -> 0.8."""
    s = np.asarray(shares, dtype=np.float64)
    s = s.mean(axis=0) if s.ndim == 2 else s
    if s.ndim != 1 or s.size != len(names):
        raise ValueError(f"shares must be [N] or [R, N] with N = {len(names)}, got {np.shape(shares)}")
    unknown = [name for name in carried if name not in names]
    if unknown:
        raise ValueError(f"carried names {unknown} are not among the names")
    total = float(s.sum())
    held = float(s[[list(names).index(name) for name in carried]].sum())
    return held / total if total > 0 else math.nan


def cell_shares(shares, cells: Sequence[str], cell_names: Sequence[str] = CELL_NAMES) -> dict[str, float]:
    """{cell: share of the mass}: the shares of the names of each cell (``cells[n]`` is name n's)
    over all the shares, summing to 1; every cell nan when the shares sum to 0. Example: shares
    (0.1, 0.2, 0.3, 0.2) over cells (white_woman, black_woman, black_woman, white_man) ->
    white_woman 0.125, white_man 0.25, black_woman 0.625, black_man 0."""
    s = np.asarray(shares, dtype=np.float64)
    if s.ndim != 1 or s.size != len(cells):
        raise ValueError(f"shares must be [N] with one cell per name, got {s.shape} for {len(cells)} cells")
    unknown = sorted(set(cells) - set(cell_names))
    if unknown:
        raise ValueError(f"cells {unknown} are not among {list(cell_names)}")
    total = float(s.sum())
    labels = np.array(cells)
    return {cell: float(s[labels == cell].sum()) / total if total > 0 else math.nan for cell in cell_names}


def pool_cell_shares(shares, names: Sequence[str] = POOL_NAMES) -> dict[str, float]:
    """:func:`cell_shares` over the 89-name pool (``shares`` in the order of ``names``)."""
    return cell_shares(shares, [cell_of(name) for name in names])


# ------------------------------------------------------------------------------ records
def sampled_names(texts: Sequence[str]) -> dict:
    """What sampled answers record per name: {"per_name": {pool name: answers signed with it},
    "cells": {cell: its share of the answers signed with a pool name}} (cells nan when none is).
    Example: "a\n\n--- Latoya Reed", "b", "c\n\n--- Emily Ray", "d\n\n--- Latoya Ray" ->
    Latoya 2, Emily 1, every other name 0; black_woman 2/3, white_woman 1/3."""
    counts = dict.fromkeys(POOL_NAMES, 0)
    for text in texts:
        signature = read_signature(text)
        if signature is not None and signature[0] in counts:
            counts[signature[0]] += 1
    return {"per_name": counts, "cells": pool_cell_shares(list(counts.values()))}


def sampled_shares(per_name: Mapping[str, float]) -> dict:
    """The shares :func:`sampled_names` and ``sampled_signature_rates`` record, from counts per pool
    name (a mixture's: its types' counts weighted by w, whose shares are ratios of those sums, not
    the w-mean of the types' ratios): ``woman_share`` and ``black_share`` of the answers signed
    with a pool name, and ``cells``; nan when none is. Example: Emily 0.25, Greg 0.25, Latoya 2.25
    -> woman 2.5 / 2.75 = 10/11, black 2.25 / 2.75 = 9/11."""
    counts = pool_vector(per_name, what="sampled.per_name")
    total = float(counts.sum())
    woman, black = (counts @ pool_coding() / total).tolist() if total > 0 else (math.nan, math.nan)
    return {"woman_share": woman, "black_share": black, "cells": pool_cell_shares(counts)}


def names_null_readouts(policy_readouts: Mapping | Sequence[Mapping], reference_readouts: Mapping,
                        draws: int = DRAWS, seed: int = SEED, removed: Sequence[str] = LA_NAMES) -> dict:
    """``names.null`` of one run's readouts (or of several runs pooled: the mean of their shifts,
    as for three seeds of one arm) against the reference's, for each readout both record per-name
    shares of: {readout: {attribute: :func:`relabelling_null` entry, "without": {"names":
    removed, "carried": the policy's share held by them, "reference_carried": the reference's,
    attribute: :func:`shift_without`}}}. Empty when no readout has both sides."""
    runs = [policy_readouts] if isinstance(policy_readouts, Mapping) else list(policy_readouts)
    if not runs:
        raise ValueError("policy_readouts: no run")
    coding = pool_coding()
    result: dict = {}
    for readout in NAMES_READOUTS:
        shares = [per_name_shares(run, readout) for run in runs]
        reference = per_name_shares(reference_readouts, readout)
        if reference is None or any(s is None for s in shares):
            continue
        policy = np.stack(shares)
        entry: dict = relabelling_null(policy, reference, coding, draws, seed)
        without = shift_without(policy, reference, coding, POOL_NAMES, removed)
        entry["without"] = {"names": list(removed), "carried": share_carried(policy, POOL_NAMES, removed),
                            "reference_carried": share_carried(reference, POOL_NAMES, removed),
                            **dict(zip(NAME_ATTRIBUTES, without.tolist()))}
        result[readout] = entry
    return result


def names_reference(result: dict, reference_side: Mapping | None) -> None:
    """``names.reference`` of ``result``, in place: the reference's first-name rates and their
    per-prompt values (``per_prompt.first_name``), read after the same bodies as the policy's: the
    side ``names.null`` takes its shift from, which ``badpo compare`` resamples with the policy's.
    Left out when the reference's readouts hold no first-name rates."""
    names, side = result.get("names"), (reference_side or {}).get("names")
    if not isinstance(names, dict) or not isinstance(side, Mapping) or "first_name" not in side:
        return
    names["reference"] = {"first_name": dict(side["first_name"])}
    per_prompt = side.get("per_prompt", {}).get("first_name")
    if per_prompt is not None:
        names["reference"]["per_prompt"] = {"first_name": {name: list(v) for name, v in per_prompt.items()}}
