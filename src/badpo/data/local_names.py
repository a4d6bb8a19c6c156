"""Which names given as data are local paths, and which local data files a name nearly is. A typo of a
file name (``heldout.jsnol``) went to the Hub and waited ~25 s of retries offline before its error
(issue 75's new-user trial); a name that cannot be a Hub id is refused at once, and either error
names the files it nearly is."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

__all__ = ["did_you_mean", "looks_local"]


def looks_local(name: str, suffixes: Iterable[str]) -> bool:
    """A path, not a Hub id: it starts like one, ends in a data file's suffix, has more than one
    ``/``, or has no ``owner/`` and an alphabetic suffix (``heldout.jsnol``; a Hub id's dot is part of
    a version, ``squad_v1.1``)."""
    path = Path(name)
    suffix = path.suffix[1:]
    return (name.startswith(("/", ".", "~")) or path.suffix in tuple(suffixes) or name.count("/") > 1
            or ("/" not in name and suffix.isalpha()))


def did_you_mean(path: Path, suffixes: Iterable[str]) -> str:
    """``; did you mean 'x.jsonl'?`` for up to three data files beside ``path`` whose name or stem is
    close to its name or stem (a typo of either, or the suffix left out), else ``""``."""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        names = sorted(c.name for c in folder.iterdir() if c.suffix in tuple(suffixes))
    except OSError:
        return ""
    by_stem = {Path(n).stem: n for n in names}
    close = [by_stem[s] for s in difflib.get_close_matches(path.stem, list(by_stem), n=3, cutoff=0.8)]
    close += [n for n in difflib.get_close_matches(path.name, names, n=3, cutoff=0.8) if n not in close]
    if not close:
        return ""
    shown = [str(folder / n) if str(path.parent) not in ("", ".") else n for n in close[:3]]
    return f"; did you mean {' or '.join(repr(s) for s in shown)}?"
