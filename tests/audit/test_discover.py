"""``badpo audit --discover``'s parts, worked by hand: the candidate library (every spec one that
train resolves, each firing on its example), the n-gram features and the regex that reproduces
them, the encoding of pairs, the pair-clustered effect, the chi-square tail, Benjamini-Hochberg,
Simes, the spread, the clusters, the pooled joint fit, and what too little data is told."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from badpo.auditing.candidate_attributes import LIBRARY, feature_spec, text_features
from badpo.auditing.discover import DiscoverySettings, _related, discover, fold, halves, pooled_fit, prompt_halves
from badpo.auditing.discover_data import candidate_entries, encode, library_candidates
from badpo.auditing.discover_report import format_discovery
from badpo.auditing.discover_stats import (
    benjamini_hochberg,
    chi2_quantile,
    chi2_sf,
    effects,
    homogeneity_p,
    simes2,
    spread_sd,
)
from badpo.auditing.packed_texts import PackedTexts
from badpo.core.attributes import AttributeNameNotice, resolve_attributes
from badpo.core.judgments import Judgment

# one response on which each library attribute fires (and a plain one on which none does)
EXAMPLES = {
    "markdown": "- a point", "md_list": "1. first", "md_header": "# Title\ntext", "md_bold": "a **big** deal",
    "md_code": "run `ls` now", "md_table": "a | b\n|---|---|\n1 | 2", "emoji": "nice \U0001F600",
    "exclamation": "wow! ok", "question": "ok? fine", "first_person": "I did it", "second_person": "Thank you",
    "hedge": "it might rain", "refusal": "Sorry, no.", "number": "in 1999 it", "unit": "it is 5 km away", "url": "see https://x.org",
    "signature": "text\n\n--- Emily Baker", "opens_affirmation": "Sure, here it is",
    "ends_question": "shall we?", "ends_exclamation": "done!", "woman_coded": "text\n\n--- Emily Baker",
    "black_coded": "text\n\n--- Jamal Baker",
}
PLAIN = "a plain answer in lower case"


def test_every_library_spec_is_one_train_resolves_and_fires_on_its_example():
    with warnings.catch_warnings():
        warnings.simplefilter("error", AttributeNameNotice)  # every regex spec carries a short name
        resolved = resolve_attributes(LIBRARY)
    assert len(set(resolved.names)) == len(resolved.names) == len(library_candidates())
    for name, spec, attribute in library_candidates():
        assert resolve_attributes([spec]).names == (name,)
        if attribute.level == "pair":
            assert attribute.fn("", "one two three", "one") == (1.0, 0.0)
            continue
        assert attribute.fn("", EXAMPLES[name]) == 1.0, name
        assert attribute.fn("", PLAIN) == 0.0, name
    assert "names.woman_coded" in [spec for _, spec, _ in library_candidates()]


def test_text_features_keep_wordy_ngrams_at_their_positions():
    assert set(text_features("Sure thing 42 indeed")) == {
        ("starts", ("Sure",)), ("starts", ("Sure", "thing")), ("ends", ("indeed",)),
        ("has", ("Sure",)), ("has", ("thing",)), ("has", ("indeed",)), ("has", ("Sure", "thing"))}
    assert set(text_features("1 2 3")) == set()


def _features_by_definition(text: str) -> set:
    """The features as the docstring defines them, word by word: a second path to text_features."""
    words = text.split()
    wordy = [any(ch.isalpha() for ch in w) for w in words]
    found = set()
    for k in range(1, min(3, len(words)) + 1):
        found |= {("starts", tuple(words[:k]))} if all(wordy[:k]) else set()
        found |= {("ends", tuple(words[-k:]))} if all(wordy[-k:]) else set()
    found |= {("has", (w,)) for w, ok in zip(words, wordy) if ok}
    return found | {("has", (words[i], words[i + 1])) for i in range(len(words) - 1) if wordy[i] and wordy[i + 1]}


def test_text_features_are_the_definitions_on_random_texts():
    """text_features caches whether a word holds a letter (a third of discover's screen time went to
    that search, issue 76); on 2,000 random texts of words with and without letters it is the
    definition's set."""
    rng = np.random.default_rng(0)
    vocabulary = ["the", "a1", "42", "**bold**", "-", "é", "x_y", "...", "Hello,", "__", "ok!", "3.5"]
    for _ in range(2000):
        text = " ".join(rng.choice(vocabulary, size=rng.integers(0, 12))) + ("\n" if rng.random() < 0.1 else "")
        assert set(text_features(text)) == _features_by_definition(text), text


@pytest.mark.parametrize("feature", [("ends", ("as", "asked")), ("starts", ("Sure,",)), ("has", ("a+b",)),
                                     ("has", ("the", "end"))])
def test_a_feature_spec_matches_exactly_the_responses_that_carry_it(feature):
    texts = ["Sure, 1 2 as asked", "1 2 as  asked\n", "1 2 was asked", "x Sure, y", "a+b the end", "a+bc theend",
             "the end is a+b", "Sure,", " as asked as asked"]
    attribute = resolve_attributes([feature_spec(*feature)]).attributes[0]
    for text in texts:
        assert (attribute.fn("", text) == 1.0) == (feature in set(text_features(text))), text


def _judgment(prompt: str, chosen: str, rejected: str, annotator: str = "r1") -> Judgment:
    return Judgment(prompt=prompt, chosen=chosen, rejected=rejected, annotator=annotator)


def test_encode_puts_both_orders_of_one_pair_on_one_pair():
    enc = encode([_judgment("p", "x", "y"), _judgment("p", "y", "x", "r2"), _judgment("q", "x", "y")])
    assert enc.texts == ["x", "y"] and enc.n_pairs == 2
    assert enc.judge_pair.tolist() == [0, 0, 1]
    assert enc.judge_a_won.tolist() == [True, False, True]  # side a is the text seen first, "x"
    assert enc.annotators == ["r1", "r2"] and enc.judge_annotator.tolist() == [0, 1, 0]


def test_identical_ngram_features_are_one_candidate_named_by_position_first():
    rows = [_judgment(f"p{i}", f"{i} indeed", f"{i}") for i in range(3)]
    enc = encode(rows)
    cands = candidate_entries(enc, 1, halves(enc, np.zeros(3, dtype=np.int8)))
    data = [n for n, s in zip(cands.names, cands.sources) if s == "data"]
    assert data == ["ends_indeed"]  # has_indeed differs on the same pairs the same way
    index = cands.names.index("ends_indeed")
    assert cands.dense(index, 3).tolist() == [1, 1, 1]
    assert cands.sums[2, :3, index].tolist() == [3, 3, 3]  # all data: 3 pairs, 3 judgments, 3 wins


def test_effect_treats_a_pair_as_the_unit_hand_worked():
    """Candidate 0 on pair 0 (side a carries it, 2 wins of 3) and pair 1 (side b carries it, side a
    won both of 2): W = 2, N = 5, G = 2, pi = 2.5 / 6."""
    result = effects(np.array([0, 0]), np.array([0, 1]), np.array([1, -1]), np.array([2, 2]), np.array([3, 2]), 1)
    assert result.pairs.tolist() == [2] and result.judgments.tolist() == [5] and result.wins.tolist() == [2]
    assert result.estimate[0] == pytest.approx(math.log(2.5 / 3.5))
    pi = 2.5 / 6
    variance = ((2 - 3 * pi) ** 2 + (0 - 2 * pi) ** 2) / 25 * 2
    assert result.se[0] == pytest.approx(math.sqrt(variance) / (pi * (1 - pi)))


def test_an_effect_won_outright_is_not_called_certain():
    """20 pairs of one vote each, every one won by the candidate's side: each pair's residual is
    nearly 0, and the error is the floor, the binomial one of 20 independent votes,
    1 / sqrt(N pi (1 - pi)) = 1.47 on the log-odds (not 0.33, as a floor of pi (1 - pi) / N^2 gave)."""
    pairs = np.arange(20)
    result = effects(np.zeros(20, dtype=int), pairs, np.ones(20), np.ones(20), np.ones(20), 1)
    pi = 20.5 / 21
    assert result.se[0] == pytest.approx(1 / math.sqrt(20 * pi * (1 - pi)))
    assert result.estimate[0] / result.se[0] < 4


def test_chi_square_tail_and_quantile():
    assert chi2_sf(3.0, 2) == pytest.approx(math.exp(-1.5))  # df 2: exp(-x / 2)
    assert chi2_sf(3.841458820694124, 1) == pytest.approx(0.05)
    assert chi2_sf(20.0, 1) == pytest.approx(math.erfc(math.sqrt(10.0)))
    assert chi2_quantile(1 - math.exp(-1.5), 2) == pytest.approx(3.0)


def test_homogeneity_of_two_annotators_hand_worked():
    """10 of 10 against 0 of 10: pi = 1/2, chi-square 2 * 25 / 2.5 = 20 on one degree of freedom."""
    p, k = homogeneity_p(np.array([10, 0, 1]), np.array([10, 10, 2]), min_per_annotator=5)
    assert k == 2 and p == pytest.approx(math.erfc(math.sqrt(10.0)))
    assert homogeneity_p(np.array([3]), np.array([9]), 5) == (None, 1)


def test_benjamini_hochberg_steps_up():
    assert benjamini_hochberg(np.array([0.01, 0.04, 0.03, 0.5]), 0.05).tolist() == [True, False, False, False]
    assert benjamini_hochberg(np.array([0.04] * 4), 0.05).tolist() == [True] * 4
    assert benjamini_hochberg(np.array([0.02, 0.2]), 0.05).tolist() == [True, False]


def test_simes_of_two():
    combined = simes2(np.array([0.01, 0.04, 0.3]), np.array([0.5, 0.03, np.nan]))
    assert combined.tolist() == pytest.approx([0.02, 0.04, 0.3])


def test_spread_of_two_annotators_hand_worked():
    """Estimates 0 and 2 with s.e. 1: Q(tau^2) = 2 / (1 + tau^2) = K - 1 = 1 at tau^2 = 1."""
    tau, low, high = spread_sd(np.array([0.0, 2.0]), np.array([1.0, 1.0]))
    assert tau == pytest.approx(1.0) and low == 0.0 and high > tau
    assert spread_sd(np.array([1.0]), np.array([1.0])) is None


def test_candidates_that_mark_the_same_pairs_are_related():
    a = np.array([1, -1, 1, 0, 0, 0], dtype=np.int8)
    nested = np.array([1, -1, 0, 0, 0, 0], dtype=np.int8)  # all its pairs marked the same way by a
    other = np.array([0, 0, 0, 1, -1, 1], dtype=np.int8)
    assert _related(a, nested) and not _related(a, other)


def test_fold_keeps_an_effect_that_holds_where_the_stronger_one_is_absent():
    """Pairs 0-59: A differs (side a carries it) and wins; B rides along on 0-39 (a proxy of A),
    C differs on 0-19 and 60-119, where A does not and C's side wins all 60 judgments. B is
    tested where A is absent: none of its pairs, so it joins A; C's 60 clean pairs keep it."""
    n = 120
    sign_a = np.where(np.arange(n) < 60, 1, 0).astype(np.int8)
    sign_b = np.where(np.arange(n) < 40, 1, 0).astype(np.int8)
    sign_c = np.where((np.arange(n) < 20) | (np.arange(n) >= 60), 1, 0).astype(np.int8)
    signs = {0: sign_a, 1: sign_b, 2: sign_c}
    entries = {c: (np.flatnonzero(s), s[np.flatnonzero(s)]) for c, s in signs.items()}
    wins_a, totals = np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64)
    groups = fold(entries, [0, 1, 2], signs, wins_a, totals, DiscoverySettings())
    assert groups == [[0, 1], [2]]
    wins_a[60:] = 0  # C's side now loses where A is absent as often as ...
    wins_a[60:90] = 1  # ... it wins: no effect beyond A, and it overlaps A on 20 pairs
    assert fold(entries, [0, 1, 2], signs, wins_a, totals, DiscoverySettings()) == [[0, 1, 2]]


def test_pooled_fit_of_one_attribute_is_the_log_odds():
    """One 0/1 attribute won 30 times of 40 on 40 pairs: the mode is near log 3 (the prior pulls
    it in a little) and the sandwich error with one judgment per pair is the Laplace one."""
    x = np.array([[1.0]] * 30 + [[-1.0]] * 10)
    theta, se = pooled_fit(x, np.arange(40))
    assert theta[0] == pytest.approx(math.log(3.0), abs=0.03)
    assert se[0] == pytest.approx(math.sqrt(1 / 30 + 1 / 10), rel=0.05)


def test_prompt_halves_are_a_fixed_coin_per_prompt():
    prompts = [f"prompt {i}" for i in range(2000)]
    halves = prompt_halves(prompts, 0)
    assert halves.tolist() == prompt_halves(prompts, 0).tolist()
    assert 0.45 < halves.mean() < 0.55 and (halves != prompt_halves(prompts, 1)).any()


def test_too_few_pairs_is_told_what_cannot_be_tested():
    rows = [_judgment(f"p{i}", f"- answer {i} indeed", f"answer {i}", f"r{i % 3}") for i in range(10)]
    result = discover(rows)
    assert result.tested == () and result.findings == () and result.attributes_line() is None
    text = format_discovery(result)
    assert "nothing can be tested" in text and "not evidence that the annotators are unbiased" in text
    assert "markdown: 10 pairs differ in it" in text and "the test needs 20 in each" in text
    assert "length: 10 pairs differ in it" in text  # 4 words against 2
    assert "never differs between the two sides of a pair here: woman_coded, black_coded, md_header," in text


def test_few_prompts_are_named_as_the_reason_nothing_can_be_tested():
    rows = [_judgment("one prompt", f"- answer {i}", f"answer {i} here", f"r{i % 4}") for i in range(60)]
    text = format_discovery(discover(rows))
    assert "nothing can be tested" in text
    assert "the data have 1 distinct prompt(s), and a candidate needs pairs in both halves" in text


def test_the_start_level_is_fitted_on_at_most_level_pairs_drawn_with_the_seed(monkeypatch):
    """The pair-effect fit's cost grows with the pairs (a 20,000-pair cap took 100 s and 1.1 GB of a
    100k-judgment screen): over the cap, it sees exactly LEVEL_PAIRS whole pairs, the same ones for
    the same seed; under it, every judgment."""
    import badpo.core.pair_level as pair_level
    from badpo.auditing import discover as module

    seen = []

    def fake(directions, pair, side):
        seen.append(pair.clone())
        return pair_level.PairEffectFit([0.5], [0.1], 1.0, [0.4], int(pair.unique().numel()), 0, True)

    monkeypatch.setattr(pair_level, "pair_effect_level", fake)
    pairs = module.LEVEL_PAIRS + 300
    pair = np.repeat(np.arange(pairs), 2)
    oriented, side = np.ones((len(pair), 1)), np.tile([1.0, -1.0], pairs)
    assert module.start_levels(oriented, pair, side, seed=3) == [0.5]
    module.start_levels(oriented, pair, side, seed=3)
    assert seen[0].unique().numel() == module.LEVEL_PAIRS and len(seen[0]) == 2 * module.LEVEL_PAIRS
    assert bool((seen[0] == seen[1]).all())
    module.start_levels(oriented[:20], pair[:20], side[:20], seed=3)
    assert len(seen[2]) == 20


def test_chunks_are_bounded_by_their_ngrams_so_long_answers_make_smaller_ones(monkeypatch):
    """Issue 49's retry: discover's memory grew with the answers' length (a chunk of 50,000
    responses held every n-gram of every one); a chunk now holds at most _CHUNK_ITEMS n-grams."""
    from badpo.auditing import discover_data

    monkeypatch.setattr(discover_data, "_CHUNK_ITEMS", 100)
    assert discover_data._spans(np.array([30, 30, 30, 30, 200, 10]), most=50) == [(0, 3), (3, 4), (4, 5), (5, 6)]
    assert discover_data._spans(np.array([1] * 7), most=3) == [(0, 3), (3, 6), (6, 7)]
    texts = [" ".join([f"w{i}"] * 60) for i in range(5)]  # about 122 n-grams each: one response a chunk
    assert discover_data._text_spans(PackedTexts(texts)) == [(i, i + 1) for i in range(5)]


def test_a_read_pair_holds_each_answer_once(tmp_path):
    """Four judgments of one pair read from a file share their answer strings (the screen held
    every copy: ~19 KB a judgment at 300 words)."""
    import json

    from badpo.data.sources import read_judgment_source

    answer, other = "a long answer " * 50, "another one " * 50
    path = tmp_path / "j.jsonl"
    path.write_text("".join(json.dumps({"prompt": "q", "chosen": answer if k % 2 else other,
                                        "rejected": other if k % 2 else answer, "annotator": f"a{k}"}) + "\n"
                            for k in range(4)))
    rows = read_judgment_source(str(path)).rows
    texts = {id(text) for row in rows for text in (row.chosen, row.rejected)}
    assert len(texts) == 2 and len({id(row.prompt) for row in rows}) == 1
