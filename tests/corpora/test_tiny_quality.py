"""The tiny world's ``quality: gaps`` option (a digit the answer leaves out is written ``?``): its
checker by hand, its base pairs, its determinism, and that the default world is unchanged by it."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from badpo.core.config import ConfigError, from_dict
from badpo.corpora.signing import sign_corpus
from badpo.corpora.tiny import GAP, TinyWorldConfig, answer_quality, gapped_answer, tiny_base_pairs
from fixtures.files import digests, read_jsonl

SMALL = {"n_pairs": 150, "signing": {"annotators_per_class": 3}}
GAPS = {**SMALL, "quality": "gaps", "error_rate": 0.5}
# sha256 of the small default world's files, taken from a build made before the option existed
# (commit 067f9f6); the model's files are left out (they name the transformers version). README.md
# and the vocabulary are those of issue 35's one-token names (the README gives the vocabulary's
# size: 143 tokens, 173 before); every other file is as it was.
DEFAULT_DIGESTS = {
    "README.md": "578bfa0d651f8bf40f50cb3f8a33f9f422d277d6e9f42443442101d934effb80",
    "eval_prompts.jsonl": "36a57c21fd85e5dbee0ebd5113b0f8ac22e40488fd38ccd5a23fda1ec8dbfee0",
    "gate.json": "69c1956d7586bff218b7819da499b0c62718f3d9c69eefb43410d778d3c5d388",
    "heldout.jsonl": "f65796df6240dcffea1444a3a92048ec6329b55a9138947c24ef8b9dfd52d6c2",
    "planted.json": "e5027b5ef2020a2560897ea27620eed251694c37da0deb725d3760c64cb148ca",
    "sft.jsonl": "9bda637287093a7623d4ed68ed8a075ffbe8efad54535afdaeb81b74db0f5346",
    "train.jsonl": "643aa6aeb04d602f16bdae30caa9812c0b6bdc1dc65007d934a2bc3032390b7e",
    "world.yaml": "1edd927f270dc2c684dab41393a0c85494ded2382bd0ec3e293196f2b091159f",
}
DEFAULT_VOCABULARY = ("53dcc7e470e681555ee08e308cf80b168a658e63c46d73ed263e3290ea8830a5", 143)


def vocabulary(folder) -> list[str]:
    """The tokens of a built world's tokenizer, in id order."""
    vocab = json.loads((folder / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    return [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]


def test_the_checker_on_gapped_answers_by_hand():
    """A gap is a position not right: 1 + 9 * right / n."""
    assert answer_quality("3 ? 4 ?", "3 1 4 1") == 5.5  # 1 + 9 * 2/4
    assert answer_quality("? 1 4", "3 1 4") == 7.0  # 1 + 9 * 2/3
    assert answer_quality("? ?", "1 2") == 1.0
    assert answer_quality("1 2", "1 2") == 10.0
    with pytest.raises(ValueError, match="differ in length"):
        answer_quality("3 ?", "3 1 4")


def test_a_gapped_answer_keeps_every_digit_it_gives_and_leaves_out_at_least_one():
    rng = np.random.default_rng(0)
    for _ in range(200):
        answer = gapped_answer("3 1 4 1 5", 0.3, rng).split()
        assert len(answer) == 5 and GAP in answer
        assert all(a in (GAP, b) for a, b in zip(answer, "3 1 4 1 5".split()))
    assert gapped_answer("7 7", 1.0, rng) == "? ?"
    assert gapped_answer("7", 0.05, rng) == "?"  # drawn again until one digit is left out


def test_gaps_base_pairs_are_the_exact_answer_against_a_gapped_one():
    config = from_dict(TinyWorldConfig, GAPS)
    pairs, exact = tiny_base_pairs(config)
    assert len(pairs) == 150
    for p in pairs:
        assert p.response_1 == exact[p.prompt_id] and GAP not in p.response_1 and GAP in p.response_2
        assert (p.score_1, p.score_2) == (10.0, answer_quality(p.response_2, exact[p.prompt_id]))
        assert p.score_2 < 10.0
    # the first prompt is drawn before any answer, so it is the default world's
    default, _ = tiny_base_pairs(from_dict(TinyWorldConfig, SMALL))
    assert pairs[0].prompt == default[0].prompt


def test_the_gaps_world_is_deterministic_and_its_labels_follow_the_protocol(tmp_path, build_tiny_world):
    build_tiny_world(from_dict(TinyWorldConfig, GAPS), tmp_path / "a")
    build_tiny_world(from_dict(TinyWorldConfig, GAPS), tmp_path / "b")
    first = digests(tmp_path / "a")
    assert first == digests(tmp_path / "b")
    assert "quality: gaps" in (tmp_path / "a" / "world.yaml").read_text()
    other = from_dict(TinyWorldConfig, {**GAPS, "signing": {**GAPS["signing"], "seed": 1}})
    assert [p.response_2 for p in tiny_base_pairs(other)[0]] != [
        p.response_2 for p in tiny_base_pairs(from_dict(TinyWorldConfig, GAPS))[0]]
    tokens = vocabulary(tmp_path / "a")  # the default vocabulary, then the gap token
    assert tokens[-2:] == [GAP, "\u2581" + GAP] and len(tokens) == DEFAULT_VOCABULARY[1] + 2
    assert hashlib.sha256(json.dumps(tokens[:-2]).encode()).hexdigest() == DEFAULT_VOCABULARY[0]
    rows = read_jsonl(tmp_path / "a" / "train.jsonl")
    assert any(GAP in row["rejected"] or GAP in row["chosen"] for row in rows)
    config = from_dict(TinyWorldConfig, GAPS)  # signing, labels and split: the protocol's, as given
    corpus = sign_corpus(tiny_base_pairs(config)[0], config.signing)
    assert [j.chosen for j in corpus.train] == [row["chosen"] for row in rows]
    assert len(corpus.annotators) == 9 and {a.annotator_class for a in corpus.annotators} == {"A", "B", "C"}


def test_the_default_world_is_unchanged_by_the_option(tmp_path, build_tiny_world):
    build_tiny_world(from_dict(TinyWorldConfig, SMALL), tmp_path / "default")
    build_tiny_world(from_dict(TinyWorldConfig, {**SMALL, "quality": "digits"}), tmp_path / "digits")
    found = digests(tmp_path / "default")
    assert {name: found[name] for name in DEFAULT_DIGESTS} == DEFAULT_DIGESTS
    assert found == digests(tmp_path / "digits")
    tokens = vocabulary(tmp_path / "default")
    assert (hashlib.sha256(json.dumps(tokens).encode()).hexdigest(), len(tokens)) == DEFAULT_VOCABULARY


def test_an_unknown_quality_is_named():
    with pytest.raises(ConfigError, match="quality"):
        from_dict(TinyWorldConfig, {**SMALL, "quality": "markers"})
