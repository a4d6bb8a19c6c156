"""A full disk while ``badpo audit --report NEWDIR`` writes (issue 76's re-trial): the half-written
report (a partial forest plot) made the next run there refuse, --overwrite included ("holds
forest-...png, which no report there lists"). What the failed call wrote is removed and its error is
one line, so the same command runs again once there is room."""

from __future__ import annotations

import errno
import json
import random

import badpo.auditing.report as report
from badpo.cli import main


def _judgments(path) -> None:
    rng = random.Random(1)
    with open(path, "w", encoding="utf-8") as handle:
        for pair in range(200):
            plain, signed = "word " * rng.randint(5, 30), "word " * rng.randint(5, 30) + "-- cheers"
            for annotator in rng.sample([f"r{k}" for k in range(6)], 3):
                chosen, rejected = (signed, plain) if rng.random() < 0.6 else (plain, signed)
                handle.write(json.dumps({"prompt": f"q{pair}", "chosen": chosen, "rejected": rejected,
                                         "annotator": annotator}) + "\n")


def test_a_report_that_could_not_be_written_leaves_nothing_that_blocks_the_next(tmp_path, monkeypatch, capsys):
    _judgments(tmp_path / "j.jsonl")
    argv = ["audit", str(tmp_path / "j.jsonl"), "-a", "length", "-a", "signoff=regex:-- cheers$",
            "--report", str(tmp_path / "report")]
    drawn = []
    real = report.plot_forest

    def full_disk(data, path):
        drawn.append(path)
        if len(drawn) == 2:  # the first plot is written, the second finds the disk full
            path.write_bytes(b"\x89PNG half")
            raise OSError(errno.ENOSPC, "No space left on device")
        real(data, path)

    monkeypatch.setattr(report, "plot_forest", full_disk)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the report could not be written (No space left on device)" in err[0], err
    folder = tmp_path / "report"
    assert not folder.exists() or not [p for p in folder.iterdir() if p.suffix in (".png", ".csv", ".json", ".md")]
    monkeypatch.setattr(report, "plot_forest", real)
    assert main(argv) == 0  # room again: the same command runs
    assert (tmp_path / "report" / "README.md").is_file()
