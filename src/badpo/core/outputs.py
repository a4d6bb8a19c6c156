"""Output paths, checked before any work: a command that cannot write its result, or would replace
a file nobody asked it to replace, says so at once, not after the data and the model have run.

The file is then written by :func:`badpo.core.jsonio.atomic_write_text`, so a killed command
leaves the old file or the whole new one. No output may be a file the command reads
(:func:`check_not_input`): ``--overwrite`` would replace the data with the result.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["check_not_input", "check_output_file", "check_writable_folder", "spreadsheet_safe"]

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|nan)")  # as Python writes one


def spreadsheet_safe(cell: Any) -> Any:
    """A CSV cell no spreadsheet runs: text that starts like a formula (``=``, ``+``, ``-``, ``@``, a
    tab or a carriage return: an annotator id ``=HYPERLINK(...)``) gets a leading ``'``, unless it is
    a number as Python writes one ("-0.5", "+inf"); any other value is returned as it is."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_START) and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell

Inputs = Iterable[tuple[str, Any]]  # (how the command line names it, a path; other values are not files)


def _same_file(first: Path, second: Path) -> bool:
    """One file under two names: the same path once links are followed, or the same inode (a hard link)."""
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet)
        return False


def check_not_input(path: str | Path, option: str, inputs: Inputs) -> None:
    """Refuse an output ``path`` that is one of the ``inputs`` (through a symlink or a hard link
    too), or lies inside an input that is a folder (a saved dataset), before any work: writing
    it would replace what the command read."""
    target = Path(path).expanduser()
    for name, source in inputs:
        if not isinstance(source, (str, os.PathLike)):
            continue  # rows in memory, a Dataset: no file to replace
        read = Path(source).expanduser()
        if read.is_dir():
            inside = Path(os.path.realpath(target)).is_relative_to(os.path.realpath(read))
            if inside:
                raise ValueError(f"{option} {path}: inside {read}, read as {name}; give a path outside it")
        elif read.exists() and _same_file(target, read):
            raise ValueError(f"{option} {path}: is {read}, read as {name}; writing there would replace it, "
                             "so give another path")


def check_writable_folder(folder: str | Path, option: str, target: str | Path) -> None:
    """The nearest existing ancestor of ``folder`` (``folder`` itself when it exists) must be a
    folder this process can create a file in (tried); the missing ones are created when the file is written."""
    nearest = Path(folder).expanduser().absolute()
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        raise NotADirectoryError(f"{option} {target}: {nearest} is a file, not a folder")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise PermissionError(f"{option} {target}: no permission to write in {nearest}")
    try:  # what access() cannot tell (root, /proc, a read-only mount): create a file there and remove it
        handle, probe = tempfile.mkstemp(prefix=".badpo-probe-", dir=nearest)
    except OSError as error:
        raise type(error)(f"{option} {target}: cannot write in {nearest} ({error.strerror or error})") from None
    os.close(handle)
    os.unlink(probe)


def check_output_file(path: str | Path, option: str, overwrite: bool = False, inputs: Inputs = ()) -> Path:
    """``path`` as a Path once it is known to be writable: a folder is refused, and so is one of
    the command's ``inputs`` (:func:`check_not_input`), and an existing file unless ``overwrite``
    (the user's explicit ``--overwrite``)."""
    check_not_input(path, option, inputs)
    target = Path(path).expanduser()
    if target.is_dir():
        raise IsADirectoryError(f"{option} {path}: is a folder; give the path of a file")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{option} {path}: the file exists; give --overwrite to replace it, or "
                              "another path")
    check_writable_folder(target.parent, option, path)
    return target
