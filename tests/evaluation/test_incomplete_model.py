"""A trained policy missing a weight is refused before any readout (issue 76 item 2): transformers
would initialise the weight afresh and the readouts would be wrong without a word."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file, save_file

from badpo.core.config import ConfigError
from badpo.engine.runtime import from_pretrained


def test_a_model_folder_missing_a_weight_is_refused_naming_it(tmp_path, save_model_dir):
    from transformers import AutoModelForCausalLM

    folder = save_model_dir(tmp_path / "policy", "gpt2")
    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    dropped = sorted(name for name in tensors if name.endswith("mlp.c_fc.weight"))[0]
    assert from_pretrained(AutoModelForCausalLM, str(folder), "model", complete=True) is not None
    save_file({k: v for k, v in tensors.items() if k != dropped}, weights, metadata={"format": "pt"})
    with pytest.raises(ConfigError, match=rf"^model: .* lacks 1 weight\(s\) its config needs \(.*{dropped}\)"):
        from_pretrained(AutoModelForCausalLM, str(folder), "model", complete=True)


class Payload:
    """An object a weights-only unpickler refuses (it is not a tensor)."""


def test_a_model_whose_only_weights_are_a_pickle_is_one_line(tmp_path, save_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    folder = save_model_dir(tmp_path / "policy", "gpt2")
    (folder / "model.safetensors").unlink()
    torch.save({"payload": Payload()}, folder / "pytorch_model.bin")
    with pytest.raises(ConfigError, match=r"^model: cannot load .*its weights are a pickle holding more than tensors"):
        from_pretrained(AutoModelForCausalLM, str(folder), "model", complete=True)
