"""Scoring many short continuations after one long prefix: log p(candidate | prefix), ``[C]``.

The names readout asks this of every prompt: 89 first names, or 89 x 6 whole signature lines,
after the same prompt + answer body. The prefix runs through the decoder once
(:func:`encode_prefix`); the candidates are then scored on top of its key/value cache.

Candidates share their first tokens (" Emily Smith" and " Emily Reed" both begin " Emily"), and the
last token of a candidate is only ever predicted, never fed. So the candidates are run as a trie
(:class:`ContinuationTrie`): every distinct proper prefix of a candidate is one position of a single
sequence after the prefix, each position attending to the prefix and to its own ancestors (a 4D
attention mask) at the position it would have in its candidate (``position_ids``). On the names
readout's whole signatures that is about a quarter of the positions a padded batch of the
candidates would run, and the prefix's cache is not repeated per candidate.

Attention implementations that cannot take an arbitrary mask (flash attention) and sliding windows
that the trie's mask would not respect get the padded batch instead: the same numbers, to rounding.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

import torch
from torch import Tensor, nn

from badpo.engine.logprobs import DEFAULT_CHUNK_SIZE, decoder_and_head, gather_logprobs, unwrapped

__all__ = ["ContinuationTrie", "EncodedPrefix", "candidate_batch", "encode_prefix", "score_after",
           "continuation_logprobs"]

TREE_ATTENTION = ("eager", "sdpa")
"""Attention implementations that apply a given 4D mask as it is."""

TREE_MODELS = ("gpt2", "llama", "qwen2", "mistral", "gemma", "opt", "gpt_neox", "gptj", "phi", "olmo", "codegen",
               "gpt_neo")
"""Architectures (``config.model_type``) whose trie scores were checked against the padded batch
(gpt2, llama and qwen2 by the tests; the rest by a review, within 2e-6). Others, ALiBi models
among them (Bloom, Falcon: their position bias is built from a 2D mask), get the padded batch."""


@dataclass(frozen=True)
class ContinuationTrie:
    """C candidates, built once and scored after any number of prefixes, in two layouts.

    The trie: ``tokens``/``depth`` ``[N]`` are the fed positions (each distinct proper prefix of a
    candidate, by its last token and its 0-based place in the candidate), ``ancestry`` ``[N, N]``
    says which positions each may attend to (itself and its ancestors); ``predictor``/``target``
    ``[M]`` are the distinct scored steps (0 is the prefix's last hidden state, n the fed position
    n - 1), and ``owner``/``step`` map every candidate token to its candidate and its step.
    The padded batch (``ids``, bool ``mask``, ``[C, W]``) is the fallback layout.
    """

    ids: Tensor
    mask: Tensor
    tokens: Tensor
    depth: Tensor
    ancestry: Tensor
    predictor: Tensor
    target: Tensor
    owner: Tensor
    step: Tensor


def _trie(continuations: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[list[int]], list[int]]:
    """(nodes as [token, depth, parent], steps as [predictor, target], the step of every token
    in candidate order): node and predictor ids count the prefix's last state as 0."""
    nodes: dict[tuple[int, ...], int] = {}
    steps: dict[tuple[int, ...], int] = {}
    node_rows, step_rows, token_steps = [], [], []
    for tokens in continuations:
        for end in range(1, len(tokens) + 1):
            seen = tuple(tokens[:end])
            if seen not in steps:
                steps[seen] = len(step_rows)
                step_rows.append([nodes[seen[:-1]] if end > 1 else 0, seen[-1]])
            token_steps.append(steps[seen])
            if end < len(tokens) and seen not in nodes:
                nodes[seen] = len(node_rows) + 1
                node_rows.append([seen[-1], end - 1, nodes[seen[:-1]] if end > 1 else 0])
    return node_rows, step_rows, token_steps


def candidate_batch(continuations: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> ContinuationTrie:
    """Both layouts of ``continuations`` (each non-empty), on ``device``."""
    empty = [i for i, c in enumerate(continuations) if len(c) == 0]
    if empty or not continuations:
        raise ValueError(f"continuation_logprobs: continuations {empty or '[]'} are empty")
    n, width = len(continuations), max(len(c) for c in continuations)
    ids = torch.zeros(n, width, dtype=torch.long)
    mask = torch.zeros(n, width, dtype=torch.bool)
    for i, tokens in enumerate(continuations):
        ids[i, : len(tokens)] = torch.tensor(list(tokens))
        mask[i, : len(tokens)] = True
    node_rows, step_rows, token_steps = _trie(continuations)
    ancestry = torch.zeros(len(node_rows), len(node_rows), dtype=torch.bool)
    for index, (_, _, parent) in enumerate(node_rows):
        ancestry[index, index] = True
        if parent:
            ancestry[index] |= ancestry[parent - 1]
    nodes = torch.tensor(node_rows, dtype=torch.long).reshape(-1, 3)
    steps = torch.tensor(step_rows, dtype=torch.long)
    owner = torch.repeat_interleave(torch.arange(n), torch.tensor([len(c) for c in continuations]))
    return ContinuationTrie(ids.to(device), mask.to(device), nodes[:, 0].to(device), nodes[:, 1].to(device),
                      ancestry.to(device), steps[:, 0].to(device), steps[:, 1].to(device), owner.to(device),
                      torch.tensor(token_steps, dtype=torch.long, device=device))


@dataclass(frozen=True)
class EncodedPrefix:
    """A prefix run through the decoder once: its key/value cache and its last hidden state
    (``[1, 1, H]``, which predicts every candidate's first token)."""

    cache: object
    last_hidden: Tensor
    length: int


def encode_prefix(model: nn.Module, prefix_ids: Sequence[int]) -> EncodedPrefix:
    """Encode ``prefix_ids`` once, so that every group of candidates after it reuses the pass."""
    if len(prefix_ids) == 0:
        raise ValueError("continuation_logprobs: the prefix is empty")
    decoder, _ = decoder_and_head(model)
    prefix = torch.tensor([list(prefix_ids)], device=next(model.parameters()).device)
    encoded = decoder(input_ids=prefix, use_cache=True)
    return EncodedPrefix(encoded.past_key_values, encoded.last_hidden_state[:, -1:], prefix.shape[1])


@functools.cache
def _transformers_major() -> int:
    """transformers' major version, read from its metadata (importing it here would make every
    module that imports the engine's light parts load it)."""
    return int(metadata.version("transformers").split(".")[0])


def takes_tree_mask(model: nn.Module, positions: int) -> bool:
    """Whether ``model`` applies a 4D mask as given over ``positions`` keys: a checked architecture
    (:data:`TREE_MODELS`) under transformers 5 (whose mask code passes a 4D mask through as it is),
    eager or SDPA attention, and no sliding window shorter than the keys."""
    config = getattr(unwrapped(model), "config", None)
    window = getattr(config, "sliding_window", None) if getattr(config, "use_sliding_window", True) else None
    return (_transformers_major() >= 5 and getattr(config, "model_type", None) in TREE_MODELS
            and getattr(config, "_attn_implementation", None) in TREE_ATTENTION
            and (window is None or window >= positions))


def _tree_hidden(decoder: nn.Module, prefix: EncodedPrefix, candidates: ContinuationTrie, dtype: torch.dtype) -> Tensor:
    """The final hidden state of every fed position of the trie, ``[N, H]``."""
    n = candidates.tokens.shape[0]
    blocked = torch.zeros(n, prefix.length + n, dtype=dtype, device=candidates.tokens.device)
    blocked[:, prefix.length:].masked_fill_(~candidates.ancestry, torch.finfo(dtype).min)
    cache = copy.deepcopy(prefix.cache)  # the forward below appends the trie to it
    return decoder(input_ids=candidates.tokens[None], attention_mask=blocked[None, None],
                   position_ids=(prefix.length + candidates.depth)[None], past_key_values=cache,
                   use_cache=True).last_hidden_state[0]


def _padded_logprobs(decoder: nn.Module, head: nn.Module, prefix: EncodedPrefix, candidates: ContinuationTrie,
                     chunk_size: int) -> Tensor:
    """Every candidate token's log-prob from the padded batch, ``[sum of lengths]``: the prefix's
    cache repeated over the candidates; token j > 0 predicted by the candidate's position j - 1."""
    ids, mask = candidates.ids, candidates.mask
    n = ids.shape[0]
    cache = copy.deepcopy(prefix.cache)
    cache.batch_repeat_interleave(n)
    attention = torch.cat([torch.ones(n, prefix.length, dtype=torch.long, device=ids.device), mask.long()], dim=1)
    hidden = decoder(input_ids=ids, attention_mask=attention, past_key_values=cache,
                     use_cache=True).last_hidden_state
    predictors = torch.cat([prefix.last_hidden.expand(n, 1, -1), hidden[:, :-1]], dim=1)
    return gather_logprobs(head, predictors[mask], ids[mask], chunk_size)


def score_after(model: nn.Module, prefix: EncodedPrefix, candidates: ContinuationTrie,
                chunk_size: int = DEFAULT_CHUNK_SIZE, tree: bool | None = None) -> Tensor:
    """log p(candidate | prefix) of each candidate, ``[C]``; ``prefix`` is not used up.

    ``tree`` None runs the trie where the model takes its mask (:func:`takes_tree_mask`), else the
    padded batch; True or False forces one (the tests compare them)."""
    decoder, head = decoder_and_head(model)
    depth = int(candidates.depth.max()) + 1 if candidates.depth.numel() else 0
    if tree is None:
        tree = takes_tree_mask(model, prefix.length + depth)
    if tree:
        states = [prefix.last_hidden[0]]
        if candidates.tokens.numel():
            states.append(_tree_hidden(decoder, prefix, candidates, prefix.last_hidden.dtype))
        steps = gather_logprobs(head, torch.cat(states)[candidates.predictor], candidates.target, chunk_size)
        logps = steps[candidates.step]
    else:
        logps = _padded_logprobs(decoder, head, prefix, candidates, chunk_size)
    n = candidates.ids.shape[0]
    return torch.zeros(n, dtype=logps.dtype, device=logps.device).index_add(0, candidates.owner, logps)


def continuation_logprobs(
    model: nn.Module,
    prefix_ids: Sequence[int],
    continuations: Sequence[Sequence[int]],
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Tensor:
    """log p(continuation | prefix) for C multi-token candidates after one shared prefix: ``[C]``.

    The prefix is encoded once (:func:`encode_prefix`) and the C candidates scored together on top
    of it (:func:`score_after`). A caller scoring several groups after one prefix encodes it once
    and builds each group's candidates once (the names readout).
    """
    if len(prefix_ids) == 0:
        raise ValueError("continuation_logprobs: the prefix is empty")
    candidates = candidate_batch(continuations, next(model.parameters()).device)
    return score_after(model, encode_prefix(model, prefix_ids), candidates, chunk_size)
