"""The command line refuses what it used to resolve silently (issue 37, item 6): a second ``-c``
replaced the first, a YAML key given twice kept the last, ``--column`` for one field twice kept
the last, ``KEY=VALUE`` after a flag was refused by ``train`` and ``reproduce``, and each command
took one spelling of the column mapping without a hint at the other."""

from __future__ import annotations

import argparse

import pytest

from badpo.cli import build_parser, main
from badpo.core.arguments import column_overrides, column_pairs
from badpo.core.config import ConfigError, read_settings
from experiments.commands import COMMANDS as EXPERIMENTS
from experiments.commands import main as experiments_main


def test_a_second_config_file_is_refused(tmp_path, capsys):
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("steps: 3\n")
    with pytest.raises(SystemExit) as raised:
        main(["train", "-c", str(tmp_path / "a.yaml"), "-c", str(tmp_path / "b.yaml")])
    assert raised.value.code == 2
    assert "-c given twice" in capsys.readouterr().err


def test_a_yaml_key_given_twice_is_refused_naming_it_and_its_lines(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("steps: 3\noptim:\n  lr: 1.0e-3\n  lr: 1.0e-4\n")
    with pytest.raises(ConfigError, match=r"twice.yaml: .*key 'lr' given twice \(lines 3 and 4\)"):
        read_settings(path)
    (tmp_path / "once.yaml").write_text("steps: 3\noptim:\n  lr: 1.0e-3\nlr: 2\n")  # other mappings: fine
    assert read_settings(tmp_path / "once.yaml") == {"steps": 3, "optim": {"lr": 1e-3}, "lr": 2}
    # a YAML merge key is no key given twice: its keys may be overridden, as YAML says
    (tmp_path / "merge.yaml").write_text("base: &base {lr: 1.0e-3, schedule: cosine}\n"
                                         "optim:\n  <<: *base\n  lr: 2.0e-4\n")
    assert read_settings(tmp_path / "merge.yaml")["optim"] == {"lr": 2e-4, "schedule": "cosine"}


def test_one_field_mapped_twice_by_column_is_refused():
    assert column_pairs(["annotator=worker_id", "prompt=q", "annotator=worker_id"]) == {
        "annotator": "worker_id", "prompt": "q"}  # the same mapping twice says nothing new
    with pytest.raises(ValueError, match=r"--column annotator: given twice \('worker_id' and 'rater'\)"):
        column_pairs(["annotator=worker_id", "annotator=rater"])
    with pytest.raises(ValueError, match="expected FIELD=COLUMN"):
        column_pairs(["annotator"])
    with pytest.raises(ValueError, match=r"^--column 'columns.prompt=q': the option takes FIELD=COLUMN without "
                                         r"'columns.' \(--column prompt=q\)$"):
        column_pairs(["columns.prompt=q"])  # the config key's spelling: was reported as columns.columns.prompt


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """badpo's parser, or that of ``python -m experiments`` (which runs through badpo's) for reproduce."""
    return build_parser(EXPERIMENTS, prog="python -m experiments") if argv[0] == "reproduce" else build_parser()


def _main(argv: list[str]) -> int:
    return experiments_main(argv) if argv[0] == "reproduce" else main(argv)


@pytest.mark.parametrize("argv", [
    ["train", "-c", "x.yaml", "steps=3", "--column", "annotator=w", "optim.lr=1e-4"],
    ["sft", "epochs=2", "-c", "x.yaml", "output_dir=o"],
    ["reproduce", "experiments/configs/reproduce_tiny.yaml", "--plan", "seeds=[42]"],
    ["experiment", "tiny", "--render-only", "seeds=[42]"],
    ["evaluate", "runs/x", "--heldout", "h.csv", "max_prompts=2"],
])
def test_key_value_is_taken_after_a_flag_on_every_command(argv):
    args = _parser(argv).parse_args(argv)
    given = [item for item in argv if "=" in item and not item.startswith(("annotator", "--"))]
    assert list(args.overrides) == given


@pytest.mark.parametrize("argv, positionals, overrides", [
    (["evaluate", "max_prompts=2", "runs/x", "generations=false"], {"run_dir": "runs/x"},
     ["max_prompts=2", "generations=false"]),
    (["build", "tiny-signed", "n_pairs=100", "out/w"], {"corpus": "tiny-signed", "outdir": "out/w"}, ["n_pairs=100"]),
    (["experiment", "seeds=[42]", "tiny", "--render-only"], {"config": "tiny"}, ["seeds=[42]"]),
    (["reproduce", "output_dir=r", "--plan", "sweep.yaml"], {"config": "sweep.yaml"}, ["output_dir=r"]),
])
def test_key_value_is_taken_before_a_positional_too(argv, positionals, overrides):
    """argparse filled the positional with the first word (``evaluate max_prompts=2 RUN`` read the
    override as the run and refused RUN as an override); each word is put back where it belongs."""
    args = _parser(argv).parse_args(argv)
    assert {dest: getattr(args, dest) for dest in positionals} == positionals
    assert list(args.overrides) == overrides


def test_a_positional_named_like_an_override_that_exists_stays_a_positional(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run=1").mkdir()
    args = build_parser().parse_args(["evaluate", "run=1", "max_prompts=2"])
    assert (args.run_dir, list(args.overrides)) == ("run=1", ["max_prompts=2"])


def test_the_other_spelling_of_the_column_mapping_is_read_or_hinted(capsys):
    assert column_overrides(["max_prompts=2", "columns.annotator=w"]) == (["max_prompts=2"], ["annotator=w"])
    args = build_parser().parse_args(["train", "--column", "annotator=w"])  # train takes --column too
    assert args.column == ["annotator=w"]
    with pytest.raises(SystemExit):
        main(["experiment", "tiny", "--column", "annotator=w"])
    assert "columns.FIELD=COLUMN, not --column" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["audit", "data.jsonl", "columns.annotator=w"])
    assert "maps a column with --column FIELD=COLUMN" in capsys.readouterr().err
    assert isinstance(build_parser(), argparse.ArgumentParser)


def test_a_config_key_given_twice_on_the_command_line_is_refused(capsys):
    """As a YAML key given twice: the last value won silently. The same value twice is no conflict."""
    with pytest.raises(SystemExit):
        main(["train", "steps=1", "-c", "x.yaml", "steps=2"])
    assert "steps: given twice ('1' and '2'); give it once" in capsys.readouterr().err
    assert list(build_parser().parse_args(["train", "steps=2", "steps=2"]).overrides) == ["steps=2", "steps=2"]


def test_one_field_mapped_by_both_spellings_is_refused(cli_error):
    line = cli_error(["train", "columns.annotator=a", "--column", "annotator=b"])
    assert line.startswith("badpo train: columns.annotator: given twice ('a' and 'b'); give it once"), line


@pytest.mark.parametrize("command", ["sft", "train", "rm"])
def test_the_training_commands_through_the_api_refuse_as_before(cli_error, command):
    """The commands call badpo.api (issue 48): a key named like the API's own argument is an unknown
    key, not a TypeError, and rows in memory are the API's, not the command line's."""
    assert cli_error([command, "config=x"]).startswith(f"badpo {command}: unknown key(s): config")
    assert cli_error([command, "data=[1, 2]"]).startswith(f"badpo {command}: data: expected str, got [1, 2]")


@pytest.mark.parametrize("command, given", [("experiment", "the CONFIG file and/or KEY=VALUE"),
                                            ("reproduce", "the CONFIG file and/or KEY=VALUE"),
                                            ("demo", "KEY=VALUE"), ("train", "-c FILE and/or KEY=VALUE")])
def test_help_says_how_each_command_takes_its_config(command, given, capsys):
    """experiment, reproduce and demo have no -c, yet their key listings said "-c FILE and/or
    KEY=VALUE": a user who followed the help got "unrecognized arguments: -c"."""
    with pytest.raises(SystemExit):
        _main([command, "--help"])
    listing = [line for line in capsys.readouterr().out.splitlines() if "key, default, meaning" in line]
    assert listing and all(f"({given}; key" in line for line in listing), listing


@pytest.mark.parametrize("argv, says", [(["experiment", "-c", "x.yaml"], "badpo experiment FILE [KEY=VALUE ...]"),
                                        (["reproduce", "--config", "x.yaml"],
                                         "python -m experiments reproduce FILE [KEY=VALUE ...]"),
                                        (["demo", "-c", "x.yaml"], "badpo demo takes no config file")])
def test_a_config_option_on_a_command_without_one_is_hinted(argv, says, capsys):
    with pytest.raises(SystemExit) as raised:
        _main(argv)
    assert raised.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("argv, first", [
    (["train", "--nonsense"], "badpo train: error: unrecognized arguments: --nonsense"),
    (["--nonsense", "train"], "badpo: error: unrecognized arguments: --nonsense"),
    (["--debug", "train", "--nonsense"], "badpo train: error: unrecognized arguments: --nonsense"),
    (["nonsense"], "badpo: error: argument command: invalid choice: 'nonsense'"),
    (["experiment", "-c", "x.yaml"], "badpo experiment: error: unrecognized arguments: -c (badpo experiment takes"),
    (["evaluate"], "badpo evaluate: error: the following arguments are required"),
    ([], "badpo: error: the following arguments are required: command"),
])
def test_an_argument_error_is_one_line_naming_the_command(argv, first, capsys):
    """argparse printed its usage block above the error: several lines where every other refusal
    of the command line is one, exit status 2."""
    with pytest.raises(SystemExit) as raised:
        main(argv)
    err = capsys.readouterr().err
    assert raised.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(first) and err.rstrip().endswith("--help)"), err
