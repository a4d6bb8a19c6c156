"""``model.compile``: the decoder compiled in place gives the eager log-probs and gradients, keeps the
parameters' names, and is part of a run's identity only when set.

Most tests trace through ``aot_eager`` (TorchDynamo and AOTAutograd, the graph capture a compile
does, without generating kernels), so they check what badpo controls in seconds; one test compiles
with the default backend (Inductor), as a user's run does."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from badpo.core.config import ConfigError
from badpo.engine import runtime
from badpo.engine.logprobs import response_logprobs
from badpo.engine.runtime import compile_decoder, decoder_blocks, load_model
from badpo.engine.settings import LoraSettings, ModelConfig, TrainConfig
from badpo.engine.tokenize import TokenizationConfig, build_token_store
from badpo.run_folder.identity import identity
from fixtures.engine import build_tokenizer

SEQUENCES = [
    ("what is the best way to learn", "sure i think you should try this first"),
    ("write code", "yes"),
    ("what is the best way to cook", "maybe try that --- emily smith"),
]


@pytest.fixture
def traced_only(monkeypatch):
    """torch.compile with the ``aot_eager`` backend: the capture without the code generation."""
    real = torch.compile

    def aot_eager(*args, **kwargs):
        kwargs.setdefault("backend", "aot_eager")
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "compile", aot_eager)
    torch._dynamo.reset()
    yield
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


def _pair(folder, lora: bool):
    lora_settings = LoraSettings(enabled=lora, rank=4, alpha=8.0)
    torch.manual_seed(0)  # the same LoRA A for both
    eager = load_model(ModelConfig(name_or_path=str(folder)), lora_settings, "no")
    torch.manual_seed(0)
    compiled = load_model(ModelConfig(name_or_path=str(folder), compile=True), lora_settings, "no")
    return eager, compiled


@pytest.mark.parametrize("lora", [False, True])
def test_compiled_decoder_gives_the_eager_logprobs_and_gradients(save_model_dir, tmp_path, traced_only, lora):
    folder = save_model_dir(tmp_path / "m", arch="llama")
    eager, compiled = _pair(folder, lora)
    decoder = (compiled.get_base_model() if lora else compiled).base_model
    assert all(block._compiled_call_impl is not None for block in decoder.layers)  # in place, not wrapped
    assert decoder._compiled_call_impl is None  # the blocks, not the mask building around them
    assert [n for n, _ in compiled.named_parameters()] == [n for n, _ in eager.named_parameters()]
    batch = _batch()
    want, want_grads = _logprobs_and_grads(eager, batch)
    got, got_grads = _logprobs_and_grads(compiled, batch)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert got_grads.keys() == want_grads.keys() and got_grads
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)
    # another padded length: the same graph (dynamic shapes), still the eager values
    short = {k: v[1:2, :6] for k, v in batch.items()}
    torch.testing.assert_close(response_logprobs(compiled, short), response_logprobs(eager, short),
                               atol=1e-5, rtol=1e-5)


def test_inductor_compiles_the_decoder_as_a_run_does(save_model_dir, tmp_path):
    """The default backend generates kernels (a C++ compiler on CPU): same log-probs within fp32's
    reordering."""
    torch._dynamo.reset()
    eager, compiled = _pair(save_model_dir(tmp_path / "m", arch="llama"), lora=False)
    batch = _batch()
    with torch.no_grad():
        torch.testing.assert_close(response_logprobs(compiled, batch), response_logprobs(eager, batch),
                                   atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()


def test_compile_needs_module_compile(monkeypatch):
    monkeypatch.delattr(nn.Module, "compile")
    with pytest.raises(ConfigError, match=r"model\.compile: needs torch >= 2\.2 .*model\.compile: false"):
        compile_decoder(nn.Linear(2, 2))


def test_compile_is_part_of_a_run_only_when_set():
    plain = identity(TrainConfig(data="x.jsonl", model=ModelConfig(name_or_path="m")))
    compiled = identity(TrainConfig(data="x.jsonl", model=ModelConfig(name_or_path="m", compile=True)))
    assert "compile" not in plain["model"]  # runs recorded before the key keep their identity
    assert compiled["model"]["compile"] is True


def test_load_model_compiles_only_when_asked(save_model_dir, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(runtime, "compile_decoder", calls.append)
    folder = save_model_dir(tmp_path / "m", arch="llama")
    load_model(ModelConfig(name_or_path=str(folder)), LoraSettings(), "no")
    assert calls == []
    model = load_model(ModelConfig(name_or_path=str(folder), compile=True), LoraSettings(), "no")
    assert calls == [model]


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
