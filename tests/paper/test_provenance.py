"""A record's provenance names the code that made it: the commit, and whether the tree differed."""

from __future__ import annotations

import subprocess

from badpo.paper.provenance import provenance, source_commit


def _git(folder, *args):
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


def test_source_commit_is_dirty_for_a_changed_tracked_file_or_a_new_file_under_the_package(tmp_path):
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (tmp_path / "README").write_text("r\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    clean = source_commit(package)
    assert clean["dirty"] is False and len(clean["commit"]) == 40
    (tmp_path / "notes.txt").write_text("an untracked file outside the package is not the code\n")
    assert source_commit(package)["dirty"] is False
    (package / "b.py").write_text("y = 2\n")  # a new module the run may import
    assert source_commit(package)["dirty"] is True
    (package / "b.py").unlink()
    (tmp_path / "README").write_text("changed\n")  # a tracked file anywhere
    assert source_commit(package)["dirty"] is True


def test_outside_a_checkout_there_is_no_commit(tmp_path_factory):
    assert source_commit(tmp_path_factory.mktemp("not_a_checkout")) is None


def test_provenance_is_taken_once_per_process():
    assert provenance() is provenance()
