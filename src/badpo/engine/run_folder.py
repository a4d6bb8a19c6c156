"""One run per output folder: its identity, a lock, and final files committed as one unit.

A run's *identity* is its resolved config without :data:`RUN_CONTROL_KEYS` (where it reports,
how it stops and resumes), and the content of its data (:func:`badpo.data.fingerprint.data_fingerprint`:
a config names its data by path, and a file changed in place is other data). ``config.yaml`` in
the folder records the config, and every checkpoint carries its own copy; ``data_fingerprint.json``
records the data (written when the folder is claimed, so that a killed run has it), so that

* training into a folder that holds another run is refused (``overwrite: true`` deletes that run
  first, and only the files a run writes), and a checkpoint is resumed only by the run that wrote it;
* files named like a run's (``policy/``, ``checkpoints/``, ``config.yaml``) in a folder without the
  data record, which every run writes first, are the user's: the folder is refused, never cleared;
* a second process training into the same folder at once is refused by an ``flock`` on
  ``.lock`` (the kernel releases it when a process dies, so a crash leaves no stale lock);
* the final outputs (``policy/``, ``theta.json``, ``run.json``; ``mixture.json`` for an arm of
  several policies; ``theta_trained.json`` under ``bias.trusted_level: final``) are written into
  a staging folder that is renamed to ``.final-commit`` in one step — the commit point — and then
  moved into place. :func:`recover_final_commit` completes an
  interrupted move, so a kill at any point leaves the previous complete state or the new complete
  state. ``run.json`` exists only in a finished run's state.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from badpo.core.bias import THETA_FILE, TRAINED_THETA_FILE
from badpo.core.config import ConfigError, load_config, to_dict
from badpo.core.file_sets import exclusive_lock
from badpo.core.jsonio import atomic_write_text
from badpo.core.notices import BadpoWarning
from badpo.data.fingerprint import data_fingerprint
from badpo.engine.checkpoint import check_files
from badpo.engine.external_run import is_external_run
from badpo.engine.settings import RUN_CONTROL_KEYS, keyed_when_set

CONFIG_FILE = "config.yaml"
DATA_FILE = "data_fingerprint.json"  # the fingerprint of the run's data (module docstring)
# the files a run wrote inside its model folders (policy/, reward_model/), one relative path a line:
# overwrite deletes these there and keeps whatever else a user put beside them
LISTED = ".run-files"
FINAL_NAMES = ("policy", "reward_model", THETA_FILE, TRAINED_THETA_FILE, "mixture.json",  # a finished run's
               "run.json", LISTED)  # outputs
_MODEL_FOLDERS = ("policy", "reward_model")
_CHECKPOINT_NAME = re.compile(r"^(\.tmp-)?step-\d{6,}$")  # badpo.engine.checkpoint's folders
_STAGING, _COMMIT, _MANIFEST, _LOCK = ".final-staging", ".final-commit", "MANIFEST", ".lock"
# what a run writes into its folder; overwrite deletes these and nothing else (em/ and types/
# hold the parts of an arm of several policies, badpo.engine.mixture)
RUN_FILES = (*FINAL_NAMES, CONFIG_FILE, DATA_FILE, "log.jsonl", "audit.json", "checkpoints",
             "tensorboard", "wandb", "em", "types", _STAGING, _COMMIT)
RunFiles = Callable[[Path], tuple[str, ...]]  # folder -> the names a stage's run writes there


def identity(config: Any) -> dict:
    """The resolved config as a plain dict without the run-control keys."""
    plain = to_dict(config)
    for dotted in RUN_CONTROL_KEYS:
        *parents, leaf = dotted.split(".")
        node = plain
        for part in parents:
            node = node[part]
        node.pop(leaf, None)  # a stage without the key (a reward model has no cache_dir)
    return keyed_when_set(plain)  # keys newer than recorded runs count only when set


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ, as ``key: old -> new``."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new), key=str):
            found += _differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return found
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} -> {new!r}"]


def recorded_identity(folder: Path, config_class: type) -> dict | str:
    """The identity recorded in ``folder/config.yaml``, or why it cannot be read."""
    path = folder / CONFIG_FILE
    if not path.exists():
        return f"{folder} holds run files but no {CONFIG_FILE} saying which run wrote them"
    try:
        return identity(load_config(config_class, path))
    except (ConfigError, yaml.YAMLError, UnicodeDecodeError) as error:
        return f"{path} is not a readable run config ({error})"


def identity_mismatch(recorded: dict | str, current: dict, what: Path) -> str | None:
    """A one-line reason why ``what`` (holding ``recorded``) is not this run, or None."""
    if isinstance(recorded, str):
        return recorded
    differences = _differences(recorded, current)
    if not differences:
        return None
    shown = "; ".join(differences[:4]) + (f"; ... {len(differences) - 4} more" if len(differences) > 4 else "")
    return f"{what} belongs to another run ({shown})"


def preference_run_files(folder: Path) -> tuple[str, ...]:
    """What a preference or reward-model run writes into ``folder``."""
    return RUN_FILES


def holds_run(folder: Path, run_files: RunFiles = preference_run_files) -> bool:
    """Whether a run wrote into ``folder`` (its data record alone, written at the claim, is no run)."""
    return any((folder / name).exists() for name in run_files(folder) if name != DATA_FILE)


def is_finished(folder: Path) -> bool:
    return (folder / "run.json").exists()


# beside config.yaml, what marks a folder a badpo stage wrote (sft.json: a finished SFT reference)
_RUN_MARKERS = (*FINAL_NAMES, "checkpoints", "sft.json")


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a run of a badpo stage: its config.yaml beside a run's outputs (a
    user's own folder with a config.yaml alone is not one), or a run BADPOTrainer saved (its record)."""
    return is_external_run(folder) or (
        (folder / CONFIG_FILE).is_file() and any((folder / name).exists() for name in _RUN_MARKERS))


def kept_inside(folder: Path) -> list[str]:
    """The files inside the run's model folders and ``checkpoints/`` that the run did not write
    (the user's), which :func:`remove_run` keeps; a ConfigError where a model folder holds files
    and no listing says which are the run's (a run of a badpo before the listing)."""
    listing = folder / LISTED
    listed = set(listing.read_text(encoding="utf-8").split()) if listing.is_file() else None
    kept = []
    for name in _MODEL_FOLDERS:
        files = sorted(p.relative_to(folder).as_posix() for p in (folder / name).rglob("*") if p.is_file())
        if files and listed is None:
            raise ConfigError(f"output_dir: {folder / name} was written before badpo listed a run's files "
                              f"({LISTED}), so overwrite cannot tell the run's files from yours; delete that "
                              "folder yourself or choose another output_dir")
        kept += [f for f in files if f not in (listed or set())]
    checkpoints = folder / "checkpoints"
    if checkpoints.is_dir():
        kept += sorted(f"checkpoints/{p.name}" for p in checkpoints.iterdir() if not _CHECKPOINT_NAME.match(p.name))
    return kept


def remove_run(folder: Path, run_files: RunFiles = preference_run_files) -> list[str]:
    """Delete what a run wrote into ``folder`` and nothing else; return what it kept inside the run's
    own folders (:func:`kept_inside`: a file of the user's in ``policy/`` or ``checkpoints/``). The
    data record stays too, since it marks the folder as claimed by badpo (:func:`check_owned`)."""
    kept = kept_inside(folder)  # read before the listing it reads is deleted below
    for name in run_files(folder):
        path = folder / name
        if name == DATA_FILE:
            continue
        if path.is_dir() and (name in _MODEL_FOLDERS or name == "checkpoints"):
            _remove_except(path, folder, set(kept))
        else:
            _remove(path)
    return kept


def _remove_except(path: Path, folder: Path, keep: set[str]) -> None:
    """Delete ``path``'s contents but the ``keep`` paths (relative to ``folder``), then ``path``
    itself if nothing is left in it."""
    for item in path.iterdir():
        relative = item.relative_to(folder).as_posix()
        if relative in keep:
            continue
        if item.is_dir() and any(k.startswith(relative + "/") for k in keep):
            _remove_except(item, folder, keep)
        else:
            _remove(item)
    if not any(path.iterdir()):
        path.rmdir()


def check_owned(folder: Path, run_files: RunFiles = preference_run_files) -> None:
    """Refuse a folder holding entries named like a run's files that badpo is not known to have
    written: every claim writes the data record first, so such entries in a folder without one
    are the user's (``policy/``, ``checkpoints/``, ``config.yaml`` of their own), and ``overwrite``
    must not delete them nor a run write among them."""
    if (folder / DATA_FILE).exists():
        return
    unowned = sorted(name for name in run_files(folder) if name != DATA_FILE and (folder / name).exists())
    if unowned:
        raise ConfigError(f"output_dir: {folder} holds {', '.join(unowned)} but no {DATA_FILE}, which every "
                          "badpo run writes first, so they are not a run's; badpo neither deletes nor writes "
                          "among them: move them away or choose another output_dir")


@contextlib.contextmanager
def run_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` for the block; another holder is a ConfigError."""
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(exclusive_lock(folder / _LOCK))
        except BlockingIOError as held:
            raise ConfigError(f"output_dir: {folder} is in use by {held}; wait for it to finish "
                              "or choose another output_dir") from None
        yield


def claim(folder: Path, config: Any, overwrite: bool, run_files: RunFiles = preference_run_files) -> None:
    """Make ``folder`` this run's (call under :func:`run_lock`): refuse run-named files badpo did
    not write (:func:`check_owned`), complete an interrupted final commit, then refuse a folder
    holding another run (another config, or the same config on data whose content changed), or
    delete it when ``overwrite`` (saying which other files it keeps); record the data's fingerprint."""
    check_owned(folder, run_files)
    recover_final_commit(folder)
    own = {*run_files(folder), _LOCK, _MANIFEST}
    foreign = sorted(entry.name for entry in folder.iterdir() if entry.name not in own) if folder.is_dir() else []
    shown = f"{', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}"
    if foreign and not holds_run(folder, run_files):  # the user's files: the run goes beside them, said once
        warnings.warn(f"output_dir {folder} holds {len(foreign)} file(s) that are not a run's ({shown}): the run's "
                      "files go beside them; overwrite=true would delete only the run's own", BadpoWarning,
                      stacklevel=2)
    recorded = read_data_record(folder)
    data = data_fingerprint(config.data, config.data_split, recorded)  # an unchanged file is not re-read
    if (folder / "sft.json").exists() and run_files is preference_run_files:
        raise ConfigError(f"output_dir: {folder} holds an SFT reference (sft.json), not a run of this stage; "
                          "overwrite does not delete another stage's run: choose another output_dir")
    if holds_run(folder, run_files) and overwrite:
        kept = [*foreign, *remove_run(folder, run_files)]
        if kept:
            listed = f"{', '.join(kept[:3])}{', ...' if len(kept) > 3 else ''}"
            warnings.warn(f"output_dir {folder}: overwrite deleted the run's files and kept {len(kept)} that "
                          f"are not a run's ({listed})", BadpoWarning, stacklevel=2)
    elif holds_run(folder, run_files):
        reason = identity_mismatch(recorded_identity(folder, type(config)), identity(config), folder)
        if reason is not None:
            raise ConfigError(f"output_dir: {reason}; choose another output_dir, or set overwrite=true "
                              "to delete that run")
        reason = data_mismatch(recorded, data, folder)
        if reason is not None:
            raise ConfigError(f"output_dir: {reason}; choose another output_dir, or set overwrite=true "
                              "to delete that run and train on the data as it is now")
    atomic_write_text(folder / DATA_FILE, json.dumps(data, indent=1, sort_keys=True) + "\n")


def read_data_record(folder: Path) -> dict | None:
    """The data fingerprint recorded in ``folder`` (None when there is none; an unreadable record
    matches no data)."""
    try:
        record = json.loads((folder / DATA_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):
        record = None
    return record if isinstance(record, dict) else {"sha256": None}


def data_mismatch(recorded: dict | None, current: dict, what: Path) -> str | None:
    """A one-line reason why ``what`` (holding a run on ``recorded`` data) is not a run on the
    ``current`` data, or None (also when nothing was recorded)."""
    if recorded is None or recorded.get("sha256") == current["sha256"]:
        return None
    was = recorded.get("sha256") if isinstance(recorded.get("sha256"), str) else "unreadable"
    return (f"{what} holds a run on other data: the content of {current['data']} changed since that run "
            f"read it (sha256 {was[:12]} -> {current['sha256'][:12]})")


def check_outside_model(output: Path, config: Any) -> None:
    """Refuse an output folder that is, or lies inside, the local folder of the model (or
    tokenizer) the run loads: a run's files would land among the model's own, and ``overwrite``
    would delete some of them."""
    target = Path(os.path.realpath(output))
    for key in ("name_or_path", "tokenizer"):
        source = getattr(config.model, key, None)
        if not source or not Path(source).is_dir():
            continue
        folder = Path(os.path.realpath(source))
        if target == folder or folder in target.parents:
            raise ConfigError(f"output_dir: {output} is {'the' if target == folder else 'inside the'} "
                              f"folder of model.{key} ({source}), which this run loads; choose another "
                              "output_dir")


@contextlib.contextmanager
def own_folder(output: Path, config: Any, accelerator, run_files: RunFiles = preference_run_files) -> Iterator[None]:
    """The main process locks and claims ``output`` for the block (``config.overwrite`` decides
    what happens to another run there); the other processes wait for it. A run that fails
    before it wrote any run file (bad data, a refused option) leaves nothing behind: not its
    lock, nor the folder it created."""
    check_outside_model(output, config)
    check_owned(output, run_files)  # before the lock leaves its file among the user's
    created = not output.exists()
    main = accelerator.is_main_process
    lock = run_lock(output) if main else contextlib.nullcontext()
    with lock:
        try:
            if main:
                claim(output, config, config.overwrite, run_files)
            accelerator.wait_for_everyone()
            yield
        except BaseException:
            if main and not holds_run(output, run_files):
                _leave_no_trace(output, created)
            raise


def _leave_no_trace(folder: Path, created: bool) -> None:
    """Remove the lock (still held: a process that opened it before cannot take it) and the
    folder when this run created it and nothing else is in it."""
    (folder / DATA_FILE).unlink(missing_ok=True)
    (folder / _LOCK).unlink(missing_ok=True)
    if created:
        with contextlib.suppress(OSError):  # not empty: something else is there, keep it
            folder.rmdir()


def check_checkpoint(checkpoint: Path, config: Any) -> None:
    """Refuse to resume from a checkpoint written by another run: another config, or other data
    (the record of the run folder the checkpoint sits in, ``RUN/checkpoints/step-N``)."""
    check_files(checkpoint)
    reason = identity_mismatch(recorded_identity(checkpoint, type(config)), identity(config), checkpoint)
    if reason is not None:
        raise ConfigError(f"resume_from: {reason}; resume it with its own config, or start without "
                          "resume_from")
    recorded = read_data_record(checkpoint) or read_data_record(checkpoint.parent.parent)
    reason = data_mismatch(recorded, data_fingerprint(config.data, config.data_split, recorded), checkpoint)
    if reason is not None:
        raise ConfigError(f"resume_from: {reason}; resume it on its own data, or start without "
                          "resume_from")


def commit_final(folder: Path, write: Callable[[Path], None]) -> None:
    """Write the final outputs with ``write(staging_folder)`` and put them in place as one unit.

    ``write`` creates some of :data:`FINAL_NAMES` in the folder it is given; names it does not
    create are removed from ``folder`` (a previous state's ``theta.json`` does not survive).
    """
    staging = folder / _STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    write(staging)
    unknown = sorted(p.name for p in staging.iterdir() if p.name not in FINAL_NAMES or p.name == LISTED)
    if unknown:
        raise RuntimeError(f"commit_final: unexpected outputs {unknown}")
    written = sorted(p.relative_to(staging).as_posix() for name in _MODEL_FOLDERS for p in (staging / name).rglob("*")
                     if p.is_file())
    (staging / LISTED).write_text("".join(f"{path}\n" for path in written), encoding="utf-8")
    present = [name for name in FINAL_NAMES if (staging / name).exists()]
    (staging / _MANIFEST).write_text("".join(f"{name}\n" for name in present), encoding="utf-8")
    sync_tree(staging)
    os.replace(staging, folder / _COMMIT)  # the commit point
    recover_final_commit(folder)


def recover_final_commit(folder: Path) -> None:
    """Finish moving a committed final state into place (idempotent; safe to re-run after a kill
    at any point), and discard an uncommitted staging folder."""
    shutil.rmtree(folder / _STAGING, ignore_errors=True)
    commit = folder / _COMMIT
    if not commit.is_dir():
        return
    listed = set((commit / _MANIFEST).read_text(encoding="utf-8").split())
    for name in FINAL_NAMES:
        target, source = folder / name, commit / name
        if source.exists():  # not moved yet: replace what is there
            _remove(target)
            os.replace(source, target)
        elif name not in listed:  # not part of the new state
            _remove(target)
    shutil.rmtree(commit)


def interrupted_commit(folder: Path) -> bool:
    return (folder / _COMMIT).exists()


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def sync_tree(folder: Path) -> None:
    """fsync every file under ``folder`` so the rename never publishes unwritten data."""
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
