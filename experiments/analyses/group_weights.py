"""Whom a group weighting (Group-DRO, Crowd-PrefRL) gave its weight to, against each annotator's
planted bias (issue 35, item 3: tab:abl_multipref's Crowd-PrefRL widens the held-out gap).

Each run folder's ``run.json`` holds the final weight q_k of every annotator (``group_weights``);
a tiny world's ``planted.json`` holds the planted theta_k. For every run this prints the three
annotators with the largest weight, each with its planted theta on the chosen attribute and that
theta's rank among all annotators (1 = the most biased), and the weighted mean sum_k q_k theta_k
beside the plain mean over annotators:

    badpo train --config runs/tiny_multipref_beta/work/<crowd_prefrl run>/config.yaml beta=0.1 \\
        runtime.seed=42 output_dir=OUT/b0.1-s42 save_policy=false
    python experiments/analyses/group_weights.py OUT/b0.1-s42 ... --planted runs/tiny_multipref_beta/corpus/planted.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from pathlib import Path

from badpo.run_folder.saved import SavedRun


def planted_theta(planted: Mapping, attribute: str) -> dict[str, float]:
    """{annotator: planted theta on ``attribute``} from a tiny world's planted.json."""
    names = planted["attribute_names"]
    if attribute not in names:
        raise ValueError(f"--attribute: {attribute!r} is not planted (planted.json has {names})")
    column = names.index(attribute)
    return {a["annotator"]: a["theta"][column] for a in planted["annotators"]}


def weight_report(weights: Mapping[str, float], theta: Mapping[str, float], top: int = 3) -> dict:
    """The ``top`` largest weights with their planted theta and its rank (1 = largest), and the
    weighted and plain means of theta. Example: weights a 0.9, b 0.1, c 0; theta a 2, b 0, c 1:
    a first (rank 1), weighted mean 0.9 * 2 = 1.8, plain mean 1.0."""
    missing = sorted(set(weights) - set(theta))
    if missing:
        raise ValueError(f"annotators without a planted theta: {missing[:5]}")
    ranked = sorted(theta, key=theta.get, reverse=True)
    heaviest = sorted(weights, key=weights.get, reverse=True)[:top]
    return {"top": [{"annotator": a, "weight": weights[a], "theta": theta[a], "rank": ranked.index(a) + 1}
                    for a in heaviest],
            "weighted_theta": math.fsum(w * theta[a] for a, w in weights.items()),
            "mean_theta": math.fsum(theta.values()) / len(theta), "annotators": len(theta)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (each with run.json)")
    parser.add_argument("--planted", type=Path, required=True, help="the world's planted.json")
    parser.add_argument("--attribute", default="length", help="the planted attribute to rank by")
    args = parser.parse_args()
    theta = planted_theta(json.loads(args.planted.read_text(encoding="utf-8")), args.attribute)
    print(f"| Run | weighted θ ({args.attribute}) | mean θ | heaviest annotators: weight, planted θ, rank |")
    print("|:--|--:|--:|:--|")
    for run in args.runs:
        summary = SavedRun(run).summary() or {}
        if "group_weights" not in summary:
            raise SystemExit(f"{run}/run.json: no group_weights (not a group weighting, or made before they were kept)")
        report = weight_report(summary["group_weights"], theta)
        top = "; ".join(f"{t['annotator']} {t['weight']:.3f}, {t['theta']:.2f}, {t['rank']}/{report['annotators']}"
                        for t in report["top"])
        print(f"| {run.name} | {report['weighted_theta']:.2f} | {report['mean_theta']:.2f} | {top} |")


if __name__ == "__main__":
    main()
