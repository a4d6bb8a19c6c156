"""How large a bias the labels of a tiny MultiPref world show, depending on what else is explained:
the pooled theta that best fits the training judgments with nothing else in the logit, with the
other attribute's bias fitted beside it, with the planted quality q, and with q and the other
attribute's planted term.

    python benchmarks/label_collapse.py WORLD [--attribute markdown] [--json OUT]

WORLD is a built tiny-multipref corpus (``world.yaml``, ``train.jsonl``); its votes are drawn
again from ``world.yaml`` (the builder is pure) to know each comparison's q and each annotator's
planted theta_k. A logistic model is not collapsible: the bias of the labels given q is larger than
the bias they show with q left unexplained, and a policy whose implicit reward carries only part of
q (and learns the undeclared attribute's bias) sees a bias in between. Issue 35: why BA-DPO with
theta at its planted value ends below the reference's markdown rate. Each fit is the
maximum-likelihood pooled theta of ``sigmoid(offset + delta_g @ theta)`` over the judgments (the
library's level fit, :func:`badpo.core.level.offset_mle`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from badpo.core.config import load_config
from badpo.core.level import LOGISTIC, offset_mle
from badpo.corpora.tiny_multipref import ATTRIBUTES, TinyMultiPrefConfig, tiny_multipref_rows


def oriented_terms(world: Path, attribute: str) -> dict[str, np.ndarray]:
    """Per training judgment, oriented chosen minus rejected: the attribute's delta_g, the other
    attributes' delta_g (``[N, d - 1]``), q, the other attributes' planted terms, and the
    attribute's planted theta_k * delta_g."""
    config = load_config(TinyMultiPrefConfig, world / "world.yaml")
    _, truth = tiny_multipref_rows(config)
    index = list(ATTRIBUTES).index(attribute)
    terms: dict[str, list] = {"delta_g": [], "other_g": [], "quality": [], "others": [], "planted": []}
    for line in (world / "train.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        quality, text_a, diff = truth.comparisons[row["pair_id"]]
        sign = 1.0 if row["chosen"] == text_a else -1.0
        theta = np.asarray(truth.theta[row["annotator"]])
        contributions = sign * theta * diff
        terms["delta_g"].append(sign * diff[index])
        terms["other_g"].append(sign * np.delete(diff, index))
        terms["quality"].append(sign * quality)
        terms["others"].append(float(contributions.sum() - contributions[index]))
        terms["planted"].append(float(contributions[index]))
    return {name: np.asarray(values) for name, values in terms.items()}


def pooled_fit(offset: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """argmax over theta of sum log sigmoid(offset + delta @ theta) (every row is a win):
    :func:`badpo.core.level.offset_mle`, the library's level fit, with the logistic link.
    ``delta`` is ``[N]`` (one attribute) or ``[N, d]``; NaN where it finds no finite maximiser."""
    directions = torch.as_tensor(delta, dtype=torch.float64).reshape(len(delta), -1)
    return offset_mle(torch.as_tensor(offset, dtype=torch.float64), directions, LOGISTIC).numpy()


def collapse_table(world: Path, attribute: str) -> dict[str, float]:
    """The attribute's pooled theta on the training judgments with nothing else in the logit, with
    the other attributes' bias fitted beside it, given q, and given q and the others' planted terms;
    beside the planted theta_k averaged over its cross-group judgments."""
    terms = oriented_terms(world, attribute)
    cross = terms["delta_g"] != 0
    zero = np.zeros_like(terms["quality"])
    return {
        "judgments": int(len(terms["delta_g"])),
        "cross_group": int(cross.sum()),
        "planted_mean_on_cross": float(np.mean(terms["planted"][cross] / terms["delta_g"][cross])),
        "nothing_else": float(pooled_fit(zero, terms["delta_g"])[0]),
        "others_fitted_beside": float(pooled_fit(zero, np.column_stack([terms["delta_g"], terms["other_g"]]))[0]),
        "given_quality": float(pooled_fit(terms["quality"], terms["delta_g"])[0]),
        "given_quality_and_others": float(pooled_fit(terms["quality"] + terms["others"], terms["delta_g"])[0]),
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
