"""Where a trained policy leans along the declared attributes: on the pairs it trained on, on
held-out pairs, and on the body-fixed candidates (issue 51).

    python experiments/analyses/training_pair_lean.py OUT --json FILE [--arms NAME ...] [--seeds S ...]
    python experiments/analyses/training_pair_lean.py --summary FILE [FILE ...]   # the removal table

OUT is an experiment folder whose arms kept their policies (each arm read against its own
reference, ``record["reference"]``). For every arm, the implicit-reward margin u of every training
and held-out judgment (:func:`badpo.readouts.model.heldout_margins`), then the policy's lean along
the attributes as the tilt rule reads it (:func:`badpo.core.level_step.policy_tilt`: each pair's margin
regressed on its attribute difference, both in the pair's first-seen orientation, each pair once,
no intercept; the reference's lean is 0 exactly). Beside it, the record's body-fixed log-odds of
the long and the bold candidates and the reference's.

Why: on smol-multipref every rule for theta leaves 17-27% of DPO's body-fixed length lean, and the
tilt rule, which holds the training pairs' lean near 0, leaves as much. If the default's lean on the
training pairs is removed where the body-fixed one is not, no rule acting through the training
loss's lean can close the gap (experiments/analyses/level_rules_toy.py isolates that channel).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from badpo.core.attributes import resolve_attributes
from badpo.core.config import from_dict
from badpo.core.jsonio import write_json
from badpo.core.judgments import read_judgments
from badpo.core.level_step import policy_tilt
from badpo.corpora.smol_multipref import candidate_responses
from badpo.engine.tokenize import TokenizationConfig
from badpo.evaluation.trained_run import load_causal_lm
from badpo.experiment.provenance import provenance
from badpo.experiment.records import read_records
from badpo.readouts.model import heldout_margins
from badpo.readouts.rows.heldout import attribute_values

BODY_FIXED = {"length": "long_log_odds", "markdown": "markdown_log_odds"}


def pair_layout(judgments) -> tuple[torch.Tensor, torch.Tensor]:
    """Each judgment's pair index (by ``pair_id``) and side (+1 where it chose the side its pair's
    first judgment chose)."""
    first: dict[str, str] = {}
    index: dict[str, int] = {}
    pair, side = [], []
    for j in judgments:
        key = j.pair_id
        first.setdefault(key, j.chosen)
        pair.append(index.setdefault(key, len(index)))
        side.append(1.0 if j.chosen == first[key] else -1.0)
    return torch.tensor(pair), torch.tensor(side, dtype=torch.float64)


def differences(judgments, attributes: list[str]) -> torch.Tensor:
    """g(chosen) - g(rejected) of the built-in attributes, ``[N, d]`` float64."""
    chosen, rejected = attribute_values(judgments, resolve_attributes(attributes))
    return torch.as_tensor(chosen - rejected, dtype=torch.float64)


def same_body_mask(judgments, answers: Path) -> torch.Tensor:
    """``[N]`` bool: the judgments whose two sides are two styles of one sampled body (smol-multipref
    draws both sides of a question without a right answer from all its samples, so some pairs differ
    in style only). Their quality difference is 0 by construction: the policy's lean there is its
    lean along the styles alone, what the body-fixed candidates read on other bodies."""
    body_of = {}
    for line in answers.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for text in candidate_responses(row["kind"], row["body"]):
            body_of[(row["prompt"], text)] = (row["prompt_id"], row["body"])
    return torch.tensor([(j.prompt, j.chosen) in body_of and body_of[(j.prompt, j.chosen)]
                         == body_of.get((j.prompt, j.rejected)) for j in judgments])


def arm_row(out: Path, record: dict, reference, base: Path, splits: dict, layouts: dict,
            attributes: list[str]) -> dict:
    """One arm's lean on the training and held-out pairs and its body-fixed log-odds (a LoRA
    policy is read on ``base``, its reference's model)."""
    from transformers import AutoTokenizer

    settings, policy_dir = record["settings"], out / record["artifacts"]["policy"]
    policy, tokenizer = load_causal_lm(policy_dir, {}, base=base), AutoTokenizer.from_pretrained(policy_dir)
    tokenization = from_dict(TokenizationConfig, settings["tokenization"])
    theta = record.get("theta") or {}
    row = {"arm": record["arm"], "seed": record["seed"], "key": record["key"], "reference": record["reference"],
           "theta": dict(zip(theta.get("attribute_names", []), theta.get("mean", []))),
           "body_fixed": {a: record["readouts"]["candidates"][BODY_FIXED[a]] for a in attributes}}
    for name, judgments in splits.items():
        margins = heldout_margins(policy, reference, tokenizer, judgments, settings["beta"], tokenization,
                                  cache_dir=out / "reference_cache")  # the reference's side once per reference
        pair, side, diff = layouts[name]
        row[f"lean_{name}"] = dict(zip(attributes, policy_tilt(margins.double(), diff, pair, side).tolist()))
        if name == "train" and "same_body" in layouts:  # the pairs that style one body: quality 0 there
            mask = layouts["same_body"]
            row["lean_same_body"] = dict(zip(attributes, policy_tilt(
                margins.double()[mask], diff[mask], pair[mask], side[mask]).tolist()))
    print(json.dumps(row), flush=True)
    return row


def lean_rows(out: Path, attributes: list[str], arms: list[str] | None, seeds: list[int] | None) -> list[dict]:
    records = read_records(out / "runs")
    splits = {name: read_judgments(out / "corpus" / f"{name}.jsonl") for name in ("train", "heldout")}
    layouts = {name: (*pair_layout(js), differences(js, attributes)) for name, js in splits.items()}
    if (out / "corpus" / "answers.jsonl").exists():
        layouts["same_body"] = same_body_mask(splits["train"], out / "corpus" / "answers.jsonl")
    rows = []
    for ref_key in sorted(k for k, r in records.items() if r["kind"] == "reference"):
        ref_record = records[ref_key]
        arms_here = [r for r in records.values() if r["kind"] == "arm" and r.get("reference") == ref_key
                     and (arms is None or r["arm"] in arms) and (seeds is None or r["seed"] in seeds)]
        if not arms_here:
            continue
        base = out / ref_record["artifacts"]["model"]
        reference = load_causal_lm(base, {})
        rows.append({"arm": "reference", "seed": ref_record.get("settings", {}).get("runtime", {}).get("seed"),
                     "key": ref_key, "body_fixed": {a: ref_record["readouts"]["candidates"][BODY_FIXED[a]]
                                                    for a in attributes}})
        rows += [arm_row(out, r, reference, base, splits, layouts, attributes)
                 for r in sorted(arms_here, key=lambda r: r["arm"])]
    return rows


def removal_table(paths: list[Path]) -> str:
    """The removal of DPO's lean on each scale, per arm and seed, from one or more ``--json`` files:
    1 - arm / DPO on the pairs (the reference's pair lean is 0), 1 - (arm - reference) / (DPO -
    reference) on the body-fixed log-odds, each arm against the DPO and reference of its seed."""
    rows = [row for path in paths for row in json.loads(Path(path).read_text())["rows"]]
    references = {r["key"]: r for r in rows if r["arm"] == "reference"}
    dpo = {r["seed"]: r for r in rows if r["arm"] == "DPO"}
    attributes = list(rows[0]["body_fixed"])
    measured = [r for r in rows if r["arm"] != "reference"]
    splits = ("train", "heldout") + (("same_body",) if all("lean_same_body" in r for r in measured) else ())
    names = {"train": "training pairs", "heldout": "held-out pairs", "same_body": "same-body pairs"}
    lines = ["| arm | seed | " + " | ".join(f"{a}: body-fixed | " + " | ".join(names[s] for s in splits)
                                           for a in attributes) + " |",
             "|:--|--:|" + "--:|" * (1 + len(splits)) * len(attributes)]
    for r in sorted((r for r in rows if r["arm"] not in ("reference", "DPO")), key=lambda r: (r["arm"], r["seed"])):
        base, ref = dpo[r["seed"]], references[r["reference"]]["body_fixed"]
        cells = []
        for a in attributes:
            body = 1 - (r["body_fixed"][a] - ref[a]) / (base["body_fixed"][a] - ref[a])
            cells += [f"{body:.0%}"] + [f"{1 - r[f'lean_{split}'][a] / base[f'lean_{split}'][a]:.0%}"
                                        for split in splits]
        lines.append(f"| {r['arm']} | {r['seed']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--summary", type=Path, nargs="+", default=None,
                        help="print the removal table of these --json files instead of measuring")
    parser.add_argument("--attributes", nargs="+", default=["length", "markdown"])
    parser.add_argument("--arms", nargs="+", default=None, help="only these arms (by their table name)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="only these seeds")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.summary:
        print(removal_table(args.summary))
        return 0
    if args.out is None or args.json is None:
        parser.error("OUT and --json are needed to measure (or --summary FILES to read)")
    torch.set_num_threads(2)
    rows = lean_rows(args.out, args.attributes, args.arms, args.seeds)
    write_json(args.json, {"folder": str(args.out), "attributes": args.attributes, "rows": rows,
                           "provenance": provenance()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
