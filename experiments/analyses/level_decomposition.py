"""Why the labels of a MultiPref-protocol world put θ's level below the planted one (issue 32; on
the tiny length-and-format world, issue 35's markdown overshoot).

BA-DPO's default start (``bias.init: reference``) fits one θ per attribute to the labels with the
policy's margin u at 0, as it is at the reference. On smol-multipref that fit reads 0.75 for
length where the planted θ_k average 0.93-0.95, and the run ends at 0.79-0.82: the level the
oracle runs show to carry the body-fixed length residual. This script rebuilds the world's truth
(the quality q of every comparison, g_a - g_b, who voted; with the builder's own pure function
from the samples it recorded, checked equal to ``source.jsonl``) and fits the pooled level of the
training judgments in four ways:

- ``u0``: as the reference start does, quality left out (u = 0);
- ``quality``: with the true q_w - q_l as a fixed offset (the level a joint fit reaches when u
  carries quality exactly);
- each also *expected*: the labels replaced by their planted probabilities (both outcomes,
  weighted p and 1 - p), so chance is taken out and what is left is what the world implies;
- ``heterogeneity``: expected, with q = 0 in the truth and in the fit: one level pooled over
  annotators whose θ_k differ.

    python experiments/analyses/level_decomposition.py runs/smol_multipref/corpus \
        --out results/smol_multipref/level/level.json
    python experiments/analyses/level_decomposition.py runs/tiny_formatting_ladder/corpus --out OUT.json  # tiny
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def logistic_fit(x: np.ndarray, offset: np.ndarray, weights: np.ndarray | None = None,
                 iterations: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """θ maximising sum_i w_i log sigmoid(offset_i + x_i . θ) (every row a win of its first side),
    by Newton, and its standard errors from the inverse Hessian. ``x`` [N, A], ``offset`` [N],
    ``weights`` [N] (default 1)."""
    weights = np.ones(len(x)) if weights is None else weights
    theta = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(offset + x @ theta)))
        hessian = (x * (weights * p * (1 - p))[:, None]).T @ x
        step = np.linalg.solve(hessian, x.T @ (weights * (1 - p)))
        theta = theta + step
        if np.abs(step).max() < 1e-12:
            break
    p = 1.0 / (1.0 + np.exp(-(offset + x @ theta)))
    hessian = (x * (weights * p * (1 - p))[:, None]).T @ x
    return theta, np.sqrt(np.diag(np.linalg.inv(hessian)))


def expected_fit(x: np.ndarray, offset: np.ndarray, true_logit: np.ndarray) -> np.ndarray:
    """The fit of :func:`logistic_fit` when each judgment's label is replaced by its probability
    under the truth: the judgment as given with weight p = sigmoid(true_logit) and reversed with
    weight 1 - p. Chance is taken out; what is left is what the world implies for this fit."""
    p = 1.0 / (1.0 + np.exp(-true_logit))
    theta, _ = logistic_fit(np.vstack([x, -x]), np.concatenate([offset, -offset]), np.concatenate([p, 1 - p]))
    return theta


def rebuilt_truth(corpus: Path):
    """The world's truth rebuilt with its builder's own function: smol-multipref's from its recorded
    samples (``answers.jsonl``), tiny-multipref's from its config alone (the builder is pure);
    refused unless the rebuilt comparisons equal the world's ``source.jsonl``."""
    from badpo.core.config import load_config

    if (corpus / "answers.jsonl").exists():
        from badpo.corpora.smol_multipref import SmolMultiPrefConfig, smol_multipref_rows
        from badpo.corpora.tasks import make_tasks

        config = load_config(SmolMultiPrefConfig, corpus / "world.yaml")
        tasks = make_tasks(config.prompts, config.seed, tuple(config.kinds))
        samples = defaultdict(list)
        for line in (corpus / "answers.jsonl").read_text().splitlines():
            row = json.loads(line)
            samples[row["prompt_id"]].append(row["answer"])
        rows, truth, _ = smol_multipref_rows(tasks, [samples[f"q{i:05d}"] for i in range(len(tasks))], config)
    else:
        from badpo.corpora.tiny_multipref import TinyMultiPrefConfig, tiny_multipref_rows

        rows, truth = tiny_multipref_rows(load_config(TinyMultiPrefConfig, corpus / "world.yaml"))
    source = [json.loads(line) for line in (corpus / "source.jsonl").read_text().splitlines()]
    if rows != source:
        raise SystemExit(f"{corpus}: the rebuilt comparisons differ from source.jsonl; not this builder's world")
    return truth


def judgment_arrays(corpus: Path, truth) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Per training judgment, seen from its chosen side: g_w - g_l [N, A], q_w - q_l [N] and the
    annotator's planted θ_k [N, A]; and the attribute names."""
    planted = json.loads((corpus / "planted.json").read_text())
    theta = {a["annotator"]: np.asarray(a["theta"], dtype=np.float64) for a in planted["annotators"]}
    x, q, planted_theta = [], [], []
    for line in (corpus / "train.jsonl").read_text().splitlines():
        judgment = json.loads(line)
        quality, text_a, diff = truth.comparisons[judgment["pair_id"]]
        sign = 1.0 if judgment["chosen"] == text_a else -1.0
        x.append(sign * np.asarray(diff, dtype=np.float64))
        q.append(sign * quality)
        planted_theta.append(theta[judgment["annotator"]])
    return np.array(x), np.array(q), np.array(planted_theta), list(planted["attribute_names"])


def decompose(x: np.ndarray, q: np.ndarray, planted_theta: np.ndarray, names: list[str]) -> dict:
    """The level under each fit of the module docstring, per attribute."""
    zero = np.zeros(len(x))
    true_logit = q + (planted_theta * x).sum(axis=1)
    cross = x != 0
    u0, u0_se = logistic_fit(x, zero)
    with_q, with_q_se = logistic_fit(x, q)
    fits = {"planted_mean": (planted_theta * cross).sum(axis=0) / cross.sum(axis=0),
            "u0": u0, "u0_se": u0_se, "quality": with_q, "quality_se": with_q_se,
            "u0_expected": expected_fit(x, zero, true_logit), "quality_expected": expected_fit(x, q, true_logit),
            "heterogeneity_expected": expected_fit(x, zero, (planted_theta * x).sum(axis=1))}
    result = {key: dict(zip(names, np.round(value, 4).tolist())) for key, value in fits.items()}
    result["correlation_x_q"] = {name: round(float(np.corrcoef(x[cross[:, a], a], q[cross[:, a]])[0, 1]), 4)
                                 for a, name in enumerate(names)}
    result["judgments"] = len(x)
    result["cross"] = dict(zip(names, cross.sum(axis=0).tolist()))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="a smol-multipref or tiny-multipref world folder (world.yaml, ...)")
    parser.add_argument("--out", type=Path, help="write the result here as JSON, with provenance")
    args = parser.parse_args()
    result = decompose(*judgment_arrays(args.corpus, rebuilt_truth(args.corpus)))
    print(json.dumps(result, indent=1))
    if args.out is not None:
        from badpo.experiment.provenance import provenance

        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"corpus": str(args.corpus), **result, "provenance": provenance()},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
