"""Atomic checkpoints: ``output_dir/checkpoints/step-NNNNNN``, resumable bit for bit.

A checkpoint is accelerate's ``save_state`` (optimizer, RNG states of every process, and the
objects registered with ``register_for_checkpointing``: scheduler, theta, theta's optimizer, the
step) written into a temporary folder that is renamed into place only when complete, so a killed
run leaves either the old checkpoints or the new one, never half of one. The policy is stored as
its *trainable* weights only (the LoRA adapter under LoRA), keyed by the unwrapped model's names,
and reloaded strictly: a missing or unexpected weight is an error. Under FSDP or DeepSpeed,
accelerate saves and loads the model itself.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import torch
from torch import nn

from badpo.core.config import dump_yaml

CHECKPOINTS = "checkpoints"
_NAME = re.compile(r"^step-(\d{6,})$")
_POLICY_FILE = "policy_trainable_{index}.safetensors"


class TrainingState:
    """The data position, saved with the checkpoint: steps completed (the schedule is a function
    of the step, so this is the whole position)."""

    def __init__(self) -> None:
        self.step = 0

    def state_dict(self) -> dict:
        return {"step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.step = int(state["step"])


def _trainable(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def install_policy_hooks(accelerator) -> None:
    """Make save_state/load_state store only the trainable weights of each prepared model."""
    from safetensors.torch import load_file, save_file

    def save_hook(models, weights, output_dir):
        if not weights:  # FSDP / DeepSpeed: accelerate's own format
            return
        if accelerator.is_main_process:
            for index, model in enumerate(models):
                state = {k: v.detach().contiguous().cpu()
                         for k, v in _trainable(accelerator.unwrap_model(model)).items()}
                save_file(state, os.path.join(output_dir, _POLICY_FILE.format(index=index)))
        weights.clear()

    def load_hook(models, input_dir):
        for index, model in enumerate(models):
            path = os.path.join(input_dir, _POLICY_FILE.format(index=index))
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path}: checkpoint has no policy weights")
            state, params = load_file(path), _trainable(accelerator.unwrap_model(model))
            if set(state) != set(params):
                missing, extra = sorted(set(params) - set(state)), sorted(set(state) - set(params))
                raise ValueError(f"{path}: missing weights {missing[:5]}, unexpected {extra[:5]}")
            with torch.no_grad():
                for name, param in params.items():
                    param.copy_(state[name])
        models.clear()

    accelerator.register_save_state_pre_hook(save_hook)
    accelerator.register_load_state_pre_hook(load_hook)


def checkpoint_path(output_dir: Path, step: int) -> Path:
    return output_dir / CHECKPOINTS / f"step-{step:06d}"


def save_checkpoint(accelerator, output_dir: Path, step: int, keep: int, config) -> Path:
    """Save the accelerator's state for ``step`` atomically, with the run's resolved ``config``
    (its identity, checked on resume); keep the newest ``keep`` checkpoints, this one always."""
    final = checkpoint_path(output_dir, step)
    temporary = final.with_name(f".tmp-{final.name}")
    if accelerator.is_main_process and temporary.exists():
        shutil.rmtree(temporary)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(temporary), safe_serialization=True)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        dump_yaml(config, temporary / "config.yaml")
        if final.exists():  # the same step saved before (a resumed run): replace it
            shutil.rmtree(final)
        os.replace(temporary, final)
        others = [path for path in list_checkpoints(output_dir) if path != final]
        for old in others[: max(0, len(others) - (keep - 1))]:
            shutil.rmtree(old)
    accelerator.wait_for_everyone()
    return final


def list_checkpoints(output_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first (temporary folders are not listed)."""
    folder = output_dir / CHECKPOINTS
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and _NAME.match(p.name)]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))


def resolve_resume(resume_from: str | None, output_dir: Path) -> Path | None:
    """The checkpoint to resume from: a path, ``latest`` (None if there is none yet), or None."""
    if resume_from is None:
        return None
    if resume_from == "latest":
        found = list_checkpoints(output_dir)
        return found[-1] if found else None
    path = Path(resume_from)
    if not path.is_dir():
        raise FileNotFoundError(f"resume_from: no checkpoint folder at {resume_from!r}")
    return path
