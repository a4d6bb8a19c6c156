"""How large a bias the labels of a tiny MultiPref world show, depending on what else is explained:
the pooled theta that best fits the training judgments with nothing else in the logit, with the
planted quality q, and with q and the other attribute's planted term.

    python benchmarks/label_collapse.py WORLD [--attribute markdown] [--json OUT]

WORLD is a built tiny-multipref corpus (``world.yaml``, ``train.jsonl``); its votes are drawn
again from ``world.yaml`` (the builder is pure) to know each comparison's q and each annotator's
planted theta_k. A logistic model is not collapsible: the bias of the labels given q is larger than
the bias they show with q left unexplained, and a policy whose implicit reward carries only part of
q sees a bias in between (issue 35: why BA-DPO with theta at its planted value ends below the
reference's markdown rate). The fit is the maximum-likelihood theta of ``sigmoid(offset + theta *
delta_g)`` over the judgments, by Newton's method on one parameter.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from badpo.core.config import load_config
from badpo.corpora.tiny_multipref import ATTRIBUTES, TinyMultiPrefConfig, tiny_multipref_rows


def oriented_terms(world: Path, attribute: str) -> dict[str, np.ndarray]:
    """Per training judgment, oriented chosen minus rejected: the attribute's delta_g, q, the other
    attributes' planted terms, and the attribute's planted theta_k * delta_g."""
    config = load_config(TinyMultiPrefConfig, world / "world.yaml")
    _, truth = tiny_multipref_rows(config)
    index = list(ATTRIBUTES).index(attribute)
    terms: dict[str, list[float]] = {"delta_g": [], "quality": [], "others": [], "planted": []}
    for line in (world / "train.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        quality, text_a, diff = truth.comparisons[row["pair_id"]]
        sign = 1.0 if row["chosen"] == text_a else -1.0
        theta = np.asarray(truth.theta[row["annotator"]])
        contributions = sign * theta * diff
        terms["delta_g"].append(sign * diff[index])
        terms["quality"].append(sign * quality)
        terms["others"].append(float(contributions.sum() - contributions[index]))
        terms["planted"].append(float(contributions[index]))
    return {name: np.asarray(values) for name, values in terms.items()}


def pooled_theta(offset: np.ndarray, delta_g: np.ndarray, steps: int = 50) -> float:
    """argmax over theta of sum log sigmoid(offset + theta * delta_g) (every row is a win)."""
    theta = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(offset + theta * delta_g)))
        gradient, curvature = np.sum((1.0 - p) * delta_g), np.sum(p * (1.0 - p) * delta_g ** 2)
        step = gradient / curvature
        theta += step
        if abs(step) < 1e-10:
            break
    return float(theta)


def collapse_table(world: Path, attribute: str) -> dict[str, float]:
    terms = oriented_terms(world, attribute)
    cross = terms["delta_g"] != 0
    return {
        "judgments": int(len(terms["delta_g"])),
        "cross_group": int(cross.sum()),
        "planted_mean_on_cross": float(np.mean(terms["planted"][cross] / terms["delta_g"][cross])),
        "nothing_else": pooled_theta(np.zeros_like(terms["quality"]), terms["delta_g"]),
        "given_quality": pooled_theta(terms["quality"], terms["delta_g"]),
        "given_quality_and_others": pooled_theta(terms["quality"] + terms["others"], terms["delta_g"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("world", type=Path)
    parser.add_argument("--attribute", default="markdown", choices=list(ATTRIBUTES))
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    table = collapse_table(args.world, args.attribute)
    for name, value in table.items():
        print(f"{name:28s} {value:.3f}" if isinstance(value, float) else f"{name:28s} {value}")
    if args.json is not None:
        args.json.write_text(json.dumps({"world": str(args.world), "attribute": args.attribute, **table},
                                        indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
