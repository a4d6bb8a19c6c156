"""The count sketch of ``badpo audit --discover`` (issue 49 item 1: memory bounded in answer length)
keeps exactly the n-grams that enough responses carry: checked against a plain count of every
n-gram, with the sketch as large as it gets and shrunk until every cell holds many n-grams."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from badpo.auditing import discover_data
from badpo.auditing.candidate_attributes import text_features
from badpo.auditing.packed_texts import PackedTexts


def _texts(n: int, words: int, seed: int) -> PackedTexts:
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, 301)
    return PackedTexts([" ".join(f"w{i}" for i in rng.choice(300, words, p=zipf / zipf.sum())) for _ in range(n)])


def _counted(texts: list[str], min_texts: int) -> tuple[np.ndarray, np.ndarray]:
    """The plain path: every n-gram of every response counted once per response."""
    counts = Counter(hash(feature) for text in texts for feature in set(text_features(text)))
    kept = sorted(h for h, c in counts.items() if c >= min_texts)
    return np.array(kept, dtype=np.int64), np.array([counts[h] for h in kept], dtype=np.int64)


@pytest.mark.parametrize("most_bits", [23, 6, 2])
@pytest.mark.parametrize("min_texts", [2, 5, 40])
def test_the_sketch_keeps_exactly_the_n_grams_enough_responses_carry(monkeypatch, most_bits, min_texts):
    texts = _texts(400, 30, seed=min_texts)
    monkeypatch.setattr(discover_data, "_SKETCH_MOST_BITS", most_bits)  # 4 cells a row: every n-gram collides
    kept, carried = discover_data._frequent_hashes(texts, min_texts)
    expected, counts = _counted(texts, min_texts)
    assert len(expected) > 0 and np.array_equal(kept, expected) and np.array_equal(carried, counts)


@pytest.mark.parametrize("cache", [discover_data.CACHE_NGRAMS, 0])  # hashes kept across passes, or read again
def test_chunks_of_responses_add_up_to_the_whole(monkeypatch, cache):
    texts = _texts(300, 40, seed=1)
    whole = discover_data._frequent_hashes(texts, 3)
    monkeypatch.setattr(discover_data, "_CHUNK_ITEMS", 500)  # many chunks of a few responses
    monkeypatch.setattr(discover_data, "CACHE_NGRAMS", cache)
    assert all(np.array_equal(a, b) for a, b in zip(discover_data._frequent_hashes(texts, 3), whole))
    features, ids = discover_data._feature_table(texts, 3)
    monkeypatch.setattr(discover_data, "CACHE_NGRAMS", 0 if cache else 10**9)  # the other way
    again, again_ids = discover_data._feature_table(texts, 3)
    assert features == again and np.array_equal(ids.gather(np.arange(300))[1], again_ids.gather(np.arange(300))[1])
