"""Do the ties a MultiPref-protocol world drops select judgments whose quality goes with the
attribute? (issue 51: θ held at each annotator's planted θ_k removes 88% (73-96) of the body-fixed
length shift on smol-multipref, not 100%.)

The world votes by Davidson's tie model (``badpo.corpora.multipref_protocol``): a vote that is not a
tie follows sigmoid(z), z = q + θ_k · Δg, but a vote is a tie more often where |z| is small, so
the kept votes over-represent comparisons where quality and the bias point the same way. With the
planted θ_k as the offset, what quality still goes with Δg among the kept votes is what even the
truth leaves for the policy to learn. This script rebuilds the world's truth
(``experiments/analyses/level_decomposition.py``), orients every comparison by its side a (not by the
vote), and regresses q on Δg (least squares, no intercept: q is odd in the orientation) over all
comparisons and over the kept votes (a comparison once per kept vote, train and held-out). The kept
votes' standard errors treat votes as independent; a comparison's votes share its q, so they are
too small.

    python experiments/analyses/tie_selection.py runs/smol_multipref/corpus --out results/level_rule/tie_selection.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
from level_decomposition import rebuilt_truth

from badpo.core.jsonio import atomic_write_text
from badpo.experiment.provenance import provenance


def quality_on_attributes(q: np.ndarray, dg: np.ndarray, names: list[str]) -> dict:
    """Least-squares slopes of q on Δg [N, A] (logits of quality per unit of each attribute), with
    their standard errors, and each attribute's correlation with q where it differs."""
    slopes, *_ = np.linalg.lstsq(dg, q, rcond=None)
    residual = q - dg @ slopes
    covariance = np.linalg.inv(dg.T @ dg) * residual.var(ddof=dg.shape[1])
    differs = [dg[:, i] != 0 for i in range(len(names))]
    return {"n": len(q), "q_sd": float(q.std()),
            **{name: {"slope": float(slopes[i]), "slope_se": float(np.sqrt(covariance[i, i])),
                      "correlation_where_it_differs": float(np.corrcoef(dg[differs[i], i], q[differs[i]])[0, 1])}
               for i, name in enumerate(names)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    truth = rebuilt_truth(args.corpus)
    planted = json.loads((args.corpus / "planted.json").read_text())
    names = list(planted["attribute_names"])
    every = list(truth.comparisons.values())
    kept = [truth.comparisons[json.loads(line)["pair_id"]] for name in ("train.jsonl", "heldout.jsonl")
            for line in (args.corpus / name).read_text().splitlines()]
    record = {"what": "quality q regressed on the attribute differences g_a - g_b, every comparison oriented "
                      "by its side a: over all comparisons, and over the votes kept (not ties)",
              "corpus": str(args.corpus), "attributes": names,
              "train_sha256": hashlib.sha256((args.corpus / "train.jsonl").read_bytes()).hexdigest(),
              "planted_theta_mean": [float(x) for x in np.mean([a["theta"] for a in planted["annotators"]], axis=0)]}
    for label, rows in (("all_comparisons", every), ("kept_votes", kept)):
        q = np.array([row[0] for row in rows], dtype=np.float64)
        record[label] = quality_on_attributes(q, np.array([row[2] for row in rows], dtype=np.float64), names)
    record["provenance"] = provenance()
    text = json.dumps(record, indent=1)
    print(text)
    if args.out:
        atomic_write_text(args.out, text + "\n")


if __name__ == "__main__":
    main()
