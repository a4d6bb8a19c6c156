"""One discover writes a ``--report`` folder at a time, and its files land as one set (issue 49,
item 7): two discovers into one folder could mix their files (no lock, files written one by one)."""

from __future__ import annotations

import json
import os

import pytest

from badpo.core import file_sets
from badpo.core.file_sets import LOCK_FILE, commit_files, folder_lock, recover_files
from badpo.core.judgments import validate_judgments, write_judgments

ROWS = [{"prompt": f"p{i}", "chosen": f"a{i} **b**", "rejected": f"b{i}", "annotator": f"k{i % 3}"}
        for i in range(12)]


def test_a_second_discover_into_a_folder_being_written_is_refused_before_reading(tmp_path, cli_error):
    data = tmp_path / "judgments.jsonl"
    write_judgments(data, validate_judgments(ROWS))
    report = tmp_path / "report"
    with folder_lock(report, "--report"):  # the first discover, still screening
        line = cli_error(["audit", str(data), "--discover", "--report", str(report)])
    assert line.startswith(f"badpo audit: --report {report}: process {os.getpid()} on ") and "is writing there" in line
    assert sorted(p.name for p in report.iterdir()) == [LOCK_FILE]


def test_a_lock_that_fails_in_a_folder_it_made_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), folder_lock(tmp_path / "new", "--report"):
        raise RuntimeError("the screen failed")
    assert not (tmp_path / "new").exists()


def _set(version: str):
    def write(staging):
        for name in ("a.json", "b.csv"):
            (staging / name).write_text(version)
    return write


def test_a_kill_before_the_commit_point_keeps_the_old_set_and_after_it_the_new_one(tmp_path, monkeypatch):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    commit_files(folder, "discover", _set("old"))

    def killed(staging):
        (staging / "a.json").write_text("new")
        raise KeyboardInterrupt  # killed while writing the set
    with pytest.raises(KeyboardInterrupt):
        commit_files(folder, "discover", killed)
    recover_files(folder, "discover")
    assert {p.name: p.read_text() for p in folder.iterdir()} == {"a.json": "old", "b.csv": "old", "notes.txt": "mine"}

    real_replace, calls = os.replace, []

    def replace(source, target):  # killed after the commit point, one file moved
        calls.append(target)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real_replace(source, target)
    monkeypatch.setattr(file_sets.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        commit_files(folder, "discover", _set("new"))
    monkeypatch.setattr(file_sets.os, "replace", real_replace)
    recover_files(folder, "discover")
    assert {p.name: p.read_text() for p in folder.iterdir()} == {"a.json": "new", "b.csv": "new", "notes.txt": "mine"}


def test_the_report_is_written_as_a_set(tmp_path, capsys):
    from badpo.cli import main

    data = tmp_path / "judgments.jsonl"
    write_judgments(data, validate_judgments(ROWS))
    report = tmp_path / "report"
    assert main(["audit", str(data), "--discover", "--report", str(report)]) == 0
    assert sorted(p.name for p in report.iterdir()) == [LOCK_FILE, "discover-forest.png", "discover.csv",
                                                        "discover.json", "discover.md", "report.html"]
    assert json.loads((report / "discover.json").read_text())["format"] == "badpo-discover/1"
