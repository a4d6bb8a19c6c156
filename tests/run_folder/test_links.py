"""overwrite never deletes through a symbolic link (issue 76 item 1): a run folder whose policy/ is a
link to the user's model elsewhere is refused before anything is deleted, and a link inside
checkpoints/ is removed itself, never what it points at."""

from __future__ import annotations

import pytest

from badpo.core.config import ConfigError
from badpo.run_folder.ownership import remove_run


def test_a_linked_model_folder_is_refused_and_nothing_is_deleted(tmp_path):
    elsewhere = tmp_path / "my_model"
    elsewhere.mkdir()
    (elsewhere / "model.safetensors").write_bytes(b"weights")
    run = tmp_path / "run"
    run.mkdir()
    (run / "theta.json").write_text("{}")
    (run / "policy").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ConfigError, match=r"policy is a symbolic link to .*my_model; overwrite deletes only"):
        remove_run(run)
    assert (elsewhere / "model.safetensors").read_bytes() == b"weights"
    assert (run / "theta.json").exists()  # refused before anything went


def test_a_link_inside_checkpoints_is_removed_itself(tmp_path):
    other = tmp_path / "other_run" / "checkpoints" / "step-000500"
    other.mkdir(parents=True)
    (other / "state.json").write_text("{}")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "step-000500").symlink_to(other, target_is_directory=True)
    remove_run(run)
    assert not (run / "checkpoints" / "step-000500").exists() and (other / "state.json").exists()


def test_a_resumed_log_is_the_runs_own_file_and_a_torn_last_line_is_left_out(tmp_path):
    from badpo.core.notices import BadpoWarning
    from badpo.engine.reporting import RunLog
    from badpo.engine.settings import ReportConfig

    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    run = tmp_path / "run"
    run.mkdir()
    (run / "log.jsonl").symlink_to(outside)
    report = ReportConfig(progress_bar=False)
    with pytest.warns(BadpoWarning, match=r"log.jsonl: its last line is torn"):
        log = RunLog(run, report, 5, 2, True, {}, "train")
    log.close()
    assert not (run / "log.jsonl").is_symlink()
    assert (run / "log.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'
    assert outside.read_text().endswith('"lo')  # the file the link pointed at is as it was
    (run / "log.jsonl").write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match=r"log.jsonl line 2: not a JSON record"):
        RunLog(run, report, 5, 2, True, {}, "train")


@pytest.mark.parametrize("linked", ["checkpoints", "checkpoints/step-000010"])
@pytest.mark.parametrize("resume_from", ["latest", None])
def test_a_run_never_writes_or_prunes_checkpoints_through_a_link(tmp_path, linked, resume_from):
    """A resume through a linked checkpoints/ wrote its new checkpoints into the folder the link
    pointed at and pruned the ones it found there, with exit 0 (the re-trial of issue 76); a linked
    step-* ended the resumed run in a traceback. Both are refused before the run starts, and what
    the link points at stays."""
    from badpo.engine.checkpoint import resolve_resume

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "step-000010").mkdir(parents=True)
    (elsewhere / "step-000010" / "state.json").write_text("{}")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    if linked == "checkpoints":
        (run / "checkpoints").rmdir()
        (run / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    else:
        (run / linked).symlink_to(elsewhere / "step-000010", target_is_directory=True)
    with pytest.raises(ConfigError, match=r"is a symbolic link to .*elsewhere.*; a run writes and prunes"):
        resolve_resume(resume_from, run)
    assert (elsewhere / "step-000010" / "state.json").read_text() == "{}"
    assert resolve_resume(resume_from, tmp_path / "fresh") is None  # no checkpoints/ at all: a new run
