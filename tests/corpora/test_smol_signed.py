"""The real-model signed world's builder, on a tiny chat model (the real one is an experiment)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from badpo.core.config import ConfigError, from_dict
from badpo.core.notices import BadpoWarning
from badpo.corpora.signing import SigningConfig
from badpo.corpora.smol_signed import SmolSignedConfig, base_pairs, build_smol_signed, clean_answer
from badpo.corpora.tasks import Task

SMALL = {"prompts": 30, "answers_per_prompt": 3, "max_new_tokens": 5, "batch_size": 16,
         "signing": {"annotators_per_class": 4, "judgments_per_pair": 3, "seed": 5}}


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory, save_model_dir) -> Path:
    return save_model_dir(tmp_path_factory.mktemp("smol") / "model", "llama", chat_template=True)


def test_base_pairs_put_a_right_answer_against_a_wrong_one_when_the_samples_hold_both():
    add = Task("add", "What is 2 + 3?", "5")
    config = SmolSignedConfig(right_score=4.0, wrong_score=0.0)
    tasks = [add, add, add, add]
    answers = [["2 + 3 = 5", "2 + 3 = 6", "2 + 3 = 5"],  # right and wrong
               ["6", "7", "6"],  # both wrong, two distinct
               ["5", "5", "5"],  # one distinct answer: dropped
               ["5", "It is 5.", "5"]]  # both right
    pairs, best, counts = base_pairs(tasks, answers, config)
    assert counts == Counter(right_vs_wrong=1, both_wrong=1, dropped_one_distinct_answer=1, both_right=1)
    first = pairs[0]
    assert (first.response_1, first.response_2, first.score_1, first.score_2) == ("2 + 3 = 5", "2 + 3 = 6", 4.0, 0.0)
    assert {pairs[1].response_1, pairs[1].response_2} == {"6", "7"} and pairs[1].score_1 == pairs[1].score_2 == 0.0
    assert pairs[2].score_1 == pairs[2].score_2 == 4.0
    assert best == {"q00000": "2 + 3 = 5", "q00001": "6", "q00002": "5", "q00003": "5"}
    assert [p.prompt_id for p in pairs] == ["q00000", "q00001", "q00003"]


def test_a_world_whose_model_is_never_right_is_built_with_a_warning():
    add = Task("add", "What is 2 + 3?", "5")
    answers = [["6", "7"], ["8", "9"]]  # 0% right: every pair is both wrong
    with pytest.warns(BadpoWarning, match=r"no base pair puts a right answer against a wrong one \(the model was "
                                          r"right on 0 of 4 samples; 2 pair\(s\) both wrong"):
        pairs, _, counts = base_pairs([add, add], answers, SmolSignedConfig())
    assert len(pairs) == 2 and counts["right_vs_wrong"] == 0


def test_a_sign_off_the_model_wrote_is_cut_so_only_planted_signatures_exist():
    assert clean_answer("  2 + 3 = 5\n--- SmolLM\nmore") == "2 + 3 = 5"
    assert clean_answer("5 --- five") == "5 --- five"  # not a line of its own
    assert clean_answer("--- Emily Baker") == ""


def test_the_world_is_the_same_for_the_same_seed_and_carries_the_planted_annotators(chat_model, tmp_path):
    config = from_dict(SmolSignedConfig, SMALL)
    a = build_smol_signed(config, tmp_path / "a", str(chat_model))
    build_smol_signed(config, tmp_path / "b", str(chat_model))
    for name in ("train.jsonl", "heldout.jsonl", "sft.jsonl", "answers.jsonl", "planted.json", "stats.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    planted = json.loads((tmp_path / "a" / "planted.json").read_text())
    assert len(planted["annotators"]) == 12 and planted["class_means"] == SigningConfig().class_means
    answers = [json.loads(line) for line in (tmp_path / "a" / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 30 * 3 and {a["kind"] for a in answers} == set(SmolSignedConfig().kinds)
    rows = [json.loads(line) for line in (tmp_path / "a" / "train.jsonl").read_text().splitlines()]
    assert rows and all(r["annotator"] in {x["annotator"] for x in planted["annotators"]} for r in rows)
    assert Counter(r["pair_type"] for r in rows).keys() <= {"quality", "swap", "mixed"}
    assert a["train"] == len(rows) and 0.0 <= a["accuracy"]["all"] <= 1.0
    other = build_smol_signed(from_dict(SmolSignedConfig, {**SMALL, "signing": {**SMALL["signing"], "seed": 6}}),
                              tmp_path / "c", str(chat_model))
    assert (tmp_path / "c" / "answers.jsonl").read_bytes() != (tmp_path / "a" / "answers.jsonl").read_bytes()
    assert other["questions"] == 30


def test_the_command_builds_it_and_bad_settings_are_one_line(chat_model, tmp_path, capsys, cli_training):
    main = cli_training
    assert main(["build", "smol-signed", str(tmp_path / "w"), f"model={chat_model}", "prompts=12",
                 "answers_per_prompt=2", "max_new_tokens=3", "signing.annotators_per_class=2"]) == 0
    assert "smol-signed world in" in capsys.readouterr().out
    assert (tmp_path / "w" / "eval_prompts.jsonl").exists()
    with pytest.raises(ConfigError, match="answers_per_prompt"):
        SmolSignedConfig(answers_per_prompt=1)
    with pytest.raises(ConfigError, match="kinds"):
        SmolSignedConfig(kinds=["poetry"])
    with pytest.raises(ConfigError, match=r"^top_p: must lie in \(0, 1\], got 1.5$"):
        SmolSignedConfig(top_p=1.5)
    with pytest.raises(ConfigError, match=r"^batch_size: must be >= 1, got 0$"):
        SmolSignedConfig(batch_size=0)
    assert main(["build", "smol-signed", str(tmp_path / "x"), f"model={tmp_path}"]) == 2
    assert "not a Hugging Face model folder" in capsys.readouterr().err


@pytest.mark.parametrize("section, message", [
    ({"heldout_share": 1.0}, r"signing.heldout_share: must lie in \[0.0, 1.0\), got 1.0"),
    ({"quality_share": 1.5}, r"signing.quality_share: must lie in \[0, 1\], got 1.5"),
    ({"judgments_per_pair": 0}, r"signing.judgments_per_pair: must be >= 1, got 0"),
    ({"seed": -1}, r"signing.seed: must be >= 0, got -1"),
])
def test_a_bad_signing_section_is_named_under_signing_in_every_world_that_holds_one(section, message):
    """SigningConfig checks itself under ``signing.``; the walk of the config around it says the same key."""
    from badpo.corpora.signed_ultrafeedback import SignedUltraFeedbackConfig
    from badpo.corpora.tiny import TinyWorldConfig

    for world in (SmolSignedConfig, SignedUltraFeedbackConfig, TinyWorldConfig):
        with pytest.raises(ConfigError, match=f"^{message}$"):
            from_dict(world, {"signing": section})
    with pytest.raises(ConfigError, match=f"^{message}$"):
        SigningConfig(**section)
