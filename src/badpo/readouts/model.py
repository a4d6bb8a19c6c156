"""Model-facing readouts: the numbers :mod:`badpo.readouts.metrics` turns into metrics (not core).

Every log-prob comes from :mod:`badpo.engine.logprobs`, so a readout scores a policy exactly as
training does, and every prompt is encoded by :mod:`badpo.engine.tokenize` (chat template when
the tokenizer has one, the prompt's last ``max_prompt_tokens`` tokens kept).

The names readout (the pool's names at the signature position) is
:mod:`badpo.readouts.names_scoring`.

- :func:`generate`: sampled generations (temperature 0.7, top-p 0.9, <= 512 new tokens).
- :func:`generation_kl`: KL(pi || pi_ref) per token on those generations.
- :func:`heldout_margins`: the implicit-reward margin u of held-out judgments.
- :func:`judge_scores`: a sequence-classification reward model's score, RM or RM- (stripped),
  on inputs truncated to 2048 tokens as in the paper.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from badpo.core.attributes import has_markdown, length_values, word_count
from badpo.core.judgments import Judgment
from badpo.core.losses import dpo_margin
from badpo.core.progress import progress, step_bar
from badpo.engine.cache import cached_values
from badpo.engine.logprobs import response_logprobs, token_logprobs, unwrapped
from badpo.engine.runtime import config_positions
from badpo.engine.tokenize import TokenizationConfig, TokenStore, build_token_store, encode_prompts
from badpo.readouts.metrics import candidate_readout, kl_per_token, sampled_text_rates

__all__ = [
    "Generations", "generate", "generation_kl", "heldout_margins", "judge_scores", "cut_at_eos", "context_length",
    "ended_and_running_logprobs", "format_readout", "sampled_text_readout",
]


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device




@dataclass(frozen=True)
class Generations:
    """Sampled answers: the text, and the exact ids (prompt, completion) they were scored from.

    ``completion_ids`` ends with EOS when the model stopped; ``token_counts`` excludes that EOS.
    """

    prompts: tuple[str, ...]
    texts: tuple[str, ...]
    prompt_ids: tuple[tuple[int, ...], ...]
    completion_ids: tuple[tuple[int, ...], ...]
    token_counts: tuple[int, ...]


def context_length(model: nn.Module, tokenizer=None) -> int | None:
    """The tokens prompt + answer may span: the model's positions (``max_position_embeddings`` or
    ``n_positions``) and the tokenizer's ``model_max_length``, the smaller one (transformers writes
    1e30 there when it does not know, which is no limit); None when neither says."""
    positions = config_positions(getattr(model, "config", None))
    limits = [positions] if positions is not None else []
    most = getattr(tokenizer, "model_max_length", None)
    if isinstance(most, int) and 0 < most < 10**9:
        limits.append(most)
    return min(limits, default=None)


def cut_at_eos(row: list[int], eos_id: int | None) -> list[int]:
    """The ids through the first EOS: what a batched ``generate`` pads after it is not the answer."""
    return row[: row.index(eos_id) + 1] if eos_id is not None and eos_id in row else row


@contextlib.contextmanager
def plain_decoding(model: nn.Module) -> Iterator[None]:
    """Decode with exactly the settings passed to ``generate``.

    transformers fills every field a passed ``GenerationConfig`` leaves unset from the model's
    own ``generation_config`` (a chat model's repetition penalty, say), which would change the
    samples behind KL, the sampled rates and the judge. The library defaults stand in for it
    during the call.
    """
    from transformers import GenerationConfig

    target = unwrapped(model)
    saved = target.generation_config
    target.generation_config = GenerationConfig()
    try:
        yield
    finally:
        target.generation_config = saved


class DecodingTicks:
    """A stopping criterion that never stops: it advances ``bar`` by one decoding step each time
    ``generate`` asks, so a long batch reports while it runs."""

    def __init__(self, bar) -> None:
        self.bar = bar

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs) -> Tensor:
        self.bar.update(1)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


@torch.no_grad()
def generate(model: nn.Module, tokenizer, prompts: Sequence[str], temperature: float = 0.7,
             top_p: float = 0.9, max_new_tokens: int = 512, seed: int = 0, batch_size: int = 16,
             config: TokenizationConfig = TokenizationConfig(), what: str = "generating") -> Generations:
    """Sample one answer per prompt (paper, Appendix Readouts: T 0.7, top-p 0.9, 512 tokens).

    Only temperature and top-p shape the decoder (no top-k, no repetition penalty, whatever the
    model's generation_config says). Prompts are left-padded in batches; sampling runs under
    ``fork_rng`` seeded with ``seed``, so the global RNG is left as it was and the same seed and
    batch size give the same answers on one machine. ``what`` labels the progress bar.
    """
    from transformers import GenerationConfig

    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no eos token; generation could not stop")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    encoded = [ids[-config.max_prompt_tokens:] for ids in encode_prompts(tokenizer, prompts, config)]
    limit = context_length(model, tokenizer)
    longest = max((len(ids) for ids in encoded), default=0)
    if limit is not None and longest + max_new_tokens > limit:
        raise ValueError(f"max_new_tokens={max_new_tokens} after a {longest}-token prompt exceeds the "
                         f"model's {limit} positions; lower max_new_tokens")
    # A complete config, so that a model's own defaults (top-k, repetition penalty) do not apply.
    decoding = GenerationConfig(do_sample=True, temperature=temperature, top_p=top_p, top_k=0,
                                max_new_tokens=max_new_tokens, pad_token_id=pad_id,
                                eos_token_id=tokenizer.eos_token_id)
    device = _device(model)
    was_training = model.training
    model.eval()
    completions: list[list[int]] = []
    devices = [device.index or 0] if device.type == "cuda" else []
    batches = range(0, len(encoded), batch_size)
    # counted in decoding steps, not batches: one batch of a large model on a CPU takes minutes
    bar = step_bar(len(batches) * max_new_tokens, what=what, unit="token", phase=True)
    with torch.random.fork_rng(devices=devices), plain_decoding(model), contextlib.closing(bar):
        torch.manual_seed(seed)
        for number, start in enumerate(batches, 1):
            chunk = encoded[start:start + batch_size]
            width = max(len(ids) for ids in chunk)
            input_ids = torch.tensor([[pad_id] * (width - len(ids)) + ids for ids in chunk], device=device)
            attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in chunk],
                                     device=device)
            output = model.generate(input_ids=input_ids, attention_mask=attention, generation_config=decoding,
                                    stopping_criteria=[DecodingTicks(bar)])
            bar.update(number * max_new_tokens - bar.n)  # a batch that ended early: its steps are done
            completions += [cut_at_eos(row, tokenizer.eos_token_id) for row in output[:, width:].tolist()]
    model.train(was_training)
    eos = tokenizer.eos_token_id
    counts = [len(c) - (1 if c and c[-1] == eos else 0) for c in completions]
    texts = [tokenizer.decode(c[:n], skip_special_tokens=True) for c, n in zip(completions, counts)]
    return Generations(tuple(prompts), tuple(texts), tuple(tuple(p) for p in encoded),
                       tuple(tuple(c) for c in completions), tuple(counts))


def _padded_batch(rows: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int,
                  device: torch.device) -> dict[str, Tensor]:
    """Right-padded input_ids / attention_mask / response_mask of (prompt, response) id pairs."""
    width = max(len(p) + len(r) for p, r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros(len(rows), width, dtype=torch.long)
    response = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, (prompt, completion) in enumerate(rows):
        n, m = len(prompt), len(completion)
        ids[i, : n + m] = torch.tensor(list(prompt) + list(completion))
        attention[i, : n + m] = 1
        response[i, n : n + m] = True
    return {"input_ids": ids.to(device), "attention_mask": attention.to(device),
            "response_mask": response.to(device)}


@torch.no_grad()
def generation_kl(policy: nn.Module, reference: nn.Module, generations: Generations,
                  pad_id: int, batch_size: int = 16) -> float:
    """KL(pi || pi_ref) per token, Monte Carlo on the policy's own generations (the exact sampled
    ids, EOS included when generated): mean of log pi - log pi_ref over generated tokens.

    The samples come from the decoder (temperature, top-p), as in the paper; the log-probs are
    the untempered model's.
    """
    rows = [(p, c) for p, c in zip(generations.prompt_ids, generations.completion_ids) if c]
    if not rows:
        raise ValueError("generations: every completion is empty; nothing to score")
    if policy is reference:  # the reference read against itself: 0 exactly, without a forward
        return 0.0
    policy_parts, reference_parts, masks = [], [], []
    for start in progress(range(0, len(rows), batch_size), "KL on the policy's answers", "batch"):
        chunk = rows[start:start + batch_size]
        policy_parts.append(token_logprobs(policy, _padded_batch(chunk, pad_id, _device(policy))).cpu())
        batch = _padded_batch(chunk, pad_id, _device(reference))
        reference_parts.append(token_logprobs(reference, batch).cpu())
        masks.append(batch["response_mask"].cpu())
    width = max(m.shape[1] for m in masks)

    def stack(parts: list[Tensor]) -> Tensor:
        return torch.cat([nn.functional.pad(p, (0, width - p.shape[1])) for p in parts])

    return kl_per_token(stack(policy_parts), stack(reference_parts), stack(masks).long())


@torch.no_grad()
def heldout_margins(policy: nn.Module, reference: nn.Module, tokenizer,
                    judgments: Sequence[Judgment], beta: float,
                    config: TokenizationConfig = TokenizationConfig(), batch_size: int = 16,
                    cache_dir: str | Path | None = None) -> Tensor:
    """The implicit-reward margin u (eq. shorthand) of each judgment, ``[N]``, chosen minus rejected.

    The reference's side is the same for every policy read against it on these judgments: with
    ``cache_dir`` it is computed once and read by every later run (keyed by content:
    :func:`badpo.engine.cache.cached_values`), with the same bits it would have when computed.
    Feed the margins to :func:`badpo.readouts.metrics.heldout_accuracy` and
    :func:`badpo.readouts.metrics.vote_prediction`.
    """
    if not judgments:
        raise ValueError("judgments: none to score")
    if policy is reference:  # u is 0 exactly: spare two forwards over every held-out judgment
        return torch.zeros(len(judgments))
    sequences = [(j.prompt, side) for j in judgments for side in (j.chosen, j.rejected)]
    # each distinct sequence once (a comparison's votes share its two), longest first so that a
    # batch pads little; the log-probs are put back in the judgments' order
    distinct = list(dict.fromkeys(sequences))
    where = {sequence: i for i, sequence in enumerate(distinct)}
    back = torch.tensor([where[sequence] for sequence in sequences])
    store = build_token_store(tokenizer, distinct, config)
    policy_logps = _store_logprobs(policy, store, batch_size, "policy")
    reference_logps = cached_values(reference, store, cache_dir, {"readout": "heldout", "batch_size": batch_size},
                                    lambda: _store_logprobs(reference, store, batch_size, "reference"))
    pairs, reference_pairs = (logps[back].reshape(len(judgments), 2) for logps in (policy_logps, reference_logps))
    return dpo_margin(pairs[:, 0], pairs[:, 1], reference_pairs[:, 0], reference_pairs[:, 1], beta)


def _store_logprobs(model: nn.Module, store: TokenStore, batch_size: int, which: str) -> Tensor:
    """Summed response log-probs of every sequence of ``store`` ``[S]`` (float32, CPU), longest first in
    batches of ``batch_size``."""
    order = torch.argsort(store.lengths, descending=True, stable=True)
    scored = torch.empty(len(store))
    for s in progress(range(0, len(store), batch_size), f"held-out judgments: {which}", "batch"):
        rows = order[s : s + batch_size]
        scored[rows] = response_logprobs(model, store.batch(rows, _device(model))).cpu()
    return scored


@torch.no_grad()
def ended_and_running_logprobs(model: nn.Module, tokenizer, sequences: Sequence[tuple[str, str]],
                               config: TokenizationConfig = TokenizationConfig(), batch_size: int = 64
                               ) -> tuple[Tensor, Tensor]:
    """(log p(response + EOS | prompt), log p(response | prompt)) of each (prompt, response),
    ``[N]`` float64 each, encoded and scored as training scores them (the engine's token store and
    per-token log-probs), in batches of ``batch_size``. A response cut by ``config.max_length``
    is an error: it has no EOS to read."""
    if not sequences:
        raise ValueError("sequences: none to score")
    store = build_token_store(tokenizer, sequences, config)
    if store.response_cut.any():
        index = int(store.response_cut.nonzero()[0])
        raise ValueError(f"response {sequences[index][1]!r} does not fit tokenization.max_length="
                         f"{config.max_length} with its prompt")
    ended, running = [], []
    for start in progress(range(0, len(store), batch_size), "candidate answers", "batch"):
        rows = torch.arange(start, min(start + batch_size, len(store)))
        per_token = token_logprobs(model, store.batch(rows, _device(model))).double().cpu()
        total = per_token.sum(dim=1)
        ended.append(total)
        running.append(total - per_token[torch.arange(len(rows)), store.lengths[rows] - 1])  # drop the EOS
    return torch.cat(ended), torch.cat(running)


@torch.no_grad()
def format_readout(model: nn.Module, tokenizer, rows: Sequence[dict],
                   config: TokenizationConfig = TokenizationConfig(), batch_size: int = 64) -> dict:
    """Length and markdown from the policy's probabilities with the answer body fixed, averaged over
    the evaluation prompts (:func:`badpo.readouts.metrics.candidate_readout`).

    Each row holds a ``prompt`` and its ``candidates``: whole responses with one body that differ
    in format and ending (the same number for every row). Read per candidate: its words
    ("expected_words"), markdown ("markdown"), whether the length attribute marks it longer than
    the shortest candidate ("long", ratio 1.5); the policy's mass on the set; and "eos_at_stops",
    p(EOS) at the candidates that another candidate extends (where a shorter answer ends); and
    "long_log_odds" / "markdown_log_odds", the mean log-odds of a long (marked) candidate, where every
    prompt has candidates on both sides of the flag. Samples of a tiny policy that learned to avoid
    EOS run on, so their length measures the collapse; these readouts do not sample.
    """
    if not rows:
        raise ValueError("format_readout: no evaluation prompts")
    sizes = {len(row["candidates"]) for row in rows}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"format_readout: every evaluation prompt needs the same non-zero number of candidates, "
                         f"got {sorted(sizes)}")
    ended, running = ended_and_running_logprobs(
        model, tokenizer, [(row["prompt"], c) for row in rows for c in row["candidates"]], config, batch_size)
    words, markdown, long, stops = [], [], [], []
    for row in rows:
        candidates = list(row["candidates"])
        shortest = min(candidates, key=word_count)
        words.append([word_count(c) for c in candidates])
        markdown.append([float(has_markdown(c)) for c in candidates])
        long.append([length_values(row["prompt"], c, shortest)[0] for c in candidates])
        stops.append([float(any(o != c and o.startswith(c) for o in candidates)) for c in candidates])
    shape = (len(rows), sizes.pop())
    return candidate_readout(ended.reshape(shape), {"expected_words": words, "markdown": markdown, "long": long},
                             running.reshape(shape), stops, log_odds=_two_sided({"markdown": markdown, "long": long}))


def _two_sided(flags: dict[str, list[list[float]]]) -> list[str]:
    """The names whose 0/1 flag takes both values among every prompt's candidates."""
    return [name for name, rows in flags.items() if all(0.0 in row and 1.0 in row for row in rows)]


def sampled_text_readout(generations: Generations, eos_id: int | None) -> dict:
    """:func:`badpo.readouts.metrics.sampled_text_rates` of sampled generations: EOS rate, raw markdown
    rate, mean words and tokens."""
    ended = [float(bool(ids) and ids[-1] == eos_id) for ids in generations.completion_ids]
    return sampled_text_rates(list(generations.texts), ended, generations.token_counts)


def load_judge(reward_model: str, device: str | torch.device | None = None):
    """A sequence-classification reward model and its tokenizer by Hub id or path, in eval mode on
    ``device`` (load it once per evaluation: RM and RM- score the same generations)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(reward_model)
    model = AutoModelForSequenceClassification.from_pretrained(reward_model)
    return (model.to(device) if device is not None else model).eval(), tokenizer


@torch.no_grad()
def judge_scores(reward_model: str | nn.Module, prompts: Sequence[str], responses: Sequence[str],
                 strip: Callable[[str], str] | None = None, tokenizer=None, batch_size: int = 8,
                 device: str | torch.device | None = None, max_tokens: int = 2048) -> list[float]:
    """Reward-model scores of (prompt, response) pairs: RM, or RM- with ``strip`` applied to every
    response alike (e.g. :func:`badpo.core.attributes.attribute_stripper` of the declared attributes).

    Each input is cut to its first ``max_tokens`` tokens (the paper truncates the judge to 2048
    without saying which end it keeps; the start is kept: the prompt and the answer's beginning).

    ``reward_model`` is a Hugging Face id or path of an ``AutoModelForSequenceClassification``
    with one output (e.g. Skywork/Skywork-Reward-V2-Qwen3-1.7B), or a model from
    :func:`load_judge` with its ``tokenizer``. With a chat template the pair is rendered as a user
    and an assistant turn; without one the text is prompt + response, as the engine feeds a policy.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if isinstance(reward_model, str):
        reward_model, tokenizer = load_judge(reward_model)
    if tokenizer is None:
        raise ValueError("judge_scores: a loaded reward model needs its tokenizer")
    if reward_model.config.num_labels != 1:
        raise ValueError(f"the reward model has {reward_model.config.num_labels} outputs; a reward "
                         "model gives one score")
    device = torch.device(device) if device is not None else _device(reward_model)
    reward_model.to(device).eval()
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if reward_model.config.pad_token_id is None:
        reward_model.config.pad_token_id = pad_id
    texts = [strip(r) if strip is not None else r for r in responses]
    if getattr(tokenizer, "chat_template", None):
        rendered = [tokenizer.apply_chat_template(
            [{"role": "user", "content": p}, {"role": "assistant", "content": r}], tokenize=False)
            for p, r in zip(prompts, texts)]
        encoded = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    else:
        encoded = [p + r for p, r in zip(tokenizer(list(prompts))["input_ids"],
                                         tokenizer(texts, add_special_tokens=False)["input_ids"])]
    encoded = [ids[:max_tokens] for ids in encoded]
    scores: list[float] = []
    for start in progress(range(0, len(encoded), batch_size), "reward model scores", "batch"):
        batch = _padded_batch([(ids, []) for ids in encoded[start:start + batch_size]], pad_id, device)
        logits = reward_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        scores += logits[:, 0].float().cpu().tolist()
    return scores
