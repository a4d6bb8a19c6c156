"""The screen's compressed answers read back as the strings given, each once, and the command's
screen lets go of the judgments it read (issue 49: discover's memory on long answers)."""

from __future__ import annotations

import gc
import weakref

from badpo.auditing.discover_report import _handed_over
from badpo.auditing.packed_texts import PackedTexts
from badpo.core.judgments import Judgment


def test_texts_read_back_as_given_each_held_once():
    texts = PackedTexts()
    given = ["plain", "two  spaces here", "ünïcode — and emoji 🙂", "", "plain", "lone surrogate \udc80"]
    assert [texts.add(t) for t in given] == [0, 1, 2, 3, 0, 4]
    assert len(texts) == 5 and list(texts) == [t for i, t in enumerate(given) if i != 4]
    assert texts[2] == given[2] and texts[1:3] == given[1:3] and texts[-1] == given[-1]
    assert texts.spaces.tolist() == [0, 3, 4, 0, 2]
    assert texts == ["plain", "two  spaces here", "ünïcode — and emoji 🙂", "", "lone surrogate \udc80"]
    assert PackedTexts(given) == texts and PackedTexts(["x", "y"]) != "xy"


def test_a_long_answer_is_held_in_fewer_bytes_than_its_text():
    answer = " ".join(f"w{(i * 7919) % 500}" for i in range(300))
    texts = PackedTexts([answer])
    assert len(texts._blobs[0]) < 0.6 * len(answer) and texts[0] == answer


def test_the_screen_lets_go_of_each_row_it_is_handed():
    rows = [Judgment(prompt="p", chosen=f"a{i}", rejected="b", annotator="r") for i in range(3)]
    first = weakref.ref(rows[0])
    handed = _handed_over(rows)
    assert next(handed).chosen == "a0" and rows[0] is None and rows[1] is not None
    assert next(handed).chosen == "a1"  # the generator held the first row until now
    gc.collect()
    assert first() is None
    assert [row.chosen for row in handed] == ["a2"] and rows == [None, None, None]
