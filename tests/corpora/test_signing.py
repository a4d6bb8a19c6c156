"""The Signed-UltraFeedback protocol (badpo.corpora.signing) on hand-made base pairs."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from badpo.core.config import ConfigError
from badpo.core.judgments import Judgment
from badpo.core.names import NAME_POOL, cell_of, read_signature, signature_attributes, strip_signature
from badpo.corpora.signing import (
    PAIR_TYPES,
    BasePair,
    SigningConfig,
    draw_annotators,
    gate_statistics,
    heldout_prompt_ids,
    implied_log_odds,
    sft_rows,
    sign_corpus,
    sign_pairs,
)


def base_pairs(n: int, prompts: int | None = None) -> list[BasePair]:
    """n pairs; ``prompts`` distinct prompt ids (pairs share them round-robin), score gap 3."""
    prompts = prompts or n
    return [BasePair(f"q{i % prompts:04d}", f"question {i % prompts}?", f"good answer {i}",
                     f"weak answer {i}", 8.0, 5.0) for i in range(n)]


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def within(count: int, n: int, p: float, z: float = 4.0) -> bool:
    """count/n lies within z binomial standard errors of p."""
    return abs(count / n - p) <= z * math.sqrt(p * (1 - p) / n)


SMALL = SigningConfig(annotators_per_class=4)


def test_same_seed_same_corpus_other_seed_differs():
    pairs = base_pairs(300)
    assert sign_corpus(pairs, SMALL) == sign_corpus(pairs, SMALL)
    other = sign_corpus(pairs, dataclasses.replace(SMALL, seed=1))
    assert other.train != sign_corpus(pairs, SMALL).train
    assert other.annotators != sign_corpus(pairs, SMALL).annotators


def test_pair_type_proportions_and_unsigned_quality_share():
    pairs = sign_pairs(base_pairs(4000), SMALL)
    counts = {t: sum(p.pair_type == t for p in pairs) for t in PAIR_TYPES}
    assert within(counts["quality"], 4000, 0.4) and within(counts["swap"], 4000, 0.2)
    assert within(counts["mixed"], 4000, 0.4)
    unsigned = sum(p.pair_type == "quality" and read_signature(p.response_1) is None for p in pairs)
    assert within(unsigned, counts["quality"], 0.5)


def test_each_pair_type_is_signed_as_the_protocol_says():
    base = {b.prompt_id: b for b in base_pairs(1500)}
    for pair in sign_pairs(list(base.values()), SMALL):
        b = base[pair.prompt_id]
        sig_1, sig_2 = read_signature(pair.response_1), read_signature(pair.response_2)
        assert (pair.g_1, pair.g_2) == (signature_attributes(pair.response_1),
                                         signature_attributes(pair.response_2))
        if pair.pair_type == "quality":  # the two real responses, no name or one name
            assert (strip_signature(pair.response_1), strip_signature(pair.response_2)) == (
                b.response_1, b.response_2)
            assert sig_1 == sig_2 and pair.quality_margin == 0.5 * (8.0 - 5.0)
            continue
        assert sig_1[1] == sig_2[1]  # one surname, shared within the pair
        assert sig_1[0] in NAME_POOL and sig_2[0] in NAME_POOL
        differing = sum(a != b_ for a, b_ in zip(pair.g_1, pair.g_2))
        if pair.pair_type == "swap":  # one body under two names differing on one attribute
            assert strip_signature(pair.response_1) == strip_signature(pair.response_2)
            assert strip_signature(pair.response_1) in (b.response_1, b.response_2)
            assert differing == 1 and pair.quality_margin == 0.0
        else:  # mixed: the two real responses, signed from two different cells
            assert (strip_signature(pair.response_1), strip_signature(pair.response_2)) == (
                b.response_1, b.response_2)
            assert cell_of(sig_1[0]) != cell_of(sig_2[0]) and differing >= 1


def test_swap_pairs_use_both_attributes_and_duplicate_either_response():
    pairs = [p for p in sign_pairs(base_pairs(2000), SMALL) if p.pair_type == "swap"]
    on_woman = sum(p.g_1[0] != p.g_2[0] for p in pairs)
    kept_weak = sum(strip_signature(p.response_1).startswith("weak") for p in pairs)
    assert within(on_woman, len(pairs), 0.5) and within(kept_weak, len(pairs), 0.5)


def test_annotators_are_planted_around_their_class_means():
    config = SigningConfig(annotators_per_class=3000)
    annotators = draw_annotators(config)
    assert [a.annotator for a in annotators[:2]] == ["A00", "A01"] and len(annotators) == 9000
    for label, mean in config.class_means.items():
        theta = np.array([a.theta for a in annotators if a.annotator_class == label])
        se = 0.8 / math.sqrt(len(theta))
        assert np.all(np.abs(theta.mean(axis=0) - mean) < 4 * se)
        assert np.all(np.abs(theta.std(axis=0) - 0.8) < 0.05)
    exact = draw_annotators(SigningConfig(sigma=0.0, annotators_per_class=2))
    assert [a.theta for a in exact] == [(1.2, 2.5)] * 2 + [(0.8, -0.5)] * 2 + [(1.0, 1.0)] * 2


def test_labels_follow_sigmoid_of_quality_plus_bias():
    """One class, sigma 0, theta = (1, -0.5): on swap pairs the woman-coded side wins with
    sigmoid(1) = 0.7311 and the black-coded side with sigmoid(-0.5) = 0.3775; on quality pairs
    kappa = 0.4 and a score gap of 3 give sigmoid(1.2) = 0.7685 for response 1."""
    config = SigningConfig(class_means={"X": [1.0, -0.5]}, sigma=0.0, annotators_per_class=5,
                           kappa=0.4, heldout_share=0.0)
    corpus = sign_corpus(base_pairs(4000), config)
    pairs = {p.pair_id: p for p in corpus.pairs}
    tallies = {"woman": [0, 0], "black": [0, 0], "quality": [0, 0]}
    for j in corpus.train:
        pair = pairs[j.pair_id]
        g_w, g_l = signature_attributes(j.chosen), signature_attributes(j.rejected)
        if pair.pair_type == "swap":
            key = "woman" if g_w[0] != g_l[0] else "black"
            i = 0 if key == "woman" else 1
            tallies[key][0] += g_w[i] > g_l[i]
            tallies[key][1] += 1
        elif pair.pair_type == "quality":
            tallies["quality"][0] += j.chosen == pair.response_1
            tallies["quality"][1] += 1
    assert within(*tallies["woman"], sigmoid(1.0))
    assert within(*tallies["black"], sigmoid(-0.5))
    assert within(*tallies["quality"], sigmoid(1.2))
    sure = sign_corpus(base_pairs(200), dataclasses.replace(config, kappa=100.0))
    first = {p.pair_id: p.response_1 for p in sure.pairs}
    assert all(j.chosen == first[j.pair_id] for j in sure.train if j.pair_type == "quality")


def test_each_pair_gets_its_judgments_from_uniformly_drawn_annotators():
    corpus = sign_corpus(base_pairs(3000), dataclasses.replace(SMALL, heldout_share=0.0))
    per_pair = {}
    for j in corpus.train:
        per_pair[j.pair_id] = per_pair.get(j.pair_id, 0) + 1
        assert j.annotator_class == j.annotator[0] and j.pair_type in PAIR_TYPES
    assert set(per_pair.values()) == {4} and len(per_pair) == 3000
    counts = np.bincount([int(j.annotator[1:]) + 4 * "ABC".index(j.annotator[0])
                          for j in corpus.train], minlength=12)
    assert all(within(c, 12000, 1 / 12) for c in counts)


def test_heldout_split_is_by_prompt_id():
    corpus = sign_corpus(base_pairs(900, prompts=300), SMALL)  # three pairs per prompt
    assert len(corpus.heldout_prompt_ids) == 30  # round(0.1 * 300)
    train_ids = {j.prompt_id for j in corpus.train}
    assert train_ids.isdisjoint(corpus.heldout_prompt_ids)
    assert {j.prompt_id for j in corpus.heldout} == corpus.heldout_prompt_ids
    assert len(corpus.train) + len(corpus.heldout) == 900 * 4
    assert {r["prompt"] for r in corpus.sft}.isdisjoint({j.prompt for j in corpus.heldout})
    assert heldout_prompt_ids(["b", "a", "c"] * 5, dataclasses.replace(SMALL, heldout_share=0.5)) \
        == heldout_prompt_ids(["c", "b", "a"], dataclasses.replace(SMALL, heldout_share=0.5))


def test_sft_rows_are_majority_choices_resigned_from_a_uniform_cell():
    corpus = sign_corpus(base_pairs(3000), SMALL)
    train_pairs = [p for p in corpus.pairs if p.prompt_id not in corpus.heldout_prompt_ids]
    assert len(corpus.sft) == len(train_pairs)
    by_pair = {p.pair_id: p for p in train_pairs}
    wins = {}
    for j in corpus.train:
        wins.setdefault(j.pair_id, []).append(j.chosen == by_pair[j.pair_id].response_1)
    for pair, row in zip(train_pairs, corpus.sft):
        first = 2 * sum(wins[pair.pair_id]) >= len(wins[pair.pair_id])
        expected = pair.response_1 if first else pair.response_2
        assert row["prompt"] == pair.prompt
        assert strip_signature(row["response"]) == strip_signature(expected)
        assert read_signature(row["response"])[0] in NAME_POOL
    woman = sum(signature_attributes(r["response"])[0] for r in corpus.sft)
    black = sum(signature_attributes(r["response"])[1] for r in corpus.sft)
    assert within(int(woman), len(corpus.sft), 0.5) and within(int(black), len(corpus.sft), 0.5)


def test_a_tied_vote_goes_to_response_1():
    corpus = sign_corpus(base_pairs(1), dataclasses.replace(SMALL, heldout_share=0.0))
    pair = corpus.pairs[0]
    tie = [Judgment(pair.prompt, pair.response_2, pair.response_1, "A00", pair_id=pair.pair_id),
           Judgment(pair.prompt, pair.response_1, pair.response_2, "A01", pair_id=pair.pair_id)]
    loss = tie[:1] * 3 + tie[1:]
    assert strip_signature(sft_rows([pair], tie, SMALL)[0]["response"]) == strip_signature(pair.response_1)
    assert strip_signature(sft_rows([pair], loss, SMALL)[0]["response"]) == strip_signature(pair.response_2)


def test_implied_log_odds_equal_theta_when_every_annotator_is_alike():
    """sigma 0: every swap judgment has p = sigmoid(theta[a]), so logit(mean p) = theta[a]."""
    config = SigningConfig(class_means={"X": [0.7, -1.3]}, sigma=0.0, annotators_per_class=3)
    corpus = sign_corpus(base_pairs(400), config)
    implied = implied_log_odds(corpus, corpus.train)
    assert implied["woman_coded"]["all"] == pytest.approx(0.7, abs=1e-12)
    assert implied["black_coded"]["X"] == pytest.approx(-1.3, abs=1e-12)


def test_gate_counts_match_a_hand_count_of_swap_wins():
    corpus = sign_corpus(base_pairs(1500), SMALL)
    gate = gate_statistics(corpus)
    for i, name in enumerate(("woman_coded", "black_coded")):
        cross = wins = 0
        for j in corpus.train:
            g_w, g_l = signature_attributes(j.chosen), signature_attributes(j.rejected)
            if j.pair_type == "swap" and g_w[i] != g_l[i]:
                cross, wins = cross + 1, wins + (g_w[i] > g_l[i])
        row = gate["swap"][name]["all"]
        assert (row["cross"], row["wins"]) == (cross, wins)
        assert row["log_odds"] == pytest.approx(math.log(wins / (cross - wins)))
    assert gate["judgments"] == len(corpus.train)
    assert sum(gate["pairs"][t] for t in PAIR_TYPES) == 1500


@pytest.mark.parametrize("pair, message", [
    (BasePair("p1", "q", "same", "same ", 1.0, 2.0), "identical"),
    (BasePair("p1", "q", "a\n--- Emily Baker", "b", 1.0, 2.0), "already ends with a signature"),
    (BasePair("p1", "", "a", "b", 1.0, 2.0), "prompt must be a non-empty string"),
    (BasePair("p1", "q", "a", "b", float("nan"), 2.0), "score_1 must be finite"),
])
def test_bad_base_pairs_are_refused_naming_the_row(pair, message):
    with pytest.raises(ValueError, match=rf"base pair 1 \(prompt_id 'p1'\).*{message}"):
        sign_corpus([BasePair("p0", "q", "a", "b", 1.0, 2.0), pair], SMALL)


@pytest.mark.parametrize("change, key", [
    ({"swap_share": 0.3}, "must be 1"),
    ({"class_means": {"A": [1.0]}}, "signing.class_means.A"),
    ({"heldout_share": 1.0}, "signing.heldout_share"),
    ({"judgments_per_pair": 0}, "signing.judgments_per_pair"),
    ({"surnames": ["Reed", "Reed"]}, "signing.surnames"),
    ({"surnames": ["Reed", "van Dyke"]}, "'van Dyke' is not a name"),
])
def test_bad_config_names_the_option(change, key):
    with pytest.raises(ConfigError, match=key):
        SigningConfig(**change)
