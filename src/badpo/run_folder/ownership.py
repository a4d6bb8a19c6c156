"""One run per output folder: a lock, the claim, and what ``overwrite`` may delete.

* training into a folder that holds another run (:mod:`badpo.run_folder.identity`) is refused
  (``overwrite: true`` deletes that run first, and only the files a run writes), and a checkpoint is
  resumed only by the run that wrote it;
* files named like a run's (``policy/``, ``checkpoints/``, ``config.yaml``) in a folder without the
  data record, which every run writes first, are the user's: the folder is refused, never cleared;
* a second process training into the same folder at once is refused by an ``flock`` on
  ``.lock`` (the kernel releases it when a process dies, so a crash leaves no stale lock).

The final outputs are put in place by :mod:`badpo.run_folder.final_commit`.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError
from badpo.core.file_sets import exclusive_lock
from badpo.core.jsonio import atomic_write_text
from badpo.core.notices import BadpoWarning
from badpo.data.fingerprint import data_fingerprint
from badpo.run_folder.final_commit import recover_final_commit, remove_path
from badpo.run_folder.identity import data_mismatch, identity, identity_mismatch, read_data_record, recorded_identity
from badpo.run_folder.layout import (
    CHECKPOINT_FILES,
    CHECKPOINT_NAME,
    CHECKPOINTS,
    DATA_FILE,
    LISTED,
    LOCK,
    MANIFEST,
    MODEL_FOLDERS,
    POLICY,
    RUN_FILES,
    SFT_RECORD,
    SUMMARY_FILE,
    THETA_FILE,
    is_finished,
)

RunFiles = Callable[[Path], tuple[str, ...]]  # folder -> the names a stage's run writes there


def preference_run_files(folder: Path) -> tuple[str, ...]:
    """What a preference or reward-model run writes into ``folder``."""
    return RUN_FILES


def holds_run(folder: Path, run_files: RunFiles = preference_run_files) -> bool:
    """Whether a run wrote into ``folder`` (its data record alone, written at the claim, is no run)."""
    return any((folder / name).exists() for name in run_files(folder) if name != DATA_FILE)


def _listed(folder: Path) -> set[str] | None:
    """The files a finished run listed as its own in its model folders (``LISTED``); None without a listing."""
    listing = folder / LISTED
    return set(listing.read_text(encoding="utf-8").split()) if listing.is_file() else None


def _model_files(folder: Path, name: str) -> list[str]:
    """Every file under the model folder ``name``, as paths relative to the run folder, sorted."""
    return sorted(p.relative_to(folder).as_posix() for p in (folder / name).rglob("*") if p.is_file())


def kept_inside(folder: Path) -> list[str]:
    """The files inside the run's model folders and ``checkpoints/`` that the run did not write
    (the user's), which :func:`remove_run` keeps; a ConfigError where a model folder holds files
    and no listing says which are the run's (a run of a badpo before the listing)."""
    listed = _listed(folder)
    kept = []
    for name in MODEL_FOLDERS:
        files = _model_files(folder, name)
        if files and listed is None:
            raise ConfigError(f"output_dir: {folder / name} was written before badpo listed a run's files "
                              f"({LISTED}), so overwrite cannot tell the run's files from yours; delete that "
                              "folder yourself or choose another output_dir")
        kept += [f for f in files if f not in (listed or set())]
    checkpoints = folder / CHECKPOINTS
    if checkpoints.is_dir():
        kept += sorted(f"checkpoints/{p.name}" for p in checkpoints.iterdir() if not CHECKPOINT_NAME.match(p.name))
    return kept


def remove_run(folder: Path, run_files: RunFiles = preference_run_files) -> list[str]:
    """Delete what a run wrote into ``folder`` and nothing else; return what it kept inside the run's
    own folders (:func:`kept_inside`: a file of the user's in ``policy/`` or ``checkpoints/``). The
    data record stays too, since it marks the folder as claimed by badpo (:func:`check_owned`)."""
    linked = [name for name in run_files(folder) if (folder / name).is_symlink()]
    if linked:  # what a link points at is outside the run: nothing is deleted, through it or beside it
        raise ConfigError(f"output_dir: {folder / linked[0]} is a symbolic link to {os.readlink(folder / linked[0])}; "
                          "overwrite deletes only what the run wrote inside its folder: remove the link (your "
                          "files stay where it points) or choose another output_dir")
    kept = kept_inside(folder)  # read before the listing it reads is deleted below
    for name in run_files(folder):
        path = folder / name
        if name == DATA_FILE:
            continue
        if path.is_dir() and (name in MODEL_FOLDERS or name == CHECKPOINTS):
            _remove_except(path, folder, set(kept))
        else:
            remove_path(path)
    return kept


def _remove_except(path: Path, folder: Path, keep: set[str]) -> None:
    """Delete ``path``'s contents but the ``keep`` paths (relative to ``folder``), then ``path``
    itself if nothing is left in it."""
    for item in path.iterdir():
        relative = item.relative_to(folder).as_posix()
        if relative in keep:
            continue
        if item.is_dir() and not item.is_symlink() and any(k.startswith(relative + "/") for k in keep):
            _remove_except(item, folder, keep)
        else:
            remove_path(item)
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
def _held(folder: Path, refusal: Callable[[BaseException], Exception], unwritable_ok: bool = False) -> Iterator[None]:
    """The folder's lock for the block; another holder raises ``refusal(holder)``; ``unwritable_ok``:
    a folder where no lock can be created is entered without one."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(exclusive_lock(folder / LOCK))
        except BlockingIOError as held:
            raise refusal(held) from None
        except OSError:
            if not unwritable_ok:
                raise
        yield


def run_lock(folder: Path) -> contextlib.AbstractContextManager[None]:
    """Hold an exclusive lock on ``folder`` for the block; another holder is a ConfigError."""
    folder.mkdir(parents=True, exist_ok=True)
    return _held(folder, lambda held: ConfigError(f"output_dir: {folder} is in use by {held}; wait for it to "
                                                  "finish or choose another output_dir"))


def evaluation_lock(folder: Path) -> contextlib.AbstractContextManager[None]:
    """Hold the run folder's lock while ``badpo evaluate`` reads it and writes its readouts, so two
    evaluations of one run (or one beside a training into it) cannot replace each other's results;
    another holder is a ValueError naming it. A folder where the lock cannot be created (read-only
    or vanished) holds no writer to wait for, and is read without one."""
    return _held(folder, lambda held: ValueError(f"{folder}: in use by {held} (an evaluation or a training of "
                                                 "this run); wait for it to finish"), unwritable_ok=True)


def refuse_files_in_model_folders(folder: Path, overwrite: bool, run_files: RunFiles = preference_run_files) -> None:
    """Refuse a preference run's folder whose ``policy/`` (or ``reward_model/``) holds files no run
    wrote, where this run will replace that folder as a whole at its final commit: an unfinished run
    (resumed), or ``overwrite`` (issue 49's retry: overwrite said it kept ``policy/my_model.bin``, and
    the run then deleted it). A finished run started again is only read, so nothing is refused; a
    finished run with no listing is left to :func:`kept_inside`, which names the listing."""
    listed = _listed(folder)
    if run_files is not preference_run_files or (is_finished(folder) and (not overwrite or listed is None)):
        return
    inside = [path for name in MODEL_FOLDERS for path in _model_files(folder, name) if path not in (listed or set())]
    if inside:
        shown = f"{', '.join(inside[:3])}{', ...' if len(inside) > 3 else ''}"
        raise ConfigError(f"output_dir: {folder} holds {len(inside)} file(s) that no run wrote inside a run's "
                          f"model folder ({shown}); a run replaces that folder as a whole when it ends, so "
                          "move them out of it, or choose another output_dir")


def _other_stage(folder: Path, run_files: RunFiles) -> str | None:
    """What another stage left in ``folder`` (an SFT reference where a preference or reward run goes,
    a preference or reward run where an SFT reference goes), named for the refusal; None otherwise.
    ``badpo sft overwrite=true`` into a finished train run replaced its config and log and kept its
    policy/, run.json and theta.json: a folder evaluate could no longer read (issue 76's re-trial)."""
    if run_files is preference_run_files:
        return "an SFT reference (sft.json)" if (folder / SFT_RECORD).exists() else None
    finished = [name for name in (SUMMARY_FILE, THETA_FILE, POLICY) if (folder / name).exists()]
    return f"a preference or reward model run ({', '.join(finished)})" if finished else None


def claim(folder: Path, config: Any, overwrite: bool, run_files: RunFiles = preference_run_files) -> None:
    """Make ``folder`` this run's (call under :func:`run_lock`): refuse run-named files badpo did
    not write (:func:`check_owned`), complete an interrupted final commit, then refuse a folder
    holding another run (another config, or the same config on data whose content changed), or
    delete it when ``overwrite`` (saying which other files it keeps), and refuse files of the user's
    inside a model folder, which the run's end would replace; record the data's fingerprint."""
    check_owned(folder, run_files)
    recover_final_commit(folder)
    own = {*run_files(folder), LOCK, MANIFEST}
    foreign = sorted(entry.name for entry in folder.iterdir() if entry.name not in own) if folder.is_dir() else []
    shown = f"{', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}"
    if foreign and not holds_run(folder, run_files):  # the user's files: the run goes beside them, said once
        warnings.warn(f"output_dir {folder} holds {len(foreign)} file(s) that are not a run's ({shown}): the run's "
                      "files go beside them; overwrite=true would delete only the run's own", BadpoWarning,
                      stacklevel=2)
    recorded = read_data_record(folder)
    data = data_fingerprint(config.data, config.data_split, recorded)  # an unchanged file is not re-read
    other = _other_stage(folder, run_files)
    if other is not None:  # each stage deletes only its own files: an overwrite across stages mixed two runs
        raise ConfigError(f"output_dir: {folder} holds {other}, not a run of this stage; overwrite does not "
                          "delete another stage's run: choose another output_dir")
    if holds_run(folder, run_files):
        refuse_files_in_model_folders(folder, overwrite, run_files)
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
    (folder / LOCK).unlink(missing_ok=True)
    if created:
        with contextlib.suppress(OSError):  # not empty: something else is there, keep it
            folder.rmdir()


def check_files(checkpoint: Path) -> None:
    """Refuse a checkpoint that holds a file badpo does not write, before anything is read: a
    pickle there (accelerate's format, or a planted one) would run code if anything loaded it."""
    if not checkpoint.is_dir():
        raise ConfigError(f"resume_from: {checkpoint} is not a checkpoint folder")
    for path in sorted(checkpoint.iterdir()):
        if not (CHECKPOINT_FILES.match(path.name) and path.is_file() and not path.is_symlink()):
            raise ConfigError(
                f"resume_from: {path} is not a file badpo writes into a checkpoint and could run "
                "code if loaded (checkpoints of badpo before its own format held pickles); refusing "
                "the checkpoint: delete that file if you trust the folder, or start without resume_from")


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
