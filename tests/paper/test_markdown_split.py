"""experiments/analyses/markdown_split.py: the pairs it compares, and its split adds up to the whole answer's
log-probability as the readouts score it (an independent path: ended_and_running_logprobs)."""

from __future__ import annotations

import json

import pytest
import torch

from badpo.corpora.tiny_multipref import TinyMultiPrefConfig
from badpo.engine.tokenize import TokenizationConfig
from badpo.readouts.model import ended_and_running_logprobs
from fixtures.benchmarks import load_analysis

module = load_analysis("markdown_split")


def test_each_plain_candidate_is_paired_with_its_bulleted_twin(tmp_path):
    row = {"prompt": "copy 1 2 3\n", "candidates": ["1 2 3", "1 2 3 as asked", "- 1 2 3", "- 1 2 3 as asked"]}
    (tmp_path / "eval_prompts.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert module.candidate_pairs(module.eval_rows(tmp_path, None)) == [("copy 1 2 3\n", "- 1 2 3", "1 2 3"),
                                                      ("copy 1 2 3\n", "- 1 2 3 as asked", "1 2 3 as asked")]


@pytest.fixture(scope="module")
def world(tmp_path_factory, build_tiny_multipref):
    out = tmp_path_factory.mktemp("tiny_multipref")
    build_tiny_multipref(TinyMultiPrefConfig(n_prompts=100, n_eval_prompts=3, heldout_fraction=0.2), out)
    return out


def test_bullet_minus_digit_plus_rest_is_the_whole_answers_difference(world):
    pairs = module.candidate_pairs(module.eval_rows(world, 2))
    tokenization = TokenizationConfig(max_prompt_tokens=16, max_length=64)
    model, tokenizer = module.load(world / "model")
    bullet, digit, rest = module.opening_and_rest(model, tokenizer, pairs, tokenization)
    ended, _ = ended_and_running_logprobs(model, tokenizer, [(p, t) for p, b, c in pairs for t in (b, c)],
                                          tokenization)
    whole = ended[0::2] - ended[1::2]
    assert len(pairs) == 6 and torch.allclose(bullet - digit + rest, whole, atol=1e-4)
    # the first response token, read independently: log p("-") at the prompt's last position
    prompt_ids = tokenizer(pairs[0][0], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids])).logits[0, -1].double()
    dash = tokenizer.convert_tokens_to_ids("-")
    assert bullet[0].item() == pytest.approx(torch.log_softmax(logits, -1)[dash].item(), abs=1e-4)


def test_the_opening_mass_sums_to_one_and_holds_the_bullets_probability(world):
    """Its kinds cover the vocabulary once, and its bullet share is exp of the split's bullet
    log-probability averaged the same way (one pair per prompt: the no-ending candidates)."""
    shares = module.opening_mass(*module.load(world / "model"), module.eval_rows(world, 2))
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-9) and min(shares.values()) >= -1e-12
    pairs = module.candidate_pairs(module.eval_rows(world, 2))[0::3]
    tokenization = TokenizationConfig(max_prompt_tokens=16, max_length=64)
    bullet, _, _ = module.opening_and_rest(*module.load(world / "model"), pairs, tokenization)
    assert shares["bullet"] == pytest.approx(float(bullet.exp().mean()), abs=1e-5)


def test_the_opening_mass_counts_a_task_word_body_once(tmp_path, build_tiny_multipref):
    """Under echo_task the body opens with its task word, not a digit: no share is negative and
    the shares still cover the vocabulary once."""
    world = tmp_path / "echo"
    build_tiny_multipref(TinyMultiPrefConfig(n_prompts=100, n_eval_prompts=3, heldout_fraction=0.2,
                                             echo_task=True), world)
    shares = module.opening_mass(*module.load(world / "model"), module.eval_rows(world, 2))
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-9) and min(shares.values()) >= -1e-12


def test_a_world_whose_bullet_follows_tabs_is_refused_in_one_line(tmp_path, build_tiny_multipref):
    """With bullet_indent the first response token is a tab, not the bullet the split reads."""
    build_tiny_multipref(TinyMultiPrefConfig(n_prompts=100, n_eval_prompts=3, heldout_fraction=0.2,
                                             bullet_indent=2), tmp_path / "corpus")
    with pytest.raises(SystemExit, match="bullet_indent 2"):
        module.split_rows(tmp_path, None)
