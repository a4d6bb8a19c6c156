"""The tiny length-and-format world (badpo.corpora.tiny_multipref): responses, determinism, ties,
one protocol with the MultiPref builder, the audit reading back the planted truth, and the
length / markdown readouts (hand-worked, and against a plain forward pass)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from badpo.cli import main
from badpo.core.attributes import length_values, word_count
from badpo.core.config import ConfigError, from_dict
from badpo.core.judgments import read_judgments
from badpo.core.markdown import has_markdown
from badpo.corpora.multipref import OVERALL_PREFS, MultiPrefConfig, build_multipref
from badpo.corpora.multipref_protocol import planted_to_dict
from badpo.corpora.tiny_multipref import (
    ATTRIBUTES,
    OUTPUT_FILES,
    TinyMultiPrefConfig,
    build_tokenizer,
    candidate_responses,
    response_score,
    response_text,
    tiny_multipref_rows,
)
from badpo.readouts.evaluate_policy import Corpus, EvalConfig, evaluate_policy
from badpo.readouts.metrics import candidate_readout, sampled_text_rates
from badpo.readouts.model import Generations, format_readout, sampled_text_readout
from fixtures.files import digests, read_jsonl

SMALL = {"n_prompts": 120, "n_eval_prompts": 8, "crowd_annotators": 6, "expert_annotators": 5}


def small_config(**changes) -> TinyMultiPrefConfig:
    return from_dict(TinyMultiPrefConfig, {**SMALL, **changes})


@pytest.fixture(scope="module")
def world(tmp_path_factory, build_tiny_multipref) -> Path:
    """The default world (1,000 prompts x 2 comparisons x 4 votes), built once for the module."""
    out = tmp_path_factory.mktemp("tiny_multipref")
    build_tiny_multipref(TinyMultiPrefConfig(), out)
    return out


def test_responses_differ_in_quality_length_and_markdown_by_hand():
    assert response_text("1 4 1 3", True, " as asked") == "- 1 4 1 3 as asked"
    plain, short, long, bullet, bullet_short, bullet_long = candidate_responses("reverse", "1 4 1")
    assert (plain, long) == ("1 4 1", "1 4 1 as asked because reverse flips the order")
    assert [has_markdown(c) for c in (plain, short, long, bullet, bullet_short, bullet_long)] == [0, 0, 0, 1, 1, 1]
    assert [word_count(c) for c in (plain, short, long, bullet)] == [3, 5, 10, 4]
    # the length attribute at ratio 1.5: 5/3 and 10/3 marked, a bullet alone (4/3) not, and with
    # 6 digits the short ending (8/6) is not: same-group pairs still differ in length
    assert length_values("", short, plain) == (1.0, 0.0) and length_values("", bullet, plain) == (0.0, 0.0)
    six = candidate_responses("copy", "1 2 3 4 5 6")
    assert length_values("", six[1], six[0]) == (0.0, 0.0) and length_values("", six[2], six[0]) == (1.0, 0.0)


def test_a_digit_string_below_three_is_refused():
    with pytest.raises(ValueError, match="min_digits"):
        small_config(min_digits=2)
    with pytest.raises(ValueError, match="ending_shares"):
        small_config(ending_shares=[0.5, 0.5])
    with pytest.raises(ValueError, match="expert_annotators"):
        small_config(expert_annotators=1)


def test_same_config_gives_byte_identical_files_and_another_seed_does_not(tmp_path, build_tiny_multipref):
    build_tiny_multipref(small_config(), tmp_path / "a")
    build_tiny_multipref(small_config(), tmp_path / "b")
    first = digests(tmp_path / "a")
    assert first == digests(tmp_path / "b")
    assert {name.rstrip("/") for name in OUTPUT_FILES} == {n.split("/")[0] for n in first}
    rows, truth = tiny_multipref_rows(small_config())
    other_rows, other_truth = tiny_multipref_rows(small_config(seed=1))
    assert rows == read_jsonl(tmp_path / "a" / "source.jsonl")
    assert [r["text"] for r in other_rows] != [r["text"] for r in rows] and other_truth.theta != truth.theta


# sha256 of the small world's files, recorded before the protocol moved to
# badpo.corpora.multipref_protocol (shared with smol-multipref): the move changed no byte. The
# tokenizer and model folders are left out: they come from tokenizers and torch, not the protocol.
FROZEN_SHA256 = {
    "README.md": "dc1d18a976f367fc89cd67cd81bc85c2e0b11bafa685e6fb368e0cfb78857d87",
    "audit.json": "660d8ef66b26f96d67c76586c06a5d09c06b15c60eb8253ce71308ad7c65e203",
    "config.yaml": "fd2d74bbd662f4d1515779e7800fb673c62bc7ed40f328e0e548002a965d434b",
    "eval_prompts.jsonl": "1d10b55c9130e0cea1c52d42aa395ca592579b5c2542782aae43edc381702d2b",
    "gate.json": "6dd4da8505074b75ba53c07a1d5297cbca7b9540d059240253de31bf4682c169",
    "heldout.jsonl": "15283027b5350b202053f37347ecde0fdadc64e361880f635c22506517883790",
    "planted.json": "d954efa8608a7eda0a4111692028298fff09dd75b88623627b30b77c836a27fd",
    "sft.jsonl": "0b5d47051426894fcb7d7472f86433e38b43a2f7517a65ca0a69204370762cfe",
    "source.jsonl": "1d63f551064d374ddbd2410d74cbe6ece41c2c172861f7430d5d686e2c338f39",
    "stats.json": "424618c9950d8eabbf058ee7ab6787351e5659dccf70a0c05b68cbc28c1433ab",
    "train.jsonl": "33875ecadd0b17d0115d3bb745da50e8cbf5340ac0b7b33d7648c95e3d4d82e4",
    "world.yaml": "0c0e512de47b6a71cde3a236a9f65436531edebf888285185cdc48302fb883f1",
}


def test_the_small_world_is_byte_for_byte_what_it_was_before_the_protocol_was_shared(tmp_path, build_tiny_multipref):
    build_tiny_multipref(small_config(), tmp_path)
    found = {name: sha for name, sha in digests(tmp_path).items() if not name.startswith(("model/", "tokenizer/"))}
    assert found == FROZEN_SHA256


def test_a_response_is_scored_on_its_digits_alone():
    # 1 + 9 * right / n: the bullet and the ending are not digits
    assert response_score("- 1 4 1 3 as asked", "reverse", "1 4 1 3") == 10.0
    assert response_score("1 4 0 3 as asked because reverse flips the order", "reverse", "1 4 1 3") == 7.75
    assert response_score("9 9 9", "copy", "1 2 3") == 1.0


def test_quality_given_puts_each_comparisons_planted_q_in_the_judgments(tmp_path, build_tiny_multipref):
    """kappa * (g_chosen - g_rejected) is the q the votes were drawn with, on the chosen side (an
    independent path: the scores are read back from the texts, q was kept when the world drew
    them); the judgments are otherwise the default world's, and world.yaml says the flag is on."""
    build_tiny_multipref(small_config(quality_given=True), tmp_path / "given")
    build_tiny_multipref(small_config(), tmp_path / "plain")
    _, truth = tiny_multipref_rows(small_config())
    for name in ("train.jsonl", "heldout.jsonl"):
        given, plain = read_jsonl(tmp_path / "given" / name), read_jsonl(tmp_path / "plain" / name)
        assert [{k: v for k, v in row.items() if not k.startswith("g_")} for row in given] == plain
        for row in given:
            q, text_a, _ = truth.comparisons[row["pair_id"]]
            oriented = q if row["chosen"] == text_a else -q
            assert 0.5 * (row["g_chosen"]["quality"] - row["g_rejected"]["quality"]) == pytest.approx(oriented)
    assert "quality_given: true" in (tmp_path / "given" / "world.yaml").read_text(encoding="utf-8")
    assert "quality_given" not in (tmp_path / "plain" / "world.yaml").read_text(encoding="utf-8")


def test_echo_task_opens_every_answer_with_its_task_word_and_keeps_the_scores(tmp_path, build_tiny_multipref):
    """No response or candidate starts with a digit after its optional bullet, and the scores read
    back from the texts still give the q the votes were drawn with."""
    build_tiny_multipref(small_config(echo_task=True, quality_given=True), tmp_path)
    _, truth = tiny_multipref_rows(small_config(echo_task=True))
    for row in read_jsonl(tmp_path / "train.jsonl"):
        task = row["prompt"].split()[0]
        assert all(text.removeprefix("- ").startswith(f"{task} ") for text in (row["chosen"], row["rejected"]))
        q, text_a, _ = truth.comparisons[row["pair_id"]]
        oriented = q if row["chosen"] == text_a else -q
        assert 0.5 * (row["g_chosen"]["quality"] - row["g_rejected"]["quality"]) == pytest.approx(oriented)
    for row in read_jsonl(tmp_path / "eval_prompts.jsonl"):
        assert all(c.removeprefix("- ").startswith(row["prompt"].split()[0] + " ") for c in row["candidates"])
    assert "echo_task: true" in (tmp_path / "world.yaml").read_text(encoding="utf-8")


def test_bullet_indent_costs_tokens_and_nothing_else(tmp_path, build_tiny_multipref):
    """Every file but the texts' tabs is the plain world's (the votes, attributes and split alike),
    a bullet then costs 1 + bullet_indent tokens and no word, and a plain answer costs what it did."""
    build_tiny_multipref(small_config(bullet_indent=3), tmp_path / "tabs")
    build_tiny_multipref(small_config(), tmp_path / "plain")
    for name in ("train.jsonl", "heldout.jsonl", "sft.jsonl", "eval_prompts.jsonl", "gate.json", "stats.json"):
        tabs = (tmp_path / "tabs" / name).read_text(encoding="utf-8")
        assert "\\t\\t\\t- " in tabs or name.endswith(".json"), name
        assert tabs.replace("\\t", "") == (tmp_path / "plain" / name).read_text(encoding="utf-8"), name
    tokenizer = build_tokenizer(small_config(bullet_indent=3))
    plain_tokenizer = build_tokenizer(small_config())

    def count(tok, text):
        return len(tok(text, add_special_tokens=False)["input_ids"])

    assert count(tokenizer, "\t\t\t- 1 4 1 3 as asked") == count(plain_tokenizer, "- 1 4 1 3 as asked") + 3 == 10
    assert count(tokenizer, "1 4 1 3") == count(plain_tokenizer, "1 4 1 3") == 4
    assert tokenizer.unk_token_id not in tokenizer("\t\t\t- 1 4", add_special_tokens=False)["input_ids"]
    assert response_score("\t\t\t- 1 4 1 3 as asked", "reverse", "1 4 1 3") == 10.0
    assert "bullet_indent: 3" in (tmp_path / "tabs" / "world.yaml").read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^bullet_indent: must lie in \[0, 16\], got -1$"):
        small_config(bullet_indent=-1)


@pytest.mark.parametrize("change, message", [
    ({"bullet_indent": 17}, r"bullet_indent: must lie in \[0, 16\], got 17"),
    ({"markdown_share": 1.5}, r"markdown_share: must lie in \[0, 1\], got 1.5"),
    ({"random_voters": 1.0}, r"random_voters: must lie in \[0.0, 1.0\), got 1.0"),
    ({"votes_per_pool": 0}, r"votes_per_pool: must be >= 1, got 0"),
    ({"tie_strength": math.inf}, r"tie_strength: must be finite and >= 0, got inf"),
    ({"seed": -1}, r"seed: must be >= 0, got -1"),
])
def test_a_field_out_of_its_declared_range_is_one_line_naming_it(change, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        small_config(**change)


def test_the_ends_of_the_declared_ranges_are_accepted_as_before():
    small_config(bullet_indent=16, error_rate=1.0, markdown_share=0.0, random_voters=0.0, tie_strength=0.0,
                 sigma=0.0, kappa=0.0, seed=0, comparisons_per_prompt=1)


def test_ties_are_dropped_counted_and_as_frequent_as_the_tie_model_says(world):
    """Every judgment is a non-tie vote of the source, every non-tie vote a judgment; the tie
    count matches the sum of Davidson's P(tie) = nu / (e^(z/2) + e^(-z/2) + nu) over the votes."""
    rows = read_jsonl(world / "source.jsonl")
    stats = json.loads((world / "stats.json").read_text())
    judgments = read_judgments(world / "train.jsonl") + read_judgments(world / "heldout.jsonl")
    votes = {(r["comparison_id"], a["evaluator"]): OVERALL_PREFS[a["overall_pref"]] for r in rows
             for column in ("normal_worker_annotations", "expert_worker_annotations") for a in r[column]}
    ties = sum(side is None for side in votes.values())
    assert len(votes) == 8000 and stats["ties_dropped"] == ties and len(judgments) == 8000 - ties
    text = {(r["comparison_id"], side): r[f"completion_{side}"] for r in rows for side in "ab"}
    assert all(text[(j.pair_id, votes[(j.pair_id, j.annotator)])] == j.chosen for j in judgments)
    assert len({(j.pair_id, j.annotator) for j in judgments}) == len(judgments)

    config = TinyMultiPrefConfig()
    _, truth = tiny_multipref_rows(config)
    p_tie = []
    for (comparison, annotator) in votes:
        quality, _, diff = truth.comparisons[comparison]
        z = quality + float(np.dot(truth.theta[annotator], diff))
        p_tie.append(config.tie_strength / (math.exp(z / 2) + math.exp(-z / 2) + config.tie_strength))
    expected, sd = sum(p_tie), math.sqrt(sum(p * (1 - p) for p in p_tie))
    assert abs(ties - expected) < 4 * sd
    assert 0.15 < ties / 8000 < 0.4  # MultiPref drops 26%


def test_the_multipref_builder_rebuilds_the_same_judgments_from_the_source_rows(world, tmp_path):
    """One protocol: `badpo build multipref` on the world's source.jsonl writes the same files."""
    config = MultiPrefConfig(source=str(world / "source.jsonl"), n_eval_prompts=100)
    build_multipref(config, tmp_path)
    for name in ("train.jsonl", "heldout.jsonl", "sft.jsonl", "audit.json"):
        assert (tmp_path / name).read_bytes() == (world / name).read_bytes(), name
    world_prompts = read_jsonl(world / "eval_prompts.jsonl")
    assert [{"prompt_id": r["prompt_id"], "prompt": r["prompt"]} for r in world_prompts] == \
        read_jsonl(tmp_path / "eval_prompts.jsonl")


def test_the_audit_reads_back_the_planted_truth(world):
    """Offline log-odds on cross-group judgments (diagnostics.audit) against the planted theta:
    overall and per pool within 3 s.e. of the value they imply, the crowd above the experts as
    planted (pool means 1.3 / 1.2 against 0.7 / 0.8), and each annotator's offline estimate
    following its planted theta_k."""
    gate = json.loads((world / "gate.json").read_text())
    planted = json.loads((world / "planted.json").read_text())
    for name in ATTRIBUTES:
        for key in ("all", "crowd", "expert"):
            row = gate[name][key]
            assert abs(row["log_odds"] - row["implied"]) < 3 * row["se"], (name, key, row)
        assert gate[name]["crowd"]["log_odds"] > gate[name]["expert"]["log_odds"]
    assert 0.4 < gate["length"]["share_cross"] < 0.65 and 0.3 < gate["markdown"]["share_cross"] < 0.55
    audit = json.loads((world / "audit.json").read_text())
    theta = {a["annotator"]: a["theta"] for a in planted["annotators"]}
    for i, name in enumerate(ATTRIBUTES):
        by_annotator = audit[name]["coordinates"][0]["by_annotator"]
        pairs = [(theta[a], row["log_odds"]) for a, row in by_annotator.items() if row["log_odds"] is not None]
        assert len(pairs) >= 65
        r = np.corrcoef([t[i] for t, _ in pairs], [lo for _, lo in pairs])[0, 1]
        assert r > 0.5, (name, r)


def test_the_world_has_two_pools_and_the_files_the_runner_reads(world):
    train, heldout = read_judgments(world / "train.jsonl"), read_judgments(world / "heldout.jsonl")
    assert {j.annotator_class for j in train} == {"crowd", "expert"}
    assert not {j.prompt_id for j in train} & {j.prompt_id for j in heldout}
    planted = json.loads((world / "planted.json").read_text())
    assert planted["attribute_names"] == list(ATTRIBUTES) and len(planted["annotators"]) == 70
    corpus = Corpus.load(world)
    assert len(corpus.eval_prompts) == 100
    for row in corpus.eval_prompts:
        task, *digits = row["prompt"].split()
        expected = " ".join(digits if task == "copy" else digits[::-1])
        assert row["body"] == expected and row["candidates"] == candidate_responses(task, expected)


def test_candidate_readout_by_hand():
    """The docstring's example: words (2, 4, 9), markdown (0, 1, 1), stops (1, 1, 0); lp = log (0.1,
    0.3, 0.1) gives mass 0.5, p = (0.2, 0.6, 0.2), words 4.6, markdown 0.8, and with running log
    (0.4, 0.5, 0.3) a stop rate 0.4 / 0.9; lp = log (0.2, 0.2, 0.4) gives mass 0.8, p = (0.25, 0.25,
    0.5), words 6.0, markdown 0.75, with running log (0.8, 0.2, 0.5) a stop rate 0.4 / 1.0."""
    logps = torch.log(torch.tensor([[0.1, 0.3, 0.1], [0.2, 0.2, 0.4]], dtype=torch.float64))
    running = torch.log(torch.tensor([[0.4, 0.5, 0.3], [0.8, 0.2, 0.5]], dtype=torch.float64))
    result = candidate_readout(logps, {"words": [2, 4, 9], "markdown": [[0, 1, 1], [0, 1, 1]]}, running, [1, 1, 0])
    assert result["mass"] == pytest.approx(0.65) and result["log_mass"] == pytest.approx(math.log(0.4) / 2)
    assert result["words"] == pytest.approx(5.3) and result["markdown"] == pytest.approx(0.775)
    assert result["eos_at_stops"] == pytest.approx((4 / 9 + 0.4) / 2)
    with pytest.raises(ValueError, match="values\\['words'\\]"):
        candidate_readout(logps, {"words": [2, 4]})
    with pytest.raises(ValueError, match="less likely without its EOS"):
        candidate_readout(logps, {}, logps - 0.1, [1, 1, 0])
    with pytest.raises(ValueError, match="come together"):
        candidate_readout(logps, {}, running)


def test_candidate_log_odds_by_hand():
    """markdown (0, 1, 1): log (0.3 + 0.1) / 0.1 = log 4 in the first prompt, log (0.2 + 0.4) / 0.2 =
    log 3 in the second; the readout is their mean. A flag that one prompt lacks is refused."""
    logps = torch.log(torch.tensor([[0.1, 0.3, 0.1], [0.2, 0.2, 0.4]], dtype=torch.float64))
    result = candidate_readout(logps, {"markdown": [0, 1, 1], "words": [2, 4, 9]}, log_odds=["markdown"])
    assert result["markdown_log_odds"] == pytest.approx((math.log(4) + math.log(3)) / 2)
    assert "words_log_odds" not in result
    with pytest.raises(ValueError, match="both in every prompt"):
        candidate_readout(logps, {"markdown": [[0, 1, 1], [1, 1, 1]]}, log_odds=["markdown"])
    with pytest.raises(ValueError, match="must be 0/1"):
        candidate_readout(logps, {"words": [2, 4, 9]}, log_odds=["words"])


def test_sampled_text_rates_by_hand():
    """"1 2", "- 1 2 as asked", "1 2 1 2 1 2", ended (1, 1, 0), tokens (2, 5, 6): EOS 2/3,
    markdown 1/3, words (2 + 5 + 6)/3, tokens 13/3."""
    result = sampled_text_rates(["1 2", "- 1 2 as asked", "1 2 1 2 1 2"], [1, 1, 0], [2, 5, 6])
    assert result == pytest.approx({"n": 3, "eos_rate": 2 / 3, "markdown_rate": 1 / 3,
                                    "mean_words": 13 / 3, "mean_tokens": 13 / 3})
    with pytest.raises(ValueError, match="ended"):
        sampled_text_rates(["a"], [2], [1])
    generations = Generations(("p", "q"), ("1 2", "- 3"), ((1,), (1,)), ((5, 9, 3), (5, 6)), (2, 2))
    assert sampled_text_readout(generations, eos_id=3)["eos_rate"] == 0.5


def full_sequence_logprob(model, ids: list[int], start: int) -> float:
    """Sum of log p(ids[t] | ids[:t]) for t >= start, from one plain forward pass."""
    with torch.no_grad():
        logps = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)
    return float(sum(logps[t - 1, ids[t]] for t in range(start, len(ids))))


def test_format_readout_matches_a_plain_forward_pass(build_tiny_model):
    """Length and markdown with the body fixed, recomputed from one forward pass per candidate."""
    config = small_config()
    tokenizer = build_tokenizer(config)
    model = build_tiny_model(config.model, tokenizer).eval()
    rows = [{"prompt": "reverse 3 1 4\n", "body": "4 1 3"}, {"prompt": "copy 5 0 0 7 2 1\n", "body": "5 0 0 7 2 1"}]
    for row in rows:
        row["candidates"] = candidate_responses(row["prompt"].split()[0], row["body"])
    result = format_readout(model, tokenizer, rows)
    eos = tokenizer.eos_token_id
    expected = {"words": [], "markdown": [], "long": [], "mass": [], "stop": [], "md_log_odds": []}
    for row in rows:
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        ids = [prompt + tokenizer(c, add_special_tokens=False)["input_ids"] for c in row["candidates"]]
        scores = np.array([full_sequence_logprob(model, i + [eos], len(prompt)) for i in ids])
        p = np.exp(scores - np.logaddexp.reduce(scores))
        expected["mass"].append(np.exp(scores).sum())
        expected["words"].append(p @ [word_count(c) for c in row["candidates"]])
        expected["markdown"].append(p @ [has_markdown(c) for c in row["candidates"]])
        expected["long"].append(p @ [length_values("", c, row["body"])[0] for c in row["candidates"]])
        # stop points: no ending and the short ending, plain and bullet (indices 0, 1, 3, 4)
        stops = [0, 1, 3, 4]
        running = [math.exp(full_sequence_logprob(model, ids[i], len(prompt))) for i in stops]
        expected["stop"].append(np.exp(scores[stops]).sum() / sum(running))
        marked = np.array([has_markdown(c) for c in row["candidates"]])
        expected["md_log_odds"].append(np.log(p[marked].sum()) - np.log(p[~marked].sum()))
    assert result["expected_words"] == pytest.approx(np.mean(expected["words"]), abs=1e-6)
    assert result["markdown"] == pytest.approx(np.mean(expected["markdown"]), abs=1e-6)
    assert result["long"] == pytest.approx(np.mean(expected["long"]), abs=1e-6)
    assert result["mass"] == pytest.approx(np.mean(expected["mass"]), rel=1e-5)
    assert result["eos_at_stops"] == pytest.approx(np.mean(expected["stop"]), rel=1e-5)
    assert result["markdown_log_odds"] == pytest.approx(np.mean(expected["md_log_odds"]), abs=1e-6)
    # the second prompt's short ending is not 1.5x longer (8/6 words), its long one is
    assert expected["long"][1] < 1.0


def test_evaluate_policy_reads_length_and_markdown_both_ways(tmp_path, build_tiny_multipref):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    world = tmp_path / "small"
    build_tiny_multipref(small_config(), world)
    tokenizer = AutoTokenizer.from_pretrained(world / "model")
    model = AutoModelForCausalLM.from_pretrained(world / "model").eval()
    config = EvalConfig(attributes=("length", "markdown"), max_prompts=6, body="given", whole_signature=False,
                        max_new_tokens=12, batch_size=64)
    result = evaluate_policy(model, model, tokenizer, Corpus.load(world), config)
    assert set(result["candidates"]) >= {"mass", "log_mass", "expected_words", "markdown", "long", "eos_at_stops",
                                         "markdown_log_odds"}
    assert set(result["candidates"]) <= {"mass", "log_mass", "expected_words", "markdown", "long", "eos_at_stops",
                                         "markdown_log_odds", "long_log_odds"}
    assert 3 <= result["candidates"]["expected_words"] <= 16 and 0 < result["candidates"]["markdown"] < 1
    assert result["sampled_text"]["n"] == 6 and result["kl"] == pytest.approx(0.0, abs=1e-9)
    assert result["sampled_text"]["mean_tokens"] == pytest.approx(result["tokens"])


def test_badpo_build_tiny_multipref(tmp_path, capsys):
    assert main(["build", "tiny-multipref", str(tmp_path), "n_prompts=60", "n_eval_prompts=4",
                 "crowd_annotators=4", "expert_annotators=4"]) == 0
    out = capsys.readouterr().out
    assert "tiny-multipref from source.jsonl" in out and "ties dropped" in out and "implied" in out
    assert (tmp_path / "model" / "config.json").exists()


def test_random_voters_vote_at_z_zero_and_change_nothing_else(tmp_path, build_tiny_multipref):
    """A quarter of each pool votes a coin (with Davidson's ties at z = 0): planted.json marks them,
    their votes are the only ones that change, and on the decisive votes of the default world a coin
    agrees with the planted logit's sign about half the time where the others agree far more."""
    config = from_dict(TinyMultiPrefConfig, {"random_voters": 0.25, "keep_ties": True})
    rows, truth = tiny_multipref_rows(config)
    coins = {a["annotator"] for a in planted_to_dict(truth, config)["annotators"] if a.get("random_voter")}
    assert coins == {f"crowd-{i:02d}" for i in range(round(0.25 * config.crowd_annotators))} | \
        {f"expert-{i:02d}" for i in range(round(0.25 * config.expert_annotators))}
    plain_rows, _ = tiny_multipref_rows(from_dict(TinyMultiPrefConfig, {}))
    agree = {True: [], False: []}
    for row, plain in zip(rows, plain_rows):
        assert {k: v for k, v in row.items() if not k.endswith("annotations")} == \
            {k: v for k, v in plain.items() if not k.endswith("annotations")}
        q, _, diff = truth.comparisons[row["comparison_id"]]
        for column in ("normal_worker_annotations", "expert_worker_annotations"):
            for vote in row[column]:
                if vote["overall_pref"] == "Tie":
                    continue
                z = q + float(np.dot(truth.theta[vote["evaluator"]], diff))
                agree[vote["evaluator"] in coins].append((vote["overall_pref"].startswith("A")) == (z > 0))
    assert abs(np.mean(agree[True]) - 0.5) < 0.05 and np.mean(agree[False]) > 0.7
    build_tiny_multipref(small_config(random_voters=0.25, keep_ties=True), tmp_path)
    assert "random_voters: 0.25" in (tmp_path / "world.yaml").read_text(encoding="utf-8")
    assert any(r.get("tie") for r in read_jsonl(tmp_path / "train.jsonl"))
