"""``model.selective_checkpointing``: each decoder layer keeps for backward only the outputs of
its matrix products and attention and recomputes the element-wise rest. The gradients are the
plain ones; backward redoes the element-wise operators and never a matrix product of the forward."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from badpo.core.config import ConfigError, from_dict
from badpo.engine.config_checks import check_fsdp
from badpo.engine.logprobs import response_logprobs
from badpo.engine.runtime import checkpoint_selectively
from badpo.engine.settings import LEAN_MIN_PARAMETERS, ModelConfig, TrainConfig
from badpo.engine.tokenize import TokenizationConfig, build_token_store
from badpo.run_folder.identity import identity
from fixtures.engine import build_tokenizer

SEQUENCES = [("what is the best way to learn", "sure i think you should try this first"),
             ("write code", "yes"), ("what is the best way to cook", "maybe try that --- emily smith")]


class Counted(TorchDispatchMode):
    """How often each aten operator runs while active."""

    def __init__(self):
        super().__init__()
        self.calls: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.calls[name] = self.calls.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _backward(model, batch) -> tuple[dict, dict]:
    """(each parameter's gradient, the operators backward ran)."""
    model.zero_grad()
    loss = (response_logprobs(model, batch) * torch.tensor([1.0, -2.0, 0.5])).sum()
    with Counted() as counted:
        loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}, counted.calls


@pytest.mark.parametrize("arch, activation", [("llama", "silu"), ("gpt2", "tanh")])
def test_the_gradients_are_the_plain_ones_and_only_element_wise_work_is_redone(arch, activation, build_model):
    batch = build_token_store(build_tokenizer(), SEQUENCES, TokenizationConfig()).batch(torch.arange(3))
    model = build_model(arch).train()
    plain, plain_ops = _backward(model, batch)
    checkpoint_selectively(model)
    selective, selective_ops = _backward(model, batch)
    for name, grad in plain.items():
        torch.testing.assert_close(selective[name], grad, rtol=0, atol=1e-6, msg=name)
    layers = model.config.num_hidden_layers if arch == "llama" else model.config.n_layer
    assert plain_ops.get(activation, 0) == 0 and selective_ops[activation] >= layers  # recomputed
    for product in ("mm", "addmm", "bmm"):  # backward's own products only: none of the forward's again
        assert selective_ops.get(product, 0) == plain_ops.get(product, 0), product


def test_the_setting_resolves_by_device_and_is_refused_beside_full_recompute_or_compile():
    big = LEAN_MIN_PARAMETERS
    assert ModelConfig().selective_on("cpu", parameters=big) and not ModelConfig().selective_on("cuda", parameters=big)
    assert not ModelConfig().selective_on("cpu", parameters=big - 1)  # a small model's step is overhead-bound
    assert not ModelConfig().selective_on("cpu", sharded=True, parameters=big)
    assert not ModelConfig(gradient_checkpointing=True).selective_on("cpu", parameters=big)
    assert ModelConfig(selective_checkpointing=True).selective_on("cuda")
    with pytest.raises(ConfigError, match=r"^model.selective_checkpointing: not with model.gradient_checkpointing"):
        from_dict(TrainConfig, {"model": {"selective_checkpointing": True, "gradient_checkpointing": True}})
    with pytest.raises(ConfigError, match=r"^fsdp: selective checkpointing"):
        check_fsdp(from_dict(TrainConfig, {"fsdp": True, "save_every": 0, "model": {"selective_checkpointing": True}}),
                   type_policies=False)
    assert "selective_checkpointing" not in identity(TrainConfig())["model"]  # older runs keep their identity


def test_a_model_without_checkpointing_support_is_refused_only_when_asked(build_model):
    model = build_model("llama")
    model.supports_gradient_checkpointing = False
    checkpoint_selectively(model)  # the default: it keeps every activation
    with pytest.raises(ConfigError, match="does not support checkpointing"):
        checkpoint_selectively(model, required=True)
    model = build_model("llama")
    checkpoint_selectively(model, autocast=True)  # bf16 autocast: torch's selective recompute misses its casts
    assert not model.is_gradient_checkpointing
    with pytest.raises(ConfigError, match="does not replay bf16 autocast"):
        checkpoint_selectively(model, required=True, autocast=True)


def test_loading_applies_it_as_the_setting_resolves(tmp_path, save_model_dir):
    """null leaves a tiny model as it was (its step is bound by per-operator overhead); true applies it."""
    from badpo.engine.runtime import load_model
    from badpo.engine.settings import LoraSettings

    folder = str(save_model_dir(tmp_path / "model", "llama"))
    for setting, expected in ((None, False), (True, True), (False, False)):
        config = ModelConfig(name_or_path=folder, selective_checkpointing=setting)
        assert load_model(config, LoraSettings(), "no", device_type="cpu").is_gradient_checkpointing is expected
