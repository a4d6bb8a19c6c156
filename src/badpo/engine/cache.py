"""Reference log-probs, computed once per (reference model, data, tokenization) and cached on disk.

The key hashes: the model's name and revision, a fingerprint of its weights (so two different
checkpoints at one path never share a cache), the exact token ids of every sequence (which
covers the data and the tokenization), the tokenization settings, and the precision. The file
stores the key's parts and a sha256 of each tensor: the summed log-probs and every response
token's (which come out of the same forward, so every method on the same judgments shares one
pass); a file that is truncated, altered or keyed otherwise is named in a warning, discarded and
recomputed. Writes are atomic. The file is safetensors (the key's parts and the checksums in its
metadata): reading a cache runs no code, so a cache folder shared between experiments
(``OUT/reference_cache``) is as safe as a checkpoint. :func:`write_cached` and
:func:`read_cached` serve other reference values keyed the same way (the readouts' held-out
log-probs)."""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor, nn

from badpo.core.notices import BadpoWarning
from badpo.core.progress import progress as reported
from badpo.engine.logprobs import response_token_logprobs
from badpo.engine.runtime import reference_mode
from badpo.engine.tokenize import TokenStore

FORMAT = "badpo.reference_logprobs/4"  # 4: base weights under their plain names
_SAMPLE = 4096


def weights_fingerprint(model: nn.Module) -> str:
    """sha256 over every base weight's name, shape, dtype, float64 sum and a strided sample.

    LoRA adapter weights are skipped and the names peft gives the base weights are read as the
    plain model's (:func:`_base_name`): the reference is the base, so a LoRA run and a full
    fine-tuning run from one reference share its cache. Cheap enough for 8B models on a GPU (one
    reduction per tensor), yet any trained checkpoint changes it.
    """
    digest = hashlib.sha256()
    named = ((_base_name(name), param) for name, param in model.named_parameters() if "lora_" not in name)
    for name, param in sorted(named, key=lambda item: item[0]):
        flat = param.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // _SAMPLE)][:_SAMPLE].float().cpu()
        total = float(flat.sum(dtype=torch.float64))
        digest.update(f"{name}|{tuple(param.shape)}|{param.dtype}|{total:.12e}|".encode())
        digest.update(sample.numpy().tobytes())
    return digest.hexdigest()


def _base_name(name: str) -> str:
    """A base weight's name as the plain model names it: peft's wrapper adds ``base_model.model.``
    in front and ``.base_layer`` inside every layer it adapts."""
    return name.removeprefix("base_model.model.").replace(".base_layer.", ".")


def tokens_fingerprint(store: TokenStore) -> str:
    digest = hashlib.sha256()
    for tensor in (store.ids, store.lengths, store.prompt_lengths):
        digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()


def cache_key(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def token_offsets(store: TokenStore) -> Tensor:
    """``[S + 1]``: the tokens of store row s sit at ``[offsets[s], offsets[s + 1])`` of a ragged
    per-token tensor."""
    return torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(store.response_lengths(), 0)])


def compute_logprobs(model: nn.Module, store: TokenStore, batch_size: int, chunk_size: int,
                     accelerator, per_token: bool = False, progress: bool = False
                     ) -> tuple[Tensor, Tensor | None]:
    """Reference log-probs of every sequence of ``store``: ``[S]`` float32 on the CPU, and with
    ``per_token`` every response token's log-prob in the ragged layout of :func:`token_offsets`.

    Sequences are batched by length (little padding); with several processes each computes a
    strided share and the shares are summed (every other entry is exactly 0). ``progress``: a bar
    with the count and an ETA on stderr (minutes on a real model's judgments).
    """
    order = torch.argsort(store.lengths, descending=True, stable=True)
    share = order[accelerator.process_index :: accelerator.num_processes]
    device = accelerator.device
    values = torch.zeros(len(store), dtype=torch.float32, device=device)
    offsets = token_offsets(store)
    tokens = torch.zeros(int(offsets[-1]), dtype=torch.float32, device=device) if per_token else None
    with reference_mode(model), accelerator.autocast():
        batches = share.split(batch_size)
        for rows in reported(batches, "reference log-probs", "batch") if progress else batches:
            batch = store.batch(rows, device)
            summed, flat = response_token_logprobs(model, batch, chunk_size)
            values[rows.to(device)] = summed.float()
            if per_token:
                spans = [torch.arange(offsets[r], offsets[r + 1]) for r in rows.tolist()]
                tokens[torch.cat(spans).to(device)] = flat.float()
    if accelerator.num_processes > 1:
        values = accelerator.reduce(values, reduction="sum")
        tokens = accelerator.reduce(tokens, reduction="sum") if per_token else None
    return values.cpu(), tokens.cpu() if per_token else None


def reference_logprobs(model: nn.Module, store: TokenStore, *, identity: dict, cache_dir: str | None,
                       batch_size: int, chunk_size: int, accelerator, per_token: bool = False,
                       progress: bool = False) -> tuple[Tensor, Tensor | None, dict]:
    """Load the cached reference log-probs of ``store`` or compute (and cache) them.

    ``identity`` holds the model name/revision, tokenization settings and precision; the weights
    and token fingerprints, and the device class when it is not the CPU, are added here.
    ``per_token`` (a method that reads per-token log-ratios) also returns every token's log-prob.
    A cache file keeps them whichever run computed it: they come out of the same forward, so an
    arm of another method on the same judgments (SamPO after DPO) reads the pass instead of
    repeating it; a file written before they were kept is computed again for such an arm. Returns
    (log-probs ``[S]``, per-token ``[N]`` or None, the key's parts).
    """
    parts = {"format": FORMAT, **identity, "weights": weights_fingerprint(model),
             "tokens": tokens_fingerprint(store), "sequences": len(store)}
    if accelerator.device.type != "cpu":  # a GPU's log-probs differ from a CPU's; a CPU cache keeps its name
        parts["device"] = accelerator.device.type
    path = Path(cache_dir) / f"{cache_key(parts)}.safetensors" if cache_dir is not None else None
    if path is not None and path.exists():
        shapes = {"logps": (len(store),), "token_logps": (int(token_offsets(store)[-1]),)}
        cached = read_cached(path, parts, shapes)
        if cached is not None and (not per_token or "token_logps" in cached):
            return cached["logps"], cached.get("token_logps") if per_token else None, parts
    values, tokens = compute_logprobs(model, store, batch_size, chunk_size, accelerator,
                                      per_token or path is not None, progress)
    if path is not None and accelerator.is_main_process:
        write_cached(path, parts, {"logps": values, "token_logps": tokens})
    accelerator.wait_for_everyone()
    return values, tokens if per_token else None, parts


def cached_values(model: nn.Module, store: TokenStore, cache_dir: str | Path | None, identity: dict,
                  compute: Callable[[], Tensor]) -> Tensor:
    """``compute()`` (one float32 value per sequence of ``store``, by ``model``) once per content.

    The key: ``identity`` (what else decides the values: the readout, its batch size), the
    model's weights and configuration (its attention kernel included, its name left out, so a
    moved folder still hits), the exact token ids, the device class and the torch version (other
    arithmetic, other bits), so that a changed reference, data or tokenization computes again and
    nothing stale is read. Without ``cache_dir`` the values are computed."""
    if cache_dir is None:
        return compute().float().cpu()
    config = model.config.to_dict() if hasattr(model, "config") else {}
    config.pop("_name_or_path", None)
    config["attention"] = getattr(getattr(model, "config", None), "_attn_implementation", None)  # not in to_dict
    device = next(model.parameters()).device
    parts = {"format": FORMAT, **identity, "weights": weights_fingerprint(model),
             "config": hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest(),
             "tokens": tokens_fingerprint(store), "sequences": len(store), "device": device.type,
             "torch": torch.__version__}
    path = Path(cache_dir) / f"{cache_key(parts)}.safetensors"
    if path.exists():
        cached = read_cached(path, parts, {"logps": (len(store),)})
        if cached is not None:
            return cached["logps"]
    values = compute().float().cpu()
    write_cached(path, parts, {"logps": values})
    return values


def write_cached(path: Path, parts: dict, tensors: dict[str, Tensor | None]) -> None:
    """Write ``tensors`` (None ones left out) atomically as safetensors, with the key's ``parts``
    and a sha256 of each tensor in the metadata: ``sha256`` for ``logps`` (the name a file kept
    before it held more), ``sha256_<name>`` for the others."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".tmp{os.getpid()}")
    kept = {name: tensor.contiguous() for name, tensor in tensors.items() if tensor is not None}
    metadata = {"format": FORMAT, "parts": json.dumps(parts, sort_keys=True),
                **{_checksum_name(name): _checksum(tensor) for name, tensor in kept.items()}}
    save_file(kept, str(temporary), metadata=metadata)
    os.replace(temporary, path)


def _checksum_name(name: str) -> str:
    return "sha256" if name == "logps" else f"sha256_{name}"


def _checksum(tensor: Tensor) -> str:
    return hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest()


def _load(path: Path) -> tuple[dict, dict[str, Tensor]]:
    """(metadata, tensors) of a cache file: safetensors, no unpickling."""
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        saved = {name: handle.get_tensor(name) for name in handle.keys()}
    if metadata.get("format") != FORMAT:
        raise ValueError(f"format {metadata.get('format')!r}, expected {FORMAT!r}")
    return metadata, saved


def read_cached(path: Path, parts: dict, shapes: dict[str, tuple[int, ...]]) -> dict[str, Tensor] | None:
    """The tensors of ``shapes`` that the file holds (``logps`` always, the others when it kept
    them), each of its shape and checksum, or None (with a warning naming the file, which is then
    replaced) when the file is truncated, altered or not for this key."""
    try:
        metadata, saved = _load(path)
        problem = None
        if json.loads(metadata.get("parts", "null")) != parts:
            problem = "its key does not match"
        elif "logps" not in saved:
            problem = "it holds no log-probs"
        for name in shapes:
            if problem is not None or name not in saved:
                continue
            if saved[name].shape != shapes[name]:
                problem = f"it holds the wrong number of {name} values"
            elif metadata.get(_checksum_name(name)) != _checksum(saved[name]):
                problem = f"its {name} values do not match their checksum"
    except Exception as error:  # noqa: BLE001 - any unreadable file is a corrupt cache
        problem = f"it cannot be read ({type(error).__name__}: {error})"
    if problem is None:
        return {name: saved[name] for name in shapes if name in saved}
    warnings.warn(f"reference cache {path}: {problem}; discarded, recomputing", BadpoWarning, stacklevel=3)
    return None
