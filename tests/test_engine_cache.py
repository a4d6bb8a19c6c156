"""Reference log-prob cache: cached == recomputed == full logits; the key follows the weights."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import build_model, build_tokenizer, judgment_rows
from test_engine_logprobs import full_logit_token_logprobs

from badpo.engine import cache
from badpo.engine.runtime import make_accelerator
from badpo.engine.tokenize import TokenizationConfig, build_token_store


@pytest.fixture()
def store():
    rows = judgment_rows()
    sequences = sorted({(r["prompt"], r[side]) for r in rows for side in ("chosen", "rejected")})
    return build_token_store(build_tokenizer(), sequences, TokenizationConfig())


def test_cached_reference_equals_recomputed_and_full_logits(tmp_path, store, monkeypatch):
    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(identity={"model": "tiny"}, cache_dir=str(tmp_path), batch_size=3, chunk_size=5,
                  accelerator=accelerator)
    first, parts = cache.reference_logprobs(model, store, **kwargs)
    assert len(list(tmp_path.iterdir())) == 1 and first.shape == (len(store),)
    with torch.no_grad():
        expected = full_logit_token_logprobs(model, store.batch(torch.arange(len(store)))).sum(-1)
    torch.testing.assert_close(first, expected, rtol=0, atol=1e-5)

    def refuse(*args, **kwargs):
        raise AssertionError("recomputed although cached")

    with monkeypatch.context() as patch:
        patch.setattr(cache, "compute_logprobs", refuse)
        loaded, loaded_parts = cache.reference_logprobs(model, store, **kwargs)
    assert torch.equal(loaded, first) and loaded_parts == parts
    recomputed = cache.compute_logprobs(model, store, 7, 1024, accelerator)
    torch.testing.assert_close(recomputed, loaded, rtol=0, atol=1e-6)


def test_the_key_changes_with_weights_tokens_and_identity(tmp_path, store):
    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(cache_dir=str(tmp_path), batch_size=8, chunk_size=64, accelerator=accelerator)
    _, base = cache.reference_logprobs(model, store, identity={"model": "tiny"}, **kwargs)
    with torch.no_grad():
        model.transformer.h[1].mlp.c_fc.weight[3, 5] += 1e-3  # one weight of one layer
    _, moved = cache.reference_logprobs(model, store, identity={"model": "tiny"}, **kwargs)
    assert moved["weights"] != base["weights"] and moved["tokens"] == base["tokens"]
    short = build_token_store(build_tokenizer(), [("write code", "yes")], TokenizationConfig())
    _, other = cache.reference_logprobs(model, short, identity={"model": "tiny"}, **kwargs)
    assert other["tokens"] != moved["tokens"]
    _, renamed = cache.reference_logprobs(model, short, identity={"model": "tiny2"}, **kwargs)
    keys = {cache.cache_key(p) for p in (base, moved, other, renamed)}
    assert len(keys) == 4 and len(list(tmp_path.glob("*.pt"))) == 4


def test_a_file_that_does_not_match_its_key_is_an_error(tmp_path, store):
    accelerator = make_accelerator("fp32", num_threads=1)
    model = build_model("gpt2")
    kwargs = dict(identity={"model": "tiny"}, cache_dir=str(tmp_path), batch_size=8, chunk_size=64,
                  accelerator=accelerator)
    _, parts = cache.reference_logprobs(model, store, **kwargs)
    path = tmp_path / f"{cache.cache_key(parts)}.pt"
    saved = torch.load(path, weights_only=True)
    torch.save({"parts": saved["parts"], "logps": saved["logps"][:-1]}, path)
    with pytest.raises(ValueError, match="do not match their key"):
        cache.reference_logprobs(model, store, **kwargs)
