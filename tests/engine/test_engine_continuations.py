"""Candidates scored as a trie after a cached prefix: the trie worked out by hand, and the trie's
log-probs against the padded batch and against scoring prefix + candidate one at a time."""

from __future__ import annotations

import pytest
import torch

from badpo.engine import continuations
from badpo.engine.continuations import candidate_batch, encode_prefix, score_after, takes_tree_mask
from fixtures.engine import VOCAB, full_logit_token_logprobs


def ids(text: str) -> list[int]:
    return [VOCAB.index(w) for w in text.split()]


def test_the_trie_feeds_each_proper_prefix_once():
    """[a b c], [a b d], [a e], [f]: the fed positions are the proper prefixes a and a b (the last
    token of a candidate is only predicted); the scored steps are the six distinct non-empty
    prefixes a, a b, a b c, a b d, a e, f, predicted by the prefix's state (0), a (1) or a b (2)."""
    a, b, c, d, e, f = 10, 11, 12, 13, 14, 15
    batch = candidate_batch([[a, b, c], [a, b, d], [a, e], [f]])
    assert batch.tokens.tolist() == [a, b] and batch.depth.tolist() == [0, 1]
    assert batch.ancestry.tolist() == [[True, False], [True, True]]
    assert batch.predictor.tolist() == [0, 1, 2, 2, 1, 0]
    assert batch.target.tolist() == [a, b, c, d, e, f]
    assert batch.owner.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 3]
    assert batch.step.tolist() == [0, 1, 2, 0, 1, 3, 0, 4, 5]


def test_single_token_candidates_feed_nothing():
    batch = candidate_batch([[5], [6], [5]])
    assert batch.tokens.numel() == 0 and batch.predictor.tolist() == [0, 0] and batch.step.tolist() == [0, 1, 0]


CANDIDATES = ["emily smith", "emily smith <eos>", "emily jones", "jamal", "lakisha jones baker",
              "lakisha jones", "greg", "emily"]


def one_at_a_time(model, prefix: list[int], candidates: list[list[int]]) -> torch.Tensor:
    """log p(candidate | prefix) from the full logits of prefix + candidate, one sequence each."""
    scores = []
    for candidate in candidates:
        sequence = torch.tensor([prefix + candidate])
        mask = torch.zeros_like(sequence, dtype=torch.bool)
        mask[0, len(prefix):] = True
        batch = {"input_ids": sequence, "attention_mask": torch.ones_like(sequence), "response_mask": mask}
        scores.append(full_logit_token_logprobs(model, batch).sum())
    return torch.stack(scores)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_the_trie_scores_what_the_padded_batch_and_the_plain_path_score(arch, attention, build_model):
    """ContinuationTrie sharing first tokens (and one a prefix of another) through the trie equal the
    padded batch and prefix + candidate scored alone, for absolute and rotary positions."""
    model = build_model(arch)
    model.config._attn_implementation = attention
    prefix = ids("write code sure i think --- ")
    candidates = [ids(text) for text in CANDIDATES]
    batch = candidate_batch(candidates)
    with torch.no_grad():
        encoded = encode_prefix(model, prefix)
        assert takes_tree_mask(model, encoded.length + 3)
        trie = score_after(model, encoded, batch, chunk_size=3, tree=True)
        padded = score_after(model, encoded, batch, chunk_size=3, tree=False)
        plain = one_at_a_time(model, prefix, candidates)
    torch.testing.assert_close(trie, padded, rtol=0, atol=1e-5)
    torch.testing.assert_close(trie, plain, rtol=0, atol=1e-5)


def test_the_default_runs_the_trie_on_a_checked_model(build_model, monkeypatch):
    """On a checked architecture the default never takes the padded batch (the two layouts agree
    to the bit on CPU here, so only forbidding one tells which ran)."""
    model = build_model("llama")
    batch = candidate_batch([ids(text) for text in CANDIDATES])
    with torch.no_grad():
        encoded = encode_prefix(model, ids("write code sure i think --- "))
        monkeypatch.setattr(continuations, "_padded_logprobs", lambda *a, **k: pytest.fail("padded batch ran"))
        score_after(model, encoded, batch)


def test_attention_that_ignores_masks_and_short_windows_get_the_padded_batch(build_model):
    """Flash attention does not take an arbitrary mask, a sliding window the trie's mask would not
    apply, and an architecture nobody checked (ALiBi models build their bias from a 2D mask): all
    are scored as a padded batch."""
    model = build_model("qwen2")
    assert takes_tree_mask(model, 100)
    model.config.model_type = "bloom"
    assert not takes_tree_mask(model, 100)
    model.config.model_type = "qwen2"
    model.config._attn_implementation = "flash_attention_2"
    assert not takes_tree_mask(model, 100)
    model.config._attn_implementation = "sdpa"
    model.config.use_sliding_window, model.config.sliding_window = True, 64
    assert not takes_tree_mask(model, 100) and takes_tree_mask(model, 64)
