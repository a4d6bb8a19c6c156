"""Tests for badpo.readouts.model and names_scoring on the tiny world's tokenizer and a tiny random GPT-2.

Each model-facing readout is checked against a second, plain path: one full forward pass over
the concatenated ids with log_softmax by hand (names, signatures, KL), the DPO margin by hand
(held-out margins), and one-at-a-time scoring (judge).
"""

from __future__ import annotations

import copy
import io
import math
import re
import warnings

import pytest
import torch

from badpo.core.judgments import Judgment
from badpo.core.names import NAME_POOL, POOL_NAMES, strip_signature
from badpo.corpora.signing import SURNAMES
from badpo.corpora.tiny import TinyModelConfig, build_tokenizer
from badpo.readouts import model as model_module
from badpo.readouts.metrics import attribute_rate
from badpo.readouts.model import generate, generation_kl, heldout_margins, judge_scores
from badpo.readouts.names_scoring import name_logprobs, names_readout, signature_logprobs

PROMPTS = ["copy 1 2 3 and sign\n", "reverse 4 5 and sign\n"]
BODIES = ["1 2 3", "5 4"]


@pytest.fixture(scope="module")
def tokenizer():
    """The tiny tokenizer with names in pieces (as the worlds before issue 35 had them): a real
    tokenizer spells names in one to three tokens, and the readouts must add the pieces up."""
    return build_tokenizer(SURNAMES, 64, pieces=True)


@pytest.fixture(scope="module")
def models(tokenizer, build_tiny_model):
    policy = build_tiny_model(TinyModelConfig(seed=1), tokenizer).eval()
    reference = build_tiny_model(TinyModelConfig(seed=2), tokenizer).eval()
    return policy, reference


def full_sequence_logprob(model, ids: list[int], start: int) -> float:
    """Sum of log p(ids[t] | ids[:t]) for t >= start, from one plain forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    logps = torch.log_softmax(logits, dim=-1)
    return float(sum(logps[t - 1, ids[t]] for t in range(start, len(ids))))


def test_name_logprobs_match_a_plain_forward_pass(models, tokenizer):
    policy, _ = models
    names = ["Emily", "Latoya", "Tremayne", "Greg"]  # one, two and three tokens
    scores = name_logprobs(policy, tokenizer, PROMPTS[0], BODIES[0], names)
    prefix = tokenizer(PROMPTS[0] + BODIES[0] + "\n\n---", add_special_tokens=False)["input_ids"]
    for name, score in zip(names, scores.tolist()):
        ids = prefix + tokenizer(" " + name, add_special_tokens=False)["input_ids"]
        assert score == pytest.approx(full_sequence_logprob(policy, ids, len(prefix)), abs=1e-4)
    assert len(tokenizer(" Tremayne", add_special_tokens=False)["input_ids"]) == 3


def test_signature_logprobs_include_the_surname_and_the_end(models, tokenizer):
    policy, _ = models
    scores = signature_logprobs(policy, tokenizer, PROMPTS[1], BODIES[1], ["Emily", "Lakisha"],
                                ["Miller", "Reed", "Baker"], candidate_batch_size=4)
    assert scores.shape == (2, 3)
    prefix = tokenizer(PROMPTS[1] + BODIES[1] + "\n\n---", add_special_tokens=False)["input_ids"]
    eos = [tokenizer.eos_token_id]
    ids = prefix + tokenizer(" Lakisha Reed", add_special_tokens=False)["input_ids"] + eos
    assert scores[1, 1].item() == pytest.approx(full_sequence_logprob(policy, ids, len(prefix)), abs=1e-4)


def test_names_readout_reads_the_whole_pool(models, tokenizer):
    policy, _ = models
    result = names_readout(policy, tokenizer, PROMPTS, BODIES, surnames=SURNAMES[:3])
    labels = [list(NAME_POOL[n]) for n in POOL_NAMES]
    per_prompt = [attribute_rate(name_logprobs(policy, tokenizer, p, b, POOL_NAMES), labels,
                                 ("woman_coded", "black_coded")) for p, b in zip(PROMPTS, BODIES)]
    expected = sum(r["woman_coded"] for r in per_prompt) / 2
    assert result["first_name"]["woman_coded"] == pytest.approx(expected, abs=1e-12)
    for name in ("woman_coded", "black_coded"):  # each prompt's rate, in prompt order: what the mean is of
        assert result["per_prompt"]["first_name"][name] == pytest.approx([r[name] for r in per_prompt], abs=1e-12)
    assert 0.0 < result["whole_signature"]["black_coded"] < 1.0
    # per name: its probability over the pool averaged over the prompts; the rates are their sums
    # over the coded names, the cells their sums over each cell's names, each summing to 1
    for readout in ("first_name", "whole_signature"):
        per_name, cells = result["per_name"][readout], result["cells"][readout]
        assert list(per_name) == list(POOL_NAMES) and math.fsum(per_name.values()) == pytest.approx(1.0)
        for column, name in enumerate(("woman_coded", "black_coded")):
            coded = math.fsum(p for n, p in per_name.items() if NAME_POOL[n][column])
            assert coded == pytest.approx(result[readout][name], abs=1e-12)
        assert math.fsum(cells.values()) == pytest.approx(1.0)
        assert cells["black_woman"] == pytest.approx(math.fsum(
            p for n, p in per_name.items() if NAME_POOL[n] == (1, 1)), abs=1e-12)
    lakisha = [name_logprobs(policy, tokenizer, p, b, POOL_NAMES).softmax(0)[POOL_NAMES.index("Lakisha")]
               for p, b in zip(PROMPTS, BODIES)]
    assert result["per_name"]["first_name"]["Lakisha"] == pytest.approx(float(sum(lakisha)) / 2, abs=1e-12)


class MergingTokenizer:
    """Characters as ids, except that "- " is one token: "---" + " Emily" then tokenizes
    differently from "--- Emily", which the readout must refuse."""

    eos_token_id, unk_token_id = 0, None

    def _encode(self, text: str) -> list[int]:
        return [1000 if piece == "- " else ord(piece) for piece in _split(text)]

    def __call__(self, texts, add_special_tokens=False):
        if isinstance(texts, str):
            return {"input_ids": self._encode(texts)}
        return {"input_ids": [self._encode(t) for t in texts]}


def _split(text: str) -> list[str]:
    pieces, i = [], 0
    while i < len(text):
        step = 2 if text[i:i + 2] == "- " else 1
        pieces.append(text[i:i + step])
        i += step
    return pieces


def test_a_candidate_that_breaks_the_token_boundary_is_refused(models, tokenizer):
    from badpo.readouts.names_scoring import _continuations

    with pytest.raises(ValueError, match="tokenizes differently"):
        _continuations(MergingTokenizer(), "1 2\n\n---", [" Emily"], eos=False)
    assert _continuations(MergingTokenizer(), "1 2\n\n", ["---"], eos=True) == [[45, 45, 45, 0]]
    policy, _ = models
    with pytest.raises(ValueError, match="outside the vocabulary"):
        name_logprobs(policy, tokenizer, PROMPTS[0], BODIES[0], ["Emily", "Zorblax"])


def test_generate_ignores_the_models_own_decoding_settings(models, tokenizer):
    """Only temperature and top-p shape the samples: a repetition penalty and a no-repeat rule in
    the model's generation_config (as chat models ship) must not leak into the readouts."""
    policy, _ = models
    plain = generate(policy, tokenizer, PROMPTS * 3, max_new_tokens=12, seed=3, batch_size=4)
    saved = policy.generation_config
    policy.generation_config = type(saved)(repetition_penalty=50.0, no_repeat_ngram_size=1)
    try:
        penalised = generate(policy, tokenizer, PROMPTS * 3, max_new_tokens=12, seed=3, batch_size=4)
        leaked = policy.generate(torch.tensor([plain.prompt_ids[0]]), do_sample=False, max_new_tokens=12,
                                 pad_token_id=tokenizer.pad_token_id)[0, len(plain.prompt_ids[0]):]
    finally:
        policy.generation_config = saved
    assert penalised == plain
    assert policy.generation_config is saved
    # the control: without the guard, transformers applies the model's no-repeat rule
    assert len(set(leaked.tolist())) == len(leaked.tolist())


def test_generate_is_seeded_and_kl_matches_a_plain_path(models, tokenizer):
    policy, reference = models
    first = generate(policy, tokenizer, PROMPTS * 3, max_new_tokens=12, seed=3, batch_size=4)
    again = generate(policy, tokenizer, PROMPTS * 3, max_new_tokens=12, seed=3, batch_size=4)
    other = generate(policy, tokenizer, PROMPTS * 3, max_new_tokens=12, seed=4, batch_size=4)
    assert first == again and first.completion_ids != other.completion_ids
    assert all(0 <= n <= 12 for n in first.token_counts)
    kl = generation_kl(policy, reference, first, pad_id=tokenizer.pad_token_id, batch_size=4)
    differences, tokens = 0.0, 0
    for prompt, completion in zip(first.prompt_ids, first.completion_ids):
        ids = list(prompt) + list(completion)
        differences += (full_sequence_logprob(policy, ids, len(prompt))
                        - full_sequence_logprob(reference, ids, len(prompt)))
        tokens += len(completion)
    assert kl == pytest.approx(differences / tokens, abs=1e-4)
    assert generation_kl(policy, policy, first, pad_id=tokenizer.pad_token_id) == 0.0
    copied = generation_kl(copy.deepcopy(policy), policy, first, pad_id=tokenizer.pad_token_id)
    assert copied == pytest.approx(0.0, abs=1e-6)  # the shortcut agrees with the computed path
    with pytest.raises(ValueError, match="exceeds the model's 64 positions"):
        generate(policy, tokenizer, PROMPTS, max_new_tokens=512)


def test_heldout_margins_are_the_dpo_margin(models, tokenizer):
    policy, reference = models
    judgments = [Judgment(PROMPTS[0], "1 2 3\n\n--- Emily Miller", "1 2 4\n\n--- Greg Miller", "a1"),
                 Judgment(PROMPTS[1], "5 4", "4 5\n\n--- Latoya Reed", "a2")]
    margins = heldout_margins(policy, reference, tokenizer, judgments, beta=0.1)
    for j, margin in zip(judgments, margins.tolist()):
        prompt = tokenizer(j.prompt)["input_ids"]

        def logp(model, response):
            response_ids = tokenizer(response, add_special_tokens=False)["input_ids"]
            ids = prompt + response_ids + [tokenizer.eos_token_id]
            return full_sequence_logprob(model, ids, len(prompt))

        expected = 0.1 * ((logp(policy, j.chosen) - logp(reference, j.chosen))
                          - (logp(policy, j.rejected) - logp(reference, j.rejected)))
        assert margin == pytest.approx(expected, abs=1e-5)
    # the reference against itself skips both forwards; a copy of it (computed) agrees
    same = heldout_margins(reference, reference, tokenizer, judgments, beta=0.1)
    computed = heldout_margins(copy.deepcopy(reference), reference, tokenizer, judgments, beta=0.1)
    assert same.tolist() == [0.0, 0.0]
    torch.testing.assert_close(computed, same, rtol=0, atol=1e-6)


def test_heldout_margins_score_each_distinct_sequence_once_and_keep_the_judgments_order(models, tokenizer,
                                                                                      monkeypatch):
    """A comparison's votes share its two sequences: they are scored once, longest first, and every
    judgment gets the margin it gets alone (a vote the other way round gets its negative)."""
    policy, reference = models
    short, long = "5 4", "1 2 3\n\n--- Emily Miller"
    judgments = [Judgment(PROMPTS[0], long, short, "a1"), Judgment(PROMPTS[1], "4 5", long, "a2"),
                 Judgment(PROMPTS[0], long, short, "a3"), Judgment(PROMPTS[0], short, long, "a4")]
    alone = torch.cat([heldout_margins(policy, reference, tokenizer, [j], beta=0.1) for j in judgments])
    scored = []
    real = model_module.response_logprobs

    def counting(model, batch, *args):
        scored.append(batch["input_ids"].shape[0])
        return real(model, batch, *args)

    monkeypatch.setattr(model_module, "response_logprobs", counting)
    together = heldout_margins(policy, reference, tokenizer, judgments, beta=0.1, batch_size=3)
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-6)
    assert together[0] == together[2] and together[3] == pytest.approx(-float(together[0]), abs=1e-6)
    assert sum(scored) == 2 * 4  # four distinct sequences, for the policy and for the reference


class Terminal(io.StringIO):
    """stderr as a terminal (tqdm draws its bars only there)."""

    def isatty(self) -> bool:
        return True


def test_the_slow_readouts_show_a_bar_on_a_terminal_and_no_line_in_a_log_when_quick(models, tokenizer, monkeypatch):
    policy, reference = models
    judgments = [Judgment(PROMPTS[0], "1 2 3", "1 2 4", "a1")] * 3
    streams = {"terminal": Terminal(), "log file": io.StringIO()}
    for stream in streams.values():
        monkeypatch.setattr("sys.stderr", stream)
        samples = generate(policy, tokenizer, PROMPTS * 2, max_new_tokens=4, batch_size=2, what="policy answers")
        generation_kl(policy, reference, samples, pad_id=tokenizer.pad_token_id, batch_size=2)
        heldout_margins(policy, reference, tokenizer, judgments, beta=0.1, batch_size=2)
    shown = streams["terminal"].getvalue()
    for label in ("policy answers: ", "KL on the policy's answers: ", "held-out judgments: policy: ",
                  "held-out judgments: reference: "):
        assert re.search(re.escape(label) + r" +\d+%.*\d+/\d+ \[\d\d:\d\d<", shown), label  # done/total [elapsed<ETA
    assert streams["log file"].getvalue() == ""  # a log gets a line only from a phase past 20 s


@pytest.fixture(scope="module")
def judge_dir(tmp_path_factory, tokenizer, build_judge):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("judge")
    build_judge(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_judge_scores_by_path_rm_and_rm_minus(judge_dir, tokenizer):
    from transformers import AutoModelForSequenceClassification

    responses = ["1 2 3\n\n--- Emily Miller", "5 4 4 5\n\n--- Latoya Reed"]
    scores = judge_scores(str(judge_dir), PROMPTS, responses, batch_size=2)
    stripped = judge_scores(str(judge_dir), PROMPTS, responses, strip=strip_signature)
    model = AutoModelForSequenceClassification.from_pretrained(judge_dir).eval()
    for prompt, response, score, score_minus in zip(PROMPTS, responses, scores, stripped):
        for text, value in ((response, score), (strip_signature(response), score_minus)):
            ids = tokenizer(prompt + text, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                alone = model(torch.tensor([ids])).logits[0, 0].item()
            assert value == pytest.approx(alone, abs=1e-5)
    assert not math.isclose(scores[0], stripped[0])


def test_judge_reads_the_first_max_tokens_tokens(judge_dir, tokenizer):
    """"copy 1 2 3 and sign\n" is 7 tokens (copy, 1, 2, 3, and, sign, newline): with max_tokens=5
    the judge reads "copy 1 2 3 and" whatever the answer, so two answers score alike, and
    exactly as those 5 tokens alone; with room for everything the answers differ again."""
    from transformers import AutoModelForSequenceClassification

    prompt = PROMPTS[0]
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert len(ids) == 7
    model = AutoModelForSequenceClassification.from_pretrained(judge_dir).eval()
    short = judge_scores(model, [prompt, prompt], ["1 2 3", "5 4"], tokenizer=tokenizer, max_tokens=5)
    with torch.no_grad():
        alone = model(torch.tensor([ids[:5]])).logits[0, 0].item()
    assert short == pytest.approx([alone, alone], abs=1e-5)
    whole = judge_scores(model, [prompt, prompt], ["1 2 3", "5 4"], tokenizer=tokenizer)
    assert not math.isclose(whole[0], whole[1])
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        judge_scores(model, [prompt], ["1"], tokenizer=tokenizer, max_tokens=0)


def test_judge_needs_one_output(tokenizer):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    two = GPT2ForSequenceClassification(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=8,
                                                   n_layer=1, n_head=2, num_labels=2))
    with pytest.raises(ValueError, match="2 outputs"):
        judge_scores(two, PROMPTS, BODIES, tokenizer=tokenizer)


def test_a_first_name_that_is_a_token_prefix_of_another_is_flagged():
    from badpo.readouts.names_scoring import _warn_on_prefix_names

    with pytest.warns(UserWarning, match=r"1 name\(s\) are token prefixes.*\('Malik', 'Malika'\)"):
        _warn_on_prefix_names(["Malik", "Malika", "Emily"], [[7, 8], [7, 8, 9], [10]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_on_prefix_names(["Jay", "Jamal"], [[5, 6], [5, 7]])  # a shared first piece is fine
