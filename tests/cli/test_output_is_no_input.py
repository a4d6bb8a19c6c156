"""No output may be a file the command reads (issue 49, item 2).

``badpo evaluate RUN --out DATA/train.jsonl --overwrite`` replaced the training data, ``--heldout H
--out H --overwrite`` the file it read, and ``badpo audit H --json H --overwrite`` (with or without
``--discover``) likewise. Each is refused before any work, naming the path, also through a symlink
or a hard link.
"""

from __future__ import annotations

import os

import pytest

from badpo.core.judgments import validate_judgments, write_judgments

ROWS = [{"prompt": f"p{i}", "chosen": f"a{i}", "rejected": f"b{i}", "annotator": f"k{i % 3}",
         "g_chosen": {"tag": float(i % 2)}, "g_rejected": {"tag": float(1 - i % 2)}} for i in range(12)]


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A run folder whose config names its training data; evaluation is a stub counting its calls."""
    data = tmp_path / "data"
    data.mkdir()
    write_judgments(data / "train.jsonl", validate_judgments(ROWS))
    write_judgments(data / "heldout.jsonl", validate_judgments(ROWS))
    run = tmp_path / "run"
    (run / "policy").mkdir(parents=True)
    (run / "config.yaml").write_text(f"method: dpo\ndata: {data / 'train.jsonl'}\n")
    calls = []
    monkeypatch.setattr("badpo.evaluation.trained_run.evaluate_run_dir",
                        lambda *a, **k: calls.append(a) or {"inputs": {}})
    return run, data, calls


def _unchanged(path, cli_error, argv, expected):
    before = path.read_bytes()
    line = cli_error(argv)
    assert expected in line, line
    assert path.read_bytes() == before


def test_evaluate_refuses_an_out_that_is_the_run_s_training_data(world, cli_error):
    run, data, calls = world
    train = data / "train.jsonl"
    _unchanged(train, cli_error, ["evaluate", str(run), "--out", str(train), "--overwrite"],
               f"--out {train}: is {train}, read as the run's training data; writing there would replace it")
    assert calls == []


def test_evaluate_refuses_an_out_that_is_the_heldout_file_or_the_corpus_beside_the_data(world, cli_error):
    run, data, calls = world
    held = data / "heldout.jsonl"
    _unchanged(held, cli_error, ["evaluate", str(run), "--heldout", str(held), "--out", str(held), "--overwrite"],
               f"--out {held}: is {held}, read as --heldout")
    _unchanged(held, cli_error, ["evaluate", str(run), "--out", str(held), "--overwrite"],
               "read as the corpus beside the run's training data")
    assert calls == []


def test_a_symlink_or_a_hard_link_to_an_input_is_the_input(world, cli_error, tmp_path):
    run, data, calls = world
    held = data / "heldout.jsonl"
    (tmp_path / "soft.jsonl").symlink_to(held)
    os.link(held, tmp_path / "hard.jsonl")
    for alias in ("soft.jsonl", "hard.jsonl"):
        out = tmp_path / alias
        _unchanged(held, cli_error, ["evaluate", str(run), "--heldout", str(held), "--out", str(out), "--overwrite"],
                   f"--out {out}: is {held}, read as --heldout")
    assert calls == []


@pytest.mark.parametrize("extra", [["-a", "tag=given:tag"], ["--discover"]])
def test_audit_refuses_a_json_that_is_its_data(world, cli_error, extra):
    _, data, _ = world
    held = data / "heldout.jsonl"
    _unchanged(held, cli_error, ["audit", str(held), *extra, "--json", str(held), "--overwrite"],
               f"--json {held}: is {held}, read as DATA")


def test_audit_stream_refuses_a_state_or_a_json_that_is_its_data(world, cli_error):
    _, data, _ = world
    held = data / "heldout.jsonl"
    _unchanged(held, cli_error, ["audit", str(held), "-a", "tag=given:tag", "--stream", str(held)],
               f"--stream {held}: is {held}, read as DATA")
    _unchanged(held, cli_error, ["audit", str(held), "-a", "tag=given:tag", "--stream", str(data / "state.json"),
                                 "--json", str(held), "--overwrite"], f"--json {held}: is {held}, read as DATA")


@pytest.mark.parametrize("extra, name", [(["-a", "tag=given:tag"], "annotators.csv"), (["--discover"], "discover.csv")])
def test_audit_refuses_a_report_that_would_replace_its_data(tmp_path, cli_error, extra, name):
    data = tmp_path / name
    data.write_text("prompt,chosen,rejected,annotator\n" + "".join(f"p{i},a{i},b{i},k{i % 3}\n" for i in range(12)))
    _unchanged(data, cli_error, ["audit", str(data), *extra, "--report", str(tmp_path), "--overwrite"],
               f"--report {data}: is {data}, read as DATA")


def test_the_api_refuses_it_too(world):
    import badpo

    run, data, calls = world
    held = data / "heldout.jsonl"
    with pytest.raises(ValueError, match="read as --heldout"):
        badpo.evaluate(run, heldout=held, out=held, overwrite=True)
    with pytest.raises(ValueError, match="read as data"):
        badpo.audit(held, ["tag=given:tag"], json_out=held, overwrite=True)
    assert calls == []
