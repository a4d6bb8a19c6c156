"""A checkpoint runs no code when it is resumed (issue 21, item 1).

accelerate's ``load_state`` unpickled the checkpoint's ``custom_checkpoint_N.pkl`` (and optimizer
and RNG pickles), so a file planted there ran code through ``badpo train ... resume_from=latest``
and through ``badpo experiment``, which resumes by itself. A checkpoint is now JSON + safetensors
(badpo.core.state_io, badpo.engine.checkpoint), and one holding any other file is refused before
anything is read. The payload here creates a marker file when unpickled (``open(marker, "w")``,
a stand-in for ``os.system``): the tests assert that it is never created, that the refusal is one
line, and that the new format still resumes bit for bit (RNG included: the model has dropout).
"""

from __future__ import annotations

import io
import math
import os
import random
import shutil
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

from badpo.cli import main
from badpo.core.config import ConfigError, dump_yaml
from badpo.core.notices import BadpoWarning
from badpo.core.state_io import join_state, read_tree, split_state, tree_text
from badpo.engine.checkpoint import check_checkpointing, list_checkpoints, rng_state, set_rng_state
from badpo.engine.train import train
from fixtures.engine import (
    VOCAB,
    assert_same_run,
    build_tokenizer,
    judgment_rows,
    log_records,
    make_config,
    write_jsonl,
)

CHECKPOINT_FILES = {"config.yaml", "policy_trainable_0.safetensors", "state.json", "state.safetensors",
                    "rng-0.json", "rng-0.safetensors"}


class Payload:
    """Unpickling it runs ``open(marker, "w")``, which creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def payload_bytes(marker: Path) -> bytes:
    """The payload as ``torch.save`` writes it (what accelerate's ``torch.load`` reads)."""
    buffer = io.BytesIO()
    torch.save(Payload(marker), buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("checkpoint_safety")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    torch.manual_seed(0)  # a tiny GPT-2 with dropout: a resume is exact only if the RNG is restored
    GPT2LMHeadModel(GPT2Config(vocab_size=len(VOCAB), n_positions=128, n_embd=32, n_layer=2, n_head=2,
                               resid_pdrop=0.2, embd_pdrop=0.2, attn_pdrop=0.2, bos_token_id=2,
                               eos_token_id=3)).save_pretrained(root / "dropout_model")
    build_tokenizer().save_pretrained(root / "dropout_model")
    return root


def dropout(world: Path) -> tuple[str, ...]:
    """Overrides training the tiny GPT-2 with dropout 0.2."""
    return "model.disable_dropout=false", f"model.name_or_path={world / 'dropout_model'}"


def test_the_payload_is_live(tmp_path):
    """The planted file would run code if unpickled: so an absent marker means it was not."""
    torch.load(io.BytesIO(payload_bytes(tmp_path / "ran")), weights_only=False).close()
    assert (tmp_path / "ran").exists()


def one_error(capsys, argv: list[str]) -> str:
    """Run ``badpo ARGV`` expecting a user error (exit 2, no traceback) and return its one line
    (the model loader's progress bars, also on stderr, aside)."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(f"badpo {argv[0]}:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------ the state helper
def test_state_round_trip_keeps_every_value_and_type(tmp_path):
    state = {
        "ints": [0, -7, 2**70], "floats": [0.1, -0.0, 1e-300, math.inf, -math.inf, math.nan],
        "flags": (True, False, None), "text": "ünïcode $tensor", "empty": {}, "nested": [[], ()],
        "by_int": {0: "a", 1: {"deep": [1.5]}, "0": "string zero"}, "$dollar": 1,
        "tensors": {"f32": torch.randn(3, 4), "bf16": torch.randn(2).bfloat16(),
                    "i64": torch.arange(5), "u8": torch.tensor([0, 255], dtype=torch.uint8),
                    "bool": torch.tensor([True, False]), "scalar": torch.tensor(3.0),
                    "strided": torch.randn(4, 3).t()},
        "shared": [torch.ones(2)] * 2,
    }
    tree, tensors = split_state(state, "s")
    save_file(tensors, tmp_path / "t.safetensors")
    (tmp_path / "t.json").write_text(tree_text(tree))
    back = join_state(read_tree((tmp_path / "t.json").read_text()), load_file(tmp_path / "t.safetensors"))
    assert back["ints"] == state["ints"] and back["flags"] == (True, False, None)
    assert back["floats"][:5] == state["floats"][:5] and math.isnan(back["floats"][5])
    assert math.copysign(1.0, back["floats"][1]) == -1.0
    assert back["text"] == state["text"] and back["empty"] == {} and back["nested"] == [[], ()]
    assert back["by_int"] == state["by_int"] and list(back["by_int"]) == [0, 1, "0"]
    assert back["$dollar"] == 1 and isinstance(back["nested"][1], tuple)
    for name, value in state["tensors"].items():
        assert back["tensors"][name].dtype == value.dtype and torch.equal(back["tensors"][name], value), name
    assert all(torch.equal(t, torch.ones(2)) for t in back["shared"])
    assert "NaN" not in tree_text(tree) and "Infinity" not in tree_text(tree)  # strict JSON


def test_optimizer_and_python_rng_states_survive_the_round_trip():
    """Int-keyed optimizer state and tuples: a string key would silently drop Adam's moments."""
    params = [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(2))]
    adam = torch.optim.AdamW(params, betas=(0.8, 0.9))
    for p in params:
        p.grad = torch.randn_like(p)
    adam.step()
    back = join_state(*_through_text(split_state({"adam": adam.state_dict(), "py": random.getstate()})))
    fresh = torch.optim.AdamW([torch.nn.Parameter(p.detach().clone()) for p in params])
    fresh.load_state_dict(back["adam"])
    assert fresh.param_groups[0]["betas"] == (0.8, 0.9)
    for key in (0, 1):
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(fresh.state_dict()["state"][key][name], adam.state_dict()["state"][key][name])
    random.setstate(back["py"])  # needs the tuples back


def _through_text(split):
    tree, tensors = split
    return read_tree(tree_text(tree)), tensors


def test_the_state_helper_refuses_what_it_never_writes():
    with pytest.raises(TypeError, match="state a/b: cannot save a object without pickle"):
        split_state({"a": {"b": object()}})
    tree, tensors = split_state({"t": torch.ones(1)})
    for bad, message in [({"$eval": "x"}, "unknown tag"), ({"$tensor": "nope"}, "no tensor named"),
                         ({"$float": "1e999"}, "not a non-finite float"),
                         ({"$tensor": "t", "other": 1}, "unknown tag")]:
        with pytest.raises(ValueError, match=message):
            join_state({"t": {"$tensor": "t"}, "x": bad}, tensors)
    with pytest.raises(ValueError, match="tensors no entry refers to"):
        join_state({}, tensors)
    with pytest.raises(ValueError, match="NaN is not JSON"):
        read_tree('{"x": NaN}')
    assert torch.equal(join_state(tree, tensors)["t"], torch.ones(1))


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def test_rng_states_are_restored_exactly():
    _seed(1)
    np.random.randn()  # numpy keeps a cached gaussian: it is part of the state
    saved = join_state(*_through_text(split_state(rng_state())))
    drawn = (random.random(), np.random.rand(3).tolist(), np.random.randn(), torch.rand(3))
    _seed(2)
    set_rng_state(saved)
    again = (random.random(), np.random.rand(3).tolist(), np.random.randn(), torch.rand(3))
    assert drawn[:3] == again[:3] and torch.equal(drawn[3], again[3])


# ------------------------------------------------------------------ what a checkpoint holds
@pytest.fixture(scope="module")
def stopped(world) -> tuple[Path, Path]:
    """(config file, output folder) of a run stopped with a checkpoint at step 2 of 4, by the CLI."""
    config = world / "stopped.yaml"
    dump_yaml(make_config(world, "stopped", "steps=4", "micro_batch_size=4", "stop_after_steps=2"), config)
    assert main(["train", "-c", str(config)]) == 0
    return config, world / "stopped"


def test_a_checkpoint_holds_json_and_safetensors_only(stopped):
    _, out = stopped
    checkpoint = list_checkpoints(out)[-1]
    assert {p.name for p in checkpoint.iterdir()} == CHECKPOINT_FILES
    for path in checkpoint.iterdir():
        head = path.read_bytes()[:2]
        assert head not in (b"\x80\x02", b"\x80\x04", b"\x80\x05", b"PK"), path  # no pickle, no torch.save
    saved = read_tree((checkpoint / "state.json").read_text())
    assert saved["format"] == "badpo.checkpoint/1"
    assert set(saved["states"]) == {"training", "optimizer", "scheduler", "theta", "theta_optimizer"}
    assert saved["states"]["training"] == {"step": 2}


@pytest.mark.parametrize("planted", ["custom_checkpoint_0.pkl", "random_states_0.pkl", "optimizer.bin",
                                     "scheduler.pt", "pytorch_model.pth", "notes.txt"])
def test_a_planted_file_is_refused_by_badpo_train_and_never_runs(stopped, planted, tmp_path, cli_error):
    config, out = stopped
    checkpoint = list_checkpoints(out)[-1]
    marker = tmp_path / "marker"
    (checkpoint / planted).write_bytes(payload_bytes(marker))
    try:
        line = cli_error(["train", "-c", str(config), "resume_from=latest"])
        assert planted in line and "could run code" in line, line
        line = cli_error(["train", "-c", str(config), f"resume_from={checkpoint}"])
        assert planted in line and "could run code" in line, line
    finally:
        (checkpoint / planted).unlink()
    assert not marker.exists()


@pytest.mark.parametrize("replaced", sorted(CHECKPOINT_FILES - {"config.yaml"}))
def test_a_pickle_under_a_known_name_is_a_parse_error_and_never_runs(stopped, replaced, tmp_path,
                                                                       capsys):
    config, out = stopped
    path = list_checkpoints(out)[-1] / replaced
    original, marker = path.read_bytes(), tmp_path / "marker"
    path.write_bytes(payload_bytes(marker))
    try:
        line = one_error(capsys, ["train", "-c", str(config), "resume_from=latest"])
    finally:
        path.write_bytes(original)
    assert replaced in line and not marker.exists(), line


@pytest.mark.slow
def test_a_planted_pickle_is_refused_by_badpo_experiment_and_never_runs(tmp_path, capsys, cli_training):
    """An arm killed after its first checkpoint is resumed by the runner itself; a pickle planted
    in that checkpoint stops the experiment with one line, and once removed the arm resumes."""
    argv = ["experiment", "tiny", f"output_dir={tmp_path}", "corpus.config.n_pairs=40",
            "reference.epochs=1.0", "train.steps=2", "train.save_every=1", "seeds=[42]",
            "arms=[{name: DPO, method: dpo}]", "tables=[{title: t, columns: [{header: KL, metric: kl}]}]",
            "plots.rates=[]", "evaluation.max_prompts=2", "evaluation.max_new_tokens=4",
            "evaluation.surnames=2", "evaluation.whole_signature_prompts=1",
            "train.report.progress_bar=false", "reference.report.progress_bar=false"]
    assert main(argv) == 0
    (arm,) = (tmp_path / "work").glob("dpo-seed42-*")
    for name in ("run.json", "theta.json"):  # killed after step 1: no outputs, no record
        (arm / name).unlink(missing_ok=True)
    shutil.rmtree(arm / "policy")
    shutil.rmtree(arm / "checkpoints" / "step-000002")
    (record,) = (tmp_path / "runs").glob("dpo-seed42-*.json")
    record.unlink()
    marker = tmp_path / "marker"
    planted = arm / "checkpoints" / "step-000001" / "custom_checkpoint_0.pkl"
    planted.write_bytes(payload_bytes(marker))
    line = one_error(capsys, argv)
    assert "custom_checkpoint_0.pkl" in line and "could run code" in line, line
    assert not marker.exists()
    planted.unlink()
    assert main(argv) == 0 and record.exists() and (arm / "run.json").exists()


# ------------------------------------------------------------------ resume stays exact
@pytest.mark.parametrize("method", ["ba_dpo_shared_mean", "group_dro_dpo"])
def test_resume_with_dropout_equals_an_uninterrupted_run(world, method):
    """Dropout draws from torch's RNG every step, so equality needs the RNG restored; theta and
    its Adam (ba_dpo_shared_mean) or the group weights (group_dro_dpo) are restored too."""
    common = ("steps=4", "micro_batch_size=4", f"method={method}",
              *dropout(world))
    full = train(make_config(world, f"full-{method}", *common))
    train(make_config(world, f"parts-{method}", *common, "save_every=1", "stop_after_steps=2"))
    resumed = train(make_config(world, f"parts-{method}", *common, "save_every=1", "resume_from=latest"))
    if method == "group_dro_dpo":  # no theta: compare the logs and the weights
        strip = [{k: v for k, v in r.items() if k != "elapsed_s"} for r in log_records(full)]
        assert strip == [{k: v for k, v in r.items() if k != "elapsed_s"} for r in log_records(resumed)]
        a, b = (load_file(out / "policy" / "model.safetensors") for out in (full, resumed))
        assert a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)
    else:
        assert_same_run(full, resumed, atol=0.0)


def test_resume_without_the_rng_would_differ(world, monkeypatch):
    """The dropout run above is a real test of the RNG: skipping its restore changes the run."""
    from badpo.engine import checkpoint

    common = ("steps=3", "micro_batch_size=4", *dropout(world))
    full = train(make_config(world, "rng-full", *common))
    train(make_config(world, "rng-parts", *common, "stop_after_steps=1"))
    monkeypatch.setattr(checkpoint, "set_rng_state", lambda state: torch.manual_seed(12345))
    resumed = train(make_config(world, "rng-parts", *common, "resume_from=latest"))
    assert log_records(full)[-1]["loss"] != log_records(resumed)[-1]["loss"]


def test_a_checkpoint_without_its_rng_state_resumes_saying_so(world):
    """Its RNG state deleted: the run resumes from the seed, with a line saying the file is missing
    and that the run will differ (not the many-processes reason it gave before)."""
    common = ("steps=2", "micro_batch_size=4")
    train(make_config(world, "rng-lost", *common, "stop_after_steps=1"))
    checkpoint = list_checkpoints(world / "rng-lost")[-1]
    for path in checkpoint.glob("rng-0.*"):
        path.unlink()
    with pytest.warns(BadpoWarning, match=r"no RNG state of process 0 \(rng-0\.json is missing: deleted since "
                                          r"the save\?\); .* differs from an uninterrupted one"):
        train(make_config(world, "rng-lost", *common, "resume_from=latest"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world: str, port: int, runs: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE="2", ACCELERATE_USE_CPU="true")
    import torch.distributed as dist

    for name, overrides in runs:
        train(make_config(Path(world), name, *overrides))
    dist.barrier()  # rank 0 may still be writing; tear down together (a rank that left
    dist.destroy_process_group()  # first aborted once: 'terminate called without an active exception')


@pytest.mark.slow
def test_two_processes_each_save_and_restore_their_rng(world):
    """Under DDP every process draws its own dropout masks: each saves its RNG and gets it back
    (without rank 1's, the weights differ by ~3e-3). One spawn runs every run; its first DDP run
    differs from later ones in the last float bits whatever is checkpointed, so a one-step warm-up
    goes first and the compared runs are exact."""
    common = ("steps=4", "micro_batch_size=4", *dropout(world))
    runs = (("ddp-warmup", ("steps=1", "micro_batch_size=4")), ("ddp-full", common),
            ("ddp-parts", (*common, "stop_after_steps=2")), ("ddp-parts", (*common, "resume_from=latest")))
    mp.spawn(_worker, args=(str(world), _free_port(), runs), nprocs=2, join=True)
    checkpoint = list_checkpoints(world / "ddp-parts")[-1]
    assert {p.name for p in checkpoint.iterdir()} == CHECKPOINT_FILES | {"rng-1.json", "rng-1.safetensors"}
    assert_same_run(world / "ddp-full", world / "ddp-parts", atol=0.0)


# ------------------------------------------------------------------ sharded training
def test_checkpoints_are_refused_under_fsdp_and_deepspeed_only_when_asked_for(tmp_path):
    config = make_config(tmp_path, "x", "steps=4")
    for kind in ("FSDP", "DEEPSPEED"):
        accelerator = SimpleNamespace(distributed_type=SimpleNamespace(name=kind))
        check_checkpointing(accelerator, config, None)  # no checkpoint asked for: trains
        for asked, resume in [(make_config(tmp_path, "x", "steps=4", "save_every=2"), None),
                              (make_config(tmp_path, "x", "steps=4", "stop_after_steps=2"), None),
                              (config, tmp_path / "x" / "checkpoints" / "step-000002")]:
            with pytest.raises(ConfigError, match=f"save_every / stop_after_steps / resume_from: .*{kind}"):
                check_checkpointing(accelerator, asked, resume)
    for kind in ("NO", "MULTI_GPU", "MULTI_CPU"):
        accelerator = SimpleNamespace(distributed_type=SimpleNamespace(name=kind))
        check_checkpointing(accelerator, make_config(tmp_path, "x", "save_every=1"), None)
