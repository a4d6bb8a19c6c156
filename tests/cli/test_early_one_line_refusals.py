"""Options that cannot work are one line, before any folder is made or any model loaded (issue 49,
items 5 and 6).

``bias.fixed_offset`` of the wrong length under the default ``bias.init`` gave ``RuntimeError: size
mismatch``; ``badpo build smol-multipref OUT num_threads=-2`` a traceback and an empty OUT; and
smol-multipref took ``heldout_fraction=1`` and ``n_eval_prompts=100000`` until after the model had
sampled every answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from badpo.core.judgments import validate_judgments, write_judgments

ROWS = [{"prompt": f"p{i}", "chosen": f"a{i}", "rejected": f"b{i}", "annotator": f"k{i % 3}",
         "g_chosen": {"tag": float(i % 2)}, "g_rejected": {"tag": float(1 - i % 2)}} for i in range(12)]


@pytest.mark.parametrize("init", [[], ["bias.init=zero"], ["bias.init=reference"]])
@pytest.mark.parametrize("command", ["train", "rm"])
def test_a_fixed_offset_of_the_wrong_length_is_one_line_before_any_folder(tmp_path, cli_error, init, command):
    data = tmp_path / "judgments.jsonl"
    write_judgments(data, validate_judgments(ROWS))
    out = tmp_path / "run"
    line = cli_error([command, f"data={data}", f"output_dir={out}", "model.name_or_path=nowhere",
                      "attributes=[tag=given:tag]", "bias.fixed_offset=[0.1, 0.2]", *init])
    assert line.startswith(f"badpo {command}: bias.fixed_offset: expected 1 values, one per attribute ['tag'], "
                           "got 2"), line
    assert not out.exists()


def test_names_counts_two_coordinates(tmp_path, cli_error):
    line = cli_error(["train", f"data={tmp_path / 'x.jsonl'}", f"output_dir={tmp_path / 'run'}",
                      "model.name_or_path=nowhere", "attributes=[names, length]", "bias.fixed_offset=[0.1]"])
    assert "bias.fixed_offset: expected 3 values, one per attribute ['woman_coded', 'black_coded', 'length'], " \
           "got 1" in line


@pytest.mark.parametrize("corpus, override, expected", [
    ("smol-multipref", "num_threads=-2", "num_threads: must be >= 0 (0 keeps torch's default), got -2"),
    ("smol-signed", "num_threads=-2", "num_threads: must be >= 0 (0 keeps torch's default), got -2"),
    ("smol-multipref", "heldout_fraction=1", "heldout_fraction: 1.0 of 500 prompts holds out 500; both the "
                                             "training and the held-out side need a prompt"),
    ("smol-multipref", "heldout_fraction=0", "heldout_fraction: 0.0 of 500 prompts holds out 0"),
    ("smol-multipref", "n_eval_prompts=100000", "n_eval_prompts: must lie in [1, 50] (the held-out prompts of "
                                                "500; lower it or raise heldout_fraction), got 100000"),
    ("smol-multipref", "n_eval_prompts=-1", "n_eval_prompts: must lie in [1, 50]"),
])
def test_a_real_model_builder_refuses_at_once_and_makes_no_folder(tmp_path, cli_error, corpus, override, expected):
    out = tmp_path / "world"
    line = cli_error(["build", corpus, str(out), override, "model=nowhere"])
    assert expected in line, line
    assert not out.exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, a folder nobody can create files in")
@pytest.mark.parametrize("declared", [["--discover"], ["-a", "tag=given:tag"]])
@pytest.mark.parametrize("option, target", [("--json", "/proc/x.json"), ("--report", "/proc/report")])
def test_an_audit_output_nobody_can_write_is_refused_before_the_screen_naming_it(tmp_path, cli_error, declared,
                                                                                  option, target):
    """It failed after the whole screen, naming an internal temp file (/proc/.x.json.123.tmp)."""
    data = tmp_path / "judgments.jsonl"
    write_judgments(data, validate_judgments(ROWS))
    line = cli_error(["audit", str(data), *declared, option, target])  # one line: no progress of a screen
    assert line.startswith(f"badpo audit: {option} {target}: cannot write in /proc"), line


def test_a_failed_write_names_the_file_not_its_temporary(tmp_path):
    from badpo.core.jsonio import atomic_write_text

    (tmp_path / "plain").write_text("a file")
    with pytest.raises(OSError) as failed:
        atomic_write_text(tmp_path / "plain" / "out.json", "{}")
    assert str(failed.value).startswith(f"cannot write {tmp_path / 'plain' / 'out.json'}: ") and ".tmp" not in str(
        failed.value)
