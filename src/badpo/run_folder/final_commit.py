"""A run's final outputs committed as one unit.

The final outputs (``policy/``, ``theta.json``, ``run.json``; ``mixture.json`` for an arm of several
policies; ``theta_trained.json`` under ``bias.trusted_level: final``) are written into a staging
folder that is renamed to ``.final-commit`` in one step, the commit point, and then moved into
place. :func:`recover_final_commit` completes an interrupted move, so a kill at any point leaves the
previous complete state or the new complete state. ``run.json`` exists only in a finished run's state.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from badpo.run_folder.layout import COMMIT, FINAL_NAMES, LISTED, MANIFEST, MODEL_FOLDERS, STAGING

__all__ = ["commit_final", "interrupted_commit", "recover_final_commit", "remove_path", "sync_tree"]


def commit_final(folder: Path, write: Callable[[Path], None]) -> None:
    """Write the final outputs with ``write(staging_folder)`` and put them in place as one unit.

    ``write`` creates some of :data:`FINAL_NAMES` in the folder it is given; names it does not
    create are removed from ``folder`` (a previous state's ``theta.json`` does not survive).
    """
    staging = folder / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        write(staging)
    except Exception as error:  # a full disk: OSError, or safetensors' own error (not an OSError)
        if not isinstance(error, OSError) and type(error).__name__ != "SafetensorError":
            raise
        shutil.rmtree(staging, ignore_errors=True)  # a half-written staging folder holds the space it took
        reason = getattr(error, "strerror", None) or str(error).strip().splitlines()[0]
        raise OSError(f"{folder}: the final outputs could not be written ({reason}); nothing of them was put "
                      "in place and the folder's earlier state is intact: free the space and run the same "
                      "command again") from error
    unknown = sorted(p.name for p in staging.iterdir() if p.name not in FINAL_NAMES or p.name == LISTED)
    if unknown:
        raise RuntimeError(f"commit_final: unexpected outputs {unknown}")
    written = sorted(p.relative_to(staging).as_posix() for name in MODEL_FOLDERS for p in (staging / name).rglob("*")
                     if p.is_file())
    (staging / LISTED).write_text("".join(f"{path}\n" for path in written), encoding="utf-8")
    present = [name for name in FINAL_NAMES if (staging / name).exists()]
    (staging / MANIFEST).write_text("".join(f"{name}\n" for name in present), encoding="utf-8")
    sync_tree(staging)
    os.replace(staging, folder / COMMIT)  # the commit point
    recover_final_commit(folder)


def recover_final_commit(folder: Path) -> None:
    """Finish moving a committed final state into place (idempotent; safe to re-run after a kill
    at any point), and discard an uncommitted staging folder."""
    shutil.rmtree(folder / STAGING, ignore_errors=True)
    commit = folder / COMMIT
    if not commit.is_dir():
        return
    listed = set((commit / MANIFEST).read_text(encoding="utf-8").split())
    for name in FINAL_NAMES:
        target, source = folder / name, commit / name
        if source.exists():  # not moved yet: replace what is there
            remove_path(target)
            os.replace(source, target)
        elif name not in listed:  # not part of the new state
            remove_path(target)
    shutil.rmtree(commit)


def interrupted_commit(folder: Path) -> bool:
    return (folder / COMMIT).exists()


def remove_path(path: Path) -> None:
    """Delete a file or a folder with all it holds; nothing when it does not exist. A symbolic link
    is removed itself, never what it points at."""
    if path.is_symlink():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def sync_tree(folder: Path) -> None:
    """fsync every file under ``folder`` so the rename never publishes unwritten data."""
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
