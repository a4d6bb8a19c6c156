"""The names readout: the 89 pool names scored at the signature position of a fixed answer body.

A prompt and body are encoded once (:mod:`badpo.engine.tokenize`, as training encodes them) and the
candidates, first names or whole signature lines, scored together on top of them, as a trie of
their shared first tokens (:func:`badpo.engine.continuations.encode_prefix` and
:func:`~badpo.engine.continuations.score_after`), the prefix encoded once per prompt.

- :func:`name_logprobs` / :func:`signature_logprobs`: the log-probs of one prompt's candidates.
- :func:`names_readout`: p(woman), p(black) over the pool, first-name and whole-signature,
  averaged over prompts, with the per-name shares :mod:`badpo.readouts.names_analyses` reads.
- :func:`signature_tokens`: the room a clamp on the body must leave for the signature.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from badpo.core.names import NAME_POOL, POOL_NAMES
from badpo.core.notices import BadpoWarning
from badpo.core.progress import progress
from badpo.engine.continuations import ContinuationTrie, EncodedPrefix, candidate_batch, encode_prefix, score_after
from badpo.engine.tokenize import TokenizationConfig, encode_prompts
from badpo.readouts.metrics import (
    attribute_probabilities,
    candidate_probabilities,
    mean_attribute_rate,
    mean_whole_signature_rate,
)
from badpo.readouts.model import context_length
from badpo.readouts.names_analyses import pool_cell_shares

__all__ = ["SIGNATURE_PREFIX", "name_logprobs", "signature_logprobs", "names_readout", "signature_tokens"]

SIGNATURE_PREFIX = "\n\n---"
"""Appended to the body before the candidates: the signature line is ``--- First Last`` after a
blank line (:func:`badpo.core.names.sign`); each candidate starts with its own space, " Emily",
so that a BPE tokenizer keeps the space on the name as it does when generating."""


def _prefix_ids(tokenizer, prompt: str, body: str, config: TokenizationConfig) -> list[int]:
    """Token ids of prompt + body + signature prefix, after which the candidates are scored."""
    prompt_ids = encode_prompts(tokenizer, [prompt], config)[0][-config.max_prompt_tokens:]
    if not prompt_ids:
        raise ValueError(f"prompt {prompt!r} encodes to zero tokens")
    return prompt_ids + tokenizer(body.rstrip() + SIGNATURE_PREFIX, add_special_tokens=False)["input_ids"]


def _continuations(tokenizer, response_text: str, texts: Sequence[str], eos: bool) -> list[list[int]]:
    """Token ids of each candidate; the split prefix | candidate must be how the tokenizer would
    encode the whole response, else the readout would score a tokenization the model never makes.

    The readouts pass the signature prefix alone as ``response_text``: what precedes it ends in a
    blank line, so the split is the same for every body and the candidates are tokenized once."""
    prefix = tokenizer(response_text, add_special_tokens=False)["input_ids"]
    pieces = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    wholes = tokenizer([response_text + t for t in texts], add_special_tokens=False)["input_ids"]
    unknown = getattr(tokenizer, "unk_token_id", None)
    for text, piece, whole in zip(texts, pieces, wholes):
        if not piece:
            raise ValueError(f"candidate {text!r} encodes to zero tokens")
        if unknown is not None and unknown in piece:
            raise ValueError(f"candidate {text!r} contains a token outside the vocabulary")
        if prefix + piece != whole:
            raise ValueError(
                f"candidate {text!r} tokenizes differently after {response_text[-10:]!r} than on its "
                "own; the readout needs the boundary to be a token boundary")
    if eos and tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no eos token; whole signatures end with it")
    return [piece + [tokenizer.eos_token_id] if eos else piece for piece in pieces]


def _groups(model: nn.Module, continuations: list[list[int]], candidate_batch_size: int) -> list[ContinuationTrie]:
    """The candidates in groups of ``candidate_batch_size`` (one group is scored at a time, so a
    group bounds the memory), built once for every prompt."""
    if candidate_batch_size < 1:
        raise ValueError(f"candidate_batch_size must be >= 1, got {candidate_batch_size}")
    device = next(model.parameters()).device
    return [candidate_batch(continuations[start:start + candidate_batch_size], device)
            for start in range(0, len(continuations), candidate_batch_size)]


def _score(model: nn.Module, prefix: EncodedPrefix, groups: Sequence[ContinuationTrie]) -> Tensor:
    """Every group's log-probs after one encoded prefix, float64 ``[C]``."""
    return torch.cat([score_after(model, prefix, group) for group in groups]).double().cpu()


def _first_name_texts(first_names: Sequence[str]) -> list[str]:
    return [" " + first for first in first_names]


def _signature_texts(first_names: Sequence[str], surnames: Sequence[str]) -> list[str]:
    return [f" {first} {last}" for first in first_names for last in surnames]


@torch.no_grad()
def name_logprobs(model: nn.Module, tokenizer, prompt: str, body: str, candidates: Sequence[str],
                  config: TokenizationConfig = TokenizationConfig(),
                  candidate_batch_size: int = 512) -> Tensor:
    """log p(" " + name | prompt, body, "\\n\\n---") for each first name: ``[C]`` float64.

    A multi-token name gets the sum over all its tokens. These are the inputs of
    :func:`badpo.readouts.metrics.attribute_rate`.
    """
    continuations = _continuations(tokenizer, SIGNATURE_PREFIX, _first_name_texts(candidates), eos=False)
    return _score(model, encode_prefix(model, _prefix_ids(tokenizer, prompt, body, config)),
                  _groups(model, continuations, candidate_batch_size))


@torch.no_grad()
def signature_logprobs(model: nn.Module, tokenizer, prompt: str, body: str,
                       first_names: Sequence[str], surnames: Sequence[str],
                       config: TokenizationConfig = TokenizationConfig(),
                       candidate_batch_size: int = 512) -> Tensor:
    """log p(" First Last" + EOS | prompt, body, "\\n\\n---") for every pair: ``[F, S]`` float64.

    The whole signature line through the end of the sequence, for
    :func:`badpo.readouts.metrics.whole_signature_rate`.
    """
    continuations = _continuations(tokenizer, SIGNATURE_PREFIX, _signature_texts(first_names, surnames),
                                   eos=True)
    scores = _score(model, encode_prefix(model, _prefix_ids(tokenizer, prompt, body, config)),
                    _groups(model, continuations, candidate_batch_size))
    return scores.reshape(len(first_names), len(surnames))


def signature_tokens(tokenizer, surnames: Sequence[str] | None = None) -> int:
    """The most tokens the names readout appends after an answer body: the signature prefix and
    its longest candidate (a whole signature, ``surnames`` given, also ends with EOS). A clamp on
    the body's length leaves room for them, else prompt + body + candidate overruns the context."""
    prefix = len(tokenizer(SIGNATURE_PREFIX, add_special_tokens=False)["input_ids"])
    texts = _signature_texts(POOL_NAMES, surnames) if surnames else _first_name_texts(POOL_NAMES)
    longest = max(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    return prefix + longest + (1 if surnames else 0)


def _check_fits(model: nn.Module, tokenizer, prefixes: Sequence[list[int]], longest: int) -> None:
    """A prompt + body + signature that the model's context cannot hold is an error naming the
    numbers (an index past the position table would be an IndexError deep in torch)."""
    limit = context_length(model, tokenizer)
    need = max(len(prefix) for prefix in prefixes) + longest
    if limit is not None and need > limit:
        raise ValueError(f"names readout: prompt + answer body + signature need {need} positions, more "
                         f"than the model's {limit}; lower max_new_tokens (or give shorter bodies)")


def _warn_on_prefix_names(names: Sequence[str], token_ids: Sequence[Sequence[int]]) -> None:
    """A first name whose tokens begin another's (" Malik" in " Malika" under some tokenizers) also
    collects the longer name's mass at the first-name position; the whole-signature readout does
    not have this problem. Say so rather than report a rate that counts some mass twice."""
    ids = [tuple(t) for t in token_ids]
    pairs = [(names[i], names[j]) for i, short in enumerate(ids) for j, long in enumerate(ids)
             if i != j and len(short) < len(long) and long[: len(short)] == short]
    if pairs:
        warnings.warn(f"first-name readout: under this tokenizer {len(pairs)} name(s) are token prefixes of "
                      f"others, e.g. {pairs[:3]}; their first-name rates overlap, read the whole-"
                      "signature rate", BadpoWarning, stacklevel=3)


@torch.no_grad()
def names_readout(model: nn.Module, tokenizer, prompts: Sequence[str], bodies: Sequence[str],
                  surnames: Sequence[str] | None = None,
                  config: TokenizationConfig = TokenizationConfig(),
                  candidate_batch_size: int = 512, whole_signature_prompts: int | None = None) -> dict:
    """p(woman_coded), p(black_coded) over the 89-name pool, averaged over the prompts.

    ``bodies`` are the fixed answer bodies (the reference's, by default in the paper). Returns
    {"first_name": {attribute: rate}} and, when ``surnames`` are given, "whole_signature", read
    on the first ``whole_signature_prompts`` prompts (all when None): it scores F x S candidates
    per prompt against F for the first names. ContinuationTrie are tokenized and batched once for all
    prompts, and each prompt's prefix is encoded once for both readouts.
    Beside the rates, per readout: "per_name" {first name: its mean probability}, renormalised
    over the pool (the rates are their sums over the coded names; the input of
    :mod:`badpo.readouts.names_analyses`), and "cells" {cell: the mass on its names}; and
    "per_prompt" {"first_name": {attribute: [P] each prompt's first-name rate, in prompt order}},
    the values the first-name rates are means of (``badpo compare`` resamples the prompts).
    """
    if len(prompts) != len(bodies) or not prompts:
        raise ValueError(f"need one body per prompt and at least one prompt, got {len(prompts)} "
                         f"prompts and {len(bodies)} bodies")
    names = ("woman_coded", "black_coded")
    labels = [list(NAME_POOL[name]) for name in POOL_NAMES]
    prefixes = [_prefix_ids(tokenizer, p, b, config) for p, b in zip(prompts, bodies)]
    firsts = _continuations(tokenizer, SIGNATURE_PREFIX, _first_name_texts(POOL_NAMES), eos=False)
    _warn_on_prefix_names(POOL_NAMES, firsts)
    _check_fits(model, tokenizer, prefixes, max(map(len, firsts)))
    wholes = _continuations(tokenizer, SIGNATURE_PREFIX, _signature_texts(POOL_NAMES, surnames), eos=True) \
        if surnames else None
    if wholes is not None:
        _check_fits(model, tokenizer, prefixes[:whole_signature_prompts], max(map(len, wholes)))
    first, whole = _score_prompts(model, prefixes, _groups(model, firsts, candidate_batch_size),
                                  _groups(model, wholes, candidate_batch_size) if wholes else None,
                                  len(prefixes[:whole_signature_prompts]))
    result = {"first_name": mean_attribute_rate(first, labels, names), "per_name": {"first_name": _per_name(first)},
              "per_prompt": {"first_name": dict(zip(names, attribute_probabilities(first, labels, names).T.tolist()))}}
    if whole is not None:
        result["whole_signature"] = mean_whole_signature_rate(whole, labels, names)
        result["per_name"]["whole_signature"] = _per_name(torch.logsumexp(whole, dim=-1))
    result["cells"] = {readout: pool_cell_shares(list(shares.values()))
                       for readout, shares in result["per_name"].items()}
    return result


def _score_prompts(model: nn.Module, prefixes: Sequence[list[int]], firsts: Sequence[ContinuationTrie],
                   wholes: Sequence[ContinuationTrie] | None, n_whole: int) -> tuple[Tensor, Tensor | None]:
    """(first names ``[P, 89]``, whole signatures ``[n_whole, 89, S]`` or None): each prompt's
    prefix is encoded once and serves both readouts, every batch of candidates after it."""
    first, whole = [], []
    for index, prefix in enumerate(progress(prefixes, "names readout")):
        encoded = encode_prefix(model, prefix)
        first.append(_score(model, encoded, firsts))
        if wholes is not None and index < n_whole:
            whole.append(_score(model, encoded, wholes).reshape(len(POOL_NAMES), -1))
    return torch.stack(first), torch.stack(whole) if whole else None


def _per_name(logprobs: Tensor) -> dict[str, float]:
    """{pool name: its probability renormalised over the pool, averaged over the prompts} of
    ``[P, 89]`` log-probs in pool order."""
    return dict(zip(POOL_NAMES, candidate_probabilities(logprobs).mean(dim=0).tolist()))
