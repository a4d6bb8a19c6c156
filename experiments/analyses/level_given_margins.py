"""The level the labels show *given a trained policy's own margins*, on its training judgments and
on held-out ones.

    python experiments/analyses/level_given_margins.py OUT [--attribute markdown] [--json FILE]

OUT is an experiment folder whose runs kept their policies. For each such run, the implicit-reward
margin u = beta * (chosen minus rejected log-ratio) of every training and held-out judgment
(:func:`badpo.readouts.model.heldout_margins`, as the held-out readouts compute it), then the one
pooled level that best fits the labels on top of u (:func:`badpo.core.level_step.offset_mle`, the
library's level fit, logistic link), with the run's fixed offset (``bias.fixed_offset``) counted
in u where it has one. A BA-DPO run's learned theta sits near the training fit, the optimum given
its margins; the held-out fit says what the labels ask of the attribute given what the policy
carries to new prompts (issue 35: the learned markdown theta climbs past the level at which the
policy holds its rate). Given-attribute runs (``given:...``) are skipped: their offsets are not in u.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from badpo.core.attributes import resolve_attributes
from badpo.core.config import from_dict
from badpo.core.judgments import read_judgments
from badpo.core.level_step import LOGISTIC, offset_mle
from badpo.engine.tokenize import TokenizationConfig
from badpo.evaluation.trained_run import load_causal_lm
from badpo.experiment.records import read_records
from badpo.readouts.model import heldout_margins
from badpo.readouts.rows.heldout import attribute_values


def attribute_difference(judgments, attribute: str) -> torch.Tensor:
    """g(chosen) - g(rejected) of one built-in attribute, ``[N]`` float64."""
    chosen, rejected = attribute_values(judgments, resolve_attributes([attribute]))
    return torch.as_tensor(chosen[:, 0] - rejected[:, 0], dtype=torch.float64)


def fitted_level(margins: torch.Tensor, difference: torch.Tensor) -> float:
    """The pooled level on top of the margins (every judgment a win of its chosen side)."""
    return float(offset_mle(margins.double(), difference.reshape(-1, 1), LOGISTIC)[0])


def run_level(out: Path, record: dict, reference, splits: dict, differences: dict, attribute: str) -> dict:
    """One run's row: its arm, seed, method and attributes, theta (learned mean plus any fixed
    offset) and the level fitted on its training and held-out margins (offset counted in u)."""
    from transformers import AutoTokenizer

    settings, policy_dir = record["settings"], out / record["artifacts"]["policy"]
    policy, tokenizer = load_causal_lm(policy_dir, {}), AutoTokenizer.from_pretrained(policy_dir)
    tokenization = from_dict(TokenizationConfig, settings["tokenization"])
    offset = dict(zip(settings["attributes"], settings.get("bias", {}).get("fixed_offset") or [])).get(attribute, 0.0)
    theta = record.get("theta") or {}
    learned = dict(zip(theta.get("attribute_names", []), theta.get("mean", [])))
    row = {"arm": record["arm"], "seed": record["seed"], "key": record["key"],
           "method": f"{record['method']} ({', '.join(settings['attributes'])})",
           "theta": learned.get(attribute, 0.0) + offset}
    for name, judgments in splits.items():
        margins = heldout_margins(policy, reference, tokenizer, judgments, settings["beta"], tokenization)
        row[name] = fitted_level(margins + offset * differences[name], differences[name]) + offset
    return row


def level_rows(out: Path, attribute: str) -> list[dict]:
    """The labels' own level (margins 0, the reference), then one row per logged arm run with a
    policy and no given attribute, by arm and seed (:func:`run_level`)."""
    records = list(read_records(out / "runs").values())
    reference_record = next(r for r in records if r["kind"] == "reference")
    reference = load_causal_lm(out / reference_record["artifacts"]["model"], {})
    splits = {name: read_judgments(out / "corpus" / f"{name}.jsonl") for name in ("train", "heldout")}
    differences = {name: attribute_difference(js, attribute) for name, js in splits.items()}
    own = {name: fitted_level(torch.zeros(len(d)), d) for name, d in differences.items()}
    rows = [{"arm": "reference (u = 0: the labels' own level)", "seed": None, "key": reference_record["key"],
             "method": "—", "theta": 0.0, **own}]
    for record in records:
        policy_dir = out / record.get("artifacts", {}).get("policy", "")
        given = any(a.startswith("given:") for a in record.get("settings", {}).get("attributes", []))
        if record["kind"] == "arm" and (policy_dir / "config.json").exists() and not given:
            rows.append(run_level(out, record, reference, splits, differences, attribute))
    return rows[:1] + sorted(rows[1:], key=lambda row: (row["arm"], row["seed"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--attribute", default="markdown")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = level_rows(args.out, args.attribute)
    print("| Arm | Seed | Method (attributes) | θ (run) | Level given its margins, training | held-out |\n"
          "|:--|--:|:--|--:|--:|--:|")
    for row in rows:
        seed = "—" if row["seed"] is None else row["seed"]
        print(f"| {row['arm']} | {seed} | {row['method']} | {row['theta']:.2f} | {row['train']:.2f} | "
              f"{row['heldout']:.2f} |")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
