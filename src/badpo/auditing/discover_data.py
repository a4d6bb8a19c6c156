"""The judgments and the candidates of ``badpo audit --discover`` as integer arrays.

:func:`encode` reads judgments once (any iterable: a million rows are never held as objects) into
distinct responses, distinct pairs (a prompt and an unordered set of two responses: every judgment
of the same two texts, either way round, by any annotator, falls on one pair) and per judgment its
pair, whether the pair's side ``a`` won and its annotator. Memory grows with the distinct texts (held
compressed: :class:`badpo.auditing.packed_texts.PackedTexts`) and with a few integers per judgment.

:func:`candidate_entries` gives every candidate its *pair entries*: the pairs whose two sides
differ on it, with ``sign = +1`` where side ``a`` carries it, and the sums from which its effect on
each half is computed (:func:`badpo.auditing.discover_stats.effect_sums`). Library candidates are
evaluated once per distinct response (``length`` once per pair) and kept as an int8 [pairs,
library] table. Data candidates come from :func:`badpo.auditing.candidate_attributes.text_features`: the n-grams
are hashed (one 64-bit integer per response and n-gram, in chunks of responses), those carried by
fewer than ``2 min_pairs`` responses are dropped, and the rest are compared pair by pair in chunks,
adding to their sums; their entries are never all held, and are recomputed in one pass for the
few candidates that are confirmed. A data candidate needs ``2 min_pairs`` differing pairs, and
features that differ on exactly the same pairs the same way are one candidate (the first of
``starts``, ``ends``, ``has``, fewest words first). Memory: the distinct responses, compressed, a few
integers per judgment and pair, a count sketch of fixed size (the rare n-grams are never all
counted), and one id per (response, kept n-gram), two bytes for all but the rarer kept n-grams
(:class:`badpo.auditing.feature_ids.FeatureIds`).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from badpo.auditing.candidate_attributes import LIBRARY, feature_name, feature_spec, text_features
from badpo.auditing.discover_stats import effect_sums
from badpo.auditing.feature_ids import FeatureIds
from badpo.auditing.packed_texts import PackedTexts
from badpo.core.attributes import STRIPPERS, resolve_attributes, word_count
from badpo.core.judgments import Judgment
from badpo.core.markdown import has_markdown

__all__ = ["CandidateEffects", "Encoded", "Halves", "Progress", "candidate_entries", "encode", "library_candidates"]

Progress = Callable[[str], None]
_EVERY = 200_000  # judgments between two progress lines


@dataclass(frozen=True)
class Encoded:
    texts: PackedTexts  # distinct responses, compressed: a list of str to read
    prompts: list[str]  # distinct prompts
    annotators: list[str]  # distinct annotator ids, in order of appearance
    pair_prompt: np.ndarray  # [P] prompt id of each pair
    pair_a: np.ndarray  # [P] text id of side a (the smaller id)
    pair_b: np.ndarray  # [P] text id of side b
    judge_pair: np.ndarray  # [N] pair of each judgment
    judge_a_won: np.ndarray  # [N] bool: the chosen response is side a
    judge_annotator: np.ndarray  # [N] annotator index

    @property
    def n_pairs(self) -> int:
        return len(self.pair_a)


Halves = list[tuple[np.ndarray, np.ndarray]]  # (wins of side a, judgments) per pair, per set of pairs


@dataclass(frozen=True)
class CandidateEffects:
    names: list[str]  # attribute (coordinate) names
    specs: list[str]  # what `badpo train` takes: attributes=[spec, ...]
    sources: list[str]  # "library" or "data"
    removers: list[Callable[[str], str] | None]  # an edit removing the attribute alone, if any
    sums: np.ndarray  # [sets, 6, C]: discover_stats.effect_sums per set of pairs (the halves given)
    library_signs: np.ndarray  # [P, L] int8: each library candidate's sign on every pair
    load: Callable[[list[int]], dict[int, tuple[np.ndarray, np.ndarray]]]  # data candidates' entries

    def __len__(self) -> int:
        return len(self.names)

    def entries(self, indices: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """candidate -> (pairs whose sides differ in it, +1 / -1: side a / b carries it); the data
        candidates' in one pass over the pairs."""
        n_library = self.library_signs.shape[1]
        out = {c: self._library(c) for c in indices if c < n_library}
        return out | self.load([c for c in indices if c >= n_library])

    def _library(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        pairs = np.flatnonzero(self.library_signs[:, c])
        return pairs, self.library_signs[pairs, c]

    def dense(self, index: int, n_pairs: int) -> np.ndarray:
        """The candidate's sign on every pair (0: both sides alike), int8 [P]."""
        out = np.zeros(n_pairs, dtype=np.int8)
        pairs, signs = self.entries([index])[index]
        out[pairs] = signs
        return out


def _id(table: dict[str, int], items: list[str], key: str) -> int:
    found = table.get(key)
    if found is None:
        found = table[key] = len(items)
        items.append(key)
    return found


def encode(judgments: Iterable[Judgment], progress: Progress | None = None) -> Encoded:
    """The integer form of ``judgments`` (module docstring)."""
    texts = PackedTexts()
    prompts: dict[str, int] = {}
    people: dict[str, int] = {}
    pairs: dict[tuple[int, int, int], int] = {}
    prompt_list: list[str] = []
    people_list: list[str] = []
    pair_cols = (array("q"), array("q"), array("q"))
    judge_cols = (array("q"), array("b"), array("q"))
    start = time.monotonic()
    for row, j in enumerate(judgments, start=1):
        chosen, rejected = texts.add(j.chosen), texts.add(j.rejected)
        a, b = min(chosen, rejected), max(chosen, rejected)
        key = (_id(prompts, prompt_list, j.prompt), a, b)
        pair = pairs.get(key)
        if pair is None:
            pair = pairs[key] = len(pairs)
            for column, value in zip(pair_cols, key):
                column.append(value)
        judge_cols[0].append(pair)
        judge_cols[1].append(chosen == a)
        judge_cols[2].append(_id(people, people_list, j.annotator))
        if progress is not None and row % _EVERY == 0:
            progress(f"read {row:,} judgments ({len(pairs):,} pairs, {time.monotonic() - start:.0f} s)")
    pair_prompt, pair_a, pair_b = (np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, np.int64)
                                   for c in pair_cols)
    judge_pair, judge_annotator = (np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, np.int64)
                                   for c in (judge_cols[0], judge_cols[2]))
    judge_a_won = np.frombuffer(judge_cols[1], dtype=np.int8).astype(bool)
    return Encoded(texts, prompt_list, people_list, pair_prompt, pair_a, pair_b, judge_pair,
                   judge_a_won, judge_annotator)


def library_candidates() -> list[tuple[str, str, object]]:
    """(name, spec, Attribute) of every library coordinate; ``names`` becomes ``names.woman_coded``
    and ``names.black_coded``, each declarable alone."""
    out = []
    for spec in LIBRARY:
        for attribute in resolve_attributes([spec]).attributes:
            single = f"names.{attribute.name}" if spec == "names" else spec
            out.append((attribute.name, single, attribute))
    return out


def _library_signs(enc: Encoded, progress: Progress | None) -> tuple[list[tuple[str, str, object]], np.ndarray]:
    """The library coordinates and their sign on every pair, int8 [P, L]: one pass over the pairs
    for the pair-level ones (length), one over the responses for the rest, each text opened once."""
    library = library_candidates()
    signs = np.zeros((enc.n_pairs, len(library)), dtype=np.int8)
    start = time.monotonic()
    paired = [c for c, (_, _, attribute) in enumerate(library) if attribute.level == "pair"]
    alone = [c for c in range(len(library)) if c not in paired]
    if paired:
        values = np.zeros((enc.n_pairs, len(paired), 2))
        for pair, (p, a, b) in enumerate(zip(enc.pair_prompt.tolist(), enc.pair_a.tolist(), enc.pair_b.tolist())):
            prompt, text_a, text_b = enc.prompts[p], enc.texts[a], enc.texts[b]
            values[pair] = [library[c][2].fn(prompt, text_a, text_b) for c in paired]
        signs[:, paired] = np.sign(values[:, :, 0] - values[:, :, 1])
    per_text = np.zeros((len(enc.texts), len(alone)))
    for index, text in enumerate(enc.texts):  # the library's response-level attributes read the response alone
        per_text[index] = [library[c][2].fn("", text) for c in alone]
    for k, column in enumerate(alone):  # a column at a time: no [P, L] float copies
        signs[:, column] = np.sign(per_text[enc.pair_a, k] - per_text[enc.pair_b, k])
    for cached in (word_count, has_markdown):  # their caches hold answers just opened, which no one else holds
        cached.cache_clear()
    if progress is not None:
        progress(f"library: {len(library)} attributes on {len(enc.texts):,} responses "
                 f"({time.monotonic() - start:.0f} s)")
    return library, signs


_TEXT_CHUNK = 50_000  # responses hashed at a time, at most
_PAIR_CHUNK = 20_000  # pairs compared at a time, at most
_CHUNK_ITEMS = 2_000_000  # and at most about this many n-grams in a chunk: long answers make smaller chunks


def _spans(sizes: np.ndarray, most: int) -> list[tuple[int, int]]:
    """[start, stop) runs of consecutive items, each at most ``most`` items long and holding at most
    :data:`_CHUNK_ITEMS` of ``sizes`` (at least one item), so that a chunk's arrays are bounded
    whatever the answers' length."""
    spans, start, total = [], 0, 0
    for index, size in enumerate(sizes.tolist()):
        if index > start and (index - start >= most or total + size > _CHUNK_ITEMS):
            spans.append((start, index))
            start, total = index, 0
        total += size
    if start < len(sizes):
        spans.append((start, len(sizes)))
    return spans


def _text_spans(texts: PackedTexts) -> list[tuple[int, int]]:
    """Chunks of responses: about two n-grams a word."""
    return _spans(2 * texts.spaces + 2, _TEXT_CHUNK)


def _pair_spans(enc: Encoded, ids: FeatureIds) -> list[tuple[int, int]]:
    """Chunks of pairs, by the kept n-grams of their two sides."""
    per_text = ids.per_row
    return _spans(per_text[enc.pair_a] + per_text[enc.pair_b], _PAIR_CHUNK)


def _chunk_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(CSR offsets, one 64-bit hash per response and n-gram) of a chunk of responses."""
    flat, offsets = array("q"), array("q", [0])
    for text in texts:
        flat.extend(hash(feature) for feature in text_features(text))
        offsets.append(len(flat))
    return np.array(offsets, dtype=np.int64), np.array(flat, dtype=np.int64)


# n-grams (8 bytes each) whose hashes are kept across the screen's three passes instead of read from
# the texts again (128 MB): reading them was most of the screen on long answers (issue 76); a larger
# pool reads them again each pass, so that memory stays bounded whatever its size
CACHE_NGRAMS = 16_000_000


class _Chunks:
    """The responses' chunks and each chunk's (CSR offsets, hashes), in order, as many times as
    iterated: computed once and kept when the pool's n-grams fit :data:`CACHE_NGRAMS`, else
    computed again on each pass."""

    def __init__(self, texts: PackedTexts) -> None:
        self.texts, self.spans = texts, _text_spans(texts)
        self.ngrams = int((2 * texts.spaces + 2).sum())  # about the n-grams
        self._kept: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = (
            {} if self.ngrams <= CACHE_NGRAMS else None)

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for span in self.spans:
            found = self._kept.get(span) if self._kept is not None else None
            if found is None:
                found = _chunk_hashes(self.texts[span[0]:span[1]])
                if self._kept is not None:
                    self._kept[span] = found
            yield found


_SKETCH_ROWS = 3  # independent rows of the count sketch
_SKETCH_MOST_BITS = 23  # at most 2**23 cells a row (32 MiB of counts), fewer for fewer n-grams
_MIXERS = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64)


def _cells(hashes: np.ndarray, row: int, bits: int) -> np.ndarray:
    """The cell of every hash in one row of the sketch (a multiplicative hash of the 64-bit hash)."""
    with np.errstate(over="ignore"):
        return ((hashes.view(np.uint64) * _MIXERS[row]) >> np.uint64(64 - bits)).astype(np.int64)


def _frequent_hashes(texts: PackedTexts, min_texts: int, chunks: _Chunks | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(the n-gram hashes at least ``min_texts`` responses carry, sorted; how many responses carry
    each) (each response's features are distinct); exact. Most n-grams of long answers are carried
    by one or two responses, so counting every distinct one would grow with the answers' length
    times their number: a count sketch (:data:`_SKETCH_ROWS` rows of counters, each n-gram adding
    to one cell a row) is filled in a first pass, and only the n-grams whose every cell reaches
    ``min_texts`` (a cell's count is never below the count of an n-gram in it) are counted exactly
    in a second. Memory: the sketch and the n-grams it lets through, whatever the number of rare ones."""
    chunks = chunks if chunks is not None else _Chunks(texts)  # a caller's: its hashes serve later passes too
    bits = int(min(_SKETCH_MOST_BITS, max(12, np.ceil(np.log2(max(chunks.ngrams, 2))))))
    sketch = np.zeros((_SKETCH_ROWS, 1 << bits), dtype=np.uint32)
    for _, hashes in chunks:  # a chunk adds at most ~2 million to a cell
        for row in range(_SKETCH_ROWS):
            np.add(sketch[row], np.bincount(_cells(hashes, row, bits), minlength=1 << bits), out=sketch[row],
                   casting="unsafe")
            np.minimum(sketch[row], min_texts, out=sketch[row])  # only ">= min_texts" matters: never wraps
    unique, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for _, hashes in chunks:
        passing = np.ones(len(hashes), dtype=bool)
        for row in range(_SKETCH_ROWS):
            passing &= sketch[row][_cells(hashes, row, bits)] >= min_texts
        chunk_unique, chunk_counts = np.unique(hashes[passing], return_counts=True)
        unique, inverse = np.unique(np.concatenate([unique, chunk_unique]), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([counts, chunk_counts])).astype(np.int64)
    frequent = counts >= min_texts
    return unique[frequent], counts[frequent]


def _feature_table(texts: PackedTexts, min_texts: int) -> tuple[list[tuple[str, tuple[str, ...]]], FeatureIds]:
    """(features, the ids of the features every response carries), keeping only the features that
    at least ``min_texts`` responses carry (fewer cannot differ on that many pairs); feature ``i``
    is the ``i``-th most common (:mod:`badpo.auditing.feature_ids` holds most ids in two bytes).
    The frequent n-grams are found first (:func:`_frequent_hashes`, two passes), a further pass hashes
    them again and keeps only the kept ones' ids, so no pass holds every n-gram of every response
    beyond :data:`CACHE_NGRAMS` of their hashes (:class:`_Chunks`); the kept hashes are named in a
    further pass, until every one is named."""
    hashed = _Chunks(texts)
    kept, carried = _frequent_hashes(texts, min_texts, hashed)  # sorted by hash
    rank = np.empty(len(kept), np.int64)
    rank[np.argsort(-carried, kind="stable")] = np.arange(len(kept))

    def chunks():  # each chunk's ids, handed over one at a time to be narrowed
        for chunk_offsets, hashes in hashed:
            position = np.minimum(np.searchsorted(kept, hashes), max(len(kept) - 1, 0))
            hit = kept[position] == hashes if len(kept) else np.zeros(len(hashes), dtype=bool)
            yield np.concatenate([[0], np.cumsum(hit)])[chunk_offsets], rank[position[hit]]

    ids = FeatureIds.from_chunks(chunks())
    wanted = {int(h): int(i) for h, i in zip(kept.tolist(), rank.tolist())}
    features: list = [None] * len(wanted)
    for text in texts:
        if not wanted:
            break
        for feature in text_features(text):
            index = wanted.pop(hash(feature), None)
            if index is not None:
                features[index] = feature
    return features, ids


def _differing(enc: Encoded, ids: FeatureIds, start: int, stop: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(feature, pair, sign) of the features that one side of a pair in [start, stop) carries
    and the other not (sign +1: side a)."""
    width = stop - start
    pair_a, feature_a = ids.gather(enc.pair_a[start:stop])
    pair_b, feature_b = ids.gather(enc.pair_b[start:stop])
    key = np.concatenate([feature_a * width + pair_a, feature_b * width + pair_b])
    sign = np.concatenate([np.ones(len(pair_a), np.int8), -np.ones(len(pair_b), np.int8)])
    unique, inverse = np.unique(key, return_inverse=True)
    total = np.bincount(inverse, weights=sign, minlength=len(unique))
    keep = total != 0
    return unique[keep] // width, unique[keep] % width + start, total[keep].astype(np.int8)


def _mixed(pair: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """A pseudo-random 53-bit number per (pair, sign), for telling identical features apart."""
    mixed = (pair.astype(np.uint64) * np.uint64(2) + (sign > 0)) * np.uint64(0x9E3779B97F4A7C15)
    return ((mixed ^ (mixed >> np.uint64(29))) >> np.uint64(11)).astype(np.float64)


def _stream(enc: Encoded, ids: FeatureIds, n_features: int, halves: Halves):
    """Every feature's effect sums per set of pairs [sets, 6, F] and, to tell identical features
    apart, the sum of :func:`_mixed` over its entries, accumulated chunk by chunk over the pairs."""
    sums = np.zeros((len(halves), 6, n_features))
    fingerprint = np.zeros(n_features)
    for start, stop in _pair_spans(enc, ids):
        feature, pair, sign = _differing(enc, ids, start, stop)
        for index, (wins_a, totals) in enumerate(halves):
            sums[index] += effect_sums(feature, pair, sign, wins_a, totals, n_features)
        fingerprint += np.bincount(feature, weights=_mixed(pair, sign), minlength=n_features)
    return sums, fingerprint


def _order_key(feature: tuple[str, tuple[str, ...]]) -> tuple[int, int, tuple[str, ...]]:
    return (("starts", "ends", "has").index(feature[0]), len(feature[1]), feature[1])


def _distinct(features: list, kept: np.ndarray, fingerprint: np.ndarray, pairs: np.ndarray) -> list[int]:
    """Of the ``kept`` feature ids, one per set of identical (pair, sign) entries, in name order."""
    chosen: dict[tuple[float, float], int] = {}
    for f in sorted(kept.tolist(), key=lambda i: _order_key(features[i])):
        chosen.setdefault((float(fingerprint[f]), float(pairs[f])), f)
    return sorted(chosen.values(), key=lambda i: _order_key(features[i]))


def _loader(enc: Encoded, ids: FeatureIds, feature_of: list[int], first: int):
    """The ``CandidateEffects.load`` of the data candidates: candidate ``first + k`` is feature
    ``feature_of[k]``; one pass over the pairs for any number of them, each candidate's entries
    kept as it goes (int32 pairs, int8 signs): the hundreds the spread test loads at once held every
    chunk's (feature, pair, sign) twice in int64 and grew the peak by 2.5 KiB a judgment."""
    def load(indices: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        if not indices:
            return {}
        keys = np.unique(np.array([feature_of[c - first] for c in indices], dtype=np.int64))
        pieces: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in keys]
        for start, stop in _pair_spans(enc, ids):
            feature, pair, sign = _differing(enc, ids, start, stop)
            mask = np.isin(feature, keys)
            feature, pair, sign = feature[mask], pair[mask].astype(np.int32), sign[mask]
            order = np.argsort(feature, kind="stable")  # by candidate, each one's pairs in order
            bounds = np.searchsorted(feature[order], keys, side="right")
            for k, (low, high) in enumerate(zip(np.concatenate([[0], bounds[:-1]]), bounds)):
                if high > low:
                    pieces[k].append((pair[order[low:high]], sign[order[low:high]]))
        joined = {key: (np.concatenate([p for p, _ in parts]) if parts else np.zeros(0, np.int32),
                        np.concatenate([s for _, s in parts]) if parts else np.zeros(0, np.int8))
                  for key, parts in zip(keys.tolist(), pieces)}
        return {c: joined[feature_of[c - first]] for c in indices}
    return load


def _data_candidates(enc: Encoded, min_pairs: int, taken: set[str], halves: Halves, first: int,
                     progress: Progress | None):
    start = time.monotonic()
    features, ids = _feature_table(enc.texts, 2 * min_pairs)
    sums, fingerprint = _stream(enc, ids, len(features), halves)
    pairs_all = sums[-1, 0]
    kept = _distinct(features, np.flatnonzero(pairs_all >= 2 * min_pairs), fingerprint, pairs_all)
    names, specs = [], []
    for f in kept:
        name = feature_name(*features[f])
        while name in taken:
            name += "_"
        taken.add(name)
        names.append(name)
        specs.append(feature_spec(*features[f], name=name))
    if progress is not None:
        progress(f"data screen: {len(features):,} n-grams carried by >= {2 * min_pairs} responses, {len(kept):,} "
                 f"distinct ones differ on >= {2 * min_pairs} pairs ({time.monotonic() - start:.0f} s)")
    return names, specs, sums[:, :, kept], _loader(enc, ids, kept, first)


def candidate_entries(enc: Encoded, min_pairs: int, halves: Halves, screen: bool = True,
                      progress: Progress | None = None) -> CandidateEffects:
    """Every candidate, the library's then (with ``screen``) the data's, with its effect sums on
    each set of pairs of ``halves``."""
    library, signs = _library_signs(enc, progress)
    pair, column = np.nonzero(signs)
    names = [name for name, _, _ in library]
    specs = [spec for _, spec, _ in library]
    removers = [attribute.remove or STRIPPERS.get(attribute.kind) for _, _, attribute in library]
    sums = [np.stack([effect_sums(column, pair, signs[pair, column], wins_a, totals, len(library))
                      for wins_a, totals in halves])]
    load = _loader(enc, FeatureIds.empty(), [], len(library))
    if screen and enc.n_pairs:
        extra_names, extra_specs, extra_sums, load = _data_candidates(enc, min_pairs, set(names), halves,
                                                                      len(library), progress)
        names += extra_names
        specs += extra_specs
        sums.append(extra_sums)
        removers += [resolve_attributes([s]).attributes[0].remove for s in extra_specs]
    sources = ["library"] * len(library) + ["data"] * (len(names) - len(library))
    return CandidateEffects(names, specs, sources, removers, np.concatenate(sums, axis=2), signs, load)
