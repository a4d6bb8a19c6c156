"""Removal of the body-fixed length and markdown shifts with a world's ties kept, beside the same
world's ties-dropped default arms (issue 72 item 5): per seed, (DPO - arm) / (DPO - reference) on
each readout, each arm against the DPO of its own data and, as a cross-check, against the other's.

    python experiments/analyses/ties_removal.py KEPT_RUNS DROPPED_RUNS --out results/ties/removal_seed42.json

KEPT_RUNS / DROPPED_RUNS: folders of run records (``<key>.json``, as ``badpo experiment`` writes them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from badpo.core.jsonio import write_json
from badpo.experiment.provenance import provenance

METRICS = ("candidates.long_log_odds", "candidates.markdown_log_odds", "candidates.expected_words",
           "candidates.long", "candidates.markdown", "tokens", "kl")


def value(record: dict, dotted: str):
    node = record["readouts"]
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def records(folder: Path) -> dict:
    out = {"arms": {}}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("kind") == "reference":
            out["reference"] = record
        elif record.get("kind") == "arm":
            out["arms"][(record["arm"], record["seed"])] = record
    return out


def removal(reference: dict, dpo: dict, arm: dict, metric: str) -> float | None:
    r, d, a = value(reference, metric), value(dpo, metric), value(arm, metric)
    if None in (r, d, a) or d == r:
        return None
    return round(100 * (d - a) / (d - r), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kept", type=Path)
    parser.add_argument("dropped", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    kept, dropped = records(args.kept), records(args.dropped)
    rows = []
    for (arm, seed), record in sorted(kept["arms"].items()):
        row = {"arm": arm, "seed": seed, "ties": "kept", "key": record["key"],
               "readouts": {m: value(record, m) for m in METRICS}}
        if arm != "DPO" and ("DPO", seed) in kept["arms"]:
            row["removed_vs_dpo_kept"] = {m: removal(kept["reference"], kept["arms"][("DPO", seed)], record, m)
                                          for m in METRICS[:-1]}
        if arm != "DPO" and ("DPO", seed) in dropped["arms"]:
            row["removed_vs_dpo_dropped"] = {m: removal(kept["reference"], dropped["arms"][("DPO", seed)], record, m)
                                             for m in METRICS[:-1]}
        theta = record.get("readouts", {}).get("theta_shared")
        row["theta_shared"] = theta
        rows.append(row)
    for (arm, seed), record in sorted(dropped["arms"].items()):
        if ("DPO", seed) not in dropped["arms"] or (arm, seed) not in kept["arms"]:
            continue
        row = {"arm": arm, "seed": seed, "ties": "dropped", "key": record["key"],
               "readouts": {m: value(record, m) for m in METRICS},
               "theta_shared": record["readouts"].get("theta_shared")}
        if arm != "DPO":
            row["removed_vs_dpo_dropped"] = {m: removal(dropped["reference"], dropped["arms"][("DPO", seed)], record, m)
                                             for m in METRICS[:-1]}
        rows.append(row)
    for row in rows:
        print(row["ties"], row["arm"], row["seed"], row.get("removed_vs_dpo_kept") or row.get("removed_vs_dpo_dropped"))
    command = f"python experiments/analyses/ties_removal.py {args.kept} {args.dropped} --out {args.out}"
    write_json(args.out, {"command": command,
                          "reference_kept": kept["reference"]["key"], "reference_dropped": dropped["reference"]["key"],
                          "rows": rows, "provenance": provenance()})


if __name__ == "__main__":
    main()
