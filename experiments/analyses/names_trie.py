"""The names readout's candidates as a trie against a padded batch, on a trained run (issue 50).

For each of the first ``--prompts`` evaluation prompts of a names corpus, the prompt + body +
signature prefix is encoded once and the 89 first names and the 89 x S whole signature lines
(S = ``--surnames``) are scored after it twice: as the trie :func:`badpo.engine.continuations.score_after`
runs by default and as the padded batch it falls back to. The record holds each layout's seconds
and the largest difference of a candidate's log-prob between them.

    OMP_NUM_THREADS=2 python experiments/analyses/names_trie.py runs/smol/work/ba_dpo_pooled-seed42-ec9e2dc4ee69 \
        --corpus runs/smol/corpus --out results/bench/names_trie_smol.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

from badpo.core.jsonio import atomic_write_text
from badpo.core.names import POOL_NAMES
from badpo.engine.continuations import candidate_batch, encode_prefix, score_after
from badpo.engine.tokenize import encode_prompts
from badpo.evaluation.trained_run import TrainedRun
from badpo.experiment.provenance import provenance
from badpo.readouts.names_scoring import SIGNATURE_PREFIX
from badpo.readouts.reading import Corpus


def candidates(tokenizer, surnames: list[str]) -> dict[str, list[list[int]]]:
    """Token ids of " First" and of " First Last" + EOS, each after the signature prefix."""
    def pieces(texts: list[str]) -> list[list[int]]:
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    wholes = [ids + [tokenizer.eos_token_id]
              for ids in pieces([f" {first} {last}" for first in POOL_NAMES for last in surnames])]
    return {"first_name": pieces([" " + first for first in POOL_NAMES]), "whole_signature": wholes}


def timed(model, encoded, batch, tree: bool) -> tuple[torch.Tensor, float]:
    start = time.perf_counter()
    scores = score_after(model, encoded, batch, tree=tree)
    return scores, time.perf_counter() - start


@torch.no_grad()
def compare(run_dir: Path, corpus_dir: Path, prompts: int, surnames: int) -> dict:
    run = TrainedRun.open(run_dir)
    model = run.load_policy().eval()
    tokenizer = AutoTokenizer.from_pretrained(run.policy)
    corpus = Corpus.load(corpus_dir)
    groups = {name: candidate_batch(ids) for name, ids in candidates(tokenizer, corpus.surnames[:surnames]).items()}
    seconds = {name: {"trie": 0.0, "padded": 0.0} for name in groups}
    worst = {name: 0.0 for name in groups}
    for row in corpus.eval_prompts[:prompts]:
        prefix = encode_prompts(tokenizer, [row["prompt"]], run.tokenization)[0][-run.tokenization.max_prompt_tokens:]
        prefix += tokenizer(row["body"].rstrip() + SIGNATURE_PREFIX, add_special_tokens=False)["input_ids"]
        encoded = encode_prefix(model, prefix)
        for name, batch in groups.items():
            trie, trie_s = timed(model, encoded, batch, tree=True)
            padded, padded_s = timed(model, encoded, batch, tree=False)
            seconds[name]["trie"] += trie_s
            seconds[name]["padded"] += padded_s
            worst[name] = max(worst[name], float((trie - padded).abs().max()))
    return {"run": str(run_dir), "prompts": prompts, "surnames": surnames,
            "positions": {name: {"trie_fed": int(batch.tokens.numel()), "padded_fed": int(batch.ids.numel()),
                                 "trie_scored": int(batch.target.numel()), "padded_scored": int(batch.mask.sum())}
                          for name, batch in groups.items()},
            "seconds": {name: {k: round(v, 2) for k, v in s.items()} for name, s in seconds.items()},
            "speedup": {name: round(s["padded"] / s["trie"], 2) for name, s in seconds.items()},
            "max_abs_logprob_difference": worst, "provenance": provenance()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--surnames", type=int, default=6)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    record = compare(args.run, args.corpus, args.prompts, args.surnames)
    atomic_write_text(args.out, json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("seconds", "speedup", "max_abs_logprob_difference")}))


if __name__ == "__main__":
    main()
