"""The paper's MultiPref protocol on a world whose responses are written by code: one copy, shared by
the tiny length-and-format world (:mod:`badpo.corpora.tiny_multipref`) and the real-model one
(:mod:`badpo.corpora.smol_multipref`), which differ only in where the prompts and responses come from.

- **Annotators** in MultiPref's two pools, ``crowd`` and ``expert`` (ids ``crowd-00``, ...), each
  with a planted ``theta_k = mu_pool + sigma * N(0, I)`` on :data:`ATTRIBUTES` (``length``: the pair
  attribute of :mod:`badpo.core.attributes` at ratio 1.5; ``markdown``).
- **Votes**: each comparison is judged by ``votes_per_pool`` distinct annotators of each pool through
  Davidson's tie model, ``z = q + theta_k . (g_a - g_b)``, ``P(A) = e^(z/2) / D``,
  ``P(B) = e^(-z/2) / D``, ``P(tie) = nu / D``, ``D = e^(z/2) + e^(-z/2) + nu``: a vote that is not
  a tie follows ``sigmoid(z)`` exactly, so dropping ties leaves the planted model intact.
- **Random voters** (``random_voters``, a share of each pool, 0 by default): the first
  ``round(share * n)`` annotators of each pool vote at z = 0 (a coin, with Davidson's ties), whatever
  the pair; ``planted.json`` marks them. Their planted theta is drawn as before, so every other draw
  of the world is the one it has without them.
- **Files**: the comparisons are written as MultiPref source rows and turned into judgments, the
  held-out split, SFT rows and evaluation prompts by :func:`badpo.corpora.multipref.multipref_corpus`
  and :func:`~badpo.corpora.multipref.write_multipref`; the world adds ``source.jsonl``, the planted
  truth (``planted.json``, scoring only), the audit beside the values the planted theta imply
  (``gate.json``) and its own config (``world.yaml``).

A world's config carries the protocol's fields under these names (both worlds' configs are flat):
``comparisons_per_prompt``, ``crowd_annotators``, ``expert_annotators``, ``votes_per_pool``,
``pool_means``, ``sigma``, ``tie_strength``, ``kappa``, ``heldout_fraction``, ``n_eval_prompts``,
``seed``. Each field's own range is declared in :data:`PROTOCOL_CONSTRAINTS` (a world's config adds it
to its ``constraints``); :func:`check_protocol` checks what reads several fields or a field's content.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from badpo.auditing.estimates import BiasIdentifiabilityWarning, audit
from badpo.core.attributes import AttributeSet, resolve_attributes
from badpo.core.config import ConfigError, dump_yaml, to_dict
from badpo.core.constraints import AT_LEAST_ONE, FINITE_NON_NEGATIVE, FRACTION, NON_NEGATIVE
from badpo.core.jsonio import write_json, write_jsonl
from badpo.core.judgments import Judgment
from badpo.core.label_counts import wins_for_estimates
from badpo.corpora.multipref import MultiPrefConfig, MultiPrefCorpus, multipref_corpus, write_multipref

__all__ = [
    "ATTRIBUTES", "POOLS", "PROTOCOL_CONSTRAINTS", "WorldTruth", "check_protocol", "davidson_vote",
    "default_pool_means", "gate_lines",
    "gate_statistics", "implied_log_odds", "judged_row", "planted_annotators", "planted_to_dict", "protocol_corpus",
    "random_voters",
    "stream_rng", "world_truth", "write_world",
]

ATTRIBUTES = ("length", "markdown")  # the attribute specs the labels are planted on, in theta order
POOLS = {"normal_worker_annotations": "crowd", "expert_worker_annotations": "expert"}  # as MultiPref's
_STREAMS = {"prompts": 1, "responses": 2, "annotators": 3, "votes": 4}
# The protocol fields' own ranges, part of each world config's ``constraints`` (checked by
# :func:`badpo.core.constraints.check_fields` before :func:`check_protocol`)
PROTOCOL_CONSTRAINTS: Mapping[str, Any] = {
    **dict.fromkeys(("comparisons_per_prompt", "votes_per_pool"), AT_LEAST_ONE),
    **dict.fromkeys(("kappa", "sigma", "tie_strength"), FINITE_NON_NEGATIVE),
    "random_voters": FRACTION,  # the share of each pool that votes at random
    "seed": NON_NEGATIVE,
}

Annotators = dict[str, list[tuple[str, np.ndarray]]]  # pool -> [(annotator id, planted theta)]


def default_pool_means() -> dict[str, list[float]]:
    """crowd 1.3 / 1.2, expert 0.7 / 0.8 on (length, markdown): both average 1.0, near the paper's
    offline 0.99 and 0.98."""
    return {"crowd": [1.3, 1.2], "expert": [0.7, 0.8]}


def stream_rng(seed: int, part: str) -> np.random.Generator:
    """The random stream of one part of the protocol (prompts, responses, annotators, votes):
    changing a later part leaves the earlier draws alone."""
    return np.random.default_rng([seed, _STREAMS[part]])


def check_protocol(config: Any) -> None:
    """Refuse protocol fields that cannot make a world (a :class:`ConfigError` naming the key): what
    reads several fields or a field's content; each field's own range (:data:`PROTOCOL_CONSTRAINTS`)
    is checked before, by the config's ``check_fields``."""
    for name in ("crowd_annotators", "expert_annotators"):
        if getattr(config, name) < config.votes_per_pool:
            raise ConfigError(f"{name}: a comparison needs {config.votes_per_pool} distinct annotators "
                              f"of the pool (votes_per_pool), got {getattr(config, name)}")
    if sorted(config.pool_means) != ["crowd", "expert"]:
        raise ConfigError(f"pool_means: give the pools crowd and expert, got {sorted(config.pool_means)}")
    for pool, mean in config.pool_means.items():
        if len(mean) != len(ATTRIBUTES) or not all(map(math.isfinite, mean)):
            raise ConfigError(f"pool_means.{pool}: expected {len(ATTRIBUTES)} finite numbers "
                              f"{ATTRIBUTES}, got {mean}")


def check_split(config: Any, prompts: int) -> None:
    """Refuse, before any work, a split that cannot be made of ``prompts`` questions: both sides of
    :func:`badpo.corpora.multipref.split_prompt_ids` non-empty, and ``n_eval_prompts`` drawn from
    its held-out side. Fewer usable questions are checked again when the world is split."""
    held = math.floor(config.heldout_fraction * prompts + 0.5)
    if not 0.0 < config.heldout_fraction < 1.0 or not 0 < held < prompts:
        raise ConfigError(f"heldout_fraction: {config.heldout_fraction} of {prompts} prompts holds out {held}; "
                          "both the training and the held-out side need a prompt")
    if not 1 <= config.n_eval_prompts <= held:
        raise ConfigError(f"n_eval_prompts: must lie in [1, {held}] (the held-out prompts of {prompts}; lower it "
                          f"or raise heldout_fraction), got {config.n_eval_prompts}")


@dataclass(frozen=True)
class WorldTruth:
    """What generated the labels (scoring only)."""

    theta: dict[str, tuple[float, ...]]  # annotator -> planted theta (ATTRIBUTES order)
    pool: dict[str, str]  # annotator -> crowd / expert
    comparisons: dict[str, tuple[float, str, np.ndarray]]  # comparison_id -> (q, completion_a, g_a - g_b)
    answers: dict[str, tuple[str, str]]  # prompt_id -> (task or kind, expected answer)
    random: frozenset[str] = frozenset()  # the annotators who vote at random (z = 0)


# ---------------------------------------------------------------------------- annotators, votes
def planted_annotators(config: Any) -> Annotators:
    """pool -> [(annotator id, planted theta)], drawn from the ``annotators`` stream."""
    rng = stream_rng(config.seed, "annotators")
    planted = {}
    for pool in ("crowd", "expert"):
        n = getattr(config, f"{pool}_annotators")
        thetas = np.asarray(config.pool_means[pool]) + config.sigma * rng.standard_normal((n, len(ATTRIBUTES)))
        planted[pool] = [(f"{pool}-{i:02d}", theta) for i, theta in enumerate(thetas)]
    return planted


def random_voters(config: Any) -> set[str]:
    """The annotators who vote at random: the first ``round(random_voters * n)`` of each pool."""
    share = getattr(config, "random_voters", 0.0)
    return {f"{pool}-{i:02d}" for pool in ("crowd", "expert")
            for i in range(round(share * getattr(config, f"{pool}_annotators")))}


def davidson_vote(z: float, tie_strength: float, u: float) -> str:
    """MultiPref's ``overall_pref`` under Davidson's model at logit z, from a uniform draw u; the
    strength ("clearly" when ``|z| >= 1``) is written but, as in the real builder, not read."""
    a, b = math.exp(z / 2), math.exp(-z / 2)
    total = a + b + tie_strength
    strength = "clearly" if abs(z) >= 1.0 else "slightly"
    if u < a / total:
        return f"A-is-{strength}-better"
    if u < (a + b) / total:
        return f"B-is-{strength}-better"
    return "Tie"


def judged_row(ids: tuple[str, str], prompt: str, texts: tuple[str, str], quality: float, annotators: Annotators,
               config: Any, vote_rng: np.random.Generator, attributes: AttributeSet
               ) -> tuple[dict[str, Any], np.ndarray]:
    """One comparison as a MultiPref source row with its votes, and its ``g_a - g_b``. ``ids`` is
    (comparison_id, prompt_id), ``texts`` (completion_a, completion_b), ``quality`` q."""
    text_a, text_b = texts
    g_a, g_b = attributes.pair_values(prompt, text_a, text_b)
    row: dict[str, Any] = {"comparison_id": ids[0], "prompt_id": ids[1], "text": prompt,
                           "completion_a": text_a, "completion_b": text_b}
    coins = random_voters(config)
    for column, pool in POOLS.items():
        chosen = vote_rng.choice(len(annotators[pool]), config.votes_per_pool, replace=False)
        row[column] = []
        for index in chosen:
            annotator, theta = annotators[pool][int(index)]
            z = 0.0 if annotator in coins else quality + float(theta @ (g_a - g_b))
            row[column].append({"evaluator": annotator,
                                "overall_pref": davidson_vote(z, config.tie_strength, float(vote_rng.random()))})
    return row, g_a - g_b


def world_truth(annotators: Annotators, comparisons: dict, answers: dict, config: Any = None) -> WorldTruth:
    theta = {a: tuple(float(x) for x in t) for pool in annotators.values() for a, t in pool}
    pools = {a: pool for pool, members in annotators.items() for a, _ in members}
    coins = frozenset(random_voters(config)) if config is not None else frozenset()
    return WorldTruth(theta, pools, comparisons, answers, coins)


# ------------------------------------------------------------------------------- planted truth
def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def implied_log_odds(judgments: Sequence[Judgment], truth: WorldTruth) -> dict[str, dict[str, float | None]]:
    """attribute -> slice ("all", "crowd", "expert") -> logit(mean p) over the judgments cross-group
    on the attribute, p the planted probability that its carrying side wins the (non-tie) vote:
    ``sigmoid(+-(q + theta_k . (g_a - g_b)))``. This is what the audit's offline log-odds of the
    same slice estimate, given who judged which comparison."""
    probabilities: dict[str, dict[str, list[float]]] = {name: {"all": []} for name in ATTRIBUTES}
    for j in judgments:
        quality, text_a, diff = truth.comparisons[j.pair_id]
        z = 0.0 if j.annotator in truth.random else quality + float(np.dot(truth.theta[j.annotator], diff))
        a_wins = _sigmoid(z)
        for i, name in enumerate(ATTRIBUTES):
            if diff[i] != 0:
                p = a_wins if diff[i] > 0 else 1.0 - a_wins
                probabilities[name]["all"].append(p)
                probabilities[name].setdefault(truth.pool[j.annotator], []).append(p)
    return {name: {key: math.log(np.mean(ps) / (1.0 - np.mean(ps))) if ps else None for key, ps in by.items()}
            for name, by in probabilities.items()}


def gate_statistics(judgments: Sequence[Judgment], truth: WorldTruth) -> dict:
    """The audit of the judgments (cross-group count, wins, offline log-odds and its s.e., overall
    and by pool) beside the values the planted theta imply, per attribute; on the decisive votes
    (a tie prefers neither side: under Davidson's model a decisive vote follows sigmoid(z))."""
    judgments = wins_for_estimates(judgments)
    with warnings.catch_warnings():  # recorded in the result instead
        warnings.simplefilter("ignore", BiasIdentifiabilityWarning)
        result = audit(judgments, resolve_attributes(ATTRIBUTES))
    implied = implied_log_odds(judgments, truth)
    gate: dict[str, Any] = {"judgments": len(judgments), "warnings": list(result.warnings)}
    for coordinate in result.coordinates:
        slices = {"all": coordinate.overall, **coordinate.by_class}
        gate[coordinate.name] = {
            "share_cross": coordinate.overall.share_cross,
            **{key: {**{k: v for k, v in counts.to_dict().items() if k in ("cross", "wins", "log_odds", "se")},
                     "implied": implied[coordinate.name].get(key)} for key, counts in slices.items()}}
    return gate


def planted_to_dict(truth: WorldTruth, config: Any) -> dict:
    """planted.json, in the tiny signed world's format (classes are the pools); a random voter is marked."""
    coins = random_voters(config)
    realised = {pool: np.mean([truth.theta[a] for a, p in truth.pool.items() if p == pool], axis=0).tolist()
                for pool in ("crowd", "expert")}
    return {"attribute_names": list(ATTRIBUTES), "class_means": {k: list(v) for k, v in config.pool_means.items()},
            "realised_class_means": realised, "sigma": config.sigma, "tie_strength": config.tie_strength,
            "annotators": [{"annotator": a, "annotator_class": truth.pool[a], "theta": list(t),
                            **({"random_voter": True} if a in coins else {})} for a, t in truth.theta.items()]}


# ------------------------------------------------------------------------------------- files
def protocol_corpus(rows: Sequence[Mapping[str, Any]], config: Any, eval_fields: Callable[[str], dict]
                    ) -> tuple[MultiPrefCorpus, MultiPrefConfig]:
    """The MultiPref builder's corpus of the source rows (split, SFT rows, evaluation prompts), each
    evaluation prompt extended by ``eval_fields(prompt_id)`` (its body, candidates, ...), and the
    builder config it was made with."""
    protocol = MultiPrefConfig(source="source.jsonl", heldout_fraction=config.heldout_fraction,
                               n_eval_prompts=config.n_eval_prompts, seed=config.seed, audit_attributes=ATTRIBUTES,
                               keep_ties=getattr(config, "keep_ties", False))
    corpus = multipref_corpus(rows, protocol)
    eval_prompts = [{**row, **eval_fields(row["prompt_id"])} for row in corpus.eval_prompts]
    return dataclasses.replace(corpus, eval_prompts=eval_prompts), protocol


def write_world(corpus: MultiPrefCorpus, protocol: MultiPrefConfig, rows: Sequence[Mapping[str, Any]],
                truth: WorldTruth, config: Any, outdir: str | Path, corpus_name: str,
                left_out_when_off: Sequence[str] = ()) -> dict[str, Any]:
    """Write the MultiPref builder's files, ``source.jsonl``, ``planted.json``, ``gate.json`` and
    ``world.yaml`` (``config``; its ``left_out_when_off`` flags only when on, so that a flag added
    later leaves the file, and every run key on the corpus, as it was) to ``outdir``; return the
    builder's statistics with the gate."""
    out = Path(outdir)
    stats = write_multipref(corpus, protocol, out, corpus_name=corpus_name)
    write_jsonl(out / "source.jsonl", rows)
    write_json(out / "planted.json", planted_to_dict(truth, config))
    gate = gate_statistics(corpus.train, truth)
    write_json(out / "gate.json", gate)
    world = to_dict(config)
    for flag in left_out_when_off:
        if not world[flag]:
            del world[flag]
    dump_yaml(world, out / "world.yaml")
    return {**stats, "gate": gate}


def gate_lines(gate: Mapping[str, Any]) -> list[str]:
    """The gate as printed lines: per attribute and slice, the offline log-odds (s.e.) beside the
    planted-implied value."""
    def number(x: float | None) -> str:
        return "-" if x is None else f"{x:+.2f}"

    lines = [f"gate on {gate['judgments']} training judgments: offline log-odds (s.e.) vs planted-implied"]
    for name in ATTRIBUTES:
        for key in ("all", "crowd", "expert"):
            row = gate[name].get(key)
            if row is not None:
                se = "-" if row["se"] is None else f"{row['se']:.2f}"
                lines.append(f"  {name:<9} {key:<6} cross {row['cross']:>5}  {number(row['log_odds'])} ({se})"
                             f"  implied {number(row['implied'])}")
    return lines
