"""The names of the files in a run folder, and what they say about the folder: the one place that
knows them (torch-free, so that ``badpo audit`` checks its outputs without loading it).

A run folder is the contract between training (``badpo sft``, ``train``, ``rm``; BADPOTrainer) and
reading (``badpo evaluate``, ``compare``, the paper's records)::

    config.yaml             the resolved config (every checkpoint carries its own copy)
    data_fingerprint.json   the content of the run's data, written first when the folder is claimed
    log.jsonl               one line a logged step
    audit.json              the audit of the training labels (the offline estimates)
    checkpoints/step-N/     what a resume reads (CHECKPOINT_FILES, nothing unpickled)
    policy/ reward_model/   the trained model (.run-files lists what the run wrote there)
    theta.json              theta as trained (theta_trained.json: the theta the policy saw, when
                            bias.trusted_level: final)
    mixture.json em/ types/ an arm of several policies (EM-DPO)
    run.json                the summary, written last: the run is finished
    sft.json                a finished SFT reference (in the reference's folder instead of run.json)
    badpo_run.json          the record of a run BADPOTrainer (TRL) saved
    readouts.json           what ``badpo evaluate`` wrote
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["AUDIT_FILE", "CHECKPOINTS", "CHECKPOINT_FILES", "CONFIG_FILE", "DATA_FILE", "EXTERNAL_RECORD",
           "FINAL_NAMES", "LISTED", "LOG_FILE", "MIXTURE_FILE", "MODEL_FOLDERS", "POLICY", "READOUTS_FILE",
           "REWARD_MODEL", "RUN_FILES", "RUN_MARKERS", "SFT_RECORD", "SUMMARY_FILE", "THETA_FILE", "TRAINED_THETA_FILE",
           "check_outside_runs", "holds_run_or_model", "is_external_run", "is_finished", "is_run_folder"]

CONFIG_FILE = "config.yaml"
DATA_FILE = "data_fingerprint.json"  # the fingerprint of the run's data (badpo.run_folder.identity)
LOG_FILE = "log.jsonl"
AUDIT_FILE = "audit.json"  # the audit of the training labels: the offline estimates
CHECKPOINTS = "checkpoints"
CHECKPOINT_NAME = re.compile(r"^(\.tmp-)?step-\d{6,}$")  # badpo.engine.checkpoint's folders
# what badpo.engine.checkpoint writes into one (safetensors and JSON: nothing that unpickles): the
# config, the policy's trainable weights, the optimisers' state and each process's RNG states
CHECKPOINT_POLICY_FILE = "policy_trainable_0.safetensors"
CHECKPOINT_STATE, CHECKPOINT_RNG = "state", "rng-{rank}"  # each as .json + .safetensors
_ANY_RANK = CHECKPOINT_RNG.format(rank=r"\d+")
CHECKPOINT_FILES = re.compile(rf"^({re.escape(CONFIG_FILE)}|{re.escape(CHECKPOINT_POLICY_FILE)}"
                              rf"|{CHECKPOINT_STATE}\.(json|safetensors)|{_ANY_RANK}\.(json|safetensors))$")
POLICY, REWARD_MODEL = "policy", "reward_model"
MODEL_FOLDERS = (POLICY, REWARD_MODEL)
THETA_FILE = "theta.json"  # a run's learned bias, as BiasChannel.save writes it
# Beside theta.json when the level step moved theta after the policy had finished training
# (bias.trusted_level: final): theta as the policy was trained against it. The pair (policy, this
# theta) is the fitted one, which vote prediction reads; theta.json holds the theta_k counted from
# the trusted annotators' zero, which the theta readouts read.
TRAINED_THETA_FILE = "theta_trained.json"
MIXTURE_FILE = "mixture.json"
EM_DIR, TYPES_DIR = "em", "types"  # an arm of several policies: its E-steps, its type policies
SUMMARY_FILE = "run.json"  # a finished run's summary (badpo.engine.reporting)
SFT_RECORD = "sft.json"  # written last by badpo sft: the reference in the folder is complete
EXTERNAL_RECORD = "badpo_run.json"  # the record of a run BADPOTrainer saved (badpo.run_folder.external)
READOUTS_FILE = "readouts.json"  # the one file evaluate writes into a run folder
# the files a run wrote inside its model folders (policy/, reward_model/), one relative path a line:
# overwrite deletes these there and keeps whatever else a user put beside them
LISTED = ".run-files"
FINAL_NAMES = (*MODEL_FOLDERS, THETA_FILE, TRAINED_THETA_FILE, MIXTURE_FILE, SUMMARY_FILE, LISTED)  # a finished
STAGING, COMMIT, MANIFEST, LOCK = ".final-staging", ".final-commit", "MANIFEST", ".lock"          # run's outputs
# what a run writes into its folder; overwrite deletes these and nothing else (em/ and types/
# hold the parts of an arm of several policies, badpo.engine.mixture)
RUN_FILES = (*FINAL_NAMES, CONFIG_FILE, DATA_FILE, LOG_FILE, AUDIT_FILE, CHECKPOINTS,
             "tensorboard", "wandb", EM_DIR, TYPES_DIR, STAGING, COMMIT)
# an SFT reference's folder is a Hugging Face model folder: the model's files, listed before they are
# moved in (so overwrite deletes only those), its staging folder, and the record written last
SFT_MODEL_FILES = ".model-files"
SFT_TEMPORARY = ".tmp-model"
SFT_RUN_FILES = (CONFIG_FILE, DATA_FILE, LOG_FILE, "tensorboard", "wandb", SFT_RECORD, SFT_MODEL_FILES, SFT_TEMPORARY,
                 "config.json")  # config.json: a model folder, which only a listed run may have written
# beside config.yaml, what marks a folder a badpo stage wrote
RUN_MARKERS = (*FINAL_NAMES, CHECKPOINTS, SFT_RECORD)
WEIGHTS = ("*.safetensors", "*.bin", "*.gguf")  # beside config.json: a Hugging Face model's folder


def is_external_run(folder: str | Path) -> bool:
    """Whether BADPOTrainer saved a run into ``folder`` (its record is there)."""
    return (Path(folder) / EXTERNAL_RECORD).is_file()


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a run of a badpo stage: its config.yaml beside a run's outputs (a
    user's own folder with a config.yaml alone is not one), or a run BADPOTrainer saved (its record)."""
    return is_external_run(folder) or (
        (folder / CONFIG_FILE).is_file() and any((folder / name).exists() for name in RUN_MARKERS))


def is_finished(folder: Path) -> bool:
    return (folder / SUMMARY_FILE).exists()


def holds_run_or_model(folder: Path) -> str | None:
    """"run" or "model" when ``folder`` holds one (a run: :func:`is_run_folder`; a model: config.json
    beside weights), else None."""
    if is_run_folder(folder):
        return "run"
    if (folder / "config.json").is_file() and any(any(folder.glob(pattern)) for pattern in WEIGHTS):
        return "model"
    return None


def check_outside_runs(path: str | os.PathLike, option: str) -> None:
    """Refuse an output ``path`` inside a run folder or a model folder, as ``evaluate`` and
    ``compare`` refuse theirs: an audit's ``--json`` with ``--overwrite`` would otherwise replace a
    run's ``theta.json`` or a model's weights."""
    target = Path(path).expanduser().absolute()
    base = target if target.is_dir() else target.parent
    for parent in (base, *base.parents):
        found = holds_run_or_model(parent)
        if found is not None:
            raise ValueError(f"{option} {path}: inside the {found} folder {parent}; give a path outside it")
