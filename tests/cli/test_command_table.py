"""The command line's tables (issue 34, item 4): commands, training commands and corpora are rows
of objects, not module paths in strings. Naming one loads nothing heavy, and an unknown name is a
one-line error listing the known ones."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from badpo.cli import COMMANDS, build_parser, main
from badpo.commands.training import TRAININGS
from badpo.core.config import ConfigError
from badpo.corpora.builders import CORPORA, Builder, corpus_builder


def test_help_loads_neither_torch_nor_a_corpus_builder():
    code = ("import sys\nfrom badpo.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules, 'datasets' in sys.modules, 'badpo.experiment.pipeline' in sys.modules, "
            "'badpo.corpora.tiny' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split()[-4:] == ["False", "False", "False", "False"]


def test_every_command_row_adds_the_parser_of_its_name_once():
    names = [command.name for command in COMMANDS]
    assert len(names) == len(set(names))
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == names
    assert {"sft", "train", "rm"} == {row.name for row in TRAININGS} <= set(names)


def test_an_unknown_command_is_one_line_listing_the_commands(capsys):
    with pytest.raises(SystemExit) as raised:
        main(["trian"])
    assert raised.value.code == 2
    error = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(error) == 1 and "invalid choice: 'trian'" in error[0]
    assert all(f"'{command.name}'" in error[0] for command in COMMANDS)


def test_every_corpus_row_loads_its_builder():
    for name, row in CORPORA.items():
        builder = row.load()
        assert row.name == name and isinstance(builder, Builder) and builder.output_files, name
        assert all(callable(f) for f in (builder.build, builder.summary)), name
    assert corpus_builder("own-data").source_fingerprints is not None
    assert corpus_builder("multipref").source_fingerprints is None


def test_an_unknown_corpus_is_one_line_listing_the_corpora():
    with pytest.raises(ConfigError) as raised:
        corpus_builder("tiny-sigend")
    message = str(raised.value)
    assert "\n" not in message and "unknown corpus 'tiny-sigend'" in message
    assert all(repr(name) in message for name in CORPORA)


def test_build_refuses_an_unknown_corpus_naming_the_known_ones(tmp_path, capsys):
    with pytest.raises(SystemExit) as raised:
        main(["build", "tiny-sigend", str(tmp_path)])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'tiny-sigend'" in err and "'own-data'" in err


def test_ctrl_c_is_one_line_with_exit_130_and_debug_may_follow_the_command(monkeypatch, capsys, tmp_path):
    """A user who stops a command with Ctrl-C (or whose conversion gets SIGTERM) reads one line
    saying what stays, not a traceback of where it stopped; every error line says "--debug for the
    traceback", and it is taken after the command too."""
    import dataclasses

    import badpo.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    def failing(args):
        raise ValueError("bad input")

    rows = {"compare": interrupted, "evaluate": failing}
    monkeypatch.setattr(cli, "COMMANDS", tuple(dataclasses.replace(row, run=rows.get(row.name, row.run))
                                               for row in cli.COMMANDS))
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().startswith("badpo compare: interrupted; the files written so far "
                                                             "stay, each whole")
    rows = {"evaluate": interrupted}  # a command that trains nothing does not speak of resuming a training
    monkeypatch.setattr(cli, "COMMANDS", tuple(dataclasses.replace(row, run=rows.get(row.name, row.run))
                                               for row in cli.COMMANDS))
    assert cli.main(["evaluate", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert "no readouts were written" in err and "checkpoint" not in err
    assert set(cli.STOPPED) - {None} <= {row.name for row in cli.COMMANDS}  # each row names a command
    rows = {"compare": interrupted, "evaluate": failing}
    monkeypatch.setattr(cli, "COMMANDS", tuple(dataclasses.replace(row, run=rows.get(row.name, row.run))
                                               for row in cli.COMMANDS))
    with pytest.raises(ValueError, match="^bad input$"):  # --debug after the command: the traceback
        cli.main(["evaluate", str(tmp_path), "--debug"])
    assert cli.main(["evaluate", str(tmp_path)]) == 2
    assert "bad input (--debug for the traceback)" in capsys.readouterr().err


def test_sigterm_ends_a_command_in_one_line_with_exit_143(monkeypatch, capsys, tmp_path):
    """``kill`` during a command (train here) went out silently with status -15; it now runs the
    command's cleanups as Ctrl-C does, says so in one line and exits 143, and the handler before
    is back afterwards."""
    import dataclasses
    import signal

    import badpo.cli as cli
    from fixtures.signals import deliver

    def killed(args):
        deliver(signal.SIGTERM)

    rows = tuple(dataclasses.replace(row, run=killed if row.name == "compare" else row.run) for row in cli.COMMANDS)
    monkeypatch.setattr(cli, "COMMANDS", rows)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 143
    line = capsys.readouterr().err.strip()
    assert line.startswith("badpo compare: terminated (SIGTERM); the files written so far stay")
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stopped_conversion_does_not_say_what_it_wrote_stays(monkeypatch, capsys, tmp_path, signal_name, status):
    """A conversion stopped by Ctrl-C or ``kill`` removes its staging folder on the way out; its line
    said "what it had written stays (a training run resumes ...)", as if a half model were kept."""
    import dataclasses
    import signal

    import badpo.cli as cli
    from fixtures.signals import deliver, python_handles_sigint

    def stopped(args):
        deliver(getattr(signal, signal_name))

    rows = tuple(dataclasses.replace(row, run=stopped if row.name == "convert-gguf" else row.run)
                 for row in cli.COMMANDS)
    monkeypatch.setattr(cli, "COMMANDS", rows)
    with python_handles_sigint():
        assert cli.main(["convert-gguf", str(tmp_path / "x.gguf"), str(tmp_path / "out")]) == status
    err = capsys.readouterr().err.strip()
    assert err.startswith("badpo convert-gguf: ") and "nothing was converted" in err, err
    assert "stays" not in err and "resume" not in err and "\n" not in err


def test_a_busy_machine_makes_torchs_threads_wait_passively_and_a_users_choice_stands(monkeypatch):
    """Beside two busy processes on two cores, spinning OpenMP threads made the demo's reference 22
    times slower (results/bench/busy_machine.json): a command started on a busy machine sets
    OMP_WAIT_POLICY=PASSIVE before torch loads; a quiet machine and a user's own value are left alone."""
    import badpo.cli as cli

    monkeypatch.setattr(cli.os, "cpu_count", lambda: 2)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(cli.os, "getloadavg", lambda: (0.4, 0.3, 0.2))
    assert not cli.wait_passively_when_busy() and "OMP_WAIT_POLICY" not in cli.os.environ
    monkeypatch.setattr(cli.os, "getloadavg", lambda: (3.9, 3.2, 2.1))
    assert cli.wait_passively_when_busy() and cli.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert not cli.wait_passively_when_busy() and cli.os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_safetensors_own_error_is_one_line_and_another_exception_a_traceback(monkeypatch, capsys, tmp_path):
    """A full disk while a checkpoint or the SFT model is written raises safetensors' own error, which
    is not an OSError: it was a traceback (issue 76's re-trial); a bug of badpo's stays one."""
    import dataclasses

    import badpo.cli as cli

    SafetensorError = type("SafetensorError", (Exception,), {})

    def full_disk(args):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    def bug(args):
        raise KeyError("a bug")

    for run, expected in ((full_disk, 2), (bug, None)):
        monkeypatch.setattr(cli, "COMMANDS", tuple(dataclasses.replace(row, run=run if row.name == "evaluate" else
                                                                       row.run) for row in cli.COMMANDS))
        if expected is None:
            with pytest.raises(KeyError):
                cli.main(["evaluate", str(tmp_path)])
            continue
        assert cli.main(["evaluate", str(tmp_path)]) == expected
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["badpo evaluate: Error while serializing: I/O error: No space left on device (os error 28) "
                       "(--debug for the traceback)"]
