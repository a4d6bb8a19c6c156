"""``badpo audit DATA --discover``: find which attributes the annotators are biased on, before
declaring one.

**Candidates** are the library of :mod:`badpo.auditing.candidate_attributes` (length, markdown and its elements,
names, emoji, punctuation, person, hedges, refusals, numbers, URLs, a signature, sentence forms)
and the n-grams of the data screen (first / last words of a response, words and phrases that differ
between the two sides of a pair), each as an attribute spec ``badpo train`` accepts.

**The test**, per candidate, on the pairs whose two sides differ in it: the shared effect (the
log-odds that its side wins, with a pair-clustered standard error; :mod:`badpo.auditing.discover_stats`)
and, for the library and the ``SPREAD_DATA`` data candidates that differ on the most pairs, the
spread across annotators (a homogeneity test), combined by Simes. The
prompts are split in two halves by a hash of the prompt text (``seed``): every candidate with at
least ``min_pairs`` differing pairs in each half is tested on the first, with Benjamini-Hochberg at
false discovery rate ``alpha`` over all of them; what it finds is tested again on the held-out half,
Benjamini-Hochberg over the carried candidates, and must keep its direction. Only what both halves
find is reported. The confirmed candidates are then grouped, strongest first (|effect / s.e.| on
all data; a library member first at equal strength): one that marks the same pairs as a cluster's
representative (on the pairs of the one that marks fewer, the other marks >= 0.6 of them the same
way) joins that cluster; one that does not is tested again on the held-out pairs where
no representative differs, where they cannot explain it, and opens a cluster only if its effect
holds there (Bonferroni over the confirmed candidates); else it joins the cluster it overlaps most,
as a proxy (a word that often ends the answers without the planted ending, a first name under the
name attributes).

**Quality.** A bias and a quality difference that goes with the candidate cannot be told apart from
labels alone; what the data allow is reported beside the effect: ``matched``, the effect on the
pairs whose two sides are identical once the candidate is removed (a swap pair; the regex specs'
edit, the signature's strip), where quality is held exactly, and the spread across annotators,
which a shared quality signal does not produce. The limits are on docs/discover.md.

**What it reports** for a cluster: the effect on all data with its interval, on the held-out half,
on matched pairs, the spread (Paule-Mandel tau over the annotators' joint estimates of
:func:`badpo.auditing.joint.fit_joint`, every reported attribute at once, with a Q-profile interval) and
the level ``bias.init: conditional`` would start theta at with every reported attribute declared
(the conditional level of :mod:`badpo.core.pair_level`, as ``badpo audit`` shows it; the default
start, ``reference``, is the marginal level); the ready
``attributes=[...]`` line; when nothing is found, the smallest effect the data could have shown.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from badpo.auditing.discover_data import CandidateEffects, Encoded, Halves, Progress, candidate_entries, encode
from badpo.auditing.discover_stats import (
    Effects,
    benjamini_hochberg,
    effects,
    effects_from_sums,
    homogeneity_p,
    simes2,
    spread_sd,
)
from badpo.auditing.joint import fit_annotator, fit_joint, prior_precision
from badpo.core.judgments import Judgment

__all__ = ["Discovery", "DiscoverySettings", "Finding", "Tested", "discover"]

_NORMAL = NormalDist()
CLUSTER_LINK = 0.6  # containment of pair signs that puts two candidates in one cluster
POWER = 0.8  # the power of the smallest effect reported when nothing is found
SPREAD_DATA = 100  # data candidates (those differing on the most pairs) whose spread is tested too


@dataclass(frozen=True)
class DiscoverySettings:
    alpha: float = 0.05  # false discovery rate of each half's Benjamini-Hochberg
    min_pairs: int = 20  # differing pairs a candidate needs in each half to be tested
    min_per_annotator: int = 5  # judgments on differing pairs an annotator needs for the spread test
    seed: int = 0  # the hash seed of the split by prompt
    screen: bool = True  # propose n-gram candidates from the data

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"discover: alpha must lie in (0, 1), got {self.alpha}")
        if self.min_pairs < 2 or self.min_per_annotator < 1:
            raise ValueError("discover: min_pairs must be >= 2 and min_per_annotator >= 1")


@dataclass(frozen=True)
class Tested:
    """One candidate's test in both halves."""

    name: str
    spec: str
    source: str  # library / data
    pairs: int  # pairs that differ in it, all data
    effect: float  # log-odds that its side wins, all data
    pairs_discovery: int
    effect_discovery: float
    p_discovery: float  # Simes of effect and spread where the spread is tested, else the effect's
    p_spread_discovery: float | None
    pairs_heldout: int
    effect_heldout: float
    p_heldout: float
    mde: float  # smallest |log-odds| both halves would confirm with 80% power
    discovered: bool
    confirmed: bool


@dataclass(frozen=True)
class Finding:
    """One reported cluster, named by its representative."""

    name: str
    spec: str
    source: str
    members: tuple[str, ...]  # the other confirmed candidates of the cluster
    pairs: int
    judgments: int
    effect: tuple[float, float, float]  # estimate, low, high (95%), all data
    heldout: tuple[float, float, float]
    pairs_heldout: int
    joint: tuple[float, float, float]  # held-out half, every reported attribute in one pooled fit
    matched: tuple[float, float, float] | None  # on pairs that differ only in the candidate
    pairs_matched: int | None  # None: no edit removes the candidate alone
    spread: tuple[float, float, float] | None  # tau, low, high
    p_spread: float | None  # homogeneity over all data
    level: float | None  # where bias.init: conditional would start theta (all findings declared)
    annotators: int  # annotators with a joint estimate
    caution: str | None = None  # why this may be quality rather than bias (:func:`caution`)


@dataclass(frozen=True)
class Discovery:
    n_judgments: int
    n_pairs: int
    n_prompts: int
    n_annotators: int
    settings: DiscoverySettings
    n_library: int
    n_data: int  # data-screen candidates (n-grams differing on >= 2 min_pairs pairs)
    tested: tuple[Tested, ...]
    untestable: tuple[tuple[str, str], ...]  # (library candidate, why it cannot be tested)
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = field(default=())
    labels: Mapping[str, Any] | None = None  # the labels read (badpo.core.label_counts), ties left out of the screen

    def attributes(self) -> list[str]:
        return [f.spec for f in self.findings]

    def attributes_line(self) -> str | None:
        """``attributes=[...]`` for ``badpo train`` (JSON strings: Python, YAML and the CLI read it)."""
        import json

        return f"attributes={json.dumps(self.attributes())}" if self.findings else None

    def power(self) -> dict[str, Any] | None:
        """The smallest |effect| the data could have shown: on the best-powered candidate and the
        median over the tested ones; None when nothing was tested."""
        if not self.tested:
            return None
        best = min(self.tested, key=lambda t: t.mde)
        return {"best": best.name, "best_pairs": best.pairs, "best_mde": best.mde,
                "median_mde": float(np.median([t.mde for t in self.tested])),
                "covers": "the tested candidates only: not a bias on an attribute no candidate carries, "
                          "nor a smaller one; nothing found is not evidence that the annotators are unbiased"}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (sorted keys; inf / NaN refused)."""
        import json

        return json.dumps(self.to_dict(), indent=1, sort_keys=True, allow_nan=False) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"n_judgments": self.n_judgments, "n_pairs": self.n_pairs, "n_prompts": self.n_prompts,
                "n_annotators": self.n_annotators, "settings": asdict(self.settings),
                "n_library": self.n_library, "n_data": self.n_data,
                "findings": [asdict(f) for f in self.findings], "attributes": self.attributes(),
                "tested": [asdict(t) for t in self.tested],
                "untestable": [{"name": n, "reason": r} for n, r in self.untestable],
                "power": self.power(), "notes": list(self.notes)} | (
            {"ties": self.labels["ties"], "labels": dict(self.labels)} if self.labels is not None else {})


# ------------------------------------------------------------------------------------ the tests
def prompt_halves(prompts: list[str], seed: int) -> np.ndarray:
    """0 (discovery) or 1 (held out) per prompt: a CRC-32 bit of ``seed`` and the prompt text."""
    return np.fromiter((zlib.crc32(f"{seed}\x00{p}".encode()) >> 7 & 1 for p in prompts),
                       dtype=np.int8, count=len(prompts))


def _spread_p(enc: Encoded, signs: np.ndarray, pair_mask: np.ndarray, min_per: int) -> float:
    """The homogeneity p-value across annotators of one candidate (sign per pair) on ``pair_mask``."""
    d = signs[enc.judge_pair]
    cross = (d != 0) & pair_mask[enc.judge_pair]
    won = enc.judge_a_won[cross] == (d[cross] > 0)
    people = enc.judge_annotator[cross]
    k = len(enc.annotators)
    p, _ = homogeneity_p(np.bincount(people, weights=won, minlength=k), np.bincount(people, minlength=k), min_per)
    return np.nan if p is None else p


def _mde(se_discovery: np.ndarray, se_heldout: np.ndarray, alpha: float, m: int) -> np.ndarray:
    power = _NORMAL.inv_cdf(POWER)
    first = (_NORMAL.inv_cdf(1 - alpha / (2 * max(m, 1))) + power) * se_discovery
    return np.maximum(first, (_NORMAL.inv_cdf(1 - alpha / 2) + power) * se_heldout)


def _select(p_a: np.ndarray, p_b: np.ndarray, testable: np.ndarray, agree: np.ndarray,
            alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(discovered, confirmed): BH over the testable on the first half, BH over those on the
    second, keeping only those whose direction ``agree``s."""
    discovered = np.zeros(len(p_a), dtype=bool)
    discovered[testable] = benjamini_hochberg(p_a[testable], alpha)
    confirmed = np.zeros(len(p_a), dtype=bool)
    confirmed[discovered] = benjamini_hochberg(p_b[discovered], alpha)
    return discovered, confirmed & agree


def halves(enc: Encoded, pair_half: np.ndarray) -> Halves:
    """(wins of side a, judgments) per pair on the discovery half, the held-out half and all pairs."""
    totals = np.bincount(enc.judge_pair, minlength=enc.n_pairs)
    wins_a = np.bincount(enc.judge_pair, weights=enc.judge_a_won, minlength=enc.n_pairs).astype(np.int64)
    return [(np.where(pair_half == h, wins_a, 0), np.where(pair_half == h, totals, 0)) for h in (0, 1)] + [
        (wins_a, totals)]


def _spread_tests(enc: Encoded, cands: CandidateEffects, testable: np.ndarray, every: Effects,
                  settings: DiscoverySettings, pair_half: np.ndarray) -> np.ndarray:
    """The homogeneity p-values [2, C] (nan: not tested) of the testable library candidates and of
    the SPREAD_DATA testable data candidates that differ on the most pairs (chosen without the labels)."""
    n_library = cands.library_signs.shape[1]
    data = [c for c in np.argsort(-every.pairs, kind="stable").tolist() if c >= n_library and testable[c]]
    chosen = [c for c in range(n_library) if testable[c]] + data[:SPREAD_DATA]
    spread = np.full((2, len(cands)), np.nan)
    for c, (pairs, pair_signs) in cands.entries(chosen).items():
        signs = np.zeros(enc.n_pairs, dtype=np.int8)
        signs[pairs] = pair_signs
        for half in (0, 1):
            spread[half, c] = _spread_p(enc, signs, pair_half == half, settings.min_per_annotator)
    return spread


def _test_all(enc: Encoded, cands: CandidateEffects, settings: DiscoverySettings, pair_half: np.ndarray):
    first, second, every = (effects_from_sums(sums) for sums in cands.sums)
    testable = (first.pairs >= settings.min_pairs) & (second.pairs >= settings.min_pairs)
    spread = _spread_tests(enc, cands, testable, every, settings, pair_half)
    p_a, p_b = simes2(first.p, spread[0]), simes2(second.p, spread[1])
    by_effect = np.isnan(spread[0]) | (first.p <= spread[0])
    agree = ~by_effect | (np.sign(first.estimate) == np.sign(second.estimate))
    discovered, confirmed = _select(p_a, p_b, testable, agree, settings.alpha)
    mde = _mde(first.se, second.se, settings.alpha, int(testable.sum()))
    tested = tuple(Tested(
        cands.names[c], cands.specs[c], cands.sources[c], int(every.pairs[c]), float(every.estimate[c]),
        int(first.pairs[c]), float(first.estimate[c]), float(p_a[c]),
        None if np.isnan(spread[0, c]) else float(spread[0, c]), int(second.pairs[c]),
        float(second.estimate[c]), float(p_b[c]), float(mde[c]), bool(discovered[c]), bool(confirmed[c]))
        for c in np.flatnonzero(testable))
    untestable = tuple(
        (cands.names[c], f"{int(every.pairs[c])} pairs differ in it ({int(first.pairs[c])} in the discovery "
                         f"half, {int(second.pairs[c])} held out); the test needs {settings.min_pairs} in each")
        for c in range(len(cands)) if cands.sources[c] == "library" and not testable[c])
    return tested, untestable, np.flatnonzero(confirmed), (second, every)


# ------------------------------------------------------------------------------- the clusters
def _related(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether two candidates mark the same pairs: on the pairs of the one that marks fewer, the
    other marks at least CLUSTER_LINK of them the same way (net of those it marks the other way)."""
    smaller = min(np.count_nonzero(x), np.count_nonzero(y))
    return smaller > 0 and abs(float(np.dot(x.astype(np.float64), y))) >= CLUSTER_LINK * smaller


# ------------------------------------------------------------------------------- the verdict
def _triple(result: Effects, c: int) -> tuple[float, float, float]:
    low, high = result.interval()
    return float(result.estimate[c]), float(low[c]), float(high[c])


def _matched(enc: Encoded, remove, entries: tuple[np.ndarray, np.ndarray], wins_a: np.ndarray,
             totals: np.ndarray):
    """(effect, pairs) on the pairs whose sides are identical once the candidate is removed;
    (None, None) without an edit that removes it alone, (None, 0) when no pair is matched."""
    if remove is None:
        return None, None
    pairs, signs = entries
    cache: dict[int, str] = {}

    def plain(text: int) -> str:
        if text not in cache:
            cache[text] = remove(enc.texts[text])
        return cache[text]

    same = np.array([plain(a) == plain(b) for a, b in zip(enc.pair_a[pairs].tolist(), enc.pair_b[pairs].tolist())],
                    dtype=bool)
    if not same.any():
        return None, 0
    result = effects(np.zeros(int(same.sum()), np.int64), pairs[same], signs[same], wins_a, totals, 1)
    return _triple(result, 0), int(result.pairs[0])


def pooled_fit(x: np.ndarray, cluster: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(theta, s.e.) of one pooled model ``P(chosen) = sigmoid(theta . x)`` over the rows ``x``
    (attribute differences, chosen minus rejected), with :mod:`badpo.auditing.joint`'s prior; the
    standard errors are a sandwich with the rows of one ``cluster`` (pair) summed in its meat."""
    rows = (x != 0).any(axis=1)
    x, cluster = x[rows], cluster[rows]
    precision = prior_precision(x)
    theta, _ = fit_annotator(x, precision)
    lose = 1.0 / (1.0 + np.exp(x @ theta))  # sigmoid(-margin): each row's weight in the gradient
    information = (x * (lose * (1 - lose))[:, None]).T @ x + np.diag(precision)
    _, group = np.unique(cluster, return_inverse=True)
    n_groups = int(group.max()) + 1 if len(group) else 0
    scores = np.stack([np.bincount(group, weights=x[:, i] * lose, minlength=n_groups)
                       for i in range(x.shape[1])], axis=1)
    bread = np.linalg.inv(information)
    meat = scores.T @ scores * (n_groups / max(n_groups - 1, 1))
    return theta, np.sqrt(np.diag(bread @ meat @ bread))


def _oriented(enc: Encoded, reps: list[int], signs: dict[int, np.ndarray]) -> np.ndarray:
    """The representatives' differences chosen minus rejected per judgment, [N, R]."""
    oriented = np.where(enc.judge_a_won, 1.0, -1.0)
    return np.stack([signs[c][enc.judge_pair] * oriented for c in reps], axis=1)


def _overlap(x: np.ndarray, y: np.ndarray) -> float:
    return abs(float(np.dot(x.astype(np.float64), y)))


def _beyond(entries: tuple[np.ndarray, np.ndarray], clean: np.ndarray, wins_a: np.ndarray,
            totals: np.ndarray) -> tuple[float, int]:
    """(p-value, pairs) of a candidate's effect (its ``entries``) on the ``clean`` pairs alone."""
    pairs, signs = entries
    mask = clean[pairs]
    result = effects(np.zeros(int(mask.sum()), np.int64), pairs[mask], signs[mask], wins_a, totals, 1)
    return float(result.p[0]), int(result.pairs[0])


def fold(entries: dict[int, tuple[np.ndarray, np.ndarray]], order: list[int], signs: dict[int, np.ndarray],
         wins_a: np.ndarray, totals: np.ndarray, settings: DiscoverySettings) -> list[list[int]]:
    """The clusters of the confirmed candidates, strongest first. A candidate joins the first
    cluster it is related to (:func:`_related`); else it is tested on the pairs where no cluster's
    representative differs (``wins_a`` and ``totals``: the held-out half), where those cannot
    explain its effect: with p <= alpha / (confirmed candidates) on at least ``min_pairs`` such
    pairs it opens a cluster, else it joins the cluster it overlaps most (a proxy of it)."""
    groups: list[list[int]] = []
    for c in order:
        related = [g for g in groups if _related(signs[c], signs[g[0]])]
        if related:
            related[0].append(c)
            continue
        clean = np.ones(len(totals), dtype=bool)
        for group in groups:
            clean &= signs[group[0]] == 0
        p, pairs = _beyond(entries[c], clean, wins_a, totals)
        closest = max(groups, key=lambda g: _overlap(signs[c], signs[g[0]]), default=None)
        explained = pairs < settings.min_pairs or p > settings.alpha / len(order)
        if closest is not None and explained and _overlap(signs[c], signs[closest[0]]) > 0:
            closest.append(c)
        else:
            groups.append([c])
    return groups


def _joint_effect(enc: Encoded, reps: list[int], signs: dict[int, np.ndarray], pair_mask: np.ndarray
                  ) -> dict[int, tuple[float, float, float]]:
    """Each representative's effect in one pooled fit of all of them on the ``pair_mask`` judgments."""
    rows = pair_mask[enc.judge_pair]
    theta, se = pooled_fit(_oriented(enc, reps, signs)[rows], enc.judge_pair[rows])
    z = _NORMAL.inv_cdf(0.975)
    return {c: (float(t), float(t - z * e), float(t + z * e)) for c, t, e in zip(reps, theta, se)}


def _joint(enc: Encoded, reps: list[int], signs: dict[int, np.ndarray], names: list[str], seed: int):
    """Per representative: (tau, low, high) or None, the level bias.init: conditional would start theta at with
    every reported attribute declared (:func:`start_levels`) or None, annotators estimated."""
    oriented = _oriented(enc, reps, signs)
    fit = fit_joint(oriented, enc.judge_annotator, enc.annotators, names)
    levels = start_levels(oriented, enc.judge_pair, np.where(enc.judge_a_won, 1.0, -1.0), seed)
    out = []
    for column in range(len(reps)):
        values, se = fit.estimate[:, column], fit.se[:, column]
        seen = np.isfinite(values)
        out.append((spread_sd(values[seen], se[seen]), levels[column], int(seen.sum())))
    return out


# the start level is fitted on at most this many pairs (drawn with the seed): the pair-effect fit's
# quadrature holds [judgments, nodes] arrays (up to ~300 nodes at a large quality spread), so on
# 20,000 pairs it took 100 s and 1.1 GB of a 100k-judgment screen; on 5,000 its s.e. is ~0.04
LEVEL_PAIRS = 5_000


def start_levels(oriented: np.ndarray, pair: np.ndarray, side: np.ndarray, seed: int) -> list[float | None]:
    """The conditional level of each column (badpo.core.pair_level), fitted jointly, as ``train``
    starts theta under ``bias.init: conditional``; on more than :data:`LEVEL_PAIRS` pairs, on that
    many drawn at random (its standard error grows as 1 / sqrt(pairs): about 0.04 there). None where
    no finite fit exists."""
    import torch

    from badpo.core.pair_level import pair_effect_level

    pairs = np.unique(pair)
    if len(pairs) > LEVEL_PAIRS:
        keep = np.isin(pair, np.random.default_rng(seed).choice(pairs, LEVEL_PAIRS, replace=False))
        oriented, pair, side = oriented[keep], pair[keep], side[keep]
    try:
        fit = pair_effect_level(torch.from_numpy(np.ascontiguousarray(oriented, dtype=np.float64)),
                                torch.from_numpy(pair.astype(np.int64)), torch.from_numpy(side))
    except ValueError:
        return [None] * oriented.shape[1]
    return [float(v) for v in fit.level]


def caution(finding: Finding, alpha: float) -> str | None:
    """Why a finding may be a quality difference that goes with the attribute, or None: the
    matched pairs (quality held) do not show the effect, or there are none and the annotators
    agree on it (no spread), as they agree on quality."""
    if finding.matched is not None and finding.matched[1] <= 0 <= finding.matched[2]:
        return (f"on the {finding.pairs_matched} pairs that differ in it alone (quality held) the effect is "
                f"{finding.matched[0]:+.2f} [{finding.matched[1]:+.2f}, {finding.matched[2]:+.2f}]: it may be quality")
    agree = finding.p_spread is None or finding.p_spread > alpha
    if finding.matched is None and agree:
        return ("no pair differs in it alone and the annotators agree on it (no spread beyond noise), as "
                "they would on a quality difference that goes with it; declare it only if it is not quality")
    return None


def _findings(enc: Encoded, cands: CandidateEffects, confirmed: np.ndarray, heldout: Effects, every: Effects,
              settings: DiscoverySettings, pair_half: np.ndarray) -> tuple[Finding, ...]:
    if not len(confirmed):
        return ()
    entries = cands.entries([int(c) for c in confirmed])
    signs = {}
    for c, (pairs, pair_signs) in entries.items():
        signs[c] = np.zeros(enc.n_pairs, dtype=np.int8)
        signs[c][pairs] = pair_signs
    strength = np.abs(every.estimate / every.se)
    order = sorted(signs, key=lambda c: (-round(float(strength[c]), 1), cands.sources[c] != "library"))
    totals = np.bincount(enc.judge_pair, minlength=enc.n_pairs)
    wins_a = np.bincount(enc.judge_pair, weights=enc.judge_a_won, minlength=enc.n_pairs).astype(np.int64)
    heldout_pairs = pair_half == 1
    groups = fold(entries, order, signs, np.where(heldout_pairs, wins_a, 0), np.where(heldout_pairs, totals, 0),
                  settings)
    reps = [g[0] for g in groups]
    joint_effect = _joint_effect(enc, reps, signs, heldout_pairs)
    joint = _joint(enc, reps, signs, [cands.names[c] for c in reps], settings.seed)
    findings = []
    everywhere = np.ones(enc.n_pairs, dtype=bool)
    for group, (spread, level, estimated) in zip(groups, joint):
        c = group[0]
        matched, pairs_matched = _matched(enc, cands.removers[c], entries[c], wins_a, totals)
        p_spread = _spread_p(enc, signs[c], everywhere, settings.min_per_annotator)
        findings.append(Finding(
            cands.names[c], cands.specs[c], cands.sources[c], tuple(cands.names[m] for m in group[1:]),
            int(every.pairs[c]), int(every.judgments[c]), _triple(every, c), _triple(heldout, c),
            int(heldout.pairs[c]), joint_effect[c], matched, pairs_matched, spread,
            None if np.isnan(p_spread) else float(p_spread), level, estimated))
    findings.sort(key=lambda f: -abs(f.effect[0]))
    return tuple(dataclasses.replace(f, caution=caution(f, settings.alpha)) for f in findings)


def discover(judgments: Iterable[Judgment], settings: DiscoverySettings | None = None,
             progress: Progress | None = None) -> Discovery:
    """Screen ``judgments`` for the attributes the annotators are biased on (module docstring)."""
    settings = settings or DiscoverySettings()
    enc = encode(judgments, progress)
    pair_half = prompt_halves(enc.prompts, settings.seed)[enc.pair_prompt]
    cands = candidate_entries(enc, settings.min_pairs, halves(enc, pair_half), settings.screen, progress)
    tested, untestable, confirmed, (heldout, every) = _test_all(enc, cands, settings, pair_half)
    if progress is not None:
        progress(f"tested {len(tested):,} candidates; {sum(t.discovered for t in tested)} found on the "
                 f"discovery half, {len(confirmed)} confirmed on the held-out half")
    findings = _findings(enc, cands, confirmed, heldout, every, settings, pair_half)
    notes = []
    if len(enc.annotators) < 2:
        notes.append(f"{len(enc.annotators)} annotator(s): the spread across annotators cannot be tested")
    held_out = int(np.count_nonzero(pair_half == 1))
    if enc.n_pairs and min(held_out, enc.n_pairs - held_out) < 0.1 * enc.n_pairs:
        notes.append(f"the split by prompt put {held_out} of {enc.n_pairs} pairs in the held-out half: the data "
                     f"have {len(enc.prompts)} distinct prompt(s), and a candidate needs pairs in both halves")
    n_library = sum(s == "library" for s in cands.sources)
    return Discovery(len(enc.judge_pair), enc.n_pairs, len(enc.prompts), len(enc.annotators), settings,
                     n_library, len(cands) - n_library, tested, untestable, findings, tuple(notes))
