"""Two CPU processes (gloo) give the same run as one process on the same global batch.

One process runs micro-batch 4 x accumulation 2; two processes run micro-batch 4 each, so every
step sees the same 8 items. theta lives outside DDP and is averaged by hand: if that were missing
(or a sum), theta's gradient norm and its values would differ.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

from badpo.engine.train import train
from fixtures.engine import assert_same_run, judgment_rows, log_records, make_config, write_jsonl


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world: str, port: int, overrides: tuple[str, ...]) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE="2", ACCELERATE_USE_CPU="true")
    from pathlib import Path

    import torch.distributed as dist

    train(make_config(Path(world), "two", *overrides))
    dist.barrier()  # rank 0 may still be writing; tear down together (a rank that left
    dist.destroy_process_group()  # first aborted once: 'terminate called without an active exception')


def test_two_gloo_processes_match_one_process(tmp_path, save_model_dir):
    save_model_dir(tmp_path / "model", "gpt2")
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    common = ("steps=3", "micro_batch_size=4", "method=ba_dpo_shared_mean", "bias.init=offline")
    one = train(make_config(tmp_path, "one", *common, f"cache_dir={tmp_path / 'cache1'}"))
    mp.spawn(_worker, args=(str(tmp_path), _free_port(), (*common, f"cache_dir={tmp_path / 'cache2'}")),
             nprocs=2, join=True)
    two = tmp_path / "two"
    assert_same_run(one, two)
    assert [r["judgments"] for r in log_records(two)] == [8, 8, 8]
    cached = [load_file(next((tmp_path / c).glob("*.safetensors")))["logps"]
              for c in ("cache1", "cache2")]
    torch.testing.assert_close(cached[0], cached[1], rtol=0, atol=1e-6)  # sharded reference pass


@pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")  # fixture labels
@pytest.mark.parametrize("mode", ["every_step", "final"])
def test_the_level_step_is_the_same_on_two_processes(tmp_path, save_model_dir, mode):
    """bias.trusted_level: each process sees its own judgments (every_step: the step's margins;
    final: its share of the last pass); summed before the solve, both hold the one-process level."""
    save_model_dir(tmp_path / "model", "gpt2")
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows(12, 4))
    common = ("steps=3", "micro_batch_size=4", "bias.trusted=[ann1]", f"bias.trusted_level={mode}")
    one = train(make_config(tmp_path, "one", *common, f"cache_dir={tmp_path / 'cache1'}"))
    mp.spawn(_worker, args=(str(tmp_path), _free_port(), (*common, f"cache_dir={tmp_path / 'cache2'}")),
             nprocs=2, join=True)
    assert_same_run(one, tmp_path / "two")
    levels = [json.loads((folder / "run.json").read_text())["trusted_level"] for folder in (one, tmp_path / "two")]
    assert levels[0]["level_shift"]["signed"] == pytest.approx(levels[1]["level_shift"]["signed"], abs=1e-5)


def test_the_fsdp_config_for_gpus_is_an_accelerate_fsdp2_config():
    """configs/accelerate_fsdp_gpu.yaml is what docs/scaling.md hands to accelerate for FSDP on GPUs
    (accelerate offers no FSDP on CPU, so it cannot run here): it must load as accelerate's own
    config, FSDP version 2, with a whole (not sharded) saved state dict that badpo's outputs need."""
    from pathlib import Path

    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import DistributedType

    path = Path(__file__).parents[2] / "configs" / "accelerate_fsdp_gpu.yaml"
    config = load_config_from_file(str(path))
    assert config.distributed_type == DistributedType.FSDP and not config.use_cpu
    assert config.fsdp_config["fsdp_version"] == 2
    assert config.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"


def test_a_world_size_accelerate_does_not_take_up_is_a_one_line_config_error(monkeypatch):
    """Plain torchrun on CPU without ACCELERATE_USE_CPU: accelerate runs one process while
    WORLD_SIZE says two, so each would train alone. The command line prints a ConfigError in one
    line (a RuntimeError was a traceback on every process), with the launch that works."""
    from badpo.core.config import ConfigError
    from badpo.engine.runtime import make_accelerator

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    with pytest.raises(ConfigError, match=r"^WORLD_SIZE=2 but accelerate runs 1 process\(es\).*"
                                          r"ACCELERATE_USE_CPU=true torchrun") as caught:
        make_accelerator("fp32")
    assert "\n" not in str(caught.value)
