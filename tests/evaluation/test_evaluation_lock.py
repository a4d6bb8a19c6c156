"""One writer per run folder (issue 76): ``badpo evaluate`` holds the run's lock while it reads the
run and writes its readouts, so a second evaluation (or a training into the folder) is refused in
one line instead of silently replacing the first one's readouts.json; a folder where no lock can be
made (read-only) is read without one."""

from __future__ import annotations

import pytest

from badpo import api
from badpo.core.file_sets import exclusive_lock
from badpo.evaluation import trained_run
from badpo.run_folder.layout import LOCK
from badpo.run_folder.ownership import evaluation_lock


def test_a_held_lock_refuses_a_second_evaluation_naming_its_holder(tmp_path):
    with exclusive_lock(tmp_path / LOCK):
        with pytest.raises(ValueError, match=r"in use by process \d+ on .*; wait for it to finish"):
            with evaluation_lock(tmp_path):
                pass
    with evaluation_lock(tmp_path):  # released: the next evaluation goes ahead
        pass


def test_a_folder_without_room_for_a_lock_is_read_without_one(tmp_path):
    with evaluation_lock(tmp_path / "not_there"):
        pass


def test_evaluate_holds_the_lock_until_its_readouts_are_written(tmp_path, monkeypatch):
    seen = []

    def evaluating(run_dir, settings, data, trust_remote_code=False):
        with pytest.raises(BlockingIOError):  # a second process would be refused now
            with exclusive_lock(tmp_path / LOCK):
                pass
        seen.append(run_dir)
        return {"readouts": "stub"}

    monkeypatch.setattr(trained_run, "evaluate_run_dir", evaluating)
    monkeypatch.setattr(trained_run, "readouts_path", lambda *args: tmp_path / "readouts.json")
    result = api.evaluate(tmp_path)
    assert seen == [tmp_path] and result.path.read_text().startswith("{")
