"""SavedRun: a run folder's saved files read without a model, for compare and the paper's records.
A missing file is None, an unreadable one a line naming it; the method comes from a TRL record,
run.json, then config.yaml; a folder is a run as the engine says (compare had markers of its own:
log.jsonl beside config.yaml counted, sft.json and checkpoints/ did not)."""

from __future__ import annotations

import json

import pytest

from badpo.comparing.compare_runs import check_out, load_run
from badpo.evaluation.trained_run import TrainedRun
from badpo.run_folder.layout import is_run_folder
from badpo.run_folder.saved import SavedRun
from fixtures.runs import DPO, readouts, write_run


def test_each_file_is_read_when_present_and_none_when_missing(tmp_path):
    moving = {"steps": [1, 2], "converged": False}
    folder = write_run(tmp_path / "ba", "ba_dpo_pooled", readouts(DPO), theta={"variant": "pooled"},
                       audit={"attributes": {}}, convergence=moving)
    saved = SavedRun(folder)
    assert saved.is_run() and not saved.external and saved.has_config()
    assert saved.method() == "ba_dpo_pooled" and saved.convergence() == moving
    assert saved.theta() == {"variant": "pooled"} and saved.audit() == {"attributes": {}}
    assert saved.data()["sha256"] and saved.final() == {} and saved.theta_file == folder / "theta.json"
    bare = SavedRun(tmp_path)
    assert (bare.summary(), bare.theta(), bare.audit(), bare.data(), bare.convergence(), bare.method()) == (None,) * 6
    assert bare.final() == {} and not bare.is_run()


def test_the_method_falls_back_from_run_json_to_config_yaml_and_bad_files_are_named(tmp_path):
    folder = write_run(tmp_path / "run", "dpo", readouts(DPO))
    (folder / "run.json").write_text(json.dumps({"final": {"loss": 0.5}}))
    (folder / "config.yaml").write_text("method: ipo\n")
    assert SavedRun(folder).method() == "ipo" and SavedRun(folder).final() == {"loss": 0.5}
    (folder / "theta.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"theta.json: cannot read the run's theta \(a JSON object was expected"):
        SavedRun(folder).theta()
    (folder / "config.yaml").write_text("method: [unclosed\n")
    (folder / "run.json").unlink()
    with pytest.raises(ValueError, match="config.yaml: cannot read the run's config"):
        SavedRun(folder).method()


def test_compare_takes_the_engines_run_folder(tmp_path):
    """A config.yaml beside log.jsonl alone (a run killed before any checkpoint) is no run folder for
    the engine, and now for compare: --out may lie in it, and a readouts file there reads alone; a
    finished SFT reference (sft.json) is one, and --out inside it is refused as evaluate refuses it."""
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "config.yaml").write_text("method: dpo\n")
    (killed / "log.jsonl").write_text("")
    assert not is_run_folder(killed) and not SavedRun(killed).is_run()
    assert check_out(killed / "cmp") == killed / "cmp"
    (killed / "readouts.json").write_text(json.dumps(readouts(DPO)))
    assert "outside its run folder" in load_run(killed / "readouts.json").notes[0]
    reference = tmp_path / "reference"
    reference.mkdir()
    (reference / "config.yaml").write_text("steps: 1\n")
    (reference / "sft.json").write_text("{}")
    assert is_run_folder(reference)
    with pytest.raises(ValueError, match="inside the run folder"):
        check_out(reference / "cmp")


def test_a_trained_run_gives_its_saved_files(tmp_path):
    trained = TrainedRun.of_settings({}, tmp_path / "run" / "policy", tmp_path / "reference")
    assert trained.saved() == SavedRun(tmp_path / "run") and trained.saved().theta() is None
