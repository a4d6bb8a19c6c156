"""Reference log-probs, computed once per (reference model, data, tokenization) and cached on disk.

The key hashes: the model's name and revision, a fingerprint of its weights (so two different
checkpoints at one path never share a cache), the exact token ids of every sequence (which
covers the data and the tokenization), the tokenization settings, and the precision. The file
stores the key's parts and a sha256 of the values; a file that is truncated, altered or keyed
otherwise is named in a warning, discarded and recomputed. Writes are atomic.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from badpo.engine.logprobs import response_logprobs
from badpo.engine.runtime import reference_mode
from badpo.engine.tokenize import TokenStore

FORMAT = "badpo.reference_logprobs/2"
_SAMPLE = 4096


def weights_fingerprint(model: nn.Module) -> str:
    """sha256 over every base weight's name, shape, dtype, float64 sum and a strided sample.

    LoRA adapter weights are skipped: the reference is the base. Cheap enough for 8B models on a
    GPU (one reduction per tensor), yet any trained checkpoint changes it.
    """
    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
        if "lora_" in name:
            continue
        flat = param.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // _SAMPLE)][:_SAMPLE].float().cpu()
        total = float(flat.sum(dtype=torch.float64))
        digest.update(f"{name}|{tuple(param.shape)}|{param.dtype}|{total:.12e}|".encode())
        digest.update(sample.numpy().tobytes())
    return digest.hexdigest()


def tokens_fingerprint(store: TokenStore) -> str:
    digest = hashlib.sha256()
    for tensor in (store.ids, store.lengths, store.prompt_lengths):
        digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()


def cache_key(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def compute_logprobs(model: nn.Module, store: TokenStore, batch_size: int, chunk_size: int,
                     accelerator) -> Tensor:
    """Reference log-probs of every sequence of ``store``: ``[S]`` float32 on the CPU.

    Sequences are batched by length (little padding); with several processes each computes a
    strided share and the shares are summed (every other entry is exactly 0).
    """
    order = torch.argsort(store.lengths, descending=True, stable=True)
    share = order[accelerator.process_index :: accelerator.num_processes]
    values = torch.zeros(len(store), dtype=torch.float32, device=accelerator.device)
    with reference_mode(model), accelerator.autocast():
        for rows in share.split(batch_size):
            batch = store.batch(rows, accelerator.device)
            values[rows.to(accelerator.device)] = response_logprobs(model, batch, chunk_size).float()
    if accelerator.num_processes > 1:
        values = accelerator.reduce(values, reduction="sum")
    return values.cpu()


def reference_logprobs(model: nn.Module, store: TokenStore, *, identity: dict, cache_dir: str | None,
                       batch_size: int, chunk_size: int, accelerator) -> tuple[Tensor, dict]:
    """Load the cached reference log-probs of ``store`` or compute (and cache) them.

    ``identity`` holds the model name/revision, tokenization settings and precision; the weights
    and token fingerprints are added here. Returns (log-probs ``[S]``, the key's parts).
    """
    parts = {"format": FORMAT, **identity, "weights": weights_fingerprint(model),
             "tokens": tokens_fingerprint(store), "sequences": len(store)}
    path = Path(cache_dir) / f"{cache_key(parts)}.pt" if cache_dir is not None else None
    if path is not None and path.exists():
        cached = _read_cache(path, parts, len(store))
        if cached is not None:
            return cached, parts
    values = compute_logprobs(model, store, batch_size, chunk_size, accelerator)
    if path is not None and accelerator.is_main_process:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        torch.save({"parts": parts, "logps": values, "sha256": _checksum(values)}, temporary)
        os.replace(temporary, path)
    accelerator.wait_for_everyone()
    return values, parts


def _checksum(values: Tensor) -> str:
    return hashlib.sha256(values.contiguous().numpy().tobytes()).hexdigest()


def _read_cache(path: Path, parts: dict, sequences: int) -> Tensor | None:
    """The cached log-probs, or None (with a warning naming the file, which is then replaced)
    when the file is truncated, altered or not for this key."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        problem = None
        if not isinstance(saved, dict) or saved.get("parts") != parts:
            problem = "its key does not match"
        elif not isinstance(saved.get("logps"), Tensor) or saved["logps"].shape != (sequences,):
            problem = "it holds the wrong number of values"
        elif saved.get("sha256") != _checksum(saved["logps"]):
            problem = "its values do not match their checksum"
    except Exception as error:  # noqa: BLE001 - any unreadable file is a corrupt cache
        problem = f"it cannot be read ({type(error).__name__}: {error})"
    if problem is None:
        return saved["logps"]
    warnings.warn(f"reference cache {path}: {problem}; discarded, recomputing", stacklevel=3)
    return None
