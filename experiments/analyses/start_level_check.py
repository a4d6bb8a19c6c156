"""Issue 51, item 1: the conditional level (badpo.core.pair_level) from the labels alone, beside
the levels the world's recorded truth gives (experiments/analyses/level_decomposition.py: the fit with quality
left out, with the true quality given, and each expected under the planted probabilities).

    python experiments/analyses/start_level_check.py runs/smol_multipref/corpus \
        --out results/level_rule/smol_multipref_level.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from badpo.auditing.estimates import attribute_differences
from badpo.auditing.start_level import start_level
from badpo.core.attributes import resolve_attributes
from badpo.core.jsonio import atomic_write_text
from badpo.core.judgments import read_judgments
from badpo.experiment.provenance import provenance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    names = ["length", "markdown"]
    judgments = read_judgments(args.corpus / "train.jsonl")
    attributes = resolve_attributes(names)
    torch.set_num_threads(1)
    fit = start_level(judgments, attribute_differences(judgments, attributes))
    with tempfile.TemporaryDirectory() as folder:
        truth = Path(folder) / "truth.json"
        subprocess.run([sys.executable, str(Path(__file__).with_name("level_decomposition.py")), str(args.corpus),
                        "--out", str(truth)], check=True, capture_output=True)
        decomposition = json.loads(truth.read_text())
    record = {"corpus": str(args.corpus), "judgments": len(judgments),
              "conditional": dict(zip(names, fit.level)), "conditional_se": dict(zip(names, fit.se)),
              "spread": fit.spread, "pairs": fit.pairs, "repeated_pairs": fit.repeated_pairs,
              "marginal": dict(zip(names, fit.marginal)),
              **{key: decomposition[key] for key in ("planted_mean", "u0", "quality", "quality_expected",
                                                     "correlation_x_q")},
              "provenance": provenance()}
    atomic_write_text(args.out, json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(json.dumps({k: record[k] for k in ("conditional", "conditional_se", "marginal", "quality",
                                             "quality_expected", "planted_mean")}, indent=1))


if __name__ == "__main__":
    main()
