"""The real-model length-and-format world's builder (badpo.corpora.smol_multipref): the styles by
hand, the comparisons from given samples (no model), and the whole build on a tiny chat model (the
real one is an experiment)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from badpo.core.attributes import length_values, resolve_attributes, word_count
from badpo.core.config import ConfigError, from_dict
from badpo.core.markdown import has_markdown
from badpo.core.notices import BadpoWarning
from badpo.corpora.multipref_protocol import planted_annotators
from badpo.corpora.smol_multipref import (
    CONTINUATIONS,
    OUTPUT_FILES,
    SmolMultiPrefConfig,
    build_smol_multipref,
    candidate_responses,
    plain_body,
    sample_status,
    smol_multipref_rows,
    styled,
)
from badpo.corpora.tasks import KINDS, WORDS, Task, check
from fixtures.files import digests, read_jsonl

PROTOCOL = {"crowd_annotators": 4, "expert_annotators": 3, "n_eval_prompts": 2}
SMALL = {"prompts": 30, "answers_per_prompt": 3, "max_new_tokens": 5, "batch_size": 16, **PROTOCOL}
ADD = Task("add", "What is 2 + 3?", "5")


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory, save_model_dir) -> Path:
    return save_model_dir(tmp_path_factory.mktemp("smol") / "model", "llama", chat_template=True)


def test_the_styles_by_hand():
    long = "2 + 3 = 5\n\nTo check the sum, I can add the two numbers again in the other order and make sure the " \
           "total comes out the same."
    bold_long = "**2 + 3 = 5**" + long[9:]
    assert candidate_responses("add", "2 + 3 = 5") == ["2 + 3 = 5", long, "**2 + 3 = 5**", bold_long]
    assert styled("There are 5.\nDone.", "add", False, True) == "**There are 5.**\nDone."
    plain, plain_long, bold, bold_long = candidate_responses("add", "There are 5.\nDone.")
    assert [has_markdown(c) for c in (plain, plain_long, bold, bold_long)] == [False, False, True, True]
    # bold adds no word; the paragraph (24 words) makes a 4-word body 28 words: 7 times longer
    assert [word_count(c) for c in (plain, plain_long, bold, bold_long)] == [4, 28, 4, 28]
    assert length_values("", bold, plain) == (0.0, 0.0) and length_values("", plain_long, plain) == (1.0, 0.0)


def test_every_paragraph_keeps_the_check_and_makes_a_40_word_body_longer():
    """No digit (the checker reads numbers), no reversed task word among the letters (the reverse
    checker looks for one), and 21 to 24 words, so that a body of up to 42 words reaches the
    length attribute's 1.5 ratio (a 50-word body with the 21 words of convert does not)."""
    assert set(CONTINUATIONS) == set(KINDS)
    for kind, text in CONTINUATIONS.items():
        assert not re.search(r"\d", text), kind
        letters = re.sub(r"[^a-z]", "", text.lower())
        assert not [w for w in WORDS if w[::-1] in letters], kind
        assert 21 <= word_count(text) <= 24, (kind, word_count(text))
        body = " ".join(["word"] * 42)
        assert length_values("", styled(body, kind, True, False), body) == (1.0, 0.0)
    assert length_values("", styled("a " * 49 + "a", "convert", True, False), "a " * 49 + "a") == (0.0, 0.0)


def test_a_sample_becomes_a_plain_body_or_is_set_aside_with_its_reason(monkeypatch):
    assert plain_body("**5**") == "5" and plain_body("- 2 + 3 = 5  \n  it is 5") == "2 + 3 = 5\n  it is 5"
    assert plain_body("5\n--- SmolLM") == "5"
    assert sample_status(ADD, "2 + 3 = **5**") == ("2 + 3 = 5", True, None)
    assert sample_status(ADD, "It is 6.") == ("It is 6.", False, None)
    assert sample_status(ADD, "--- SmolLM") == ("", False, "empty")
    assert sample_status(ADD, "*") == ("*", False, "markdown_unreadable")  # "***" is not bold
    monkeypatch.setitem(CONTINUATIONS, "add", "So the total is 6, not 5.")
    assert sample_status(ADD, "2 + 3 = 5") == ("2 + 3 = 5", True, "style_changes_check")


def test_the_comparisons_from_given_samples():
    """Question 0 has right and wrong samples: every comparison puts one against the other, q =
    kappa (4 - 0) = +-2. Question 1 has no usable sample. Question 2 has one body: its sides differ
    in style only. Each comparison has two crowd and two expert votes."""
    config = from_dict(SmolMultiPrefConfig, {**PROTOCOL, "comparisons_per_prompt": 3})
    tasks = [ADD, Task("count", 'How many letters are in the word "apple"?', "5"), ADD]
    answers = [["2 + 3 = 5", "It is 6.", "It is 7."], ["", "--- x", ""], ["5", "5", "**5**"]]
    rows, truth, counts = smol_multipref_rows(tasks, answers, config)
    assert [r["comparison_id"] for r in rows] == ["q00000-0", "q00000-1", "q00000-2", "q00002-0", "q00002-1",
                                                  "q00002-2"]
    assert counts["questions_without_usable_sample"] == 1 and counts["dropped"] == {"empty": 3}
    assert counts["sides"]["pairs_right_vs_wrong"] == 3 and truth.answers == {"q00000": ("add", "5"),
                                                                               "q00002": ("add", "5")}
    attributes = resolve_attributes(("length", "markdown"))
    for row in rows:
        a, b = row["completion_a"], row["completion_b"]
        quality, text_a, diff = truth.comparisons[row["comparison_id"]]
        right = (check(ADD, a), check(ADD, b))
        assert text_a == a and a != b and quality == 2.0 * (right[0] - right[1])
        if row["prompt_id"] == "q00000":
            assert right[0] != right[1]
        else:
            assert plain_body(a).split("\n")[0] == plain_body(b).split("\n")[0] == "5"
        g_a, g_b = attributes.pair_values(row["text"], a, b)
        assert np.array_equal(diff, g_a - g_b)
        assert [len(row[c]) for c in ("normal_worker_annotations", "expert_worker_annotations")] == [2, 2]
    assert set(truth.theta) == {a for pool in planted_annotators(config).values() for a, _ in pool}


def test_a_world_whose_model_is_never_right_is_built_with_a_warning():
    """As smol-signed's: no comparison of a right answer against a wrong one is said, not built silently."""
    config = from_dict(SmolMultiPrefConfig, {**PROTOCOL, "comparisons_per_prompt": 2})
    with pytest.warns(BadpoWarning, match=r"no comparison puts a right answer against a wrong one \(the model was "
                                          r"right on 0 of 4 samples; 0 right and 8 wrong sides\)"):
        rows, _, counts = smol_multipref_rows([ADD, ADD], [["6", "7"], ["8", "9"]], config)
    assert len(rows) == 4 and "pairs_right_vs_wrong" not in counts["sides"]


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="long_share"):
        SmolMultiPrefConfig(long_share=0.0)
    with pytest.raises(ConfigError, match="kinds"):
        SmolMultiPrefConfig(kinds=["poetry"])
    with pytest.raises(ConfigError, match="expert_annotators"):
        SmolMultiPrefConfig(expert_annotators=1)
    with pytest.raises(ConfigError, match=r"^temperature: must be > 0, got 0.0$"):
        SmolMultiPrefConfig(temperature=0.0)
    with pytest.raises(ConfigError, match=r"^top_p: must lie in \(0, 1\], got 0.0$"):
        SmolMultiPrefConfig(top_p=0.0)
    with pytest.raises(ConfigError, match=r"^kappa: must be finite and >= 0, got -1.0$"):
        SmolMultiPrefConfig(kappa=-1.0)
    SmolMultiPrefConfig(top_p=1.0, temperature=1e-6)  # (0, 1] and > 0, as before


def test_the_world_is_the_same_for_the_same_seed(chat_model, tmp_path):
    config = from_dict(SmolMultiPrefConfig, SMALL)
    first = build_smol_multipref(config, tmp_path / "a", str(chat_model))
    build_smol_multipref(config, tmp_path / "b", str(chat_model))
    a, b = digests(tmp_path / "a"), digests(tmp_path / "b")
    assert set(a) == set(OUTPUT_FILES)
    assert {k: v for k, v in a.items() if k != "timings.json"} == {k: v for k, v in b.items() if k != "timings.json"}
    build_smol_multipref(from_dict(SmolMultiPrefConfig, {**SMALL, "seed": 1}), tmp_path / "c", str(chat_model))
    assert digests(tmp_path / "c")["answers.jsonl"] != a["answers.jsonl"]

    answers = read_jsonl(tmp_path / "a" / "answers.jsonl")
    generated = json.loads((tmp_path / "a" / "generated.json").read_text())
    assert len(answers) == 30 * 3 == generated["samples"]
    assert generated["samples_used"] == sum(r["used"] for r in answers)
    assert first["judgments_train"] == len(read_jsonl(tmp_path / "a" / "train.jsonl"))
    by_id = {r["prompt_id"]: r for r in answers}
    for row in read_jsonl(tmp_path / "a" / "eval_prompts.jsonl"):
        assert (row["kind"], row["expected"], row["prompt"]) == (by_id[row["prompt_id"]]["kind"],
                                                                 by_id[row["prompt_id"]]["expected"],
                                                                 by_id[row["prompt_id"]]["prompt"])
        assert row["candidates"] == candidate_responses(row["kind"], row["body"])
        assert row["body"] in {r["body"] for r in answers if r["prompt_id"] == row["prompt_id"] and r["used"]}
    world = json.loads((tmp_path / "a" / "planted.json").read_text())
    assert len(world["annotators"]) == 7 and world["attribute_names"] == ["length", "markdown"]


def test_the_command_builds_it(chat_model, tmp_path, capsys, cli_training):
    main = cli_training
    with pytest.warns(BadpoWarning, match="right on 0 of 40 samples"):  # the random tiny model is never right
        assert main(["build", "smol-multipref", str(tmp_path / "w"), f"model={chat_model}", "prompts=20",
                     "answers_per_prompt=2", "max_new_tokens=3", "crowd_annotators=3", "expert_annotators=3",
                     "n_eval_prompts=1"]) == 0
    out = capsys.readouterr().out
    assert "smol-multipref world in" in out and "ties dropped" in out and "implied" in out
    assert main(["build", "smol-multipref", str(tmp_path / "w"), f"model={chat_model}"]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_keep_ties_writes_the_tie_votes_and_leaves_the_rest_as_it_was(chat_model, tmp_path):
    """The same seed with and without keep_ties: the decisive judgments, the SFT rows and the answers
    are the same files' rows; the tie votes are added as tie judgments; world.yaml names the flag
    only when on (an earlier world keeps its key)."""
    build_smol_multipref(from_dict(SmolMultiPrefConfig, SMALL), tmp_path / "off", str(chat_model))
    build_smol_multipref(from_dict(SmolMultiPrefConfig, {**SMALL, "keep_ties": True}), tmp_path / "on",
                         str(chat_model))
    off, on = digests(tmp_path / "off"), digests(tmp_path / "on")
    assert off["sft.jsonl"] == on["sft.jsonl"] and off["answers.jsonl"] == on["answers.jsonl"]
    dropped, kept = read_jsonl(tmp_path / "off" / "train.jsonl"), read_jsonl(tmp_path / "on" / "train.jsonl")
    assert [r for r in kept if not r.get("tie")] == dropped
    assert sum(bool(r.get("tie")) for r in kept) > 0
    assert "keep_ties" not in (tmp_path / "off" / "world.yaml").read_text()
    assert "keep_ties: true" in (tmp_path / "on" / "world.yaml").read_text()
