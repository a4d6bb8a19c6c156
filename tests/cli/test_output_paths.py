"""Every output path a command takes is checked before any work, an existing file is replaced only
with ``--overwrite``, evaluate writes nothing into a run folder but its readouts.json, and a report
folder holds one report (issue 21, items 2 and 3)."""

from __future__ import annotations

import json

import pytest

import badpo
from badpo.cli import main
from badpo.core.config import ConfigError
from badpo.core.file_sets import LOCK_FILE, folder_lock
from badpo.core.judgments import validate_judgments, write_judgments

ROWS = [{"prompt": f"p{i}", "chosen": f"a{i}", "rejected": f"b{i}", "annotator": f"k{i % 3}",
         "g_chosen": {"tag": float(i % 2), "other": 1.0}, "g_rejected": {"tag": float(1 - i % 2), "other": 0.0}}
        for i in range(12)]


@pytest.fixture
def fake_run(tmp_path, monkeypatch):
    """A run folder as train leaves it; evaluation itself is replaced by a stub that counts its
    calls, so that a refusal is seen to come before any model is loaded."""
    run = tmp_path / "run"
    (run / "policy").mkdir(parents=True)
    (run / "config.yaml").write_text("method: dpo\n")
    (run / "theta.json").write_text('{"format": "badpo.bias/1"}\n')
    calls = []

    def evaluate_run_dir(*args, **kwargs):
        calls.append(args)
        return {"inputs": {"attributes": ["tag"]}}

    monkeypatch.setattr("badpo.evaluation.trained_run.evaluate_run_dir", evaluate_run_dir)
    return run, calls


@pytest.mark.parametrize("target", ["theta.json", "policy/readouts.json", "config.yaml"])
def test_evaluate_refuses_an_out_inside_the_run_folder_before_loading_anything(fake_run, cli_error, target):
    run, calls = fake_run
    theta = (run / "theta.json").read_text()
    line = cli_error(["evaluate", str(run), "--out", str(run / target)])
    assert f"inside the run folder {run}, where evaluate writes nothing but its readouts.json" in line
    assert calls == [] and (run / "theta.json").read_text() == theta


def test_evaluate_refuses_an_out_inside_another_run_folder(fake_run, tmp_path, cli_error):
    run, calls = fake_run
    other = tmp_path / "other"
    (other / "policy").mkdir(parents=True)
    (other / "config.yaml").write_text("method: dpo\n")
    (other / "run.json").write_text("{}\n")
    assert f"inside the run folder {other}" in cli_error(["evaluate", str(run), "--out", str(other / "r.json")])
    assert calls == []


def test_evaluate_replaces_an_existing_out_only_with_overwrite(fake_run, tmp_path, cli_error, capsys):
    run, calls = fake_run
    out = tmp_path / "mine.json"
    out.write_text("keep me\n")
    line = cli_error(["evaluate", str(run), "--out", str(out)])
    assert line.startswith(f"badpo evaluate: --out {out}: the file exists; give --overwrite") and calls == []
    assert out.read_text() == "keep me\n"
    assert main(["evaluate", str(run), "--out", str(out), "--overwrite"]) == 0
    assert json.loads(out.read_text())["inputs"]["attributes"] == ["tag"]
    assert main(["evaluate", str(run)]) == 0 and (run / "readouts.json").exists() and len(calls) == 2


def test_evaluate_never_replaces_the_run_s_own_evaluation_without_overwrite(fake_run, cli_error):
    """`badpo evaluate RUN` replaced RUN/readouts.json silently (a quick 5-prompt evaluation over
    20 prompts that had cost hours); now it is refused, before anything is loaded, unless --overwrite."""
    run, calls = fake_run
    (run / "readouts.json").write_text('{"inputs": {"n_prompts": 20}}\n')
    for argv in (["evaluate", str(run)], ["evaluate", str(run), "--out", str(run / "readouts.json")]):
        line = cli_error(argv)
        assert line.startswith(f"badpo evaluate: {run / 'readouts.json'}: this run has been evaluated already")
        assert "--overwrite" in line and calls == []
    assert (run / "readouts.json").read_text() == '{"inputs": {"n_prompts": 20}}\n'
    with pytest.raises(ConfigError, match="evaluated already"):
        badpo.evaluate(run)
    assert main(["evaluate", str(run), "--overwrite"]) == 0 and len(calls) == 1
    assert json.loads((run / "readouts.json").read_text())["inputs"]["attributes"] == ["tag"]


def test_evaluate_refuses_an_out_under_a_file_or_at_a_folder(fake_run, tmp_path, cli_error):
    run, calls = fake_run
    (tmp_path / "plain").write_text("x")
    assert "is a file, not a folder" in cli_error(["evaluate", str(run), "--out", str(tmp_path / "plain" / "r.json")])
    assert "is a folder; give the path of a file" in cli_error(["evaluate", str(run), "--out", str(tmp_path)])
    assert calls == []


@pytest.fixture
def judgments(tmp_path):
    path = tmp_path / "judgments.jsonl"
    write_judgments(path, validate_judgments(ROWS))
    return path


def test_audit_json_replaces_an_existing_file_only_with_overwrite(judgments, tmp_path, cli_error, capsys):
    out = tmp_path / "audit.json"
    out.write_text("mine\n")
    line = cli_error(["audit", str(judgments), "-a", "tag=given:tag", "--json", str(out)])
    assert "--json" in line and "the file exists; give --overwrite" in line and out.read_text() == "mine\n"
    assert main(["audit", str(judgments), "-a", "tag=given:tag", "--json", str(out), "--overwrite"]) == 0
    assert json.loads(out.read_text())["attribute_names"] == ["tag"]


def test_a_pseudonymised_report_never_sits_beside_the_plain_reports_plots(judgments, tmp_path, cli_error, capsys):
    """A plain report on two attributes, then a pseudonymised one on one of them into the same
    folder: refused without --overwrite; with it, exactly the old report's files go (its plot
    forest-other.png held raw ids) and a file of the user's stays."""
    report = tmp_path / "report"
    assert main(["audit", str(judgments), "-a", "tag=given:tag", "-a", "other=given:other",
                 "--report", str(report)]) == 0
    (report / "notes.txt").write_text("mine\n")
    assert (report / "forest-other.png").exists()
    pseudonymised = ["audit", str(judgments), "-a", "tag=given:tag", "--report", str(report),
                     "--pseudonymise", "--pseudonym-key", "s3cret"]
    line = cli_error(pseudonymised)
    assert "holds another report (6 files); give --overwrite to replace it" in line
    assert main([*pseudonymised, "--overwrite"]) == 0
    kept = sorted(p.name for p in report.iterdir() if p.name != LOCK_FILE)
    assert kept == ["README.md", "annotators.csv", "audit.json", "forest-tag.png", "notes.txt", "report.html"]
    assert "k0" not in (report / "annotators.csv").read_text()


def test_a_plain_audit_into_a_report_folder_another_writer_holds_is_refused(judgments, tmp_path, cli_error):
    """Issue 49's retry: a plain audit and a discover started together into one --report both
    wrote there (only discover took the folder's lock); now the second is refused and writes nothing."""
    report = tmp_path / "report"
    with folder_lock(report, "--report"):  # as a discover of the same folder holds it while it screens
        line = cli_error(["audit", str(judgments), "-a", "tag=given:tag", "--report", str(report)])
    assert f"--report {report}" in line and "is writing there" in line
    assert [p.name for p in report.iterdir()] == [LOCK_FILE]


def test_a_report_folder_with_files_no_report_lists_is_refused(judgments, tmp_path, cli_error):
    for stray in ("forest-tag.png", "audit.json"):
        folder = tmp_path / stray.replace(".", "_")
        folder.mkdir()
        (folder / stray).write_text("another tool's\n")
        line = cli_error(["audit", str(judgments), "-a", "tag=given:tag", "--report", str(folder), "--overwrite"])
        assert f"holds {stray}, which no report there lists; choose an empty folder" in line
        assert (folder / stray).read_text() == "another tool's\n"


def test_build_replaces_a_corpus_only_with_overwrite(tmp_path, cli_error, capsys, cli_training):
    """A rebuild into the folder of a run's data would replace train.jsonl without a word."""
    world = tmp_path / "world"
    world.mkdir()
    (world / "train.jsonl").write_text("my judgments\n")
    line = cli_error(["build", "tiny-signed", str(world), "n_pairs=60"])
    assert f"OUTDIR {world}: holds train.jsonl, which building tiny-signed replaces; give --overwrite" in line
    assert (world / "train.jsonl").read_text() == "my judgments\n"
    assert main(["build", "tiny-signed", str(world), "n_pairs=60", "--overwrite"]) == 0
    assert (world / "train.jsonl").read_text() != "my judgments\n"


@pytest.mark.parametrize("command", ["sft", "train", "rm"])
def test_a_run_s_output_dir_that_is_a_file_is_refused_in_one_line(tmp_path, cli_error, command):
    data = tmp_path / "judgments.jsonl"
    write_judgments(data, validate_judgments(ROWS))
    line = cli_error([command, f"data={data}", f"output_dir={data}", "model.name_or_path=unused"])
    expected = f"badpo {command}: output_dir: {data} is a file; a run writes into a folder of its own"
    assert line.startswith(expected), line


def test_sft_refuses_the_folder_of_its_own_data_as_output_dir(tmp_path, cli_error):
    """An SFT reference written into a corpus folder: its model files among the corpus's (train and
    rm refused it already)."""
    (tmp_path / "corpus").mkdir()
    data = tmp_path / "corpus" / "sft.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"p{i}", "response": f"r{i}"}) + "\n" for i in range(4)))
    line = cli_error(["sft", f"data={data}", f"output_dir={tmp_path / 'corpus'}", "model.name_or_path=unused"])
    assert "holds the run's data" in line and str(data) in line, line
