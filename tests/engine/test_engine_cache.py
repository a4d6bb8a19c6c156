"""Reference log-prob cache: cached == recomputed == full logits; the key follows the weights."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from badpo.engine import cache
from badpo.engine.runtime import make_accelerator
from badpo.engine.tokenize import TokenizationConfig, build_token_store
from fixtures.engine import build_tokenizer, full_logit_token_logprobs, judgment_rows


@pytest.fixture()
def store():
    rows = judgment_rows()
    sequences = sorted({(r["prompt"], r[side]) for r in rows for side in ("chosen", "rejected")})
    return build_token_store(build_tokenizer(), sequences, TokenizationConfig())


def test_cached_reference_equals_recomputed_and_full_logits(tmp_path, store, monkeypatch, build_model):
    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(identity={"model": "tiny"}, cache_dir=str(tmp_path), batch_size=3, chunk_size=5,
                  accelerator=accelerator)
    first, _, parts = cache.reference_logprobs(model, store, **kwargs)
    assert len(list(tmp_path.iterdir())) == 1 and first.shape == (len(store),)
    with torch.no_grad():
        expected = full_logit_token_logprobs(model, store.batch(torch.arange(len(store)))).sum(-1)
    torch.testing.assert_close(first, expected, rtol=0, atol=1e-5)

    def refuse(*args, **kwargs):
        raise AssertionError("recomputed although cached")

    with monkeypatch.context() as patch:
        patch.setattr(cache, "compute_logprobs", refuse)
        loaded, _, loaded_parts = cache.reference_logprobs(model, store, **kwargs)
    assert torch.equal(loaded, first) and loaded_parts == parts
    recomputed, _ = cache.compute_logprobs(model, store, 7, 1024, accelerator)
    # another batch size pads and sums differently: equal to fp32 rounding of values ~10-20 nats
    torch.testing.assert_close(recomputed, loaded, rtol=2e-7, atol=1e-6)


def test_the_key_changes_with_weights_tokens_and_identity(tmp_path, store, build_model):
    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(cache_dir=str(tmp_path), batch_size=8, chunk_size=64, accelerator=accelerator)
    _, _, base = cache.reference_logprobs(model, store, identity={"model": "tiny"}, **kwargs)
    with torch.no_grad():
        model.transformer.h[1].mlp.c_fc.weight[3, 5] += 1e-3  # one weight of one layer
    _, _, moved = cache.reference_logprobs(model, store, identity={"model": "tiny"}, **kwargs)
    assert moved["weights"] != base["weights"] and moved["tokens"] == base["tokens"]
    short = build_token_store(build_tokenizer(), [("write code", "yes")], TokenizationConfig())
    _, _, other = cache.reference_logprobs(model, short, identity={"model": "tiny"}, **kwargs)
    assert other["tokens"] != moved["tokens"]
    _, _, renamed = cache.reference_logprobs(model, short, identity={"model": "tiny2"}, **kwargs)
    keys = {cache.cache_key(p) for p in (base, moved, other, renamed)}
    assert len(keys) == 4 and len(list(tmp_path.glob("*.safetensors"))) == 4


def test_a_lora_wrapped_reference_has_the_plain_models_fingerprint(build_model):
    """A LoRA run and a full fine-tuning run from one reference share its cache: peft's names for
    the base weights (``base_model.model.`` ..., ``.base_layer.``) and its adapters do not enter
    the fingerprint, while a change to a base weight still does."""
    import copy

    from peft import LoraConfig, get_peft_model

    model = build_model("gpt2")
    wrapped = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, target_modules=["c_attn", "c_fc"],
                                                               fan_in_fan_out=True))
    assert any(".base_layer." in name for name, _ in wrapped.named_parameters())
    assert cache.weights_fingerprint(wrapped) == cache.weights_fingerprint(model)
    with torch.no_grad():
        wrapped.base_model.model.transformer.h[0].attn.c_attn.base_layer.weight[0, 0] += 1e-3
    assert cache.weights_fingerprint(wrapped) != cache.weights_fingerprint(model)


@pytest.mark.parametrize("damage", ["truncated", "altered", "other_key", "short"])
def test_a_damaged_cache_file_is_named_discarded_and_recomputed(tmp_path, store, monkeypatch, damage, build_model):
    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(identity={"model": "tiny"}, cache_dir=str(tmp_path), batch_size=8, chunk_size=64,
                  accelerator=accelerator)
    values, _, parts = cache.reference_logprobs(model, store, **kwargs)
    path = tmp_path / f"{cache.cache_key(parts)}.safetensors"
    with safe_open(str(path), framework="pt") as handle:
        metadata, logps = handle.metadata(), handle.get_tensor("logps")
    if damage == "truncated":  # a kill or a full disk while copying the file
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "altered":  # the values edited, the checksum not
        save_file({"logps": logps + 0.5}, str(path), metadata=metadata)
    elif damage == "other_key":
        parts_other = json.dumps({**json.loads(metadata["parts"]), "model": "other"}, sort_keys=True)
        save_file({"logps": logps}, str(path), metadata={**metadata, "parts": parts_other})
    else:
        save_file({"logps": logps[:-1]}, str(path), metadata=metadata)
    calls = []
    compute = cache.compute_logprobs
    monkeypatch.setattr(cache, "compute_logprobs", lambda *a: calls.append(1) or compute(*a))
    with pytest.warns(UserWarning, match=f"reference cache {path}: .*discarded, recomputing"):
        again, _, _ = cache.reference_logprobs(model, store, **kwargs)
    assert calls == [1] and torch.equal(again, values)
    healed, _, _ = cache.reference_logprobs(model, store, **kwargs)  # the file was rewritten
    assert calls == [1] and torch.equal(healed, values)


class _OnDevice:
    """An accelerator that says it runs on ``kind`` (the log-probs themselves are the CPU's)."""

    def __init__(self, accelerator, kind: str) -> None:
        self._accelerator, self.device = accelerator, torch.device(kind)

    def __getattr__(self, name):
        return getattr(self._accelerator, name)


def test_a_gpu_cache_is_keyed_apart_and_a_cpu_cache_keeps_its_name(tmp_path, store, monkeypatch, build_model):
    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(identity={"model": "tiny"}, cache_dir=str(tmp_path), batch_size=8, chunk_size=64)
    values, _, on_cpu = cache.reference_logprobs(model, store, accelerator=accelerator, **kwargs)
    assert "device" not in on_cpu  # the name a CPU cache had before the device was keyed
    monkeypatch.setattr(cache, "compute_logprobs", lambda *args: (values, None))
    _, _, on_gpu = cache.reference_logprobs(model, store, accelerator=_OnDevice(accelerator, "cuda"), **kwargs)
    assert on_gpu == {**on_cpu, "device": "cuda"} and len(list(tmp_path.glob("*.safetensors"))) == 2


def test_every_method_on_the_same_judgments_shares_one_reference_pass(tmp_path, store, monkeypatch, build_model):
    """The file keeps every token's log-prob whichever run wrote it, so SamPO (per-token
    log-ratios) after DPO reads DPO's pass, and DPO after SamPO reads SamPO's: one file, one pass,
    the values those runs would have computed themselves."""
    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(identity={"model": "tiny"}, cache_dir=str(tmp_path), batch_size=3, chunk_size=5,
                  accelerator=accelerator)
    own_values, own_tokens = cache.compute_logprobs(model, store, 3, 5, accelerator, True)
    for first in (False, True):
        folder = tmp_path / f"first-per-token-{first}"
        values, tokens, _ = cache.reference_logprobs(model, store, **{**kwargs, "cache_dir": str(folder)},
                                                     per_token=first)
        assert torch.equal(values, own_values) and (tokens is None) != first
        with monkeypatch.context() as patch:
            patch.setattr(cache, "compute_logprobs", lambda *a: pytest.fail("the pass was repeated"))
            values, tokens, _ = cache.reference_logprobs(model, store, **{**kwargs, "cache_dir": str(folder)},
                                                         per_token=not first)
        assert torch.equal(values, own_values) and (tokens is None) == first
        assert first or torch.equal(tokens, own_tokens)
        assert len(list(folder.glob("*.safetensors"))) == 1


def test_a_file_without_token_values_serves_sums_and_is_completed_for_a_per_token_run(tmp_path, store, build_model):
    """A cache written before the token values were kept (the same key, ``logps`` alone) still
    serves every run that reads sums; a run that needs the tokens computes them, without a
    warning, and the file then holds both."""
    import warnings

    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(identity={"model": "tiny"}, cache_dir=str(tmp_path), batch_size=3, chunk_size=5,
                  accelerator=accelerator)
    values, _, parts = cache.reference_logprobs(model, store, **kwargs)
    path = tmp_path / f"{cache.cache_key(parts)}.safetensors"
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
    save_file({"logps": values}, str(path), metadata={k: metadata[k] for k in ("format", "parts", "sha256")})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sums, _, _ = cache.reference_logprobs(model, store, **kwargs)
        _, tokens, _ = cache.reference_logprobs(model, store, **kwargs, per_token=True)
    assert torch.equal(sums, values) and tokens is not None
    with safe_open(str(path), framework="pt") as handle:
        assert set(handle.keys()) == {"logps", "token_logps"}
