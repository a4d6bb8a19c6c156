"""A run folder's relative paths are read from where the run was made (issue 37, item 6): a run
trained with ``model.name_or_path=models/ref`` and ``output_dir=runs/x`` could be evaluated only
from the folder it was trained in."""

from __future__ import annotations

from badpo.readouts.run_paths import made_from, resolved_from


def test_relative_paths_of_a_run_are_read_from_where_it_was_made(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "models" / "ref").mkdir(parents=True)
    (project / "runs" / "x").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)  # evaluated from another folder
    origin = made_from(project / "runs" / "x", "runs/x")
    assert origin == project.resolve()
    assert resolved_from(origin, "models/ref") == str(project.resolve() / "models" / "ref")
    assert resolved_from(origin, "org/hub-model") == "org/hub-model"  # nothing there: a Hub id stays
    assert resolved_from(origin, None) is None
    moved = tmp_path / "elsewhere" / "runs" / "x"  # the project moved as a whole: found again
    (tmp_path / "elsewhere" / "models" / "ref").mkdir(parents=True)
    moved.mkdir(parents=True)
    assert resolved_from(made_from(moved, "runs/x"), "models/ref") == str((tmp_path / "elsewhere").resolve()
                                                                          / "models" / "ref")
    assert made_from(project / "runs" / "x", "runs/renamed") is None  # renamed since: nothing to guess
    assert made_from(project / "runs" / "x", str(project / "runs" / "x")) is None  # absolute: nothing to resolve
