"""Every stage that loads a model names its device and number of processes, so that
``model.compile`` null resolves as the run's (on for one CUDA GPU only): a spy stands in for
``load_model`` and stops the stage there, under an accelerator that claims three processes."""

from __future__ import annotations

import pytest

import badpo.engine.preference as preference
import badpo.engine.reward as reward
import badpo.engine.sft as sft
from badpo.core.config import apply_overrides, from_dict
from badpo.engine.runtime import make_accelerator
from badpo.engine.settings import RMConfig, SFTConfig
from fixtures.engine import judgment_rows, make_config, write_jsonl


class _Loaded(Exception):
    """Raised by the spy: the stage got as far as loading its model."""


class _ThreeProcesses:
    """A real CPU accelerator that claims three processes."""

    num_processes = 3

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    root = tmp_path_factory.mktemp("call_sites")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def _asked(monkeypatch, module, prepare) -> dict:
    seen = {}

    def spy(*args, **kwargs):
        seen.update(kwargs)
        raise _Loaded

    monkeypatch.setattr(module, "load_model", spy)
    with pytest.raises(_Loaded):
        prepare(_ThreeProcesses(make_accelerator("fp32", 1)))
    return seen


def _base(world, name: str) -> dict:
    return {"data": str(world / "judgments.jsonl"), "model": {"name_or_path": str(world / "model")},
            "runtime": {"num_threads": 1}, "report": {"progress_bar": False}, "output_dir": str(world / name)}


def test_preference_training_names_its_device_and_processes(world, monkeypatch):
    seen = _asked(monkeypatch, preference, lambda acc: preference.prepare_run(
        make_config(world, "t", "batch_size=24"), acc))  # a batch three processes can split
    assert (seen["device_type"], seen["processes"], seen["sharded"]) == ("cpu", 3, False)


def test_sft_names_its_device_and_processes(world, monkeypatch):
    config = from_dict(SFTConfig, apply_overrides({**_base(world, "s"), "source": "judgments"}, []))
    seen = _asked(monkeypatch, sft, lambda acc: sft.SFTStage().prepare(config, acc))
    assert (seen["device_type"], seen["processes"]) == ("cpu", 3)


def test_reward_model_names_its_device_and_processes(world, monkeypatch):
    config = from_dict(RMConfig, apply_overrides({**_base(world, "r"), "attributes": ["given:signed"],
                                        "batch_size": 6, "micro_batch_size": 2}, []))
    seen = _asked(monkeypatch, reward, lambda acc: reward.prepare_reward_run(config, acc))
    assert (seen["device_type"], seen["processes"]) == ("cpu", 3)
