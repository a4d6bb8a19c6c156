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
    said = r"^model: cannot load .*its weights are no pickle of tensors .*: a damaged file, or one holding more"
    with pytest.raises(ConfigError, match=said):
        from_pretrained(AutoModelForCausalLM, str(folder), "model", complete=True)
    (folder / "pytorch_model.bin").write_bytes(b"garbage")  # a damaged file reads the same, not as a threat
    with pytest.raises(ConfigError, match=said):
        from_pretrained(AutoModelForCausalLM, str(folder), "model", complete=True)


@pytest.mark.parametrize("damage", ["truncated", "lying"])
def test_a_damaged_safetensors_file_is_one_line_naming_it(tmp_path, save_model_dir, damage):
    """A header cut short (a copy that stopped), or one whose offsets point past the data (a file
    edited by hand): safetensors' own error, once, in the line that names the key and the folder."""
    import struct

    from transformers import AutoModelForCausalLM

    folder = save_model_dir(tmp_path / "policy", "gpt2")
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    if damage == "truncated":
        weights.write_bytes(data[:20])
    else:
        size = struct.unpack("<Q", data[:8])[0]
        header = data[8:8 + size].replace(b'"data_offsets":[0,', b'"data_offsets":[7,', 1)
        weights.write_bytes(data[:8] + header + data[8 + size:])
    with pytest.raises(ConfigError, match=r"^model: cannot load .*policy.* \(a damaged safetensors file: "):
        from_pretrained(AutoModelForCausalLM, str(folder), "model", complete=True)


class _Unreachable:
    """A loader whose Hub cannot be reached (transformers' own words)."""

    @staticmethod
    def from_pretrained(name, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them "
                      "in the cached files.")


def test_a_hub_id_out_of_reach_points_to_the_model_that_needs_no_network(tmp_path):
    with pytest.raises(ConfigError, match=r"^model.name_or_path: cannot load 'Qwen/Qwen2.5-0.5B-Instruct' "
                                          r"\(We couldn't connect.*\); without the Hub, "
                                          r"model.name_or_path=smollm2-135m-instruct"):
        from_pretrained(_Unreachable, "Qwen/Qwen2.5-0.5B-Instruct", "model.name_or_path")
    (tmp_path / "local").mkdir()
    with pytest.raises(ConfigError) as local:  # a folder of one's own: no pointer to another model
        from_pretrained(_Unreachable, str(tmp_path / "local"), "model.name_or_path")
    assert "without the Hub" not in str(local.value)
