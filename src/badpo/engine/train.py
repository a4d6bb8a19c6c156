"""``badpo train``: one preference run (DPO, a BA-DPO arm or a baseline) at one seed.

The run lives in its folder as every stage's does (:mod:`badpo.engine.lifecycle`); an arm of
several policies (EM-DPO) goes to :mod:`badpo.engine.mixture`, which resumes its parts itself, and
every other arm is the preference stage (:mod:`badpo.engine.preference`) on the one loop
(:mod:`badpo.engine.loop`).
"""

from __future__ import annotations

from pathlib import Path

from badpo.engine.config_checks import check_train
from badpo.engine.lifecycle import Lifecycle
from badpo.engine.loop import run_stage
from badpo.engine.mixture import train_type_policies
from badpo.engine.preference import PreferenceStage
from badpo.engine.settings import TrainConfig
from badpo.methods import get_method


def _one_policy(config: TrainConfig) -> bool:
    """Whether the arm trains one policy on the loop, from the folder's own checkpoints."""
    return not get_method(config.method).type_policies


PREFERENCE_RUN = Lifecycle(check_train, resumes=_one_policy)


def _train_in(config: TrainConfig, output: Path, accelerator, resume: Path | None) -> Path:
    if not _one_policy(config):  # several policies, each trained by the loop below
        return train_type_policies(config, output, accelerator)
    return run_stage(PreferenceStage(), config, output, accelerator, resume)


def train(config: TrainConfig) -> Path:
    """Run (or resume) one preference run; returns its output folder.

    The folder holds ``policy/`` (HF format; the adapter under LoRA), ``theta.json``,
    ``config.yaml`` (resolved), ``log.jsonl``, ``audit.json``, ``run.json`` and ``checkpoints/``.
    A folder holding another run is refused (``overwrite: true`` replaces it); a finished run is
    left as it is.
    """
    return PREFERENCE_RUN.run(config, _train_in)


__all__ = ["train", "PREFERENCE_RUN"]
