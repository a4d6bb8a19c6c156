"""``badpo rm``: the Bradley-Terry loss with the bias term, the reward-model stage on the engine's loop,
its outputs as ``badpo evaluate``'s judge, and the reward-tilt readout."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from badpo.cli import main
from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError, apply_overrides, from_dict, load_config
from badpo.core.losses import ba_dpo_loss, bt_loss
from badpo.engine.config_checks import check_rm
from badpo.engine.reward import RewardScorer, prepare_reward_run, reward_losses, without_final_eos
from badpo.engine.runtime import make_accelerator
from badpo.engine.settings import REWARD_LR, RMConfig, resolved_lr
from badpo.engine.tokenize import build_token_store
from badpo.readouts.metrics import reward_tilt
from badpo.readouts.model import judge_scores
from fixtures.engine import judgment_rows, write_jsonl

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


# ------------------------------------------------------------------------------------ the loss
def test_bt_loss_by_hand():
    """-log sigmoid(r_w - r_l + b) = log(1 + exp(-(r_w - r_l + b))):
    (1, 0, 0): z = 1 -> log(1 + e^-1) = 0.3132617; (0.5, 1.5, 0.5): z = -0.5 -> log(1 + e^0.5) =
    0.9740770; (2, 2, -1): z = -1 -> log(1 + e) = 1.3132617. Without b the last is log 2 = 0.6931472."""
    r_w, r_l = torch.tensor([1.0, 0.5, 2.0]), torch.tensor([0.0, 1.5, 2.0])
    losses = bt_loss(r_w, r_l, torch.tensor([0.0, 0.5, -1.0]))
    torch.testing.assert_close(losses, torch.tensor([0.3132617, 0.9740770, 1.3132617]), atol=1e-6, rtol=0)
    assert float(bt_loss(r_w, r_l)[2]) == pytest.approx(0.6931472, abs=1e-6)
    assert float(bt_loss(torch.tensor([100.0]), torch.tensor([0.0]))[0]) == pytest.approx(math.exp(-100), rel=1e-3)
    with pytest.raises(ValueError, match="same shape"):
        bt_loss(r_w, r_l[:2])
    with pytest.raises(ValueError, match="broadcast"):
        bt_loss(r_w, r_l, torch.zeros(3, 3))


def test_bradley_terry_on_implicit_rewards_is_ba_dpo():
    """With r = beta (log pi - log pi_ref) the reward margin is u, so bt_loss is ba_dpo_loss, value
    and gradient (float64, to 1e-12)."""
    generator = torch.Generator().manual_seed(0)
    pc, pr, rc, rr = (torch.randn(16, generator=generator, dtype=torch.float64) * 5 for _ in range(4))
    bias = torch.randn(16, generator=generator, dtype=torch.float64, requires_grad=True)
    beta = 0.1
    dpo = ba_dpo_loss(pc, pr, rc, rr, bias, beta)[0]
    (dpo_grad,) = torch.autograd.grad(dpo.sum(), bias)
    bt = bt_loss(beta * (pc - rc), beta * (pr - rr), bias)
    (bt_grad,) = torch.autograd.grad(bt.sum(), bias)
    torch.testing.assert_close(bt, dpo, atol=1e-12, rtol=0)
    torch.testing.assert_close(bt_grad, dpo_grad, atol=1e-12, rtol=0)


def test_reward_tilt_by_hand():
    """Differences [0.5, 0, -1, 1]: mean 0.125; higher on 2 pairs, a tie counts one half: 2.5 / 4."""
    tilt = reward_tilt([1.0, 0.5, 2.0, 0.0], [0.5, 0.5, 3.0, -1.0])
    assert tilt == {"mean_difference": pytest.approx(0.125), "share_higher": 0.625, "n": 4}
    with pytest.raises(ValueError, match="counterpart_rewards"):
        reward_tilt([1.0, 2.0], [1.0])


# ---------------------------------------------------------------------------------- the config
@pytest.mark.parametrize("name", ["rm_tiny.yaml", "rm_tiny_quality.yaml", "rm_qwen2.5-0.5b.yaml"])
def test_the_shipped_configs_load_and_validate(name):
    config = load_config(RMConfig, CONFIGS / name)
    lr = resolved_lr(config.optim, config.lora, REWARD_LR)
    check_rm(dataclasses.replace(config, optim=dataclasses.replace(config.optim, lr=lr)))  # no download
    assert config.bias_variant == "shared_mean" and config.attributes == ["names"] and config.method == "rm_shared_mean"


def test_bad_keys_and_variants_are_named():
    with pytest.raises(ConfigError, match="beta"):
        load_config(RMConfig, CONFIGS / "rm_tiny.yaml", ["beta=0.1"])
    with pytest.raises(ConfigError, match="bias.variant: 'nope' is not one of"):
        load_config(RMConfig, CONFIGS / "rm_tiny.yaml", ["bias.variant=nope"])
    plain = load_config(RMConfig, CONFIGS / "rm_tiny.yaml", ["bias.variant=none", "bias.level=orthogonal"])
    with pytest.raises(ConfigError, match="^bias.level: orthogonal needs a theta.*variant 'none' learns none"):
        check_rm(plain)  # named by the key the user set, not by the run's name rm_none


# ------------------------------------------------------------------------- training on the engine
@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    folder = tmp_path_factory.mktemp("rm")
    save_model_dir(folder / "model")
    write_jsonl(folder / "judgments.jsonl", judgment_rows(6, 4))
    return folder


def rm_config(world: Path, name: str, *overrides: str) -> RMConfig:
    base = {"bias": {"variant": "shared_mean"}, "data": str(world / "judgments.jsonl"), "attributes": ["given:signed"],
            "model": {"name_or_path": str(world / "model")}, "steps": 3, "batch_size": 8, "micro_batch_size": 4,
            "optim": {"lr": 1e-3, "warmup_ratio": 0.0, "schedule": "constant"},
            "runtime": {"num_threads": 1}, "report": {"progress_bar": False}, "output_dir": str(world / name)}
    return from_dict(RMConfig, apply_overrides(base, list(overrides)))


def run_cli(world: Path, name: str, *overrides: str) -> Path:
    path = world / f"{name}.yaml"
    path.write_text(json.dumps(dataclasses.asdict(rm_config(world, name, *overrides))))
    assert main(["rm", "-c", str(path)]) == 0
    return world / name


def test_the_first_loss_is_bradley_terry_by_hand(world):
    """The loop's terms of one micro-batch equal -log sigmoid(r_w - r_l + theta . dg) computed from
    the model's own logits on prompt + response (no EOS) and theta set by hand (theta_bar 0.7)."""
    run, _, tokenizer = prepare_reward_run(rm_config(world, "unused"), make_accelerator("fp32", 1))
    with torch.no_grad():
        run.bias.shared_mean.fill_(0.7)
    micro = run.items.micro_batch(torch.arange(4))
    terms = reward_losses(run, micro, 0)
    rows = [json.loads(line) for line in (world / "judgments.jsonl").read_text().splitlines()]
    model = run.accelerator.unwrap_model(run.policy).model

    def reward(prompt: str, response: str) -> float:
        ids = tokenizer(prompt)["input_ids"] + tokenizer(response, add_special_tokens=False)["input_ids"]
        return float(model(input_ids=torch.tensor([ids])).logits[0, 0])

    for k, j in enumerate(micro.judgments.tolist()):
        row = rows[j]
        margin = reward(row["prompt"], row["chosen"]) - reward(row["prompt"], row["rejected"])
        b = 0.7 * (row["g_chosen"]["signed"] - row["g_rejected"]["signed"])
        assert float(terms.losses[k]) == pytest.approx(math.log1p(math.exp(-(margin + b))), abs=1e-5)


def test_rm_writes_a_reward_model_the_judge_scores_as_training_does(world):
    out = run_cli(world, "shared")
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert len(records) == 3 and "theta_lr" in records[0] and "reward_accuracy" in records[0]
    summary = json.loads((out / "run.json").read_text())
    assert summary["variant"] == "shared_mean" and summary["judgments"] == 24
    theta = BiasChannel.load(out / "theta.json")
    assert theta.variant == "shared_mean" and float(theta.mean().abs().sum()) > 0
    model = AutoModelForSequenceClassification.from_pretrained(out / "reward_model")
    tokenizer = AutoTokenizer.from_pretrained(out / "reward_model")
    assert model.config.num_labels == 1 and tokenizer.pad_token_id is not None
    assert model.config.pad_token_id == tokenizer.pad_token_id
    # the engine's encoding (prompt + response, EOS dropped, right-padded) and the judge's agree
    rows = [json.loads(line) for line in (world / "judgments.jsonl").read_text().splitlines()][:6]
    sequences = [(r["prompt"], r["chosen"]) for r in rows]
    store = without_final_eos(build_token_store(tokenizer, sequences, rm_config(world, "x").tokenization))
    batch = store.batch(torch.arange(len(store)))
    with torch.no_grad():
        engine = RewardScorer(model.eval())(batch["input_ids"], batch["attention_mask"])
    judge = judge_scores(model, [p for p, _ in sequences], [r for _, r in sequences], tokenizer=tokenizer)
    torch.testing.assert_close(engine, torch.tensor(judge), atol=1e-5, rtol=0)


def test_plain_variant_and_pair_grouped_batching(world):
    out = run_cli(world, "plain", "bias.variant=none", "batching=pair_grouped", "batch_size=2", "micro_batch_size=1")
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert "theta_lr" not in records[0] and records[-1]["theta_bar"] == {"signed": 0.0}
    assert records[0]["judgments"] == 8  # two pairs of four judgments each
    assert float(BiasChannel.load(out / "theta.json").theta().abs().sum()) == 0.0


def test_trusted_annotators_flow_through_the_bias_channel(world):
    out = run_cli(world, "trusted", "bias.trusted=[ann0]", "steps=2")
    theta = BiasChannel.load(out / "theta.json")
    assert set(theta.trusted) == {"ann0"}
    row = theta.annotators.index("ann0")
    assert float(theta.theta()[row].abs().sum()) == 0.0 and float(theta.theta().abs().sum()) > 0


def test_trusted_annotators_set_the_reward_models_level(world):
    """bias.trusted_level: final (the default) on the reward model: the same reward model as under
    gradient, theta of the untrusted moved by the level_shift run.json records, the trusted at 0."""
    plain = run_cli(world, "trusted-gradient", "bias.trusted=[ann0]", "bias.trusted_level=gradient")
    final = run_cli(world, "trusted-final", "bias.trusted=[ann0]")
    weights = load_file(final / "reward_model" / "model.safetensors")
    for name, value in load_file(plain / "reward_model" / "model.safetensors").items():
        assert torch.equal(value, weights[name])
    shift = json.loads((final / "run.json").read_text())["trusted_level"]["level_shift"]["signed"]
    before, after = BiasChannel.load(plain / "theta.json"), BiasChannel.load(final / "theta.json")
    moved = (after.theta() - before.theta())[:, 0]
    expected = torch.tensor([0.0 if a == "ann0" else shift for a in after.annotators])
    assert shift is not None and abs(shift) > 1e-3
    torch.testing.assert_close(moved, expected, atol=1e-6, rtol=0)


def test_stop_and_resume_equals_the_uninterrupted_run(world):
    whole = run_cli(world, "whole")
    parts = run_cli(world, "parts", "stop_after_steps=2")
    assert not (parts / "run.json").exists()
    run_cli(world, "parts", "resume_from=latest")
    a, b = (load_file(whole / "reward_model" / "model.safetensors"),
            load_file(parts / "reward_model" / "model.safetensors"))
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=2e-5)
    torch.testing.assert_close(BiasChannel.load(whole / "theta.json").theta(),
                               BiasChannel.load(parts / "theta.json").theta(), rtol=0, atol=2e-5)


def test_lora_is_merged_into_a_plain_reward_model(world):
    out = run_cli(world, "lora", "lora.enabled=true", "lora.rank=4", "steps=2")
    assert not (out / "reward_model" / "adapter_config.json").exists()
    model = AutoModelForSequenceClassification.from_pretrained(out / "reward_model")
    base = AutoModelForSequenceClassification.from_pretrained(world / "model", num_labels=1)
    assert set(model.state_dict()) == set(base.state_dict())  # no lora_ weights left


def test_a_missing_attribute_for_a_learned_theta_is_one_line(world, cli_error):
    path = world / "noattr.yaml"
    path.write_text(json.dumps(dataclasses.asdict(rm_config(world, "noattr", "attributes=[]"))))
    assert "attributes" in cli_error(["rm", "-c", str(path)])


# --------------------------------------------------------------------- as badpo evaluate's judge
def test_evaluate_reads_tilt_and_heldout_of_a_reward_model_on_the_tiny_world(tmp_path, build_tiny_world):
    from badpo.corpora.tiny import TinyWorldConfig
    from badpo.evaluation.trained_run import EvalData, evaluate_run_dir, summary
    from badpo.readouts.evaluate_policy import judge_readouts

    build_tiny_world(from_dict(TinyWorldConfig, {"n_pairs": 120}), tmp_path / "world")
    out = tmp_path / "rm"
    config = from_dict(RMConfig, {
        "data": str(tmp_path / "world" / "train.jsonl"), "attributes": ["names"],
        "model": {"name_or_path": str(tmp_path / "world" / "model")},
        "tokenization": {"max_prompt_tokens": 32, "max_length": 64}, "steps": 2, "batch_size": 16,
        "micro_batch_size": 16, "runtime": {"num_threads": 1}, "report": {"progress_bar": False},
        "output_dir": str(out)})
    path = tmp_path / "rm.yaml"
    path.write_text(json.dumps(dataclasses.asdict(config)))
    assert main(["rm", "-c", str(path)]) == 0
    readouts = evaluate_run_dir(out, {"max_prompts": 10}, EvalData(corpus=str(tmp_path / "world")))
    for name in ("woman_coded", "black_coded"):
        assert readouts["tilt"][name]["n"] == 20  # two counterfactual pairs per response
        assert 0.0 <= readouts["tilt"][name]["share_higher"] <= 1.0
        heldout = readouts["heldout"][name]
        assert heldout["n_same"] + heldout["n_cross"] == len(
            (tmp_path / "world" / "heldout.jsonl").read_text().splitlines())
    assert set(readouts["theta_mean"]) == {"woman_coded", "black_coded"}
    # any declared attribute with a counterfactual edit has a tilt; one without is skipped, saying why;
    # a reward model generates nothing, so its summary names no generation setting
    others = evaluate_run_dir(out, {"max_prompts": 10, "attributes": ["dash=regex:--- ", "length"]},
                              EvalData(corpus=str(tmp_path / "world")))
    assert others["tilt"]["dash"]["edit"] == "pattern deleted" and others["tilt"]["dash"]["n"] == 10
    assert others["skipped"]["tilt.length"].startswith("length is a comparison of two answers")
    text = summary(others)
    assert text.startswith("a reward model: read ") and "max_new_tokens" not in text
    assert "dash " in text and "(n 10, pattern deleted)" in text and "skipped tilt.length: length is" in text
    assert "max_new_tokens" not in readouts["inputs"]
    judged = judge_readouts(str(out / "reward_model"), ["copy 1 2 and sign\n"], ["1 2\n\n--- Emily Baker"],
                            ["woman_coded"])
    assert math.isfinite(judged["rm"]) and math.isfinite(judged["rm_minus"])
