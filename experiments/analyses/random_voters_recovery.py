"""theta_k recovery among the annotators who did not vote at random, and what the reliability weights
gave the random voters, for each arm run of a random-voter world's experiment (issue 72 item 5).

    python experiments/analyses/random_voters_recovery.py runs/tiny_random_voters \
        --out results/random_voters/recovery.json

Reads OUT/runs/<key>.json (the arm, its seed and work folder), OUT/work/<key>/theta.json and run.json,
and OUT/corpus/planted.json (which annotators vote at random, and every planted theta_k). r is
Pearson's over the non-random annotators, on the first declared attribute.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from badpo.core.jsonio import write_json
from badpo.experiment.provenance import provenance


def arm_row(out: Path, record: dict, planted: dict) -> dict | None:
    folder = out / record["artifacts"]["run"]
    if not (folder / "theta.json").exists():
        return None
    theta = json.loads((folder / "theta.json").read_text())
    attribute = theta["declared"][0]
    column = planted["attribute_names"].index(attribute)
    coins = {a["annotator"] for a in planted["annotators"] if a.get("random_voter")}
    truth = {a["annotator"]: a["theta"][column] for a in planted["annotators"]}
    learned = {a: v["theta"][attribute] for a, v in theta["annotators"].items()}
    others = sorted(a for a in learned if a not in coins)
    r = float(np.corrcoef([truth[a] for a in others], [learned[a] for a in others])[0, 1]) \
        if theta["variant"] not in ("pooled", "none") else None
    weights = json.loads((folder / "run.json").read_text())["input"].get("reliability_weights")
    row = {"arm": record["arm"], "seed": record["seed"], "key": record["key"], "variant": theta["variant"],
           "theta_bar": theta["theta_bar"][attribute], "r_non_random": r,
           "planted_mean_non_random": float(np.mean([truth[a] for a in others]))}
    if weights is not None:
        row.update(weight_others_mean=float(np.mean([weights[a] for a in others])), random_voters=len(coins),
                   weight_random_zero=sum(weights[a] == 0.0 for a in coins))
        if coins:
            row["weight_random_mean"] = float(np.mean([weights[a] for a in coins]))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--out", dest="record", type=Path, required=True)
    args = parser.parse_args()
    planted = json.loads((args.out / "corpus" / "planted.json").read_text())
    rows = []
    for path in sorted((args.out / "runs").glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("kind") == "arm":
            row = arm_row(args.out, record, planted)
            if row is not None:
                rows.append(row)
    for row in rows:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items() if k != "key"})
    command = f"python experiments/analyses/random_voters_recovery.py {args.out} --out {args.record}"
    write_json(args.record, {"command": command,
                             "arms": rows, "provenance": provenance()})


if __name__ == "__main__":
    main()
