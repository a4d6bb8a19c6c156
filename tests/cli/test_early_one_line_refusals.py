"""Options that cannot work are one line, before any folder is made or any model loaded (issue 49,
item 5).

``bias.fixed_offset`` of the wrong length under the default ``bias.init`` gave ``RuntimeError: size
mismatch``; ``badpo build smol-multipref OUT num_threads=-2`` a traceback and an empty OUT.
"""

from __future__ import annotations

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
])
def test_a_real_model_builder_refuses_at_once_and_makes_no_folder(tmp_path, cli_error, corpus, override, expected):
    out = tmp_path / "world"
    line = cli_error(["build", corpus, str(out), override, "model=nowhere"])
    assert expected in line, line
    assert not out.exists()
