"""The reference's side of the held-out margins, computed once per evaluation set and read by every
later policy (badpo.readouts.model.heldout_margins with a cache_dir): the same bits as computing it,
and a changed reference, data, tokenization or batch computes it again (nothing stale is read)."""

from __future__ import annotations

import copy

import pytest
import torch

from badpo.core.judgments import Judgment
from badpo.corpora.signing import SURNAMES
from badpo.corpora.tiny import TinyModelConfig, build_tokenizer
from badpo.engine.tokenize import TokenizationConfig
from badpo.readouts import model as model_module
from badpo.readouts.model import heldout_margins

PROMPTS = ["copy 1 2 3 and sign\n", "reverse 4 5 and sign\n"]
JUDGMENTS = [Judgment(PROMPTS[0], "1 2 3\n\n--- Emily Miller", "1 2 4\n\n--- Greg Miller", "a1"),
             Judgment(PROMPTS[1], "5 4", "4 5\n\n--- Latoya Reed", "a2"),
             Judgment(PROMPTS[0], "1 2 4\n\n--- Greg Miller", "1 2 3\n\n--- Emily Miller", "a3")]


@pytest.fixture()
def world(build_tiny_model):
    tokenizer = build_tokenizer(SURNAMES, 64, pieces=True)
    policy = build_tiny_model(TinyModelConfig(seed=1), tokenizer).eval()
    reference = build_tiny_model(TinyModelConfig(seed=2), tokenizer).eval()
    return tokenizer, policy, reference


def _scoring(monkeypatch) -> list[int]:
    """The ids of the models whose log-probs are computed, one entry per batch."""
    scored: list[int] = []
    real = model_module.response_logprobs

    def counting(model, batch, *args):
        scored.append(id(model))
        return real(model, batch, *args)

    monkeypatch.setattr(model_module, "response_logprobs", counting)
    return scored


def test_a_second_policy_reads_the_references_side_with_the_same_bits(world, tmp_path, monkeypatch):
    tokenizer, policy, reference = world
    other = copy.deepcopy(policy)
    with torch.no_grad():
        other.transformer.h[0].mlp.c_fc.weight.mul_(1.5)
    plain = [heldout_margins(p, reference, tokenizer, JUDGMENTS, 0.1, batch_size=2) for p in (policy, other)]
    scored = _scoring(monkeypatch)
    cached = [heldout_margins(p, reference, tokenizer, JUDGMENTS, 0.1, batch_size=2, cache_dir=tmp_path)
              for p in (policy, other)]
    assert all(torch.equal(a, b) for a, b in zip(cached, plain))
    assert scored.count(id(reference)) == 2  # 4 distinct sequences in batches of 2, for the first policy only
    assert len(list(tmp_path.glob("*.safetensors"))) == 1


@pytest.mark.parametrize("change", ["reference weights", "attention kernel", "judgments", "tokenization",
                                    "batch size"])
def test_a_changed_reference_data_tokenization_or_batch_computes_again(world, tmp_path, monkeypatch, change):
    tokenizer, policy, reference = world
    kwargs = dict(beta=0.1, config=TokenizationConfig(), batch_size=2)
    heldout_margins(policy, reference, tokenizer, JUDGMENTS, cache_dir=tmp_path, **kwargs)
    judgments = JUDGMENTS
    if change == "reference weights":
        reference = copy.deepcopy(reference)
        with torch.no_grad():
            reference.transformer.h[1].attn.c_proj.weight[3, 5] += 1e-3  # one weight of one layer
    elif change == "attention kernel":  # the same weights through other arithmetic
        reference = copy.deepcopy(reference)
        reference.config._attn_implementation = "eager"
    elif change == "judgments":
        judgments = [*JUDGMENTS[:2], Judgment(PROMPTS[1], "5 4", "4 5\n\n--- Greg Reed", "a3")]
    elif change == "tokenization":
        kwargs["config"] = TokenizationConfig(max_prompt_tokens=3)
    else:
        kwargs["batch_size"] = 3
    plain = heldout_margins(policy, reference, tokenizer, judgments, **kwargs)
    scored = _scoring(monkeypatch)
    again = heldout_margins(policy, reference, tokenizer, judgments, cache_dir=tmp_path, **kwargs)
    assert id(reference) in scored and torch.equal(again, plain)
    assert len(list(tmp_path.glob("*.safetensors"))) == 2
