"""How fast ``badpo audit --stream`` flags planted outliers, and how often it flags the rest (a
simulation, not a test).

The world is the tiny signed world's: its pairs (``tiny_base_pairs`` and ``sign_pairs`` with the
default signing protocol: 40% quality, 20% swap, 40% mixed pairs, names from the four cells) and its
label model (each pair judged by 4 annotators drawn uniformly with replacement; response 1 wins with
probability sigmoid(q + theta_k . (g_1 - g_2))). The annotators differ from the built world's: a
pool of ``--annotators`` sharing one level theta = (1.0, 1.0) (woman, black; the mean of the tiny
world's class means), four of them planted at known offsets from it (:data:`OUTLIERS`). Each stream
is a fresh draw of the pair order, the judges and the votes over ``--pairs`` pairs, fed through
:meth:`badpo.auditing.stream.StreamAudit.observe` and read after every judgment.

Beside it, the same streams are judged by re-running the offline audit's Bonferroni flag
(``outlying_bonferroni`` of ``badpo audit --report``: penalised likelihood-ratio p < 0.05 / m
against the pool's level from all cross-group votes) every ``--every`` judgments, as a team would
by re-running the whole-file audit as the file grows. A null world (every annotator at the level)
gives the family false-flag rate where the guarantee applies exactly.

    python benchmarks/bench_stream_audit.py [--streams 200] [--null-streams 100] [--pairs 4000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from badpo.auditing.estimates import penalised_log_odds, penalised_p_value
from badpo.auditing.stream import StreamAudit
from badpo.corpora.signing import SigningConfig, sign_pairs
from badpo.corpora.tiny import TinyWorldConfig, tiny_base_pairs

LEVEL = (1.0, 1.0)
ATTRIBUTES = ("woman", "black")
OUTLIERS = {"O1": (2.0, 0.0), "O2": (-1.0, 0.0), "O3": (0.0, -2.0), "O4": (0.0, 1.0)}


def world(n_pairs: int, seed: int) -> dict[str, np.ndarray]:
    """The tiny world's pairs: g_1 - g_2 [n, 2] and the quality margin q [n]."""
    config = TinyWorldConfig(n_pairs=n_pairs, signing=SigningConfig(seed=seed))
    pairs = sign_pairs(tiny_base_pairs(config)[0], config.signing)
    return {"diff": np.array([np.subtract(p.g_1, p.g_2) for p in pairs]),
            "quality": np.array([p.quality_margin for p in pairs])}


def annotators(m: int, planted: bool) -> tuple[list[str], np.ndarray]:
    names = [f"L{i:02d}" for i in range(m - (len(OUTLIERS) if planted else 0))]
    theta = [LEVEL] * len(names)
    if planted:
        names += list(OUTLIERS)
        theta += [tuple(a + b for a, b in zip(LEVEL, offset)) for offset in OUTLIERS.values()]
    return names, np.array(theta)


def stream(pairs: dict[str, np.ndarray], theta: np.ndarray, rng: np.random.Generator):
    """(judge index [N], pair index [N], g(chosen) - g(rejected) [N, 2]) of one stream."""
    order = np.repeat(rng.permutation(len(pairs["quality"])), 4)
    who = rng.integers(len(theta), size=len(order))
    diff = pairs["diff"][order]
    logit = pairs["quality"][order] + np.einsum("nq,nq->n", theta[who], diff)
    first_wins = rng.random(len(order)) < 1.0 / (1.0 + np.exp(-logit))
    return who, order, np.where(first_wins[:, None], diff, -diff)


def naive_flags(who, differences, m: int, every: int) -> np.ndarray:
    """[m, q] judgment number at which the re-run offline Bonferroni flag first fires (0: never)."""
    cross, won = differences != 0, differences > 0
    own_n = np.zeros((m, 2), dtype=np.int64)
    own_w = np.zeros((m, 2), dtype=np.int64)
    first = np.zeros((m, 2), dtype=np.int64)
    for start in range(0, len(who), every):
        stop = min(start + every, len(who))
        np.add.at(own_n, who[start:stop], cross[start:stop])
        np.add.at(own_w, who[start:stop], won[start:stop])
        for i in range(2):
            pool, _, _ = penalised_log_odds(own_w[:, i].sum(), own_n[:, i].sum())
            estimated = own_n[:, i] > 0
            p = penalised_p_value(own_w[:, i], own_n[:, i], float(pool))
            fired = estimated & (p < 0.05 / max(int(estimated.sum()), 1)) & (first[:, i] == 0)
            first[fired, i] = stop
    return first


def run(pairs, names, theta, streams: int, seed: int, alpha: float, every: int) -> dict[str, list]:
    """Per stream: the flags of the streaming test (judgment, own votes) and of the re-run audit."""
    m = len(names)
    found: dict[str, list] = {"anytime": [], "anytime_votes": [], "naive": []}
    keys = [f"pair{i}" for i in range(len(pairs["quality"]))]
    for s in range(streams):
        rng = np.random.default_rng([seed, s])
        who, order, differences = stream(pairs, theta, rng)
        audit = StreamAudit([f"{a}=given:{a}" for a in ATTRIBUTES], alpha=alpha, pool_size=m)
        audit.observe([names[k] for k in who], [keys[p] for p in order], differences)
        at = np.zeros((m, 2), dtype=np.int64)
        votes = np.zeros((m, 2), dtype=np.int64)
        position = {name: k for k, name in enumerate(audit.annotators)}
        for k, name in enumerate(names):
            if name in position:
                at[k], votes[k] = audit.flagged[position[name], :, 0], audit.flagged[position[name], :, 1]
        found["anytime"].append(at.tolist())
        found["anytime_votes"].append(votes.tolist())
        found["naive"].append(naive_flags(who, differences, m, every).tolist())
    return found


def summarise(found: dict[str, list], names: list[str], theta: np.ndarray, n: int) -> dict:
    """Detection per planted (annotator, attribute) and false flags on the tests at the level."""
    out: dict = {}
    offsets = theta - np.array(LEVEL)
    null = offsets == 0
    for method in ("anytime", "naive"):
        at = np.array(found[method])  # [streams, m, q]
        rows = {}
        for k, i in zip(*np.nonzero(~null)):
            times = at[:, k, i][at[:, k, i] > 0]
            row = {"offset": float(offsets[k, i]), "flagged_share": float(np.mean(at[:, k, i] > 0))}
            if len(times):
                row |= {f"judgments_p{q}": float(np.percentile(times, q)) for q in (10, 50, 90)}
            if method == "anytime" and len(times):
                votes = np.array(found["anytime_votes"])[:, k, i]
                row["own_votes_median"] = float(np.median(votes[at[:, k, i] > 0]))
            rows[f"{names[k]} {ATTRIBUTES[i]}"] = row
        false = (at > 0) & null[None]
        out[method] = {"planted": rows, "any_false_flag_share": float(np.mean(false.any(axis=(1, 2)))),
                       "false_flags_per_test": float(false.sum() / (len(at) * null.sum())),
                       "tests_at_level": int(null.sum())}
    out["judgments_per_stream"] = n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=200, help="streams of the world with outliers")
    parser.add_argument("--null-streams", type=int, default=100, help="streams of the world without")
    parser.add_argument("--pairs", type=int, default=4000, help="pairs per stream (4 judgments each)")
    parser.add_argument("--annotators", type=int, default=20, help="the pool, outliers included (= --pool-size)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--every", type=int, default=1000, help="judgments between re-runs of the offline audit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/bench_stream_audit.json")
    args = parser.parse_args()
    started = time.perf_counter()
    pairs = world(args.pairs, args.seed)
    result = {"command": "python benchmarks/bench_stream_audit.py " + " ".join(
                  f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
              "level": LEVEL, "outliers": OUTLIERS, "annotators": args.annotators, "alpha": args.alpha,
              "pair_types": "tiny signed world, default signing protocol", "python": platform.python_version()}
    for label, planted, streams in (("planted", True, args.streams), ("null", False, args.null_streams)):
        if streams < 1:
            continue
        names, theta = annotators(args.annotators, planted)
        found = run(pairs, names, theta, streams, args.seed + planted, args.alpha, args.every)
        result[label] = summarise(found, names, theta, 4 * args.pairs) | {"streams": streams}
    result["seconds"] = time.perf_counter() - started
    result["load_average_1min"] = os.getloadavg()[0]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
