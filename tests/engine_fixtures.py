"""Tiny models, tokenizers and judgments for the engine tests (built locally, nothing downloaded),
and the checks several engine test files share (full-logit log-probs, two runs compared).

A WordLevel tokenizer over a fixed word list (wrapped in ``PreTrainedTokenizerFast``), a variant of
it with a chat template, and tiny GPT-2 / Llama / Qwen2 models built from configs with dropout 0,
saved with ``save_pretrained`` so that the engine loads them by path like any Hub model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from badpo.core.bias import BiasChannel
from badpo.core.config import apply_overrides, from_dict
from badpo.engine.settings import TrainConfig

SPECIAL = ["<pad>", "<unk>", "<bos>", "<eos>", "<|user|>", "<|assistant|>"]
WORDS = (
    "what is the best way to learn cook write code answer here a an and of in it sure "
    "yes no maybe i think you should try this that first then finally good bad short long "
    "--- emily greg lakisha jamal smith jones baker wilson thanks regards sign your name"
).split()
VOCAB = SPECIAL + WORDS
CHAT_TEMPLATE = (
    "{% for message in messages %}<|user|> {{ message['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_tokenizer(chat_template: bool = False) -> PreTrainedTokenizerFast:
    """Whitespace word tokenizer over ``VOCAB``; with ``chat_template`` a one-turn user template."""
    word_level = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>"))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=word_level,
        pad_token="<pad>", unk_token="<unk>", bos_token="<bos>", eos_token="<eos>",
    )
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(arch: str = "gpt2", seed: int = 0) -> torch.nn.Module:
    """A 2-layer causal LM over ``VOCAB`` with dropout 0 (so that repeated forwards agree)."""
    torch.manual_seed(seed)
    vocab = len(VOCAB)
    if arch == "gpt2":
        config = GPT2Config(
            vocab_size=vocab, n_positions=128, n_embd=32, n_layer=2, n_head=2,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=2, eos_token_id=3,
        )
        return GPT2LMHeadModel(config)
    common = dict(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        bos_token_id=2, eos_token_id=3, pad_token_id=0, tie_word_embeddings=False,
    )
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**common))
    if arch == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**common))
    raise ValueError(f"unknown arch {arch!r}")


def save_model_dir(path: Path, arch: str = "gpt2", chat_template: bool = False, seed: int = 0) -> Path:
    """Save a tiny model and its tokenizer under ``path`` (HF format) and return ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    build_model(arch, seed).save_pretrained(path)
    build_tokenizer(chat_template).save_pretrained(path)
    return path


def judgment_rows(n_pairs: int = 6, judgments_per_pair: int = 4) -> list[dict]:
    """Judgment rows over the tiny vocabulary: ``n_pairs`` pairs, each judged by several annotators.

    Each row carries ``g_chosen`` / ``g_rejected`` for one attribute ``signed`` (read with the
    ``given:signed`` attribute spec), so the tests do not depend on a signature parser. Labels are
    deterministic: on an even pair (signed side ``a`` vs unsigned ``b``) judgment j prefers ``a``
    unless j % 4 == 3, so with 4 judgments per pair the signed side wins 3 of 4 cross-group
    judgments (offline log-odds log 3); on an odd pair (both unsigned) ``a`` wins when j is even.
    Judgment j of pair i is cast by annotator (i + j) % 5; ann0-ann2 are class A, ann3-ann4 B.
    """
    prompts = ["what is the best way to learn", "what is the best way to cook", "write code"]
    bodies = ["sure i think you should try this first", "maybe try that", "yes good answer here",
              "no bad short answer", "then finally good and long answer", "i think this"]
    rows = []
    for i in range(n_pairs):
        a = bodies[i % len(bodies)] + " --- emily smith" if i % 2 == 0 else bodies[i % len(bodies)]
        b = bodies[(i + 1) % len(bodies)]
        g_a = 1.0 if i % 2 == 0 else 0.0
        for j in range(judgments_per_pair):
            a_wins = j % 4 != 3 if i % 2 == 0 else j % 2 == 0
            chosen, rejected, g_w, g_l = (a, b, g_a, 0.0) if a_wins else (b, a, 0.0, g_a)
            k = (i + j) % 5
            rows.append({
                "prompt": prompts[i % len(prompts)], "chosen": chosen, "rejected": rejected,
                "annotator": f"ann{k}", "annotator_class": "A" if k < 3 else "B",
                "pair_id": f"p{i}", "g_chosen": {"signed": g_w}, "g_rejected": {"signed": g_l},
            })
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def make_config(world: Path, name: str, *overrides: str) -> TrainConfig:
    base = {
        "method": "ba_dpo_shared_mean", "data": str(world / "judgments.jsonl"),
        "attributes": ["given:signed"], "model": {"name_or_path": str(world / "model")},
        "steps": 3, "batch_size": 8, "micro_batch_size": 8,
        "optim": {"lr": 1e-3, "warmup_ratio": 0.0, "schedule": "constant"},
        "runtime": {"num_threads": 1}, "report": {"progress_bar": False},
        "cache_dir": str(world / "cache"), "output_dir": str(world / name),
    }
    return from_dict(TrainConfig, apply_overrides(base, overrides))


def log_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def full_logit_token_logprobs(model, batch) -> torch.Tensor:
    """The independent path: materialise [B, T, V] logits and read log_softmax at the labels."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    logps = torch.log_softmax(logits.float(), dim=-1)[:, :-1]
    picked = logps.gather(-1, batch["input_ids"][:, 1:, None]).squeeze(-1)
    return torch.nn.functional.pad(picked * batch["response_mask"][:, 1:], (1, 0))


def policy_weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(out / "policy" / "model.safetensors")


def assert_same_run(a: Path, b: Path, atol: float = 2e-5) -> None:
    """Same gradient norms (Adam would hide a wrong gradient scale) and the same weights and theta.

    Weights to 2e-5 = 2% of one step at lr 1e-3: Adam's step g / (sqrt(v) + eps) turns float noise
    in a near-zero gradient coordinate into a visible difference."""
    for ra, rb in zip(log_records(a), log_records(b), strict=True):
        for key in ("loss", "grad_norm", "theta_grad_norm"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-7), (key, ra["step"])
    wa, wb = policy_weights(a), policy_weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=0, atol=atol, msg=name)
    theta_a, theta_b = BiasChannel.load(a / "theta.json"), BiasChannel.load(b / "theta.json")
    torch.testing.assert_close(theta_a.theta(), theta_b.theta(), rtol=0, atol=atol)
