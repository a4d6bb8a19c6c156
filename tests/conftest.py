"""Fixtures shared by every test file."""

from __future__ import annotations

import pytest

from badpo.cli import main


@pytest.fixture
def cli_error(capsys):
    """Run ``badpo ARGV`` expecting a user error: exit status 2 and exactly one line on stderr
    (warnings aside), no traceback. Returns that line."""

    def run(argv: list[str]) -> str:
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, err
        lines = [line for line in err.splitlines() if not line.startswith("badpo: warning:")]
        assert len(lines) == 1 and "Traceback" not in err, err
        return lines[0]

    return run
