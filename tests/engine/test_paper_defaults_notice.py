"""A stage run without a config file trains with the paper's recipe for 0.5B-8B models on every key
it is not given: `badpo sft/train/rm` without -c, and `badpo.sft/train/rm` without a config, say so
in one line naming the learning rate, the length of training and the batch in force (issue 24,
item 6). Nothing trains here: each call stops at the missing model, after the notice."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import badpo
from badpo.cli import main
from badpo.engine.settings import PaperDefaultsNotice

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TAIL = " are the paper's settings (for its 0.5B to 8B models); for a small model set them or start from "


def notices(argv: list[str]) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 2  # model.name_or_path: required (or missing)
    return [str(w.message) for w in caught if w.category is PaperDefaultsNotice]


@pytest.mark.parametrize("stage, named", [
    ("train", "optim.lr 5e-07, steps 1000, batch_size 32"),
    ("sft", "optim.lr 1e-05, epochs 1, batch_size 32"),
    ("rm", "optim.lr 1e-05, steps 1000, batch_size 32"),
])
def test_a_stage_without_a_config_names_the_papers_settings_in_force(stage, named):
    assert notices([stage, "data=judgments.jsonl"]) == [f"no config file: {named}{TAIL}configs/{stage}_tiny.yaml (-c)"]


def test_only_the_keys_not_given_are_named_and_lora_changes_the_rate():
    assert notices(["train", "optim.lr=2e-4", "steps=20"]) == [
        f"no config file: batch_size 32{TAIL}configs/train_tiny.yaml (-c)"]
    assert notices(["sft", "lora.enabled=true", "epochs=3"]) == [
        f"no config file: optim.lr 0.0001, batch_size 32{TAIL}configs/sft_tiny.yaml (-c)"]
    assert notices(["train", "optim.lr=2e-4", "steps=20", "batch_size=8"]) == []


def test_a_config_file_says_nothing():
    assert notices(["train", "-c", str(CONFIGS / "train_tiny.yaml"), "model.name_or_path="]) == []


def test_the_api_without_a_config_says_the_same():
    with pytest.warns(PaperDefaultsNotice, match=r"^no config file: optim\.lr 1e-05, batch_size 32 are the paper's"):
        with pytest.raises(ValueError, match="model.name_or_path: required"):
            badpo.rm(data="judgments.jsonl", steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaperDefaultsNotice)
        with pytest.raises(ValueError, match="model.name_or_path: required"):
            badpo.rm({"steps": 3}, data="judgments.jsonl")  # a config (here a dict) was given
