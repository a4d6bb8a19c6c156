"""The own-body check of the paper's readouts appendix: "using each arm's own body instead of the
reference's changes no number by more than 0.005" (issue 23, item 5).

The first-name rate is read after an answer body. Run an experiment's readouts twice, once after
the reference's greedy answer and once after each arm's own, into the same output_dir (the
readout settings are part of a record's key, the training is not, so nothing trains again):

    badpo experiment experiments/configs/experiment_tiny_names_v3.yaml evaluation.body=reference
    badpo experiment experiments/configs/experiment_tiny_names_v3.yaml evaluation.body=own
    badpo experiment experiments/configs/experiment_tiny_names_v3.yaml --render-only   # table.md as it was
    python experiments/analyses/body_check.py runs/tiny_names_v3

It prints, per arm and rate, the seed mean under each body and their difference (the number a
table shows), the largest difference at any one seed, and the largest of all.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from badpo.experiment.records import read_records
from badpo.experiment.tables import ABSENT, metric_value

RATES = ("names.first_name.woman_coded", "names.first_name.black_coded")
BODIES = ("reference", "own")


def by_body(records: Iterable[Mapping], metrics: Iterable[str] = RATES) -> dict:
    """{body: {(arm, seed): {metric: value}}} of the records read after the reference's or the
    arm's own body (the reference's record under arm "reference", seed None)."""
    table: dict = {body: {} for body in BODIES}
    for record in records:
        body = record.get("evaluation", {}).get("body")
        if body not in table:
            continue
        arm = record.get("arm") if record["kind"] == "arm" else "reference"
        seed = record.get("seed") if record["kind"] == "arm" else None
        if (arm, seed) in table[body]:
            raise ValueError(f"two records of {arm} seed {seed} under body {body}: give one experiment's output_dir")
        values = {m: metric_value(record, m) for m in metrics}
        table[body][(arm, seed)] = {m: None if v is ABSENT else v for m, v in values.items()}
    return table


def differences(table: Mapping, metrics: Iterable[str] = RATES) -> list[dict]:
    """Per arm and metric: the seed means under each body, own - reference of those means, and
    the largest |own - reference| at one seed; only the (arm, seed) read under both bodies."""
    rows = []
    shared = sorted(set(table["reference"]) & set(table["own"]), key=lambda k: (str(k[0]), k[1] or 0))
    for arm in dict.fromkeys(a for a, _ in shared):
        seeds = [s for a, s in shared if a == arm]
        for metric in metrics:
            ref = np.array([table["reference"][(arm, s)][metric] for s in seeds], dtype=float)
            own = np.array([table["own"][(arm, s)][metric] for s in seeds], dtype=float)
            rows.append({"arm": arm, "metric": metric, "seeds": len(seeds), "reference": float(ref.mean()),
                         "own": float(own.mean()), "difference": float(own.mean() - ref.mean()),
                         "largest_at_a_seed": float(np.abs(own - ref).max())})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the experiment's output_dir (holds runs/*.json)")
    out = parser.parse_args().out
    records = list(read_records(out / "runs").values())
    rows = differences(by_body(records))
    if not rows:
        raise SystemExit(f"{out}/runs: no run read out under both evaluation.body=reference and =own")
    print("| Arm | rate | seeds | reference body | own body | own - reference | largest at a seed |")
    print("|:--|:--|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['arm']} | {r['metric'].rsplit('.', 1)[-1]} | {r['seeds']} | {r['reference']:.3f} | "
              f"{r['own']:.3f} | {r['difference']:+.4f} | {r['largest_at_a_seed']:.4f} |")
    worst = max(rows, key=lambda r: abs(r["difference"]))
    print(f"\nlargest change of a seed mean: {worst['difference']:+.4f} ({worst['arm']}, {worst['metric']}); "
          f"largest at one seed: {max(r['largest_at_a_seed'] for r in rows):.4f}")


if __name__ == "__main__":
    main()
