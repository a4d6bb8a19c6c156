"""Where a tiny policy's markdown shift sits: in the bullet itself, or in the answer after it.

    python experiments/analyses/markdown_split.py OUT [--prompts 100] [--json FILE]

OUT is an experiment folder of the tiny length-and-format world whose runs kept their policies
(``save_policy: true``). ``p(md) | body`` compares, for each evaluation prompt and ending, the
candidate with a bullet (``- 9 7 0 0 ...``) with the one without (``9 7 0 0 ...``). Its log-odds
against the reference's splits exactly into two parts, each a change in log-probability,
policy minus reference, of the bulleted candidate minus the plain one:

- ``first``: the first token: the bullet against the plain answer's first digit;
- ``rest``: every later token (digits, ending, EOS): on the bulleted side from the first digit
  (spelled after a space) on, on the plain side from the second digit on.

A shift in ``first`` is the markdown decision; a shift in ``rest`` is the body's likelihood after
a bullet moving apart from the same body without one (issue 35: why the tiny policy stays on its
reference's markdown rate at a theta below the bias its labels show). Means over prompts and the
three endings; one row per run that kept its policy, by arm and seed. A second table says where
the first token's mass sits, reference first: the bullet, the body's first token (the exact first
digit, or the task word under ``echo_task``) in its own spelling and spelled after a space (as it
is in the world's answers only after a bullet), the other digits in either spelling, and the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from badpo.core.attributes import has_markdown
from badpo.core.config import from_dict, load_config
from badpo.corpora.tiny_multipref import MARKDOWN_PREFIX, TinyMultiPrefConfig
from badpo.engine.logprobs import token_logprobs
from badpo.engine.tokenize import TokenizationConfig, build_token_store
from badpo.evaluation.trained_run import load_causal_lm
from badpo.experiment.records import read_records


def eval_rows(corpus: Path, prompts: int | None) -> list[dict]:
    """The first ``prompts`` evaluation prompts of the world (all when None)."""
    return [json.loads(line) for line in list((corpus / "eval_prompts.jsonl").open(encoding="utf-8"))[:prompts]]


def candidate_pairs(rows: list[dict]) -> list[tuple[str, str, str]]:
    """(prompt, bulleted candidate, plain candidate) for each evaluation prompt and ending."""
    pairs = []
    for row in rows:
        plain = [c for c in row["candidates"] if not has_markdown(c)]
        for text in plain:
            bulleted = next(c for c in row["candidates"] if has_markdown(c) and c.endswith(text))
            pairs.append((row["prompt"], bulleted, text))
    return pairs


def load(model_dir: Path):
    """(model, tokenizer) of a saved policy or reference, read once for both readouts."""
    from transformers import AutoTokenizer

    return load_causal_lm(model_dir, {}), AutoTokenizer.from_pretrained(model_dir)


@torch.no_grad()
def opening_and_rest(model, tokenizer, pairs: list[tuple[str, str, str]], tokenization: TokenizationConfig
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per pair: (log p of the bullet as first token, log p of the plain answer's first digit there,
    bulleted minus plain log p of every later token), encoded as training encodes them."""
    sequences = [(prompt, text) for prompt, bulleted, plain in pairs for text in (bulleted, plain)]
    store = build_token_store(tokenizer, sequences, tokenization)
    per_token = token_logprobs(model, store.batch(torch.arange(len(store)), "cpu")).double()  # [N, T], by position
    first = per_token[torch.arange(len(store)), torch.as_tensor(store.prompt_lengths)]  # the first response token
    rest = per_token.sum(dim=1) - first
    return first[0::2], first[1::2], rest[0::2] - rest[1::2]


OPENINGS = ("bullet", "body's first token", "the same, spaced", "other digits", "other spaced digits", "other tokens")


@torch.no_grad()
def opening_mass(model, tokenizer, rows: list[dict]) -> dict[str, float]:
    """Mean probability of each kind of first response token over the evaluation prompts: the
    bullet, the body's first token (the exact answer's first digit, or its task word under
    ``echo_task``), that token spelled after a space (as it is in the world's answers only after a
    bullet), the other digits in either spelling, and the rest."""
    ids = {kind: tokenizer.convert_tokens_to_ids([f"{prefix}{d}" for d in range(10)])
           for kind, prefix in (("digits", ""), ("spaced", "\u2581"))}
    bullet = tokenizer.convert_tokens_to_ids(MARKDOWN_PREFIX.strip())
    totals = dict.fromkeys(OPENINGS, 0.0)
    for row in rows:
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        p = torch.softmax(model(torch.tensor([prompt])).logits[0, -1].double(), -1)
        first = row["body"].split()[0]  # the exact first digit, or the task word under echo_task
        own, spaced = tokenizer.convert_tokens_to_ids([first, "\u2581" + first])
        is_digit = first.isdigit()
        shares = {"bullet": p[bullet], "body's first token": p[own], "the same, spaced": p[spaced],
                  "other digits": p[ids["digits"]].sum() - (p[own] if is_digit else 0.0),
                  "other spaced digits": p[ids["spaced"]].sum() - (p[spaced] if is_digit else 0.0)}
        shares["other tokens"] = 1.0 - sum(shares.values())
        for kind, share in shares.items():
            totals[kind] += float(share) / len(rows)
    return totals


def split_rows(out: Path, prompts: int | None) -> list[dict]:
    """The reference's first-token mass, then one row per logged arm run with a policy: its arm,
    seed, mean shifts from the reference (nats: the bullet, the first digit, their difference,
    the rest) and its first-token mass. Each model is read once."""
    indent = load_config(TinyMultiPrefConfig, out / "corpus" / "world.yaml").bullet_indent
    if indent:
        raise SystemExit(f"markdown_split: {out / 'corpus' / 'world.yaml'} has bullet_indent {indent}: the bullet is "
                         "not the first response token, which this split reads")
    rows = eval_rows(out / "corpus", prompts)
    pairs = candidate_pairs(rows)
    records = list(read_records(out / "runs").values())
    reference = next(r for r in records if r["kind"] == "reference")
    tokenization = from_dict(TokenizationConfig, reference["settings"]["tokenization"])
    model, tokenizer = load(out / reference["artifacts"]["model"])
    base = opening_and_rest(model, tokenizer, pairs, tokenization)
    opening = opening_mass(model, tokenizer, rows)
    table = [{"arm": "reference", "seed": None, "key": reference["key"], "opening": opening}]
    for record in records:
        policy = out / record.get("artifacts", {}).get("policy", "")
        if record["kind"] != "arm" or not (policy / "config.json").exists():
            continue
        model, tokenizer = load(policy)
        bullet, digit, rest = (float((mine - theirs).mean())
                               for mine, theirs in zip(opening_and_rest(model, tokenizer, pairs, tokenization), base))
        table.append({"arm": record["arm"], "seed": record["seed"], "key": record["key"], "bullet": bullet,
                      "digit": digit, "first": bullet - digit, "rest": rest,
                      "opening": opening_mass(model, tokenizer, rows)})
    return table[:1] + sorted(table[1:], key=lambda row: (row["arm"], row["seed"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--prompts", type=int, default=None, help="evaluation prompts read (default: all)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = split_rows(args.out, args.prompts)
    print("| Arm | Seed | Bullet | First digit | First token | Rest | Total |\n|:--|--:|--:|--:|--:|--:|--:|")
    for row in rows[1:]:
        print(f"| {row['arm']} | {row['seed']} | {row['bullet']:+.3f} | {row['digit']:+.3f} | {row['first']:+.3f} | "
              f"{row['rest']:+.3f} | {row['first'] + row['rest']:+.3f} |")
    print("\nFirst-token mass (mean over the prompts):\n")
    print("| Arm | Seed | " + " | ".join(OPENINGS) + " |\n|:--|--:|" + "--:|" * len(OPENINGS))
    for row in rows:
        seed = "—" if row["seed"] is None else row["seed"]
        print(f"| {row['arm']} | {seed} | " + " | ".join(f"{row['opening'][k]:.3f}" for k in OPENINGS) + " |")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
