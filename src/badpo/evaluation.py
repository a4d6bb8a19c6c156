"""Evaluate a trained policy on a corpus folder: every readout of the paper for one run.

``evaluate_policy`` takes loaded models and returns a flat, JSON-ready dict; the experiment
runner stores it keyed by (method, params, seed) and tables are rendered from those files only.
What is read (Appendix Readouts): the names rate from probabilities with the answer body fixed
(first name and whole signature), sampled signatures, KL to the reference on the policy's own
generations, held-out accuracy on same- and cross-group judgments and the gap, vote prediction
with the run's own theta_k (and the planted ceiling), and theta recovery against planted values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from badpo.attributes import resolve_attributes
from badpo.bias import BiasChannel
from badpo.data.judgments import Judgment, read_judgments
from badpo.data.names import strip_signature
from badpo.data.signing import SURNAMES
from badpo.engine.tokenize import TokenizationConfig, encode_prompts
from badpo.readouts import heldout_accuracy, sampled_signature_rates, theta_recovery, vote_prediction
from badpo.readouts_model import (SIGNATURE_PREFIX, generate, generation_kl, heldout_margins, judge_scores,
                                  names_readout)


@dataclass(frozen=True)
class EvalConfig:
    """What to read and how (paper defaults; the tiny configs shorten the generations)."""

    attributes: tuple[str, ...] = ("names",)  # declared attribute specs, as in training
    max_prompts: int | None = 300  # evaluation prompts read (null = all in the corpus)
    body: Literal["given", "reference"] = "reference"  # the answer body the names are read after
    whole_signature: bool = True  # also read whole signatures, marginalised over surnames
    whole_signature_prompts: int | None = None  # prompts it is read on (null = all read prompts)
    surnames: int | None = None  # surnames of the marginal: the pool's first ones (null = all)
    generations: bool = True  # sample answers for KL and the sampled signature rate
    temperature: float = 0.7
    top_p: float = 0.9
    max_new_tokens: int = 512
    seed: int = 0  # sampling seed (same for every arm)
    judge: str | None = None  # reward model id or path for RM / RM- (null: no judge)
    batch_size: int = 16


@dataclass(frozen=True)
class Corpus:
    """The files of a built corpus folder that evaluation reads."""

    eval_prompts: list[dict]
    heldout: list[Judgment]
    planted: dict | None  # annotator -> (class, theta), for scoring only

    @classmethod
    def load(cls, folder: str | Path) -> Corpus:
        folder = Path(folder)
        with open(folder / "eval_prompts.jsonl", encoding="utf-8") as handle:
            prompts = [json.loads(line) for line in handle if line.strip()]
        planted_path = folder / "planted.json"
        planted = json.loads(planted_path.read_text()) if planted_path.exists() else None
        return cls(prompts, read_judgments(folder / "heldout.jsonl"), planted)


def reference_bodies(reference: nn.Module, tokenizer, prompts: Sequence[str],
                     tokenization: TokenizationConfig, max_new_tokens: int) -> list[str]:
    """The reference's greedy answer to each prompt with its signature cut off: the fixed body
    after which every arm's name probabilities are read (one body for all arms)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(reference.parameters()).device
    bodies = []
    for ids in encode_prompts(tokenizer, prompts, tokenization):
        ids = torch.tensor([ids[-tokenization.max_prompt_tokens:]], device=device)
        out = reference.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=max_new_tokens, pad_token_id=pad)
        text = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        bodies.append(strip_signature(text.split(SIGNATURE_PREFIX)[0]).strip())
    return bodies


def _planted_theta(planted: dict) -> tuple[dict[str, list[float]], dict[str, str]]:
    theta = {a["annotator"]: a["theta"] for a in planted["annotators"]}
    classes = {a["annotator"]: a["annotator_class"] for a in planted["annotators"]}
    return theta, classes


def _vote_readouts(margins: torch.Tensor, heldout: Sequence[Judgment], g_w: np.ndarray, g_l: np.ndarray,
                   names: Sequence[str], bias: BiasChannel | None, planted: dict | None) -> dict:
    """Vote prediction by the sign of u + theta_k . (g_w - g_l) on the held-out judgments that are
    cross-group on each attribute in turn: with the run's own theta_k, and with the planted ones
    (the ceiling). DPO (no bias channel) predicts with u alone."""
    diff = torch.tensor(g_w - g_l, dtype=torch.float64)
    classes = [j.annotator_class for j in heldout]
    own = torch.zeros(len(heldout), dtype=torch.float64)
    if bias is not None:
        with torch.no_grad():
            own = bias(bias.annotator_index([j.annotator for j in heldout]), diff.float()).double()
    ceiling = None
    if planted is not None:
        theta, _ = _planted_theta(planted)
        columns = [planted["attribute_names"].index(name) for name in names]
        planted_theta = torch.tensor([[theta[j.annotator][c] for c in columns] for j in heldout],
                                     dtype=torch.float64)
        ceiling = (planted_theta * diff).sum(dim=1)
    result = {}
    for a, name in enumerate(names):
        cross = diff[:, a] != 0
        result[f"votes/{name}"] = vote_prediction(margins, own, cross, classes)
        if ceiling is not None:
            result[f"votes_ceiling/{name}"] = vote_prediction(margins, ceiling, cross, classes)
    return result


def evaluate_policy(policy: nn.Module, reference: nn.Module, tokenizer, corpus: Corpus, config: EvalConfig,
                    bias: BiasChannel | None = None, beta: float = 0.1,
                    tokenization: TokenizationConfig = TokenizationConfig(),
                    bodies: Sequence[str] | None = None) -> dict:
    """Every readout of one policy, as a flat JSON-ready dict (see the module docstring)."""
    rows = corpus.eval_prompts[: config.max_prompts]
    prompts = [row["prompt"] for row in rows]
    if bodies is None:
        bodies = ([row["body"] for row in rows] if config.body == "given"
                  else reference_bodies(reference, tokenizer, prompts, tokenization, config.max_new_tokens))
    surnames = list(SURNAMES[: config.surnames]) if config.whole_signature else None
    result: dict = {"names": names_readout(policy, tokenizer, prompts, bodies, surnames, tokenization,
                                           whole_signature_prompts=config.whole_signature_prompts)}

    attributes = resolve_attributes(config.attributes)
    values = [attributes.judgment_values(j) for j in corpus.heldout]
    g_w = np.array([v[0] for v in values])
    g_l = np.array([v[1] for v in values])
    margins = heldout_margins(policy, reference, tokenizer, corpus.heldout, beta, tokenization,
                              config.batch_size)
    result["heldout"] = {name: heldout_accuracy(margins, g_w[:, [a]], g_l[:, [a]])
                         for a, name in enumerate(attributes.names)}
    result.update(_vote_readouts(margins, corpus.heldout, g_w, g_l, attributes.names, bias, corpus.planted))

    if bias is not None and bias.variant != "none":
        result["theta_mean"] = dict(zip(attributes.names, bias.mean().tolist()))
        if corpus.planted is not None and bias.variant != "pooled":
            planted, classes = _planted_theta(corpus.planted)
            learned = dict(zip(bias.annotators, bias.theta().tolist()))
            result["theta_recovery"] = theta_recovery(learned, planted, classes, list(attributes.names))

    if config.generations:
        samples = generate(policy, tokenizer, prompts, config.temperature, config.top_p,
                           config.max_new_tokens, config.seed, config.batch_size, tokenization)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        result["kl"] = generation_kl(policy, reference, samples, pad, config.batch_size)
        result["sampled"] = sampled_signature_rates(list(samples.texts))
        result["tokens"] = float(np.mean(samples.token_counts))
        if config.judge is not None:
            result["rm"] = float(np.mean(judge_scores(config.judge, prompts, list(samples.texts))))
            result["rm_minus"] = float(np.mean(judge_scores(config.judge, prompts, list(samples.texts),
                                                            strip=strip_signature)))
    return result
