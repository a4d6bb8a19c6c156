"""``fsdp: true``: the policy sharded by FSDP2 over two gloo CPU processes trains as one process does
on the same global batch (one process: micro-batch 4 x accumulation 2; two: micro-batch 4 each;
and 2 x 4 against 2 x 2 each), a sharded run stopped and resumed equals the uninterrupted one bit
for bit, and what it cannot do is refused in one line before anything loads.

The workers check at every step that the policy they train holds DTensor shards of half its
weights each, so a run that fell back to DDP (whole weights on both processes) fails the test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError
from badpo.engine.config_checks import check_train
from badpo.engine.runtime import check_sharding
from badpo.engine.train import train
from badpo.run_folder.identity import identity
from fixtures.engine import assert_same_run, free_port, judgment_rows, log_records, make_config, write_jsonl

CHECKPOINT_NAMES = {"config.yaml", "policy_trainable_0.safetensors", "state.json", "state.safetensors",
                    "rng-0.json", "rng-0.safetensors", "rng-1.json", "rng-1.safetensors"}


def _sharded_worker(rank: int, world: str, port: int, overrides: tuple[str, ...]) -> None:
    """Train as process ``rank`` of two, writing per step (DTensor?, local weights, whole weights)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE="2", ACCELERATE_USE_CPU="true")
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from badpo.engine import loop

    seen, step = [], loop.train_step

    def checked_step(run, index):
        params = list(run.policy.parameters())
        switch, offs = run.policy.set_requires_gradient_sync, []

        def counted(on: bool, **kwargs):
            offs.append(not on)
            return switch(on, **kwargs)

        run.policy.set_requires_gradient_sync = counted  # count the micro-batches that skip the sync
        try:
            result = step(run, index)
        finally:
            del run.policy.set_requires_gradient_sync
        seen.append([all(isinstance(p, DTensor) for p in params),
                     sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in params),
                     sum(p.numel() for p in params), sum(offs)])
        return result

    loop.train_step = checked_step
    train(make_config(Path(world), "two", *overrides))
    (Path(world) / f"sharding-{rank}.json").write_text(json.dumps(seen))
    dist.barrier()  # rank 0 may still be writing; tear down together (a rank that left
    dist.destroy_process_group()  # first aborted once: 'terminate called without an active exception')


# micro 2: two accumulation passes on each process (one process: four), the first without a gradient sync
@pytest.mark.parametrize("micro", [4, 2])
def test_fsdp_on_two_gloo_processes_matches_one_process(tmp_path, save_model_dir, micro):
    save_model_dir(tmp_path / "model", "gpt2")
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    # max_grad_norm 0.1: every step clips (the norms are near 0.5), through the DTensor gradients
    # one forward a micro-batch on both sides (FSDP's only way): grouped forwards add float noise that
    # Adam grows past the comparison's tolerance within a few steps
    common = ("steps=10", f"micro_batch_size={micro}", "method=ba_dpo_shared_mean", "bias.init=offline",
              "optim.max_grad_norm=0.1", "runtime.length_groups=1")
    one = train(make_config(tmp_path, "one", *common, f"cache_dir={tmp_path / 'cache1'}"))
    mp.spawn(_sharded_worker, nprocs=2, join=True, args=(
        str(tmp_path), free_port(), (*common, "fsdp=true", f"cache_dir={tmp_path / 'cache2'}")))
    two = tmp_path / "two"
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"sharding-{rank}.json").read_text())
        assert len(seen) == 10
        for sharded, local, whole, sync_off in seen:
            assert sharded and local < 0.6 * whole, (rank, local, whole)
            assert sync_off == 4 // micro - 1  # every micro-batch but the last skips the reduce-scatter
    losses = [[r["loss"] for r in log_records(folder)] for folder in (one, two)]
    assert len(losses[1]) == 10 and [r["judgments"] for r in log_records(two)] == [8] * 10
    gap = max(abs(a - b) for a, b in zip(*losses))
    print(f"micro-batch {micro}: largest loss difference over 10 steps: {gap:.3g}")
    assert gap <= 1e-5
    assert_same_run(one, two)  # gradient norms, the gathered policy and theta


def _runs_worker(rank: int, world: str, port: int, runs: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """Train each of ``runs`` (folder, overrides) in turn as process ``rank`` of two."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE="2", ACCELERATE_USE_CPU="true")
    import torch.distributed as dist

    for name, overrides in runs:
        train(make_config(Path(world), name, *overrides))
    dist.barrier()  # tear down together, as _sharded_worker does
    dist.destroy_process_group()


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


def test_a_sharded_run_stopped_and_resumed_equals_the_uninterrupted_one(tmp_path, save_model_dir):
    """Stopped after step 3 of 6 and resumed, a sharded run's log, policy, theta and last checkpoint
    (AdamW's moments gathered whole, theta and its Adam, each process's RNG) equal the uninterrupted
    run's bit for bit, and the two folders hold the same files; the checkpoint holds whole tensors,
    as a DDP run's."""
    save_model_dir(tmp_path / "model", "gpt2")
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    sharded = ("fsdp=true", "steps=6", "save_every=3", "micro_batch_size=4", "runtime.length_groups=1",
               "method=ba_dpo_shared_mean", "bias.init=offline")
    for runs in ((("full", sharded), ("parts", (*sharded, "stop_after_steps=3"))),
                 (("parts", (*sharded, "resume_from=latest")),)):  # resumed by fresh processes
        mp.spawn(_runs_worker, nprocs=2, join=True, args=(str(tmp_path), free_port(), runs))
    full, parts = tmp_path / "full", tmp_path / "parts"
    assert _files(full) == _files(parts)
    records = [[{k: v for k, v in r.items() if k != "elapsed_s"} for r in log_records(run)] for run in (full, parts)]
    assert len(records[0]) == 6 and records[0] == records[1]
    for name in sorted(_files(full)):
        if name.endswith(".safetensors"):
            a, b = load_file(full / name), load_file(parts / name)
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
        elif name.startswith("checkpoints/") and name.endswith(".json"):
            assert (full / name).read_text() == (parts / name).read_text(), name
    assert torch.equal(BiasChannel.load(full / "theta.json").theta(), BiasChannel.load(parts / "theta.json").theta())
    checkpoint = full / "checkpoints" / "step-000006"
    assert {p.name for p in checkpoint.iterdir()} == CHECKPOINT_NAMES
    saved = load_file(checkpoint / "policy_trainable_0.safetensors")
    final = load_file(full / "policy" / "model.safetensors")
    assert all(torch.equal(saved[k], final[k.removeprefix("model.")]) for k in saved)  # whole, as gathered at the end
    moments = load_file(checkpoint / "state.safetensors")
    shapes = sorted(moments[k].shape for k in moments if k.startswith("states/optimizer/") and k.endswith("/exp_avg"))
    assert shapes == sorted(weight.shape for weight in saved.values())


def _config(tmp_path: Path, *overrides: str):
    return make_config(tmp_path, "run", "fsdp=true", *overrides)


@pytest.mark.parametrize("overrides", [("lora.enabled=true",), ("method=em_dpo",), ("model.compile=true",),
                                       ("runtime.length_groups=2",), ("model.selective_checkpointing=true",)])
def test_what_fsdp_cannot_do_is_refused_in_one_line(tmp_path, overrides):
    with pytest.raises(ConfigError, match="^fsdp: ") as error:
        check_train(_config(tmp_path, *overrides))
    assert "\n" not in str(error.value)


def test_fsdp_takes_checkpoints(tmp_path):
    check_train(_config(tmp_path, "steps=4", "save_every=2", "stop_after_steps=2", "resume_from=latest"))


@pytest.mark.parametrize("kind, processes, precision", [("NO", 1, "no"), ("MULTI_GPU", 2, "no"),
                                                        ("MULTI_CPU", 2, "bf16")])
def test_fsdp_needs_two_cpu_processes_in_fp32(kind, processes, precision):
    accelerator = SimpleNamespace(distributed_type=SimpleNamespace(name=kind), num_processes=processes,
                                  mixed_precision=precision)
    with pytest.raises(ConfigError, match="^fsdp: ") as error:
        check_sharding(accelerator)
    assert "\n" not in str(error.value)


def test_fsdp_enters_a_runs_identity_only_when_set(tmp_path):
    assert "fsdp" not in identity(make_config(tmp_path, "run"))
    assert identity(_config(tmp_path))["fsdp"] is True
