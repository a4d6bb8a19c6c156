"""LoRA through peft: the run trains an adapter, the reference is the base with adapters disabled."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from badpo.core.judgments import read_judgments
from badpo.engine.batches import build_preference_data
from badpo.engine.tokenize import TokenizationConfig
from badpo.engine.train import train
from fixtures.engine import full_logit_token_logprobs, judgment_rows, log_records, make_config, write_jsonl


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    root = tmp_path_factory.mktemp("engine_lora")
    save_model_dir(root / "model", "llama")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def lora_config(world, name, *overrides):
    return make_config(world, name, "lora.enabled=true", "lora.rank=4", "lora.alpha=8.0",
                       "optim.lr=null", "steps=4", "micro_batch_size=4", "bias.init=zero",
                       *overrides)  # theta from 0: the first loss is log 2


def test_lora_run_trains_an_adapter_against_the_base_as_reference(world):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = train(lora_config(world, "lora"))
    files = {p.name for p in (out / "policy").iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= files
    assert "model.safetensors" not in files
    assert json.loads((out / "run.json").read_text())["final"]["lr"] > 0
    assert log_records(out)[0]["lr"] == 5e-6  # the LoRA default (constant schedule here)
    assert log_records(out)[0]["loss"] == pytest.approx(0.6931472, abs=1e-6)  # B = 0: policy = base

    tokenizer = AutoTokenizer.from_pretrained(world / "model")
    store = build_preference_data(read_judgments(world / "judgments.jsonl"), None, tokenizer,
                                  TokenizationConfig()).store  # the engine's sequence order
    batch = store.batch(torch.arange(len(store)))
    base = AutoModelForCausalLM.from_pretrained(world / "model")
    with torch.no_grad():
        base_logps = full_logit_token_logprobs(base, batch).sum(-1)
        cached = load_file(next((world / "cache").glob("*.safetensors")))["logps"]
        policy = PeftModel.from_pretrained(base, out / "policy")
        adapted = full_logit_token_logprobs(policy, batch).sum(-1)
        with policy.disable_adapter():
            disabled = full_logit_token_logprobs(policy, batch).sum(-1)
    torch.testing.assert_close(cached, base_logps, rtol=0, atol=1e-5)
    torch.testing.assert_close(disabled, base_logps, rtol=0, atol=1e-6)
    assert (adapted - base_logps).abs().max() > 1e-4  # the adapter moved the policy


def test_lora_stop_and_resume_equals_uninterrupted(world):
    """The checkpoint holds only the adapter; resuming restores it, AdamW, theta and the schedule."""
    from safetensors.torch import load_file

    full = train(lora_config(world, "lora_full", "optim.lr=1e-3"))
    train(lora_config(world, "lora_parts", "optim.lr=1e-3", "stop_after_steps=2"))
    checkpoint = world / "lora_parts" / "checkpoints" / "step-000002"
    saved = load_file(checkpoint / "policy_trainable_0.safetensors")
    assert saved and all("lora_" in name for name in saved)
    resumed = train(lora_config(world, "lora_parts", "optim.lr=1e-3", "resume_from=latest"))
    a = load_file(full / "policy" / "adapter_model.safetensors")
    b = load_file(resumed / "policy" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_lora_under_bf16_has_fp32_adapters_on_a_bf16_base(world):
    from badpo.engine.runtime import load_model
    from badpo.engine.settings import LoraSettings, ModelConfig

    model = load_model(ModelConfig(name_or_path=str(world / "model")),
                       LoraSettings(enabled=True, rank=4), mixed="bf16")
    dtypes = {name: p.dtype for name, p in model.named_parameters()}
    assert {d for n, d in dtypes.items() if "lora_" in n} == {torch.float32}
    assert {d for n, d in dtypes.items() if "lora_" not in n} == {torch.bfloat16}
    out = train(lora_config(world, "lora_bf16", "runtime.precision=bf16", "steps=2"))
    assert (out / "policy" / "adapter_model.safetensors").exists()


def test_lora_loading_prints_no_library_deprecation(world):
    """peft reads ``is_gradient_checkpointing``, which transformers 5 renamed and warns about on
    every run: a line in every log that is about neither the user's data nor their config."""
    import warnings

    from badpo.engine.runtime import load_model
    from badpo.engine.settings import LoraSettings, ModelConfig

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_model(ModelConfig(name_or_path=str(world / "model")), LoraSettings(enabled=True, rank=4), mixed="no")
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
