"""Discover reads a JSONL file twice and holds neither pass (badpo.data.judgment_stream): the same
findings as the whole-file reader, repeats kept or dropped alike, a bad row refused before the
screen starts, a file changed between the passes refused, and each judgment let go once screened."""

from __future__ import annotations

import gc
import json
import weakref

import pytest

from badpo.auditing import discover_report
from badpo.auditing.discover_report import discover_source
from badpo.core.config import ConfigError
from badpo.core.judgments import Judgment, JudgmentError, duplicate_rows, judgment_digest, write_judgments
from badpo.data.judgment_stream import judgment_stream
from badpo.data.sources import read_judgment_source
from fixtures.discover_worlds import WORLDS


@pytest.fixture(scope="module")
def world_file(tmp_path_factory):
    """The MultiPref discover world with its first 30 judgments repeated at the end."""
    rows = WORLDS["multipref"](0)
    path = tmp_path_factory.mktemp("stream") / "judgments.jsonl"
    write_judgments(path, [*rows, *rows[:30]])
    return path


@pytest.mark.parametrize("duplicates", ["keep", "drop"])
def test_the_stream_finds_what_the_whole_file_reader_finds(world_file, duplicates, monkeypatch):
    streamed = discover_source(str(world_file), duplicates=duplicates, progress=False)
    monkeypatch.setattr(discover_report, "judgment_stream", lambda *args: None)  # the whole-file reader
    whole = discover_source(str(world_file), duplicates=duplicates, progress=False)
    assert repr(streamed[0]) == repr(whole[0]) and streamed[1] == whole[1]
    assert "30 exact duplicate judgment(s)" in streamed[1] and streamed[0].findings


def test_a_bad_last_row_is_refused_before_the_screen_starts(world_file, tmp_path, monkeypatch):
    path = tmp_path / "bad.jsonl"
    path.write_text(world_file.read_text() + json.dumps({"prompt": "q", "chosen": "a", "rejected": "a",
                                                          "annotator": "r"}) + "\n")
    monkeypatch.setattr(discover_report, "discover", lambda *args, **kwargs: pytest.fail("the screen started"))
    lines = len(world_file.read_text().splitlines())
    with pytest.raises(JudgmentError, match=f"line {lines + 1}"):
        discover_source(str(path), progress=False)


def test_a_file_changed_between_the_passes_is_refused(world_file, tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text(world_file.read_text())
    stream = judgment_stream(str(path))
    stream.check()
    with open(path, "a") as handle:
        handle.write(json.dumps({"prompt": "q", "chosen": "a", "rejected": "b", "annotator": "r"}) + "\n")
    with pytest.raises(ConfigError, match="changed while it was read"):
        next(stream.judgments())


def test_each_judgment_is_let_go_once_the_reader_moves_on(world_file):
    stream = judgment_stream(str(world_file))
    stream.check()
    judgments = stream.judgments()
    first = weakref.ref(next(judgments))
    next(judgments)
    gc.collect()
    assert first() is None


def test_only_a_local_jsonl_file_is_streamed(world_file, tmp_path):
    assert judgment_stream(str(world_file)) is not None
    assert judgment_stream(str(world_file), split="train") is None  # the whole-file reader refuses it
    (tmp_path / "j.json").write_text("[]")
    assert judgment_stream(str(tmp_path / "j.json")) is None and judgment_stream("some/hub-id") is None


def test_the_digest_tells_judgments_apart_as_equality_does():
    base = Judgment("q", "a", "b", "r", g_chosen={"x": 1.0}, g_rejected={"x": 0.0})
    same = [Judgment("q", "a", "b", "r", g_chosen={"x": 1}, g_rejected={"x": -0.0})]
    other = [Judgment("q", "a", "b", "r2", g_chosen={"x": 1.0}, g_rejected={"x": 0.0}),
             Judgment("q", "a", "b", "r", g_chosen={"x": 1.5}, g_rejected={"x": 0.0}),
             Judgment("q", "a", "b", "r", pair_id="p", g_chosen={"x": 1.0}, g_rejected={"x": 0.0}),
             Judgment("q", "a", "b", "r"), Judgment("q", "b", "a", "r", g_chosen={"x": 1.0}, g_rejected={"x": 0.0})]
    for judgment in same:
        assert judgment == base and judgment_digest(judgment) == judgment_digest(base)
    for judgment in other:
        assert judgment != base and judgment_digest(judgment) != judgment_digest(base)
    assert duplicate_rows([base, *other, *same, other[0]]) == [6, 7]


def test_a_file_under_home_is_read_and_its_bad_line_named(world_file, tmp_path, monkeypatch):
    """``~/j.jsonl`` (as a config file may give it): the whole-file reader opened the path
    unexpanded and failed with FileNotFoundError; both readers now read it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "j.jsonl").write_text(world_file.read_text() + "{not json\n")
    line = len(world_file.read_text().splitlines()) + 1
    with pytest.raises(JudgmentError, match=f"j.jsonl line {line}: not valid JSON"):
        judgment_stream("~/j.jsonl").check()
    with pytest.raises(JudgmentError, match=f"j.jsonl line {line}: not valid JSON"):
        read_judgment_source("~/j.jsonl")
