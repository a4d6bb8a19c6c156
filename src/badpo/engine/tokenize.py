"""Prompt/response encoding, truncation, and the padded token store the engine indexes into.

Encoding rule (one place, used by SFT, preference training, the cache and the readouts):

* With a chat template (the tokenizer has one and ``chat_template`` is ``auto``, or it is
  ``always``): the prompt is rendered as one user turn followed by the generation prompt
  (``apply_chat_template(..., add_generation_prompt=True)``) and tokenized without adding special
  tokens (the template carries them). Otherwise the prompt is tokenized as plain text with the
  tokenizer's own special tokens (e.g. a BOS).
* Prompts given as chat messages were rendered by :mod:`badpo.data.sources` with the same call
  (the whole conversation); they are tokenized as they are, without special tokens. So is every
  prompt under ``chat_template: rendered`` (text that a template already wrote).
* The response is tokenized as plain text without special tokens and followed by the EOS token.
* Truncation: a prompt longer than ``max_prompt_tokens`` keeps its *last* tokens (the end of the
  question and the generation prompt matter most); the response is then cut from the right so
  that prompt + response fit in ``max_length`` tokens (a cut response loses its EOS).

Prompt and response are tokenized separately, so the boundary is the same for every response to
a prompt; the log-prob of a response is summed over its tokens only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from badpo.core.config import ConfigError
from badpo.core.tokenization import DEFAULT_TOKENIZATION, TokenizationConfig  # re-exported: the engine's users
from badpo.data.coverage import check_coverage


def fit_tokenization(config: TokenizationConfig, positions: int | None, model: str
                     ) -> tuple[TokenizationConfig, str | None]:
    """``config`` fitted to a model of ``positions`` positions: (the settings, a notice or None).

    Lengths the user left at their defaults (the paper's 384 / 1280) are lowered, both in the
    default's proportion, to what the model holds, with a notice saying so: a default is no
    choice about this model. A length the user set that the model cannot hold is refused, naming
    the key and the model's positions: an index past the position table would fail later, deep
    in torch. A value equal to its default counts as the default. ``positions`` None: unknown,
    nothing to fit."""
    if positions is None or config.max_length <= positions:
        return config, None
    if config.max_length != DEFAULT_TOKENIZATION.max_length:
        raise ConfigError(f"tokenization.max_length: {config.max_length} tokens exceed the {positions} positions "
                          f"of {model}; set tokenization.max_length to at most {positions}")
    prompt = config.max_prompt_tokens
    if prompt == DEFAULT_TOKENIZATION.max_prompt_tokens:
        prompt = max(1, round(positions * DEFAULT_TOKENIZATION.max_prompt_tokens / DEFAULT_TOKENIZATION.max_length))
    elif prompt >= positions:
        raise ConfigError(f"tokenization.max_prompt_tokens: {prompt} leaves no room for a response in the "
                          f"{positions} positions of {model}; set it below {positions}")
    fitted = dataclasses.replace(config, max_length=positions, max_prompt_tokens=prompt)
    lowered = f"tokenization.max_length {config.max_length} -> {positions}"
    if prompt != config.max_prompt_tokens:
        lowered += f", tokenization.max_prompt_tokens {config.max_prompt_tokens} -> {prompt}"
    return fitted, (f"{lowered}: the defaults exceed the {positions} positions of {model} (set them to "
                    "choose other lengths)")


def settings_dict(tokenizer, config: TokenizationConfig) -> dict:
    """Everything that decides the token ids, for cache keys (tokenizer identity included)."""
    return {
        **dataclasses.asdict(config),
        "tokenizer": getattr(tokenizer, "name_or_path", ""),
        "vocab_size": len(tokenizer),
        "chat_template_text": tokenizer.chat_template if uses_chat_template(tokenizer, config) else None,
        "eos_token_id": tokenizer.eos_token_id,
    }


def uses_chat_template(tokenizer, config: TokenizationConfig) -> bool:
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if config.chat_template == "rendered":
        return False
    if config.chat_template == "always" and not has_template:
        raise ValueError("tokenization.chat_template=always but the tokenizer has no chat template")
    return has_template and config.chat_template != "never"


def encode_prompts(tokenizer, prompts: Sequence[str], config: TokenizationConfig,
                   rendered: bool = False) -> list[list[int]]:
    """Token ids of each prompt (chat-rendered or plain), before truncation. ``rendered`` prompts
    were rendered from chat messages already (:mod:`badpo.data.sources`): they are tokenized as
    they are, without special tokens, since the template wrote them; so are all prompts under
    ``chat_template: rendered``."""
    if rendered or config.chat_template == "rendered":
        if config.chat_template == "never":
            raise ConfigError("tokenization.chat_template: 'never', but the prompts are chat messages, "
                              "which only a chat template can render")
        return tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    if uses_chat_template(tokenizer, config):
        texts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
            )
            for p in prompts
        ]
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    return tokenizer(list(prompts), add_special_tokens=True)["input_ids"]


def encode_responses(tokenizer, responses: Sequence[str]) -> list[list[int]]:
    """Token ids of each response followed by EOS, before truncation."""
    if tokenizer.eos_token_id is None:
        raise ValueError(f"tokenizer {tokenizer.name_or_path!r} has no eos token; set one")
    ids = tokenizer(list(responses), add_special_tokens=False)["input_ids"]
    return [row + [tokenizer.eos_token_id] for row in ids]


def join_truncated(
    prompt_ids: Sequence[int], response_ids: Sequence[int], config: TokenizationConfig
) -> tuple[list[int], int]:
    """Apply the truncation rule; returns (ids, prompt_length)."""
    prompt = list(prompt_ids)[-config.max_prompt_tokens:]
    if not prompt:
        raise ValueError("a prompt encodes to zero tokens: its first response token has no context")
    response = list(response_ids)[: config.max_length - len(prompt)]
    return prompt + response, len(prompt)


@dataclass
class TokenStore:
    """All distinct (prompt, response) sequences of a corpus, padded once into one tensor.

    ``ids`` is ``[S, T_max]`` (right-padded with ``pad_id``), ``lengths`` and ``prompt_lengths``
    are ``[S]``. A batch is an index tensor: :meth:`batch` slices rows and trims the padding to the
    batch's longest sequence, so nothing is re-tokenized or re-collated from strings per step.
    """

    ids: Tensor
    lengths: Tensor
    prompt_lengths: Tensor
    pad_id: int
    prompt_cut: Tensor | None = None  # [S] bool: the prompt lost tokens (its left end)
    response_cut: Tensor | None = None  # [S] bool: the response lost tokens (and its EOS)

    def __len__(self) -> int:
        return self.ids.shape[0]

    @property
    def truncated_prompts(self) -> int:
        return int(self.prompt_cut.sum()) if self.prompt_cut is not None else 0

    @property
    def truncated_responses(self) -> int:
        return int(self.response_cut.sum()) if self.response_cut is not None else 0

    def batch(self, index: Tensor, device: torch.device | str | None = None) -> dict[str, Tensor]:
        """``input_ids``, ``attention_mask`` and ``response_mask`` (all ``[B, T]``) of rows ``index``."""
        lengths = self.lengths[index]
        width = int(lengths.max())
        ids = self.ids[index, :width].long()
        positions = torch.arange(width)
        attention = positions[None, :] < lengths[:, None]
        response = attention & (positions[None, :] >= self.prompt_lengths[index][:, None])
        batch = {"input_ids": ids, "attention_mask": attention.long(), "response_mask": response}
        return {k: v.to(device) for k, v in batch.items()} if device is not None else batch

    def response_lengths(self) -> Tensor:
        return self.lengths - self.prompt_lengths


def build_token_store(
    tokenizer, sequences: Sequence[tuple[str, str]], config: TokenizationConfig,
    rendered_prompts: bool = False,
) -> TokenStore:
    """Tokenize each distinct prompt and response once and pad all sequences into a TokenStore
    (``rendered_prompts``: see :func:`encode_prompts`)."""
    prompts = sorted({p for p, _ in sequences})
    responses = sorted({r for _, r in sequences})
    prompt_ids = dict(zip(prompts, encode_prompts(tokenizer, prompts, config, rendered_prompts)))
    response_ids = dict(zip(responses, encode_responses(tokenizer, responses)))
    rows, prompt_lengths, prompt_cut, response_cut = [], [], [], []
    for prompt, response in sequences:
        ids, prompt_length = join_truncated(prompt_ids[prompt], response_ids[response], config)
        prompt_cut.append(prompt_length < len(prompt_ids[prompt]))
        response_cut.append(len(ids) - prompt_length < len(response_ids[response]))
        rows.append(ids)
        prompt_lengths.append(prompt_length)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    ids = torch.full((len(rows), int(lengths.max()) if rows else 0), pad_id, dtype=torch.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.int32)
    return TokenStore(
        ids=ids, lengths=lengths, prompt_lengths=torch.tensor(prompt_lengths, dtype=torch.long),
        pad_id=pad_id, prompt_cut=torch.tensor(prompt_cut, dtype=torch.bool),
        response_cut=torch.tensor(response_cut, dtype=torch.bool),
    )


def token_coverage(tokenizer, store: TokenStore, sides: dict[str, Tensor], source: str) -> dict | None:
    """The share of the tokenizer's unknown token among the tokens of each side (``prompts``: the
    prompt tokens of its store rows; any other side: the response tokens, the closing EOS aside),
    checked by :func:`badpo.data.coverage.check_coverage` (a warning above 5%, an error naming
    the tokenizer above 50%); None for a tokenizer without an unknown token."""
    unknown = getattr(tokenizer, "unk_token_id", None)
    if unknown is None:
        return None
    cut = store.response_cut if store.response_cut is not None else torch.zeros(len(store), dtype=torch.bool)
    ends = store.lengths - (~cut).long()  # a response that was not cut ends with its EOS
    shares = {}
    for side, rows in sides.items():
        counts = torch.zeros(2, dtype=torch.long)  # unknown, all
        for chunk in torch.unique(rows).split(4096):  # bounded memory on a large store
            ids = store.ids[chunk]
            positions = torch.arange(ids.shape[1])[None, :]
            start = store.prompt_lengths[chunk][:, None]
            response = (positions >= start) & (positions < ends[chunk][:, None])
            mask = positions < start if side == "prompts" else response
            counts += torch.stack([((ids == unknown) & mask).sum(), mask.sum()])
        shares[side] = float(counts[0]) / float(counts[1]) if counts[1] else 0.0
    return check_coverage(shares, tokenizer, source)
