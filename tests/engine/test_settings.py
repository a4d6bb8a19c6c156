"""Engine configs: the shipped YAML files load and comment every key; the CLI wires sft / train."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from badpo.cli import main
from badpo.core.config import ConfigError, load_config
from badpo.engine.settings import SFTConfig, TrainConfig
from fixtures.engine import judgment_rows, write_jsonl

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
ENGINE_FILES = sorted(CONFIGS.glob("sft_*.yaml")) + sorted(CONFIGS.glob("train_*.yaml"))
KEY_LINE = re.compile(r"^\s*[A-Za-z_][\w.]*:")


def test_there_are_tiny_and_paper_scale_configs():
    names = {p.stem for p in ENGINE_FILES}
    for model in ("tiny", "qwen2.5-0.5b", "llama3.1-8b", "mistral-7b"):
        assert {f"sft_{model}", f"train_{model}"} <= names


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda p: p.name)
def test_config_loads_and_every_key_is_commented(path):
    config_class = SFTConfig if path.name.startswith("sft_") else TrainConfig
    config = load_config(config_class, path)
    uncommented = [line for line in path.read_text().splitlines()
                   if KEY_LINE.match(line) and "#" not in line]
    assert not uncommented, uncommented
    if isinstance(config, TrainConfig):
        config.arm  # noqa: B018 (a known method and variant)
    if "llama" in path.name or "mistral" in path.name:
        assert config.lora.enabled and (config.lora.rank, config.lora.alpha) == (32, 64.0)


def test_paper_recipe_is_the_default():
    config = TrainConfig()
    assert (config.beta, config.steps, config.batch_size, config.bias.lr) == (0.1, 1000, 32, 1e-2)
    assert (config.optim.warmup_ratio, config.optim.max_grad_norm, config.optim.schedule) == (
        0.1, 1.0, "cosine")
    assert (config.tokenization.max_prompt_tokens, config.tokenization.max_length) == (384, 1280)


def test_unknown_and_ill_typed_keys_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown key.*bias.lrr"):
        load_config(TrainConfig, None, ["bias.lrr=0.1"])
    with pytest.raises(ConfigError, match="batching: 'pairs' is not one of"):
        load_config(TrainConfig, None, ["batching=pairs"])
    with pytest.raises(ConfigError, match="steps: expected an integer"):
        load_config(TrainConfig, None, ["steps=1.5"])


def test_cli_train_and_sft_run_from_a_yaml_with_overrides(tmp_path, capsys, cli_error, save_model_dir):
    save_model_dir(tmp_path / "model", "gpt2")
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    config = tmp_path / "train.yaml"
    config.write_text(f"data: {tmp_path / 'judgments.jsonl'}\nmodel:\n  name_or_path: {tmp_path / 'model'}\n")
    out = tmp_path / "run"
    assert main(["train", "-c", str(config), "steps=1", "batch_size=4", "micro_batch_size=4",
                 "method=dpo", f"output_dir={out}", "cache_dir=null", "report.progress_bar=false",
                 "runtime.num_threads=1", "report.report_to=[tensorboard]"]) == 0
    assert capsys.readouterr().out.strip().endswith(str(out))
    assert (out / "policy" / "model.safetensors").exists() and (out / "config.yaml").exists()
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert load_config(TrainConfig, out / "config.yaml").optim.lr == 5e-7  # resolved default
    assert re.match("badpo sft: .*model.name_or_path: required",
                    cli_error(["sft", f"data={tmp_path / 'judgments.jsonl'}", "source=judgments"]))


def test_each_commands_override_example_is_a_key_of_its_own_config():
    """The KEY=VALUE help of every config-taking command shows keys that command accepts (it once
    showed ``train.steps=200`` everywhere, a key no stage has)."""
    import argparse

    from badpo.cli import build_parser
    from badpo.commands.training import TRAININGS
    from badpo.core.config import apply_overrides, from_dict
    from badpo.corpora.builders import corpus_builder
    from badpo.readouts.evaluate_policy import EvalConfig

    classes = {"build": corpus_builder("tiny-signed").config_class, "evaluate": EvalConfig,
               **{row.name: row.config_class() for row in TRAININGS}}
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command, cls in classes.items():
        overrides = next(a for a in subparsers.choices[command]._actions if a.dest == "overrides")
        example = re.findall(r"\S+=\S+", overrides.help.split("e.g.")[1])
        assert example, command
        from_dict(cls, apply_overrides({}, example))  # an unknown key is a ConfigError
