"""Tokenization rules and THE log-prob code against full-logit log-probs (tiny GPT-2/Llama/Qwen2)."""

from __future__ import annotations

import pytest
import torch

from badpo.core.config import ConfigError
from badpo.engine.continuations import candidate_batch, continuation_logprobs, encode_prefix, score_after
from badpo.engine.logprobs import decoder_and_head, response_logprobs, token_logprobs
from badpo.engine.tokenize import TokenizationConfig, build_token_store, join_truncated
from fixtures.engine import VOCAB, build_tokenizer, full_logit_token_logprobs

SEQUENCES = [
    ("what is the best way to learn", "sure i think you should try this first"),
    ("write code", "yes"),
    ("what is the best way to cook", "maybe try that --- emily smith"),
]


def ids(text: str) -> list[int]:
    return [VOCAB.index(w) for w in text.split()]


def test_plain_encoding_and_truncation_rules():
    """Prompt 'what is the best way to learn' is 7 words; max_prompt_tokens=5 keeps the last 5
    ('the best way to learn'); max_length=12 leaves 7 response tokens, so the 8-word response
    + eos (9 tokens) keeps its first 7 and loses 'first' and eos."""
    store = build_token_store(build_tokenizer(), SEQUENCES[:2],
                              TokenizationConfig(max_prompt_tokens=5, max_length=12))
    assert store.ids[0].tolist() == ids("the best way to learn sure i think you should try this")
    assert store.prompt_lengths.tolist() == [5, 2] and store.lengths.tolist() == [12, 4]
    eos = VOCAB.index("<eos>")
    assert store.ids[1, :4].tolist() == ids("write code yes") + [eos]
    assert (store.truncated_prompts, store.truncated_responses) == (1, 1)
    batch = store.batch(torch.tensor([1, 0]))
    assert batch["input_ids"].shape == (2, 12)
    assert batch["response_mask"][0].tolist() == [False, False] + [True] * 2 + [False] * 8
    assert batch["attention_mask"][0].tolist() == [1] * 4 + [0] * 8


def test_chat_template_renders_a_user_turn_and_generation_prompt():
    store = build_token_store(build_tokenizer(chat_template=True), SEQUENCES[1:2], TokenizationConfig())
    expected = ids("<|user|> write code <|assistant|> yes") + [VOCAB.index("<eos>")]
    assert store.ids[0].tolist() == expected and store.prompt_lengths.tolist() == [4]
    never = build_token_store(build_tokenizer(chat_template=True), SEQUENCES[1:2],
                              TokenizationConfig(chat_template="never"))
    assert never.prompt_lengths.tolist() == [2]
    with pytest.raises(ValueError, match="no chat template"):
        build_token_store(build_tokenizer(), SEQUENCES[1:2], TokenizationConfig(chat_template="always"))
    # rendered: the prompt is text a template already wrote, so it is taken as it is (not templated
    # a second time): the same 4 prompt tokens as 'write code' templated above
    rendered = build_token_store(build_tokenizer(chat_template=True), [("<|user|> write code <|assistant|>", "yes")],
                                 TokenizationConfig(chat_template="rendered"))
    assert rendered.ids[0].tolist() == expected and rendered.prompt_lengths.tolist() == [4]


def test_bad_limits_and_empty_prompt_are_errors():
    with pytest.raises(ConfigError, match="tokenization.max_prompt_tokens"):
        TokenizationConfig(max_prompt_tokens=20, max_length=10)
    with pytest.raises(ValueError, match="zero tokens"):
        join_truncated([], [5, 6], TokenizationConfig())


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
@pytest.mark.parametrize("chunk_size", [1, 3, 1024])
def test_chunked_logprobs_equal_full_logits(arch, chunk_size, build_model):
    model = build_model(arch)
    batch = build_token_store(build_tokenizer(), SEQUENCES, TokenizationConfig()).batch(torch.arange(3))
    expected = full_logit_token_logprobs(model, batch)
    projected = []  # the shape of every logits tensor the head makes
    hook = decoder_and_head(model)[1].register_forward_hook(lambda m, args, out: projected.append(out.shape))
    per_token = token_logprobs(model, batch, chunk_size)
    hook.remove()
    # fp32, each token's log-prob to 1e-6 (a sum of ~10 of them to 1e-5: another order of adding)
    torch.testing.assert_close(per_token, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(response_logprobs(model, batch, chunk_size), expected.sum(-1),
                               rtol=0, atol=1e-5)
    assert (per_token[~batch["response_mask"]] == 0).all()
    # never the [B, T, V] logits of the batch: response rows only, at most chunk_size at a time
    n_response = int(batch["response_mask"].sum())
    assert all(len(shape) == 2 and shape[0] <= min(chunk_size, n_response) for shape in projected)
    assert sum(shape[0] for shape in projected) == n_response


def test_chunked_gradients_equal_full_logit_gradients(build_model):
    """Checkpointed chunks recompute in backward; the gradient must not change."""
    model = build_model("llama")
    batch = build_token_store(build_tokenizer(), SEQUENCES, TokenizationConfig()).batch(torch.arange(3))
    weights = torch.tensor([1.0, -2.0, 0.5])
    (response_logprobs(model, batch, chunk_size=2) * weights).sum().backward()
    chunked = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    (full_logit_token_logprobs(model, batch).sum(-1) * weights).sum().backward()
    for name, param in model.named_parameters():
        torch.testing.assert_close(chunked[name], param.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_continuations_share_one_prefix(arch, build_model):
    """Scoring C candidates after a cached prefix equals scoring prefix + candidate one by one."""
    model = build_model(arch)
    prefix = ids("write code sure i think --- ")
    candidates = [ids("emily smith"), ids("jamal"), ids("lakisha jones baker"), ids("greg")]
    with torch.no_grad():
        together = continuation_logprobs(model, prefix, candidates, chunk_size=2)
        one_by_one = []
        for candidate in candidates:
            sequence = torch.tensor([prefix + candidate])
            mask = torch.zeros_like(sequence, dtype=torch.bool)
            mask[0, len(prefix):] = True
            batch = {"input_ids": sequence, "attention_mask": torch.ones_like(sequence),
                     "response_mask": mask}
            one_by_one.append(full_logit_token_logprobs(model, batch).sum())
    torch.testing.assert_close(together, torch.stack(one_by_one), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="empty"):
        continuation_logprobs(model, prefix, [ids("greg"), []])


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_one_encoded_prefix_serves_every_group_bit_for_bit(arch, build_model):
    """The names readout encodes a prefix once and scores several batches of candidates after it:
    each batch's log-probs are exactly those of encoding the prefix again for it, and scoring does
    not use up the prefix (the same batch twice gives the same bits)."""
    model = build_model(arch)
    prefix = ids("write code sure i think --- ")
    groups = [[ids("emily smith"), ids("jamal")], [ids("lakisha jones baker")], [ids("greg"), ids("emily")]]
    with torch.no_grad():
        encoded = encode_prefix(model, prefix)
        shared = [score_after(model, encoded, candidate_batch(group)) for group in groups]
        again = score_after(model, encoded, candidate_batch(groups[0]))
        fresh = [continuation_logprobs(model, prefix, group) for group in groups]
    assert all(torch.equal(a, b) for a, b in zip(shared, fresh)) and torch.equal(again, shared[0])


def test_peft_model_and_disabled_adapter(build_model):
    """Through peft, log-probs follow the adapter; with it disabled they are the base model's."""
    from peft import LoraConfig, get_peft_model

    base = build_model("qwen2")
    batch = build_token_store(build_tokenizer(), SEQUENCES, TokenizationConfig()).batch(torch.arange(3))
    with torch.no_grad():
        base_logps = full_logit_token_logprobs(base, batch).sum(-1)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
        adapted = response_logprobs(model, batch)
        torch.testing.assert_close(adapted, full_logit_token_logprobs(model, batch).sum(-1),
                                   rtol=0, atol=1e-5)
        assert (adapted - base_logps).abs().max() > 1e-3
        with model.disable_adapter():
            torch.testing.assert_close(response_logprobs(model, batch), base_logps, rtol=0, atol=1e-5)


def test_models_that_rescale_logits_are_refused(build_model):
    model = build_model("gpt2")
    model.config.final_logit_softcapping = 30.0
    batch = build_token_store(build_tokenizer(), SEQUENCES, TokenizationConfig()).batch(torch.arange(1))
    with pytest.raises(ValueError, match="final_logit_softcapping"):
        response_logprobs(model, batch)
