"""The judgments and the candidates of ``badpo audit --discover`` as integer arrays.

:func:`encode` reads judgments once (any iterable: a million rows are never held as objects) into
distinct responses, distinct pairs (a prompt and an unordered set of two responses: every judgment
of the same two texts, either way round, by any annotator, falls on one pair) and per judgment its
pair, whether the pair's side ``a`` won and its annotator. Memory grows with the distinct texts and
with a few integers per judgment.

:func:`candidate_entries` turns every candidate into sparse *pair entries* ``(candidate, pair,
sign)``: the pairs whose two sides differ on the candidate, ``sign = +1`` where side ``a`` carries
it. Library candidates are evaluated once per distinct response (``length`` once per pair); data
candidates come from :func:`badpo.audit.candidates.text_features` and are kept when they differ
between the sides of at least ``min_pairs`` pairs; features that differ on exactly the same pairs
the same way are one candidate (the first of ``starts``, ``ends``, ``has``, fewest words first).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from badpo.audit.candidates import LIBRARY, feature_name, feature_spec, text_features
from badpo.core.attributes import STRIPPERS, resolve_attributes
from badpo.core.judgments import Judgment

__all__ = ["Candidates", "Encoded", "Progress", "candidate_entries", "encode", "library_candidates"]

Progress = Callable[[str], None]
_EVERY = 200_000  # judgments between two progress lines


@dataclass(frozen=True)
class Encoded:
    texts: list[str]  # distinct responses
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


@dataclass(frozen=True)
class Candidates:
    names: list[str]  # attribute (coordinate) names
    specs: list[str]  # what `badpo train` takes: attributes=[spec, ...]
    sources: list[str]  # "library" or "data"
    removers: list[Callable[[str], str] | None]  # an edit removing the attribute alone, if any
    entry_candidate: np.ndarray  # [E]
    entry_pair: np.ndarray  # [E]
    entry_sign: np.ndarray  # [E] +1: side a carries the candidate, -1: side b

    def __len__(self) -> int:
        return len(self.names)

    def dense(self, index: int, n_pairs: int) -> np.ndarray:
        """The candidate's sign on every pair (0: both sides alike), int8 [P]."""
        out = np.zeros(n_pairs, dtype=np.int8)
        mask = self.entry_candidate == index
        out[self.entry_pair[mask]] = self.entry_sign[mask]
        return out


def _id(table: dict[str, int], items: list[str], key: str) -> int:
    found = table.get(key)
    if found is None:
        found = table[key] = len(items)
        items.append(key)
    return found


def encode(judgments: Iterable[Judgment], progress: Progress | None = None) -> Encoded:
    """The integer form of ``judgments`` (module docstring)."""
    texts: dict[str, int] = {}
    prompts: dict[str, int] = {}
    people: dict[str, int] = {}
    pairs: dict[tuple[int, int, int], int] = {}
    text_list: list[str] = []
    prompt_list: list[str] = []
    people_list: list[str] = []
    pair_cols = (array("q"), array("q"), array("q"))
    judge_cols = (array("q"), array("b"), array("q"))
    start = time.monotonic()
    for row, j in enumerate(judgments, start=1):
        chosen, rejected = _id(texts, text_list, j.chosen), _id(texts, text_list, j.rejected)
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
    return Encoded(text_list, prompt_list, people_list, pair_prompt, pair_a, pair_b, judge_pair,
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
    """The library coordinates and their sign on every pair, int8 [P, L]."""
    library = library_candidates()
    signs = np.zeros((enc.n_pairs, len(library)), dtype=np.int8)
    start = time.monotonic()
    for column, (_name, _spec, attribute) in enumerate(library):
        if attribute.level == "pair":  # length: one evaluation per pair
            prompts, texts = enc.prompts, enc.texts
            values = np.array([attribute.fn(prompts[p], texts[a], texts[b]) for p, a, b in
                               zip(enc.pair_prompt.tolist(), enc.pair_a.tolist(), enc.pair_b.tolist())],
                              dtype=np.float64).reshape(-1, 2)
            signs[:, column] = np.sign(values[:, 0] - values[:, 1])
        else:  # the library's response-level attributes read the response alone
            per_text = np.fromiter((attribute.fn("", t) for t in enc.texts), dtype=np.float64,
                                   count=len(enc.texts))
            signs[:, column] = np.sign(per_text[enc.pair_a] - per_text[enc.pair_b])
    if progress is not None:
        progress(f"library: {len(library)} attributes on {len(enc.texts):,} responses "
                 f"({time.monotonic() - start:.0f} s)")
    return library, signs


def _feature_table(texts: list[str], min_texts: int
                   ) -> tuple[list[tuple[str, tuple[str, ...]]], np.ndarray, np.ndarray]:
    """(features, CSR offsets [T + 1], feature ids) of every response, keeping only the features
    that at least ``min_texts`` responses carry (fewer cannot differ on that many pairs). The
    first pass holds one 64-bit hash per (response, feature), not the features themselves."""
    flat = array("q")
    offsets = array("q", [0])
    for text in texts:
        flat.extend(hash(feature) for feature in text_features(text))
        offsets.append(len(flat))
    hashes = np.frombuffer(flat, dtype=np.int64) if len(flat) else np.zeros(0, np.int64)
    unique, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    del hashes, flat
    kept = counts >= min_texts
    new_id = np.where(kept, np.cumsum(kept) - 1, -1)[inverse]
    del inverse
    keep_rows = new_id >= 0
    kept_before = np.concatenate([[0], np.cumsum(keep_rows)])  # kept entries before each position
    offsets_kept = kept_before[np.frombuffer(offsets, dtype=np.int64)]
    wanted = {int(h): i for i, h in enumerate(unique[kept].tolist())}
    features: list = [None] * len(wanted)
    for text in texts:  # the second pass names the kept hashes, until every one is named
        if not wanted:
            break
        for feature in text_features(text):
            index = wanted.pop(hash(feature), None)
            if index is not None:
                features[index] = feature
    return features, offsets_kept.astype(np.int64), new_id[keep_rows]


def _gather(offsets: np.ndarray, flat: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in ``rows``, feature id) of every feature of every row."""
    lengths = offsets[rows + 1] - offsets[rows]
    owner = np.repeat(np.arange(len(rows)), lengths)
    starts = np.repeat(offsets[rows] - np.cumsum(lengths) + lengths, lengths)
    return owner, flat[starts + np.arange(len(owner))]


def _pair_feature_signs(enc: Encoded, offsets: np.ndarray, flat: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(feature, pair, sign) of every feature that one side of a pair carries and the other not."""
    pair_a, feature_a = _gather(offsets, flat, enc.pair_a)
    pair_b, feature_b = _gather(offsets, flat, enc.pair_b)
    key = np.concatenate([feature_a * enc.n_pairs + pair_a, feature_b * enc.n_pairs + pair_b])
    sign = np.concatenate([np.ones(len(pair_a), np.int64), -np.ones(len(pair_b), np.int64)])
    unique, inverse = np.unique(key, return_inverse=True)
    total = np.bincount(inverse, weights=sign, minlength=len(unique))
    keep = total != 0
    return unique[keep] // enc.n_pairs, unique[keep] % enc.n_pairs, total[keep].astype(np.int8)


def _order_key(feature: tuple[str, tuple[str, ...]]) -> tuple[int, int, tuple[str, ...]]:
    return (("starts", "ends", "has").index(feature[0]), len(feature[1]), feature[1])


def _distinct_features(feature: np.ndarray, pair: np.ndarray, sign: np.ndarray, kept: np.ndarray,
                       features: list) -> list[int]:
    """Of the ``kept`` feature ids, one per set of identical (pair, sign) entries."""
    mixed = (pair.astype(np.uint64) * np.uint64(2) + (sign > 0)) * np.uint64(0x9E3779B97F4A7C15)
    mixed ^= mixed >> np.uint64(29)
    n = int(feature.max()) + 1 if len(feature) else 0
    total = np.bincount(feature, weights=(mixed >> np.uint64(11)).astype(np.float64), minlength=n)
    count = np.bincount(feature, minlength=n)
    chosen: dict[tuple[float, int], int] = {}
    for f in sorted(kept.tolist(), key=lambda i: _order_key(features[i])):
        chosen.setdefault((float(total[f]), int(count[f])), f)
    return sorted(chosen.values(), key=lambda i: _order_key(features[i]))


def _data_candidates(enc: Encoded, min_pairs: int, taken: set[str], progress: Progress | None):
    start = time.monotonic()
    features, offsets, flat = _feature_table(enc.texts, 2 * min_pairs)
    feature, pair, sign = _pair_feature_signs(enc, offsets, flat)
    counts = np.bincount(feature, minlength=len(features))
    kept = _distinct_features(feature, pair, sign, np.flatnonzero(counts >= 2 * min_pairs), features)
    new_id = np.full(len(features), -1, dtype=np.int64)
    new_id[kept] = np.arange(len(kept))
    mask = new_id[feature] >= 0
    names, specs = [], []
    for f in kept:
        name = feature_name(*features[f])
        while name in taken:
            name += "_"
        taken.add(name)
        names.append(name)
        specs.append(feature_spec(*features[f], name=name))
    if progress is not None:
        progress(f"data screen: {len(features):,} n-grams, {len(kept):,} differ on >= {2 * min_pairs} pairs "
                 f"({time.monotonic() - start:.0f} s)")
    return names, specs, new_id[feature[mask]], pair[mask], sign[mask]


def _remover(name: str, attribute) -> Callable[[str], str] | None:
    return attribute.remove or STRIPPERS.get(attribute.kind)


def candidate_entries(enc: Encoded, min_pairs: int, screen: bool = True,
                      progress: Progress | None = None) -> Candidates:
    """Every candidate's pair entries: the library's, then (with ``screen``) the data's."""
    library, signs = _library_signs(enc, progress)
    pair, column = np.nonzero(signs)
    names = [name for name, _, _ in library]
    specs = [spec for _, spec, _ in library]
    removers = [_remover(name, attribute) for name, _, attribute in library]
    parts = [(column.astype(np.int64), pair.astype(np.int64), signs[pair, column])]
    if screen and enc.n_pairs:
        extra_names, extra_specs, cand, extra_pair, extra_sign = _data_candidates(enc, min_pairs, set(names), progress)
        parts.append((cand + len(names), extra_pair, extra_sign))
        names += extra_names
        specs += extra_specs
        removers += [resolve_attributes([s]).attributes[0].remove for s in extra_specs]
    candidate, pair, sign = (np.concatenate(c) for c in zip(*parts))
    sources = ["library"] * len(library) + ["data"] * (len(names) - len(library))
    return Candidates(names, specs, sources, removers, candidate, pair, sign.astype(np.int8))
