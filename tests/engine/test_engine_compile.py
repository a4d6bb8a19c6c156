"""``model.compile``: every decoder block compiled in place gives the eager log-probs and gradients
(training, the reference pass, LoRA, gradient checkpointing), one graph serves every block, the
parameters keep their names, and the setting is part of a run and of its reference cache only when set.

Most tests trace through ``aot_eager`` (TorchDynamo and AOTAutograd, the graph capture a compile
does, without generating kernels), counting the frames captured, so they check what badpo controls
in seconds; one test compiles with the default backend (Inductor), as a user's run does."""

from __future__ import annotations

import json
import re

import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

from badpo.core.config import ConfigError
from badpo.core.notices import BadpoWarning
from badpo.engine import runtime
from badpo.engine.cache import cache_key
from badpo.engine.logprobs import response_logprobs
from badpo.engine.preference import reference_identity
from badpo.engine.runtime import compile_decoder, decoder_blocks, load_model, reference_mode
from badpo.engine.settings import LoraSettings, ModelConfig, TrainConfig, check_compile_torch
from badpo.engine.tokenize import TokenizationConfig, build_token_store
from badpo.engine.train import train
from badpo.run_folder.identity import identity
from fixtures.engine import build_tokenizer, judgment_rows, make_config, write_jsonl

SEQUENCES = [
    ("what is the best way to learn", "sure i think you should try this first"),
    ("write code", "yes"),
    ("what is the best way to cook", "maybe try that --- emily smith"),
]


@pytest.fixture
def counted(monkeypatch) -> CompileCounterWithBackend:
    """torch.compile through ``aot_eager`` with a counter of the frames it captures."""
    counter = CompileCounterWithBackend("aot_eager")
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda *args, **kwargs: real(*args, **{**kwargs, "backend": counter}))
    torch._dynamo.reset()
    yield counter
    torch._dynamo.reset()


def _batch():
    store = build_token_store(build_tokenizer(), SEQUENCES, TokenizationConfig())
    return store.batch(torch.arange(len(SEQUENCES)))


def _logprobs_and_grads(model: nn.Module, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    logps = response_logprobs(model, batch, chunk_size=4)  # several chunks: the checkpointed head too
    (logps * torch.tensor([1.0, -2.0, 0.5])).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return logps.detach(), grads


def _pair(folder, lora: bool = False, checkpointing: bool = False):
    """The same model loaded eager and compiled; LoRA's B made non-zero (alike in both), so that the
    adapters change the forward and A gets gradients."""
    settings = LoraSettings(enabled=lora, rank=4, alpha=8.0)
    models = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = load_model(ModelConfig(name_or_path=str(folder), compile=compiled,
                                       gradient_checkpointing=checkpointing), settings, "no")
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.data.normal_(0.0, 0.1)
        models.append(model)
    return models


@pytest.mark.parametrize("lora, checkpointing", [(False, False), (True, False), (False, True)])
def test_compiled_blocks_give_the_eager_logprobs_and_gradients(save_model_dir, tmp_path, counted, lora,
                                                               checkpointing):
    eager, compiled = _pair(save_model_dir(tmp_path / "m", arch="llama"), lora, checkpointing)
    decoder = (compiled.get_base_model() if lora else compiled).base_model
    assert all(block._compiled_call_impl is not None for block in decoder.layers)  # in place, not wrapped
    assert decoder._compiled_call_impl is None  # the blocks, not the mask building around them
    assert [n for n, _ in compiled.named_parameters()] == [n for n, _ in eager.named_parameters()]
    batch = _batch()
    want, want_grads = _logprobs_and_grads(eager, batch)
    got, got_grads = _logprobs_and_grads(compiled, batch)
    assert counted.frame_count >= 1  # dynamo captured the blocks: not a silent fall back to eager
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert got_grads.keys() == want_grads.keys() and any("lora_A" in n for n in got_grads) == lora
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)
    # another padded length: the same graph (dynamic shapes), still the eager values
    short = {k: v[1:3, :9] for k, v in batch.items()}
    torch.testing.assert_close(response_logprobs(compiled, short), response_logprobs(eager, short),
                               atol=1e-5, rtol=1e-5)
    # the reference pass: eval mode, no grad, the adapters off under LoRA
    with torch.no_grad(), reference_mode(eager), reference_mode(compiled):
        torch.testing.assert_close(response_logprobs(compiled, batch), response_logprobs(eager, batch),
                                   atol=1e-5, rtol=1e-5)


def test_one_graph_serves_every_block(save_model_dir, tmp_path, counted):
    """The frames captured do not grow with the number of blocks (a graph per block would)."""
    frames = {}
    for layers in (2, 4):
        folder = save_model_dir(tmp_path / f"m{layers}", arch="llama")
        config = (folder / "config.json")
        config.write_text(config.read_text().replace('"num_hidden_layers": 2', f'"num_hidden_layers": {layers}'))
        torch._dynamo.reset()
        before = counted.frame_count
        _logprobs_and_grads(load_model(ModelConfig(name_or_path=str(folder), compile=True), LoraSettings(), "no"),
                            _batch())
        frames[layers] = counted.frame_count - before
    assert frames[2] >= 1 and frames[4] == frames[2], frames


def test_inductor_compiles_the_blocks_as_a_run_does(save_model_dir, tmp_path):
    """The default backend generates kernels (a C++ compiler on a CPU): the same log-probs and
    gradients within fp32's reordering."""
    torch._dynamo.reset()
    eager, compiled = _pair(save_model_dir(tmp_path / "m", arch="llama"))
    batch = _batch()
    want, want_grads = _logprobs_and_grads(eager, batch)
    got, got_grads = _logprobs_and_grads(compiled, batch)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-4, rtol=1e-3, msg=name)
    torch._dynamo.reset()


@pytest.mark.parametrize("version, refused", [("2.4.1", True), ("2.1.0+cpu", True), ("2.5.0", False),
                                              ("2.13.0+cpu", False), ("3.0.0a0", False)])
def test_compile_needs_torch_2_5(version, refused):
    if refused:
        with pytest.raises(ConfigError, match=r"^model\.compile: needs torch >= 2\.5 \(this is " + re.escape(version)):
            check_compile_torch(version)
    else:
        check_compile_torch(version)


def test_an_old_torch_is_refused_when_the_config_is_read(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.4.0")
    with pytest.raises(ConfigError, match=r"model\.compile: needs torch >= 2\.5"):
        ModelConfig(name_or_path="m", compile=True)
    ModelConfig(name_or_path="m")  # not asked for: no check


def test_compile_is_part_of_a_run_only_when_set():
    plain = identity(TrainConfig(data="x.jsonl", model=ModelConfig(name_or_path="m")))
    off = identity(TrainConfig(data="x.jsonl", model=ModelConfig(name_or_path="m", compile=False)))
    compiled = identity(TrainConfig(data="x.jsonl", model=ModelConfig(name_or_path="m", compile=True)))
    assert "compile" not in plain["model"]  # runs recorded before the key keep their identity,
    assert off == plain  # and so do those recorded with the old default, false
    assert compiled["model"]["compile"] is True


@pytest.mark.parametrize(("compile", "device", "sharded", "processes", "torch_version", "on"), [
    (None, "cuda", False, 1, "2.11.0", True),  # null: on one CUDA GPU
    (None, "cpu", False, 1, "2.11.0", False),  # off on a CPU (the CPU records stay as they were)
    (None, None, False, 1, "2.11.0", False),  # no device named (a config read outside a run)
    (None, "cuda", True, 1, "2.11.0", False),  # not under FSDP (refused when asked for by name)
    (None, "cuda", False, 2, "2.11.0", False),  # not with several processes (untested there)
    (None, "cuda", False, 1, "2.4.1", False),  # not where one graph cannot serve every block
    (False, "cuda", False, 1, "2.11.0", False),
    (True, "cpu", False, 1, "2.11.0", True),
    (True, "cuda", False, 2, "2.11.0", True),  # asked for by name: the user's call
])
def test_compile_null_resolves_by_device(monkeypatch, compile, device, sharded, processes, torch_version, on):
    config = ModelConfig(name_or_path="m", compile=compile)
    monkeypatch.setattr(torch, "__version__", torch_version)
    assert config.compile_on(device, sharded, processes) is on


def test_compile_null_gives_way_to_selective_checkpointing_asked_for():
    """The two are refused together by name; left at null on a GPU, compile yields."""
    config = ModelConfig(name_or_path="m", selective_checkpointing=True)
    assert config.compile_on("cuda") is False and config.selective_on("cuda") is True


def test_decoder_compiled_says_what_compile_decoder_did(build_model, counted):
    model = build_model("gpt2")
    assert not runtime.decoder_compiled(model)
    compile_decoder(model)
    assert runtime.decoder_compiled(model)
    linear = nn.Linear(2, 2)
    with pytest.warns(BadpoWarning):
        compile_decoder(linear, required=False)
    assert not runtime.decoder_compiled(linear)  # so its reference cache is not keyed as compiled


def test_load_model_compiles_only_when_asked_or_on_a_gpu(save_model_dir, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(runtime, "compile_decoder", lambda model, required=True: calls.append((model, required)))
    folder = save_model_dir(tmp_path / "m", arch="llama")
    load_model(ModelConfig(name_or_path=str(folder)), LoraSettings(), "no", device_type="cpu")
    load_model(ModelConfig(name_or_path=str(folder), compile=False), LoraSettings(), "no", device_type="cuda")
    assert calls == []
    model = load_model(ModelConfig(name_or_path=str(folder), compile=True), LoraSettings(), "no")
    assert calls == [(model, True)]
    model = load_model(ModelConfig(name_or_path=str(folder)), LoraSettings(), "no", device_type="cuda")
    assert calls[1:] == [(model, False)]  # null on a GPU: compiled, but not required


def test_a_model_without_blocks_trains_uncompiled_unless_compile_was_asked_for():
    with pytest.warns(BadpoWarning, match=r"^model\.compile: Linear has no list of decoder blocks to compile; "
                                          r"training it uncompiled"):
        compile_decoder(nn.Linear(2, 2), required=False)
    with pytest.raises(ConfigError, match=r"model\.compile: Linear has no list of decoder blocks"):
        compile_decoder(nn.Linear(2, 2))


def test_decoder_blocks_are_the_list_nearest_the_top(build_model):
    llama, gpt2 = build_model("llama"), build_model("gpt2")
    assert decoder_blocks(llama) is llama.model.layers and decoder_blocks(gpt2) is gpt2.transformer.h

    class Block(nn.Module):  # a mixture of experts: a longer list inside every block
        def __init__(self):
            super().__init__()
            self.experts = nn.ModuleList(nn.Linear(2, 2) for _ in range(8))

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(4, 2)
            self.layers = nn.ModuleList(Block() for _ in range(3))

    stack = Stack()
    assert decoder_blocks(stack) is stack.layers
    with pytest.raises(ConfigError, match=r"model\.compile: Linear has no list of decoder blocks"):
        decoder_blocks(nn.Linear(2, 2))


def test_compile_decoder_compiles_every_block(build_model, counted):
    model = build_model("gpt2")
    compile_decoder(model)
    assert all(block._compiled_call_impl is not None for block in model.transformer.h)


def test_the_reference_cache_is_keyed_apart_only_when_compiled():
    tokenizer = build_tokenizer()
    config = TrainConfig(data="x", model=ModelConfig(name_or_path="m"))
    plain = reference_identity(config, tokenizer, "no", torch.float32, compiled=False)
    compiled = reference_identity(config, tokenizer, "no", torch.float32, compiled=True)
    assert "compile" not in plain  # a cache written before the key keeps its name
    assert compiled == {**plain, "compile": True} and cache_key(compiled) != cache_key(plain)


def test_a_compile_resolved_at_run_time_keys_the_reference_cache(save_model_dir, tmp_path, counted, monkeypatch):
    """``model.compile`` null is resolved by the run's device and processes (here as a GPU would
    resolve it), and the reference cache names the compile that happened."""
    save_model_dir(tmp_path / "model", "gpt2")
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    asked = []

    def as_on_a_gpu(self, device_type, sharded=False, processes=1):
        asked.append((device_type, sharded, processes))
        return True

    monkeypatch.setattr(ModelConfig, "compile_on", as_on_a_gpu)
    run = json.loads((train(make_config(tmp_path, "resolved", "steps=1")) / "run.json").read_text())
    assert asked[0] == ("cpu", False, 1)
    assert run["reference_cache"]["compile"] is True
    monkeypatch.undo()
    plain = json.loads((train(make_config(tmp_path, "plain", "steps=1")) / "run.json").read_text())
    assert "compile" not in plain["reference_cache"]  # null on a CPU: eager, the cache as before
