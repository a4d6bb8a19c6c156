"""The default ``badpo evaluate`` fits every world badpo builds: the ``max_new_tokens`` clamp counts
what the names readout appends after the reference's answer (issue 21, item 5).

The tiny world's model has 64 positions. Its random initialisation never emits EOS, so the
reference's greedy body fills all the room the clamp leaves; the names readout then appends the
signature prefix and a whole signature (+ EOS). Before the fix the clamp left room for the body
alone, and torch raised ``IndexError: index out of range in self`` at the default 512.
"""

from __future__ import annotations

import pytest

from badpo.corpora.tiny import TinyModelConfig, build_tokenizer
from badpo.engine.tokenize import TokenizationConfig
from badpo.evaluation.trained_run import GenerationCapNotice, cap_new_tokens
from badpo.readouts.evaluate_policy import EvalConfig, reference_bodies
from badpo.readouts.model import context_length
from badpo.readouts.names_scoring import names_readout, signature_tokens

SURNAMES = ["Ellis", "Baker"]
PROMPTS = ["reverse 5 2 7 4 7 and sign\n", "copy 9 5 5 9 3 and sign\n"]


@pytest.fixture(scope="module")
def world(build_tiny_model):
    tokenizer = build_tokenizer(SURNAMES, 64)
    return tokenizer, build_tiny_model(TinyModelConfig(), tokenizer).eval()


def test_the_default_clamp_leaves_room_for_the_signature_the_names_readout_appends(world):
    tokenizer, model = world
    tokenization = TokenizationConfig(max_prompt_tokens=32, max_length=64)
    with pytest.warns(GenerationCapNotice, match="signature the names readout appends"):
        config = cap_new_tokens(EvalConfig(), model, tokenizer, PROMPTS, tokenization, SURNAMES)
    longest = max(len(ids) for ids in tokenizer(PROMPTS)["input_ids"])
    assert config.max_new_tokens == 64 - longest - signature_tokens(tokenizer, SURNAMES)
    bodies = reference_bodies(model, tokenizer, PROMPTS, tokenization, config.max_new_tokens)
    rates = names_readout(model, tokenizer, PROMPTS, bodies, SURNAMES, tokenization)
    assert set(rates) == {"first_name", "whole_signature", "per_name", "cells", "per_prompt"}


def test_a_body_the_context_cannot_hold_is_a_one_line_error_not_an_index_error(world):
    tokenizer, model = world
    body = " ".join(["7"] * (context_length(model, tokenizer) - 10))
    with pytest.raises(ValueError, match="names readout: prompt \\+ answer body \\+ signature need"):
        names_readout(model, tokenizer, PROMPTS[:1], [body], SURNAMES)
