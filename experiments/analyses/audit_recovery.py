"""How well the labels alone identify theta_k: the offline audit's per-annotator estimates
against the planted values, the yardstick of issue 32's recovery target ("r >= 0.9, or within
0.05 of what the offline audit reaches on the same labels").

    python experiments/analyses/audit_recovery.py WORLD [--attributes names] [--json OUT]

WORLD is a built corpus with ``train.jsonl`` and ``planted.json`` (tiny-signed, smol-signed,
tiny-multipref, ...). The audit is ``badpo audit`` itself (the joint per-annotator fit with its
prior, :mod:`badpo.auditing.joint`), written to a temporary report; the Pearson r is over the
annotators the audit could estimate on that attribute (at least one cross-group judgment).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import badpo


def audit_estimates(world: Path, attributes: list[str]) -> dict[str, dict[str, float]]:
    """{attribute: {annotator: the audit's joint estimate}} on ``world/train.jsonl``."""
    with tempfile.TemporaryDirectory() as folder:
        badpo.audit(str(world / "train.jsonl"), attributes, report=Path(folder) / "report")
        rows = list(csv.DictReader((Path(folder) / "report" / "annotators.csv").open(encoding="utf-8")))
    estimates: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["estimate"] not in ("", "nan"):
            estimates.setdefault(row["attribute"], {})[row["annotator"]] = float(row["estimate"])
    return estimates


def planted_theta(world: Path) -> dict[str, dict[str, float]]:
    """{attribute: {annotator: planted theta_k}} from ``world/planted.json``."""
    planted = json.loads((world / "planted.json").read_text(encoding="utf-8"))
    names = planted["attribute_names"]
    return {name: {a["annotator"]: float(a["theta"][i]) for a in planted["annotators"]}
            for i, name in enumerate(names)}


def recovery(estimates: dict[str, dict[str, float]], planted: dict[str, dict[str, float]]) -> dict:
    """Per attribute: Pearson r of estimate against planted over the annotators both hold, and n."""
    result = {}
    for name, values in planted.items():
        shared = sorted(set(values) & set(estimates.get(name, {})))
        if len(shared) < 3:
            result[name] = {"pearson": None, "n": len(shared)}
            continue
        x = np.array([estimates[name][a] for a in shared])
        y = np.array([values[a] for a in shared])
        result[name] = {"pearson": float(np.corrcoef(x, y)[0, 1]), "n": len(shared)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("world", type=Path)
    parser.add_argument("--attributes", nargs="+", default=["names"])
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    figures = recovery(audit_estimates(args.world, args.attributes), planted_theta(args.world))
    for name, entry in figures.items():
        r = "n/a" if entry["pearson"] is None else f"{entry['pearson']:.3f}"
        print(f"{name}: audit r = {r} over {entry['n']} annotators")
    if args.json:
        args.json.write_text(json.dumps({"world": str(args.world), "recovery": figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
