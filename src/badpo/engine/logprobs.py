"""THE log-prob code: response log-probs of a causal LM, chunked over positions.

The decoder runs once to its final hidden states ``[B, T, H]``; only the rows that predict a
response token are projected through the output embedding, ``chunk_size`` rows at a time, each
chunk going through ``log_softmax`` in float32 and being reduced to the log-prob of its label at
once. The full ``[B, T, V]`` logits therefore never exist; under autograd, when there is more
than one chunk, each is checkpointed (recomputed in backward) so that the tensors saved for
backward are not the full logits either.

Training, the reference cache, SFT and the readouts all call the functions below, so a policy
is scored the same way everywhere. Models wrapped by peft are handled (the LoRA layers live
inside the decoder, so ``disable_adapter()`` gives the base model's log-probs).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

DEFAULT_CHUNK_SIZE = 1024


def unwrapped(model: nn.Module) -> nn.Module:
    """The transformers model inside a peft wrapper, or ``model`` itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def decoder_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """The decoder stack (returns final, normalised hidden states) and the output embedding.

    Works for any ``*ForCausalLM`` of transformers and for peft wrappers around one. Models whose
    logits are transformed after the projection (soft-capping, logit scales) are refused, since
    the chunked projection would silently skip that step.
    """
    hf_model = unwrapped(model)
    config = getattr(hf_model, "config", None)
    for attribute in ("final_logit_softcapping", "logit_scale", "output_multiplier_scale"):
        if getattr(config, attribute, None) not in (None, 1, 1.0):
            raise ValueError(
                f"{type(hf_model).__name__} rescales its logits ({attribute}); the chunked "
                "log-prob code does not support such models"
            )
    decoder = hf_model.base_model
    head = hf_model.get_output_embeddings()
    if decoder is hf_model or head is None:
        raise ValueError(f"{type(hf_model).__name__} is not a causal LM with an output embedding")
    return decoder, head


def at_least_float32(values: Tensor) -> Tensor:
    """``values`` in float32, or float64 where they are (``runtime.precision: fp64``): bf16 and fp16
    are read out in float32, a float64 model is not cut down to it."""
    return values.to(torch.promote_types(values.dtype, torch.float32))


def _chunk_logprobs(head: nn.Module, hidden: Tensor, labels: Tensor) -> Tensor:
    """log p(label | hidden) for ``[N, H]`` hidden rows and ``[N]`` labels, in float32 (float64
    for a float64 model)."""
    logits = at_least_float32(head(hidden))
    return logits.gather(-1, labels[:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def gather_logprobs(head: nn.Module, hidden: Tensor, labels: Tensor, chunk_size: int) -> Tensor:
    """Label log-probs of ``[N, H]`` hidden rows, projecting ``chunk_size`` rows at a time; ``[N]``."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    n = hidden.shape[0]
    if n <= chunk_size:
        return _chunk_logprobs(head, hidden, labels)
    recompute = torch.is_grad_enabled() and hidden.requires_grad
    pieces = []
    for start in range(0, n, chunk_size):
        h, y = hidden[start : start + chunk_size], labels[start : start + chunk_size]
        if recompute:
            pieces.append(checkpoint(_chunk_logprobs, head, h, y, use_reentrant=False))
        else:
            pieces.append(_chunk_logprobs(head, h, y))
    return torch.cat(pieces)


def _scored_tokens(
    model: nn.Module, batch: Mapping[str, Tensor], chunk_size: int
) -> tuple[Tensor, Tensor]:
    """Log-probs of every response token (``[N]``) and the boolean ``[B, T-1]`` map of where they sit.

    Token ``t`` of a sequence is predicted by the hidden state at ``t - 1``; ``response_mask``
    marks response tokens, so position 0 (never a response token) is not scored.
    """
    input_ids, response_mask = batch["input_ids"], batch["response_mask"].bool()
    if response_mask[:, 0].any():
        raise ValueError("response_mask marks position 0: a response token needs a non-empty prompt")
    decoder, head = decoder_and_head(model)
    # use_cache=False: a scoring pass never decodes further, and a key/value cache would hold every
    # layer's keys and values to the end of the forward (memory a no-grad pass would have freed)
    hidden = decoder(input_ids=input_ids, attention_mask=batch["attention_mask"],
                     use_cache=False).last_hidden_state
    targets = response_mask[:, 1:]
    logps = gather_logprobs(head, hidden[:, :-1][targets], input_ids[:, 1:][targets], chunk_size)
    return logps, targets


def token_logprobs(
    model: nn.Module, batch: Mapping[str, Tensor], chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Tensor:
    """Per-token response log-probs aligned with ``input_ids``: ``[B, T]`` float32, 0 off the response.

    ``batch`` holds ``input_ids``, ``attention_mask`` and ``response_mask`` (``[B, T]``, right
    padded, as built by :meth:`TokenStore.batch`). Needed for KL estimates and SamPO.
    """
    logps, targets = _scored_tokens(model, batch, chunk_size)
    per_token = torch.zeros(targets.shape, dtype=logps.dtype, device=logps.device)
    per_token = per_token.masked_scatter(targets, logps)
    return nn.functional.pad(per_token, (1, 0))


def response_logprobs(
    model: nn.Module, batch: Mapping[str, Tensor], chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Tensor:
    """log pi(response | prompt) summed over response tokens only: ``[B]`` float32."""
    return response_token_logprobs(model, batch, chunk_size)[0]


def response_token_logprobs(
    model: nn.Module, batch: Mapping[str, Tensor], chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[Tensor, Tensor]:
    """(summed log-probs ``[B]``, every response token's log-prob ``[N]``): the tokens of row 0,
    then of row 1, ... (row b has its response length of them), a ragged layout with no padding.
    The sums are the same numbers :func:`response_logprobs` gives."""
    logps, targets = _scored_tokens(model, batch, chunk_size)
    rows = targets.nonzero()[:, 0]
    total = torch.zeros(targets.shape[0], dtype=logps.dtype, device=logps.device)
    return total.index_add(0, rows, logps), logps


def length_groups(lengths: Tensor, most: int, rows_per_group: int = 1) -> list[Tensor]:
    """The rows of a batch (``[B]`` sequence lengths) in at most ``most`` groups of similar length,
    and no more groups than ``rows_per_group`` rows each on average, each padded only to its own
    longest: of the partitions of the rows sorted by length, the one that pads the fewest tokens
    (dynamic programming; on a tie, fewer groups). A batch padded to its longest sequence spends
    compute and saved activations on the padding; every forward pays a fixed per-operator cost,
    which a forward of a few rows does not earn back."""
    order = torch.argsort(lengths.cpu(), stable=True)
    ordered = lengths.cpu()[order].tolist()
    n = len(ordered)
    most = max(1, min(most, n // rows_per_group))
    # best[k][j]: fewest padded tokens for the first j rows in k groups; cut[k][j]: where its last group starts
    best = [[0] + [float("inf")] * n] + [[float("inf")] * (n + 1) for _ in range(most)]
    cut = [[0] * (n + 1) for _ in range(len(best))]
    for k in range(1, len(best)):
        for j in range(1, n + 1):
            for i in range(k - 1, j):
                cost = best[k - 1][i] + (j - i) * ordered[j - 1]
                if cost < best[k][j]:
                    best[k][j], cut[k][j] = cost, i
    k = min(range(1, len(best)), key=lambda g: (best[g][n], g)) if n else 1
    bounds, j = [], n
    while k > 0 and j > 0:
        bounds.append((cut[k][j], j))
        j, k = cut[k][j], k - 1
    return [order[i:j].to(lengths.device) for i, j in reversed(bounds)] or [order.to(lengths.device)]


class LogprobModel(nn.Module):
    """``forward(batch) -> response_logprobs``, as a module so accelerate can wrap it (DDP, FSDP).

    Calling the decoder and the head inside one wrapped forward keeps the distributed wrapper's
    gradient hooks in charge of every parameter used.
    """

    def __init__(self, model: nn.Module, chunk_size: int = DEFAULT_CHUNK_SIZE, groups: int = 1,
                 rows_per_group: int = 1) -> None:
        super().__init__()
        self.model = model
        self.chunk_size = chunk_size
        self.groups = groups  # forwards a batch may be split into by length (runtime.length_groups)
        self.rows_per_group = rows_per_group  # no more forwards than this many rows each on average
        # FSDP's transformer auto-wrap policy looks for the layer classes here.
        self._no_split_modules = getattr(model, "_no_split_modules", None)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, response_mask: Tensor,
                per_token: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Summed response log-probs ``[B]``; with ``per_token`` also the ragged per-token ones."""
        batch = {"input_ids": input_ids, "attention_mask": attention_mask,
                 "response_mask": response_mask}
        groups = length_groups(attention_mask.sum(1), self.groups, self.rows_per_group) if self.groups > 1 else []
        if len(groups) <= 1:
            summed, tokens = response_token_logprobs(self.model, batch, self.chunk_size)
            return (summed, tokens) if per_token else summed
        parts = [response_token_logprobs(self.model, _narrowed(batch, rows), self.chunk_size) for rows in groups]
        rows = torch.cat(groups)
        back = torch.argsort(rows)
        summed = torch.cat([part[0] for part in parts])[back]
        if not per_token:
            return summed
        counts = response_mask[rows, 1:].sum(1).tolist()  # the ragged tokens come group by group
        pieces = torch.cat([part[1] for part in parts]).split(counts)
        return summed, torch.cat([pieces[i] for i in back.tolist()])


def _narrowed(batch: Mapping[str, Tensor], rows: Tensor) -> dict[str, Tensor]:
    """The ``rows`` of a batch, cut after the last position any of them attends to."""
    width = int(batch["attention_mask"][rows].any(0).nonzero().max()) + 1
    return {key: value[rows, :width] for key, value in batch.items()}
