"""Atomic checkpoints: ``output_dir/checkpoints/step-NNNNNN``, resumable bit for bit, and loaded
without running code.

accelerate's ``save_state`` pickles the optimizer, the RNG states and every object registered for
checkpointing, and ``load_state`` unpickles them: a file planted in a checkpoint folder ran code on
resume. So badpo writes its own format, of safetensors and JSON only (read back by parsers that
never execute anything), and names every file a checkpoint may hold:

* ``config.yaml``: the run's resolved config (its identity, checked before a resume);
* ``policy_trainable_0.safetensors``: the policy's *trainable* weights (the LoRA adapter under
  LoRA), keyed by the unwrapped model's names and reloaded strictly (a missing or unexpected
  weight is an error);
* ``state.json`` + ``state.safetensors``: every other state of the run by name (the policy's
  AdamW, the lr schedule, the step, theta and theta's Adam, the method's loss weights), each its
  ``state_dict`` split by :mod:`badpo.core.state_io` into a JSON tree and named tensors;
* ``rng-R.json`` + ``rng-R.safetensors``: the RNG states of process R (python ``random``, numpy,
  torch CPU, and CUDA where available), written and restored by each process.

A checkpoint holding any other file (a ``.pkl``, ``.bin``, ``.pt``, an accelerate checkpoint of an
older badpo, anything unknown) is refused before anything is read. The files are written into a
temporary folder renamed into place only when complete, so a killed run leaves either the old
checkpoints or the new one, never half of one.

A policy badpo shards itself (``fsdp: true``, FSDP2 on CPU processes) is checkpointed whole: its
weights and AdamW moments are gathered from the shards on every process and written by the main
one, so the folder is the one a DDP run writes; a resume cuts each process's shard back out of them.
Under accelerate's FSDP or DeepSpeed (GPUs only, so untested here) checkpoints are refused with an
error naming the options (:func:`check_checkpointing`).
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from badpo.core.config import ConfigError, dump_yaml
from badpo.core.notices import BadpoWarning
from badpo.core.state_io import join_state, read_tree, split_state, tree_text
from badpo.run_folder.layout import CHECKPOINT_POLICY_FILE, CHECKPOINT_RNG, CHECKPOINT_STATE, CHECKPOINTS, CONFIG_FILE
from badpo.run_folder.ownership import check_files
from badpo.theta.state import theta_parts

FORMAT = "badpo.checkpoint/1"
_NAME = re.compile(r"^step-(\d{6,})$")


class TrainingState:
    """The data position, saved with the checkpoint: steps completed (the schedule is a function
    of the step, so this is the whole position)."""

    def __init__(self) -> None:
        self.step = 0

    def state_dict(self) -> dict:
        return {"step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.step = int(state["step"])


@dataclasses.dataclass
class Contents:
    """What a checkpoint holds: the prepared policy (its trainable weights) and the objects with
    ``state_dict`` / ``load_state_dict``, by the name their state is saved under."""

    policy: nn.Module
    states: dict[str, Any]


def checkpoint_contents(run, state: TrainingState) -> Contents:
    """The checkpointed parts of a :class:`badpo.engine.loop.Run` and its step: the policy's, and
    theta's as :func:`badpo.theta.state.theta_parts` names them (BADPOTrainer saves the same)."""
    states = {"training": state, "optimizer": run.optimizer, "scheduler": run.scheduler,
              **theta_parts(run.bias, run.theta_optimizer, getattr(run, "cuts", None), run.weighting)}
    if getattr(run, "level", None) is not None:  # the level step's cached margins
        states["level"] = run.level
    return Contents(run.policy, states)


def check_checkpointing(accelerator, config, resume: Path | None) -> None:
    """Refuse checkpoints under accelerate's FSDP, DeepSpeed, ...: accelerate runs them on GPUs
    only, so badpo's gathering of their shards is untested (``fsdp: true`` shards on CPU processes,
    ``MULTI_CPU`` here, and is tested)."""
    kind = accelerator.distributed_type.name
    if kind == "NO" or kind.startswith("MULTI_"):
        return
    stops = config.stop_after_steps is not None and config.stop_after_steps < config.steps
    if config.save_every or stops or resume is not None:
        raise ConfigError(
            f"save_every / stop_after_steps / resume_from: badpo's checkpoints are untested under "
            f"accelerate's {kind} (it runs on GPUs only); set save_every=0, drop stop_after_steps and "
            "resume_from, or train under DDP (on CPU processes fsdp=true shards and checkpoints)")


def _trainable(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def _dtensor() -> type | tuple:
    """torch's DTensor, the parameters of a policy ``fsdp: true`` sharded (``()``, which nothing is
    an instance of, where torch lacks torch.distributed)."""
    if not torch.distributed.is_available():
        return ()
    from torch.distributed.tensor import DTensor

    return DTensor


def _whole(tree: Any, keep: bool) -> Any:
    """``tree`` with every DTensor gathered whole, one tensor at a time: a collective, so every process
    calls it on the same state in the same order; only the process that writes (``keep``) holds the
    whole tensors, on the CPU, the others drop each one as soon as it is gathered (three whole copies
    of the model, weights and AdamW's two moments, on every process would undo the sharding)."""
    if isinstance(tree, _dtensor()):
        whole = tree.full_tensor()
        return whole.cpu() if keep else None
    if isinstance(tree, dict):
        return {key: _whole(value, keep) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_whole(value, keep) for value in tree)
    return tree


def _saved_parts(accelerator, contents: Contents) -> tuple[dict, dict] | None:
    """(the trainable weights, every state by name) as the main process writes them (None on the
    others). Under ``fsdp: true`` every process gathers the shards, so the files hold the whole
    tensors a DDP run's hold."""
    weights = _trainable(accelerator.unwrap_model(contents.policy))
    sharded = any(isinstance(weight, _dtensor()) for weight in weights.values())
    if not (sharded or accelerator.is_main_process):
        return None
    states = {name: obj.state_dict() for name, obj in contents.states.items()}
    if sharded:
        with torch.no_grad():
            keep = accelerator.is_main_process
            weights, states = _whole(weights, keep), _whole(states, keep)
    return (weights, states) if accelerator.is_main_process else None


def _placed(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A whole saved tensor held as ``like`` is: this process's shard of it where ``like`` is a
    DTensor (cut here as FSDP cut the weight, no communication), else as it is."""
    if not isinstance(like, _dtensor()):
        return value
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(value.to(like.device), like.device_mesh, like.placements, src_data_rank=None)


def _placed_state(obj: Any, state: Any) -> Any:
    """An optimizer's saved state with each moment of a sharded parameter cut to this process's
    shard (the state is keyed by the parameters' order); any other state as it is."""
    if not isinstance(obj, torch.optim.Optimizer):
        return state
    params = [param for group in obj.param_groups for param in group["params"]]
    moments = {index: {key: _placed(value, params[index]) if isinstance(value, torch.Tensor)
                       and value.shape == params[index].shape else value for key, value in moment.items()}
               for index, moment in state["state"].items()}
    return {**state, "state": moments}


def _load_tensors(path: Path) -> dict[str, torch.Tensor]:
    """safetensors' parser (no code runs); a damaged file is a one-line error naming it."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.exists():
        raise FileNotFoundError(f"{path}: missing from the checkpoint")
    try:
        return load_file(path)
    except SafetensorError as error:
        raise ValueError(f"{path}: not a readable safetensors file ({error})") from None


def _load_policy(accelerator, policy: nn.Module, folder: Path) -> None:
    """Copy the saved trainable weights into ``policy``; a missing or unexpected one is an error."""
    path = folder / CHECKPOINT_POLICY_FILE
    saved, params = _load_tensors(path), _trainable(accelerator.unwrap_model(policy))
    if set(saved) != set(params):
        missing, extra = sorted(set(params) - set(saved)), sorted(set(saved) - set(params))
        raise ValueError(f"{path}: missing weights {missing[:5]}, unexpected {extra[:5]}")
    wrong = next((name for name, param in params.items() if saved[name].shape != param.shape), None)
    if wrong is not None:
        raise ValueError(f"{path}: {wrong} has shape {list(saved[wrong].shape)}, this run's model "
                         f"{list(params[wrong].shape)}: the checkpoint is of another model")
    _refuse_non_finite(path, saved)
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(_placed(saved[name], param))


def _tensors_in(tree: Any, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor of a nested state (dicts and lists), with its dotted path."""
    if isinstance(tree, torch.Tensor):
        yield prefix, tree
    elif isinstance(tree, dict):
        for key, value in tree.items():
            yield from _tensors_in(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            yield from _tensors_in(value, f"{prefix}.{i}" if prefix else str(i))


def _refuse_non_finite(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """A checkpoint of NaN or inf weights would train on NaN from its first step: refuse it."""
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{path}: {name} holds NaN or inf values (saved from a diverged run?); "
                             "refusing to resume from it: resume from an earlier checkpoint "
                             "(resume_from=PATH) or train again with overwrite=true")


def write_state_files(folder: Path, stem: str, state: Any) -> None:
    """``stem.json`` (the tree) and ``stem.safetensors`` (its tensors): a state saved without
    pickle (:mod:`badpo.core.state_io`)."""
    from safetensors.torch import save_file

    tree, tensors = split_state(state)
    save_file(tensors, folder / f"{stem}.safetensors")
    (folder / f"{stem}.json").write_text(tree_text(tree), encoding="utf-8")


def read_state_files(folder: Path, stem: str) -> Any:
    """The state :func:`write_state_files` wrote; a missing or damaged file is a one-line error
    naming it."""
    tensors, path = _load_tensors(folder / f"{stem}.safetensors"), folder / f"{stem}.json"
    try:
        return join_state(read_tree(path.read_text(encoding="utf-8")), tensors)
    except ValueError as error:  # json's and join_state's errors (bad UTF-8 too): name the file
        raise ValueError(f"{path}: not a readable checkpoint state ({error})") from None


def rng_state() -> dict:
    """This process's RNG states: python ``random``, numpy's global generator, torch CPU, CUDA."""
    _, key, pos, has_gauss, gauss = np.random.get_state()
    state = {"python": random.getstate(), "torch": torch.get_rng_state(),
             "numpy": {"key": torch.from_numpy(key.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "gauss": float(gauss)}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned (CUDA states of devices this machine lacks are
    dropped)."""
    random.setstate(state["python"])
    numpy = state["numpy"]
    np.random.set_state(("MT19937", numpy["key"].numpy().astype(np.uint32), numpy["pos"],
                         numpy["has_gauss"], numpy["gauss"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"][: torch.cuda.device_count()])


def checkpoint_path(output_dir: Path, step: int) -> Path:
    return output_dir / CHECKPOINTS / f"step-{step:06d}"


def save_checkpoint(accelerator, output_dir: Path, step: int, keep: int, config,
                    contents: Contents) -> Path:
    """Save ``contents`` and every process's RNG for ``step`` atomically, with the run's resolved
    ``config``; keep the newest ``keep`` checkpoints, this one always. Called on every process."""
    final = checkpoint_path(output_dir, step)
    temporary = final.with_name(f".tmp-{final.name}")
    if accelerator.is_main_process:
        if temporary.exists():
            shutil.rmtree(temporary)
        temporary.mkdir(parents=True)
    accelerator.wait_for_everyone()
    write_state_files(temporary, CHECKPOINT_RNG.format(rank=accelerator.process_index), rng_state())
    parts = _saved_parts(accelerator, contents)  # on every process: a sharded policy is gathered
    if accelerator.is_main_process:
        from safetensors.torch import save_file

        weights, states = parts
        save_file({k: v.detach().contiguous().cpu() for k, v in weights.items()}, temporary / CHECKPOINT_POLICY_FILE)
        write_state_files(temporary, CHECKPOINT_STATE, {"format": FORMAT, "states": states})
        dump_yaml(config, temporary / CONFIG_FILE)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        for path in temporary.iterdir():  # on disk before the rename publishes the checkpoint
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        if final.exists():  # the same step saved before (a resumed run): replace it
            shutil.rmtree(final)
        os.replace(temporary, final)
        others = [path for path in list_checkpoints(output_dir) if path != final]
        for old in others[: max(0, len(others) - (keep - 1))]:
            shutil.rmtree(old)
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(accelerator, checkpoint: Path, contents: Contents) -> None:
    """Restore ``contents`` and this process's RNG from ``checkpoint`` (on every process), after
    :func:`badpo.run_folder.ownership.check_files`; the saved states must be exactly the run's."""
    check_files(checkpoint)
    _load_policy(accelerator, contents.policy, checkpoint)
    saved = read_state_files(checkpoint, CHECKPOINT_STATE)
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise ValueError(f"{checkpoint / 'state.json'}: not a {FORMAT} state")
    states = saved["states"]
    if set(states) != set(contents.states):
        raise ValueError(f"{checkpoint}: holds the states {sorted(states)}, this run has "
                         f"{sorted(contents.states)}")
    # every saved state's tensors (theta, the optimizers' moments, the loss weights): a NaN in any
    # of them is a diverged run, whose first step would train on it
    _refuse_non_finite(checkpoint / f"{CHECKPOINT_STATE}.safetensors", dict(_tensors_in(states)))
    for name, obj in contents.states.items():
        obj.load_state_dict(_placed_state(obj, states[name]))
    rng = CHECKPOINT_RNG.format(rank=accelerator.process_index)
    if (checkpoint / f"{rng}.json").exists():
        set_rng_state(read_state_files(checkpoint, rng))
        return
    saved_by = len(list(checkpoint.glob("rng-*.json")))
    why = (f"saved by {saved_by} process(es)" if 0 < saved_by <= accelerator.process_index
           else f"{rng}.json is missing: deleted since the save?")
    warnings.warn(f"{checkpoint}: no RNG state of process {accelerator.process_index} ({why}); its RNG goes "
                  "on from the seed, so the resumed run differs from an uninterrupted one", BadpoWarning,
                  stacklevel=2)


def continue_from(accelerator, checkpoint: Path, policy: nn.Module, optimizer) -> None:
    """Start a new run where another run's ``checkpoint`` left its policy: copy in the trainable
    weights and the AdamW moments (and step counts); the new run keeps its own param groups (its
    learning-rate schedule), step, RNG and every other state. EM-DPO's type policies go on this
    way from round to round (:mod:`badpo.engine.mixture`). Called on every process."""
    check_files(checkpoint)
    _load_policy(accelerator, policy, checkpoint)
    saved = read_state_files(checkpoint, CHECKPOINT_STATE)
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or "optimizer" not in saved["states"]:
        raise ValueError(f"{checkpoint / 'state.json'}: not a {FORMAT} state with an optimizer")
    moments, current = saved["states"]["optimizer"], optimizer.state_dict()
    sizes = [len(group["params"]) for group in current["param_groups"]]
    if [len(group["params"]) for group in moments["param_groups"]] != sizes:
        raise ValueError(f"{checkpoint}: its optimizer holds other parameters than this run's")
    optimizer.load_state_dict({"state": moments["state"], "param_groups": current["param_groups"]})


def list_checkpoints(output_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first (temporary folders are not listed)."""
    folder = output_dir / CHECKPOINTS
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and _NAME.match(p.name)]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))


def refuse_linked_checkpoints(output_dir: Path) -> None:
    """A run never writes or deletes through a link: ``checkpoints/`` or a ``step-*`` in it that is a
    symbolic link is refused in one line before the run starts (a resume through a linked folder wrote
    new checkpoints into the folder it pointed at and deleted the ones it found there, issue 76)."""
    folder = output_dir / CHECKPOINTS
    linked = [folder] if folder.is_symlink() else [p for p in folder.iterdir() if p.is_symlink()] \
        if folder.is_dir() else []
    if linked:
        raise ConfigError(f"output_dir: {linked[0]} is a symbolic link to {os.readlink(linked[0])}; a run writes and "
                          "prunes its checkpoints inside its own folder only: remove the link (what it points at "
                          "stays) or choose another output_dir")


def resolve_resume(resume_from: str | None, output_dir: Path) -> Path | None:
    """The checkpoint to resume from: a path, ``latest`` (None if there is none yet), or None; a
    linked ``checkpoints/`` is refused first (:func:`refuse_linked_checkpoints`)."""
    refuse_linked_checkpoints(output_dir)
    if resume_from is None:
        return None
    if resume_from == "latest":
        found = list_checkpoints(output_dir)
        return found[-1] if found else None
    path = Path(resume_from)
    if not path.is_dir():
        raise FileNotFoundError(f"resume_from: no checkpoint folder at {resume_from!r}")
    return path


__all__ = ["FORMAT", "TrainingState", "Contents", "checkpoint_contents",
           "check_checkpointing", "save_checkpoint", "load_checkpoint", "continue_from",
           "list_checkpoints", "refuse_linked_checkpoints", "resolve_resume", "checkpoint_path", "rng_state",
           "set_rng_state", "write_state_files", "read_state_files"]
