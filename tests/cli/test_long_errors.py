"""An error or warning that echoes a value is cut to a readable line (issue 49's retry: a 2 MB
scalar in a config gave a 2 MB error line)."""

from __future__ import annotations

from badpo.cli import MESSAGE_CHARS, shortened


def test_a_long_message_is_cut_in_its_middle_saying_how_much():
    message = "unknown method '" + "x" * 10_000 + "'; choose one of [dpo]"
    cut = shortened(message)
    assert len(cut) < MESSAGE_CHARS + 60
    assert cut.startswith("unknown method 'xxx") and cut.endswith("; choose one of [dpo]")
    assert f"[{len(message) - MESSAGE_CHARS:,} characters cut]" in cut
    assert shortened("short") == "short"


def test_the_command_line_prints_the_cut_line(cli_error):
    line = cli_error(["train", "model.name_or_path=m", "data=d.jsonl", "method=" + "y" * 100_000])
    assert len(line) < MESSAGE_CHARS + 200 and "characters cut" in line
