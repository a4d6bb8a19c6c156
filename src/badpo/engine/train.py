"""``badpo train``: one preference run (DPO, a BA-DPO arm or a baseline) at one seed.

The run folder is owned for the run's duration (lock, identity); a finished run is kept, an
arm of several policies (EM-DPO) goes to :mod:`badpo.engine.mixture`, and every other arm is the
preference stage (:mod:`badpo.engine.preference`) on the one loop (:mod:`badpo.engine.loop`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from badpo.engine.loop import notice, resume_point, run_stage
from badpo.engine.mixture import train_type_policies
from badpo.engine.preference import PreferenceStage, preference_lr
from badpo.engine.run_folder import is_finished, own_folder
from badpo.engine.runtime import fit_to_model, make_accelerator
from badpo.engine.settings import TrainConfig, check_train, format_output_dir
from badpo.methods import get_method


def train(config: TrainConfig) -> Path:
    """Run (or resume) one preference run; returns its output folder.

    The folder holds ``policy/`` (HF format; the adapter under LoRA), ``theta.json``,
    ``config.yaml`` (resolved), ``log.jsonl``, ``audit.json``, ``run.json`` and ``checkpoints/``.
    A folder holding another run is refused (``overwrite: true`` replaces it); a finished run is
    left as it is.
    """
    config = format_output_dir(config)
    config = dataclasses.replace(config, optim=dataclasses.replace(config.optim, lr=preference_lr(config)))
    check_train(config)
    output = Path(config.output_dir)
    accelerator = make_accelerator(config.runtime.precision, config.runtime.num_threads)
    config = fit_to_model(config, accelerator)
    with own_folder(output, config, accelerator):
        if is_finished(output):
            notice("train", accelerator, f"{output} holds this run, finished; its results are kept "
                                 "(overwrite=true trains it again)")
            return output
        if get_method(config.method).type_policies:  # several policies, each trained by the loop below
            return train_type_policies(config, output, accelerator)
        return run_stage(PreferenceStage(), config, output, accelerator, resume_point(config, output))


__all__ = ["train"]
