"""A report folder written by one process at a time, its files replaced as one set.

Two ``badpo audit --discover --report DIR`` at once mixed their files (one's ``discover.json``
beside the other's ``discover.csv``). :func:`folder_lock` refuses a second writer (an ``flock``,
which the kernel drops when a process dies, so a crash leaves no stale lock), and
:func:`commit_files` writes the set into a staging folder inside DIR that is renamed to a commit
folder in one step (the commit point) and then moved into place; :func:`recover_files` completes
an interrupted move, so a kill leaves the old set or the new one. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["LOCK_FILE", "commit_files", "exclusive_lock", "folder_lock", "recover_files"]

LOCK_FILE = ".badpo-writing.lock"


@contextlib.contextmanager
def exclusive_lock(lock_file: Path) -> Iterator[None]:
    """Hold an ``flock`` on ``lock_file`` (created; the kernel drops it when the process dies) for
    the block, the holder written into it; another holder is a ``BlockingIOError`` whose message is
    what that holder wrote ("another process" when nothing)."""
    handle = open(lock_file, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise BlockingIOError(handle.read().strip() or "another process") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()} on {os.uname().nodename}\n")
        handle.flush()
        yield
    finally:
        handle.close()  # releases the lock


@contextlib.contextmanager
def folder_lock(folder: str | Path, option: str) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (created) for the block; another holder is a
    ``BlockingIOError`` naming ``option`` and the folder. A block that fails in a folder it created
    leaves no folder behind (nor its lock file, when nothing else is there)."""
    folder = Path(folder)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(exclusive_lock(folder / LOCK_FILE))
        except BlockingIOError as held:
            raise BlockingIOError(f"{option} {folder}: {held} is writing there; wait for it to finish or "
                                  "choose another folder") from None
        try:
            yield
        except BaseException:
            if created and [p.name for p in folder.iterdir()] == [LOCK_FILE]:
                (folder / LOCK_FILE).unlink()
                folder.rmdir()
            raise


def _parts(folder: Path, tag: str) -> tuple[Path, Path]:
    return folder / f".{tag}-staging", folder / f".{tag}-commit"


def recover_files(folder: str | Path, tag: str) -> None:
    """Finish moving a committed set into ``folder`` (safe to repeat after a kill at any point) and
    drop an uncommitted staging folder."""
    staging, commit = _parts(Path(folder), tag)
    shutil.rmtree(staging, ignore_errors=True)
    if commit.is_dir():
        for path in sorted(commit.iterdir()):
            os.replace(path, Path(folder) / path.name)
        commit.rmdir()


def commit_files(folder: str | Path, tag: str, write: Callable[[Path], None]) -> list[Path]:
    """``write(staging)`` creates the set's files in a staging folder; they replace their namesakes
    in ``folder`` as one unit (call under :func:`folder_lock`). Returns their paths in ``folder``."""
    folder = Path(folder)
    staging, commit = _parts(folder, tag)
    recover_files(folder, tag)
    staging.mkdir(parents=True)
    write(staging)
    names = sorted(path.name for path in staging.iterdir())
    for name in names:
        with open(staging / name, "rb") as handle:
            os.fsync(handle.fileno())
    os.replace(staging, commit)  # the commit point
    recover_files(folder, tag)
    return [folder / name for name in names]
