"""How many random voters the audit's reliability flags, and how many others it flags falsely, on
the tiny length-and-format world with a share of each pool voting at random (issue 72 item 5), against
the same worlds with none. No model is trained: the audit reads the labels.

    python experiments/analyses/random_voters_audit.py --out results/random_voters/audit_flags.json

Expected (written before the first run, 2026-11-29): 15% of each pool (6 of 40 crowd, 4 of 30 expert
annotators: 10 of 70) votes a coin with Davidson's ties at z = 0. Each annotator casts about 114 votes
(8,000 votes over 70), about 76 of them decisive; at about 100 votes a coin's interval is about 0.65
wide (docs/audit.md), so most coins are flagged: 6-10 of 10 per world, at most one false flag per
world (FDR 0.1 on H0 s >= 0.5), and none on the worlds without coins.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from badpo.auditing.estimates import audit
from badpo.core.attributes import resolve_attributes
from badpo.core.config import from_dict
from badpo.core.jsonio import write_json
from badpo.core.label_counts import wins_for_estimates
from badpo.corpora.multipref_protocol import planted_to_dict, protocol_corpus
from badpo.corpora.tiny_multipref import TinyMultiPrefConfig, tiny_multipref_rows
from badpo.experiment.provenance import provenance


def flags(share: float, seed: int) -> dict:
    config = from_dict(TinyMultiPrefConfig, {"random_voters": share, "keep_ties": True, "seed": seed})
    rows, truth = tiny_multipref_rows(config)
    corpus, _ = protocol_corpus(rows, config, lambda prompt_id: {})
    coins = {a["annotator"] for a in planted_to_dict(truth, config)["annotators"] if a.get("random_voter")}
    started = time.perf_counter()
    result = audit(wins_for_estimates(corpus.train), resolve_attributes(["length", "markdown"]), start=True)
    seconds = time.perf_counter() - started
    reliability = result.reliability
    flagged = set(reliability.flagged)
    estimate = dict(zip(reliability.annotators, reliability.estimate.tolist()))
    return {"share": share, "seed": seed, "annotators": len(reliability.annotators), "random_voters": len(coins),
            "judgments": len(corpus.train), "ties": sum(j.tie for j in corpus.train),
            "flagged_random": len(flagged & coins), "flagged_others": len(flagged - coins),
            "flagged": sorted(flagged), "spread": reliability.spread, "audit_s": round(seconds, 2),
            "s_random": sorted(round(estimate[a], 3) for a in coins if np.isfinite(estimate[a])),
            "s_others_range": [round(min(v for a, v in estimate.items() if a not in coins and np.isfinite(v)), 3),
                               round(max(v for a, v in estimate.items() if a not in coins and np.isfinite(v)), 3)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    worlds = [flags(share, seed) for share in (0.15, 0.0) for seed in args.seeds]
    for world in worlds:
        print(f"share {world['share']:.2f} seed {world['seed']}: {world['flagged_random']} of {world['random_voters']} "
              f"random voters flagged, {world['flagged_others']} others; audit {world['audit_s']} s")
    write_json(args.out, {"command": "python experiments/analyses/random_voters_audit.py --out " + str(args.out),
                          "worlds": worlds, "provenance": provenance()})


if __name__ == "__main__":
    main()
