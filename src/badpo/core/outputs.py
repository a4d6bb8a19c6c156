"""Output paths, checked before any work: a command that cannot write its result, or would replace
a file nobody asked it to replace, says so at once, not after the data and the model have run.

The file is then written by :func:`badpo.core.jsonio.atomic_write_text`, so a killed command
leaves the old file or the whole new one.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["check_output_file", "check_writable_folder"]


def check_writable_folder(folder: str | Path, option: str, target: str | Path) -> None:
    """The nearest existing ancestor of ``folder`` (``folder`` itself when it exists) must be a
    folder this process may write in; the missing ones are created when the file is written."""
    nearest = Path(folder).expanduser().absolute()
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        raise NotADirectoryError(f"{option} {target}: {nearest} is a file, not a folder")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise PermissionError(f"{option} {target}: no permission to write in {nearest}")


def check_output_file(path: str | Path, option: str, overwrite: bool = False) -> Path:
    """``path`` as a Path once it is known to be writable: a folder is refused, and so is an
    existing file unless ``overwrite`` (the user's explicit ``--overwrite``)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise IsADirectoryError(f"{option} {path}: is a folder; give the path of a file")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{option} {path}: the file exists; give --overwrite to replace it, or "
                              "another path")
    check_writable_folder(target.parent, option, path)
    return target
