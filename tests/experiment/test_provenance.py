"""A record's provenance names the code that made it: the commit, and whether the tree differed."""

from __future__ import annotations

import subprocess

import pytest

from badpo.experiment.provenance import cpu_identity, device_class, provenance, source_commit


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


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 167
model name\t: Intel(R) Xeon(R) Processor
stepping\t: 1

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: another processor
stepping\t: 0
"""


def test_cpu_identity_reads_the_first_processor_and_names_its_signature():
    identity = cpu_identity(CPUINFO)
    assert identity["model"] == "Intel(R) Xeon(R) Processor"
    assert identity["signature"] == "GenuineIntel/6/167/1"  # the first block, not the second's AMD


def test_cpu_identity_leaves_unknown_fields_none():
    identity = cpu_identity("model name\t: a board\n")
    assert identity["model"] == "a board" and identity["signature"] is None


def test_a_cpu_record_names_its_processor_and_kernels(monkeypatch):
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    if device_class() != "cpu":
        pytest.skip("a GPU machine names its GPU instead (tests/experiment/test_device_class_key.py)")
    device = provenance()["device"]
    assert set(device["cpu"]) == {"model", "signature", "capability"}
