"""Progress of a long phase (a readout's answers, candidates, held-out judgments, KL, whole
signatures; the reference log-prob cache; the training steps): its count, elapsed time and ETA, on
stderr.

On a terminal it is a tqdm bar that vanishes when its phase is done. Where stderr is not a
terminal (a log file, a pipe, ``nohup``, a job scheduler) a bar's carriage returns would pile up
on one line, so the bar was left out, and an evaluation that costs hours on a real model looked
hung (30 tiny prompts were 64 s silent): there a phase writes a line every :data:`LOG` ``every_s``
(20 s) while it runs and its last line when done, each ending in a newline. A phase shorter than
that writes nothing, so a quick evaluation stays quiet. ``TQDM_DISABLE=1`` silences both, as it
does every tqdm bar. The training loop's bar (:func:`step_bar`) is the same in a log: a line every
interval, with the last logged loss, instead of a carriage return every tenth of a second.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["LOG", "LogLines", "progress", "step_bar"]

_LINE_FORMAT = "{desc}: {unit} {n_fmt} of {total_fmt} ({percentage:.0f}%), {elapsed} elapsed, ETA {remaining}"
_STEP_FORMAT = _LINE_FORMAT + "{postfix}"


@dataclass
class LogLines:
    """How often a phase writes its line where stderr is not a terminal."""

    every_s: float = 20.0  # a line this often while a phase runs; a shorter phase writes none


LOG = LogLines()


class _Lines(io.TextIOBase):
    """tqdm's status writes ('\\r' + status + padding) as one newline-ended line each, blanks
    dropped: what a log file can be read from."""

    def __init__(self, stream) -> None:
        super().__init__()
        self.stream, self.last = stream, None

    def write(self, text: str) -> int:
        line = text.replace("\r", "").rstrip()
        if line and line != self.last:  # closing repeats the last state: written once
            self.stream.write(line + "\n")
            self.stream.flush()
            self.last = line
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def _silenced() -> bool:
    return os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("", "0", "false", "no")


def progress(items: Iterable | None = None, what: str = "", unit: str = "prompt", total: int | None = None):
    """``items`` wrapped in a progress report of the phase ``what`` counted in ``unit``s (see the
    module docstring): a vanishing bar on a terminal, timed lines in a log."""
    named = {"desc": what, "unit": unit}
    return _bar({"iterable": items, "total": total}, {**named, "leave": False},
                {**named, "bar_format": _LINE_FORMAT, "delay": LOG.every_s})


def step_bar(total: int, initial: int = 0, what: str = "", unit: str = "step", phase: bool = False):
    """A bar the caller advances (``update``, ``set_postfix``, ``close``): tqdm's bar on a terminal,
    as before; where stderr is a log, one line every :data:`LOG` ``every_s`` with the postfix (the
    loss) and the last when closed; nothing under ``TQDM_DISABLE``. ``phase``: a readout's phase,
    as :func:`progress` reports it (its bar vanishes; in a log, a phase shorter than ``every_s``
    writes nothing)."""
    terminal, log = {"desc": what}, {"desc": what, "unit": unit, "bar_format": _STEP_FORMAT}
    if phase:
        terminal, log = {**terminal, "unit": unit, "leave": False}, {**log, "delay": LOG.every_s}
    return _bar({"total": total, "initial": initial}, terminal, log)


def _bar(counted: dict, terminal: dict, log: dict):
    """tqdm over ``counted`` (what it counts): silent under ``TQDM_DISABLE``; with ``terminal``'s
    options on a terminal; in a log, whole timed lines (:class:`_Lines`) with ``log``'s."""
    from tqdm.auto import tqdm

    stream = sys.stderr
    if _silenced():
        return tqdm(**counted, disable=True)
    if stream.isatty():
        return tqdm(**counted, **terminal, dynamic_ncols=True, file=stream)
    return tqdm(**counted, **log, file=_Lines(stream), mininterval=LOG.every_s, miniters=1, leave=True)
