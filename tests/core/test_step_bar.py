"""The training loop's bar in a log (issue 37: tqdm's carriage return every tenth of a second
filled a nohup log with thousands of bar states): whole lines, one per interval, with the loss,
and the last when the bar closes; a terminal keeps tqdm's bar; ``TQDM_DISABLE`` silences it."""

from __future__ import annotations

import io
import re

from badpo.core import progress as progress_module
from badpo.core.progress import step_bar

LINE = re.compile(r"^dpo: step (\d+) of 100 \(\d+%\), [\d:]+ elapsed, ETA \S+(, loss=[\d.]+)?$")


def _run(steps: int, start: int = 0) -> None:
    bar = step_bar(100, start, "dpo")
    for step in range(start, start + steps):
        bar.set_postfix(loss=f"{0.5 + step / 1000:.4f}", refresh=False)
        bar.update(1)
    bar.close()


def test_in_a_log_each_interval_is_one_whole_line_with_the_loss(capsys, monkeypatch):
    monkeypatch.setattr(progress_module.LOG, "every_s", 0.0)
    _run(5)
    lines = capsys.readouterr().err.splitlines()
    assert "\r" not in "".join(lines) and all(LINE.match(line) for line in lines), lines
    assert [int(LINE.match(line)[1]) for line in lines][-1] == 5
    assert lines[-1].endswith("loss=0.5040")


def test_a_fast_loop_writes_its_first_and_last_line_only(capsys):
    _run(100)
    lines = capsys.readouterr().err.splitlines()
    assert [int(LINE.match(line)[1]) for line in lines] == [0, 100]


def test_a_resumed_run_counts_from_its_step_and_tqdm_disable_silences_it(capsys, monkeypatch):
    monkeypatch.setattr(progress_module.LOG, "every_s", 0.0)
    _run(2, start=40)
    counts = [int(LINE.match(line)[1]) for line in capsys.readouterr().err.splitlines()]
    assert list(dict.fromkeys(counts)) == [40, 41, 42] and counts == sorted(counts)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    _run(3)
    assert capsys.readouterr().err == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_keeps_tqdms_bar(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    _run(3)
    assert "\r" in terminal.getvalue() and "3/100" in terminal.getvalue()


def test_a_state_written_twice_in_a_row_is_one_line():
    """tqdm's close writes the last state again; a log gets it once."""
    log = io.StringIO()
    lines = progress_module._Lines(log)
    for text in ("\rdpo: step 5 of 5", "\rdpo: step 5 of 5   ", "\r", "\rdpo: step 5 of 5, loss=0.1"):
        lines.write(text)
    assert log.getvalue().splitlines() == ["dpo: step 5 of 5", "dpo: step 5 of 5, loss=0.1"]

