"""The data screen's n-gram ids in two bytes with escapes read back as the plain ids, and the screen
finds the same with every id escaped as with none (issue 49: discover's memory on long answers)."""

from __future__ import annotations

import numpy as np
import pytest

from badpo.auditing import discover_data, feature_ids
from badpo.auditing.discover import DiscoverySettings, discover
from badpo.auditing.feature_ids import ESCAPE, FeatureIds
from badpo.auditing.packed_texts import PackedTexts
from badpo.core.judgments import Judgment


def _chunks(rows: list[list[int]], sizes: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Consecutive chunks of ``rows`` of the given sizes, as the screen hands them over."""
    chunks, start = [], 0
    for size in sizes:
        part = rows[start:start + size]
        offsets = np.concatenate([[0], np.cumsum([len(r) for r in part])]).astype(np.int64)
        chunks.append((offsets, np.array([i for r in part for i in r], dtype=np.int64)))
        start += size
    return chunks


def test_ids_above_the_escape_come_back_in_order_for_any_rows():
    rng = np.random.default_rng(0)
    rows = [rng.integers(0, 3 * ESCAPE, size=rng.integers(0, 9)).tolist() for _ in range(40)]
    rows[3] = [ESCAPE - 1, ESCAPE, ESCAPE + 1, 0]  # both sides of the escape value
    table = FeatureIds.from_chunks(_chunks(rows, [7, 0, 20, 13]))
    assert table.flat.dtype == np.uint16 and table.escaped.dtype == np.int32
    assert table.per_row.tolist() == [len(r) for r in rows]
    wanted = np.array([3, 5, 5, 0, 39, 12, 3, 21])  # repeated rows, as a text on several pairs
    owner, ids = table.gather(wanted)
    assert owner.tolist() == [k for k, r in enumerate(wanted) for _ in rows[r]]
    assert ids.tolist() == [i for r in wanted for i in rows[r]]


def test_an_empty_table_gathers_nothing():
    owner, ids = FeatureIds.empty(3).gather(np.array([0, 2]))
    assert owner.size == 0 and ids.size == 0


def _long_answers(pairs: int = 300, words: int = 40, seed: int = 0) -> list[Judgment]:
    """Zipf answers over 200 words, an "indeed" ending on half the sides that the three annotators of
    every pair favour: hundreds of n-grams are kept, so most ids are escaped at a small ESCAPE."""
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, 201)
    out = []
    for pair in range(pairs):
        a, b = (" ".join(f"w{i}" for i in rng.choice(200, words, p=zipf / zipf.sum())) for _ in range(2))
        a += " indeed" if rng.random() < 0.5 else ""
        for annotator in range(3):
            a_won = rng.random() < 1 / (1 + np.exp(-1.5 * a.endswith("indeed")))
            out.append(Judgment(prompt=f"q{pair}", chosen=a if a_won else b, rejected=b if a_won else a,
                                annotator=f"r{annotator}"))
    return out


@pytest.mark.parametrize("escape", [5, 300])
def test_the_screen_finds_the_same_with_ids_escaped(monkeypatch, escape):
    """Ids from ``escape`` up held as escapes (all but the five commonest n-grams at 5) change no
    number of the screen."""
    judgments = _long_answers()
    settings = DiscoverySettings(min_pairs=5)
    plain = discover(judgments, settings)
    monkeypatch.setattr(feature_ids, "ESCAPE", escape)
    table = discover_data._feature_table(PackedTexts(j.chosen for j in judgments), 2 * settings.min_pairs)[1]
    assert table.escaped.size > 0
    escaped = discover(judgments, settings)
    assert repr(escaped) == repr(plain) and plain.n_data > 100 and plain.findings  # every float, to the bit


def test_the_commonest_n_grams_get_the_smallest_ids():
    """Ids are ranked by how many responses carry the n-gram, so that most fit in two bytes."""
    texts = PackedTexts(["a b", "a c", "a d", "a b", "x y", "a c"][i % 6] + f" z{i}" for i in range(60))
    features, table = discover_data._feature_table(texts, 5)
    carried = np.bincount(table.gather(np.arange(len(texts)))[1], minlength=len(features))
    assert features[0][1] == ("a",) and list(carried) == sorted(carried, reverse=True)  # "a": 50 of 60
