"""The preference stage on a tiny GPT-2: loss, schedules, accumulation, resume, batching modes.

Fixture: 6 pairs x 4 judgments = 24 judgments (see ``fixtures.engine.judgment_rows``); dropout
is 0, so two runs that should agree can be compared to float tolerance.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

import badpo.engine.preference as engine_preference
from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError, apply_overrides, from_dict
from badpo.core.judgments import read_judgments
from badpo.core.losses import ba_dpo_loss
from badpo.engine.batches import build_preference_data
from badpo.engine.settings import TrainConfig
from badpo.engine.tokenize import TokenizationConfig
from badpo.engine.train import train
from badpo.theta.start import offline_estimate
from fixtures.engine import (
    assert_same_run,
    full_logit_token_logprobs,
    judgment_rows,
    log_records,
    make_config,
    policy_weights,
    write_jsonl,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("engine_train")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def sequence_logprobs(model_dir: Path, prompts: list[str], responses: list[str]) -> torch.Tensor:
    """Full-logit log-probs of each (prompt, response), the engine's tokenization rule."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from badpo.engine.tokenize import build_token_store

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    store = build_token_store(tokenizer, list(zip(prompts, responses)), TokenizationConfig())
    with torch.no_grad():
        return full_logit_token_logprobs(model, store.batch(torch.arange(len(store)))).sum(-1)


def test_engine_loss_is_ba_dpo_loss_on_full_logit_logprobs(world):
    """Step 2's logged loss, recomputed by hand: the policy and theta after step 1 (saved by a
    1-step run with the same data order), the original model as reference, log-probs from full
    logits, and badpo.core.losses.ba_dpo_loss averaged over all 24 judgments (the batch)."""
    args = ("batch_size=24", "bias.init=offline")
    one = train(make_config(world, "loss1", "steps=1", *args))
    two = train(make_config(world, "loss2", "steps=2", *args))
    judgments = read_judgments(world / "judgments.jsonl")
    prompts = [j.prompt for j in judgments]
    chosen, rejected = [j.chosen for j in judgments], [j.rejected for j in judgments]
    theta = BiasChannel.load(one / "theta.json")
    attr_diff = torch.tensor([[j.g_chosen["signed"] - j.g_rejected["signed"]] for j in judgments])
    with torch.no_grad():
        bias_logit = theta(theta.annotator_index([j.annotator for j in judgments]), attr_diff)
    assert bias_logit.abs().max() > 0.5  # warm start log 3 = 1.0986, moved by one step
    losses, chosen_rewards, rejected_rewards = ba_dpo_loss(
        sequence_logprobs(one / "policy", prompts, chosen),
        sequence_logprobs(one / "policy", prompts, rejected),
        sequence_logprobs(world / "model", prompts, chosen),
        sequence_logprobs(world / "model", prompts, rejected), bias_logit, beta=0.1)
    step2 = log_records(two)[1]
    margin = chosen_rewards - rejected_rewards
    assert abs(margin).max() > 1e-3  # the policy has moved from the reference
    assert step2["loss"] == pytest.approx(float(losses.mean()), abs=1e-5)
    assert step2["reward_margin"] == pytest.approx(float(margin.mean()), abs=1e-5)
    assert step2["reward_accuracy"] == pytest.approx(float((margin > 0).float().mean()))


def test_theta_frozen_at_zero_is_dpo(world, monkeypatch):
    """theta frozen at its start 0 (no optimizer, no gradient): the bias logit is 0 * dg = 0."""
    dpo = train(make_config(world, "dpo", "method=dpo"))  # theta from 0 below: the same logits
    prepare = engine_preference.prepare_run

    def with_frozen_theta(config, accelerator=None, **options):
        run, parts, tokenizer = prepare(config, accelerator, **options)
        for param in run.bias.parameters():
            param.requires_grad_(False)
        return dataclasses.replace(run, theta_optimizer=None), parts, tokenizer

    monkeypatch.setattr(engine_preference, "prepare_run", with_frozen_theta)
    frozen = train(make_config(world, "frozen", "method=ba_dpo_pooled", "bias.init=zero"))
    assert [r["loss"] for r in log_records(dpo)] == [r["loss"] for r in log_records(frozen)]
    assert all(r["theta_bar"]["signed"] == 0.0 for r in log_records(frozen))
    for name, weight in policy_weights(dpo).items():
        assert torch.equal(weight, policy_weights(frozen)[name]), name


def test_theta_lr_is_constant_and_unclipped_while_policy_lr_follows_the_schedule(world):
    """10 steps, warmup_ratio 0.2 -> 2 warmup steps: factors 1/2, 2/2, then cosine
    0.5 (1 + cos(pi (k - 2) / 8)) for k = 2..9: 1, 0.96194, 0.85355, 0.69134, 0.5, 0.30866,
    0.14645, 0.03806. The policy's gradient is clipped to norm 1e-12; theta's first Adam step is
    still lr * g / (|g| + eps) = 0.01 in size, which a clipped gradient (~1e-12 < eps) could not give."""
    out = train(make_config(world, "schedule", "steps=10", "optim.warmup_ratio=0.2", "bias.init=zero",
                            "optim.schedule=cosine", "optim.max_grad_norm=1e-12",
                            "method=ba_dpo_pooled"))
    records = log_records(out)
    factors = [0.5, 1.0] + [0.5 * (1 + math.cos(math.pi * (k - 2) / 8)) for k in range(2, 10)]
    assert [r["lr"] for r in records] == pytest.approx([1e-3 * f for f in factors], rel=1e-12)
    hand = [0.5, 1.0, 1.0, 0.96194, 0.85355, 0.69134, 0.5, 0.30866, 0.14645, 0.03806]
    assert factors == pytest.approx(hand, abs=1e-5)
    assert all(r["theta_lr"] == 0.01 for r in records)
    assert abs(records[0]["theta_bar"]["signed"]) == pytest.approx(0.01, rel=1e-4)


def test_micro_batch_8_x1_equals_2_x4(world):
    # theta from 0: at the reference fit the first step's gradient nearly cancels, and Adam turns
    # float noise in near-zero coordinates into differences larger than the tolerance
    whole = train(make_config(world, "micro8", "micro_batch_size=8", "bias.init=zero"))
    split = train(make_config(world, "micro2", "micro_batch_size=2", "bias.init=zero"))
    assert_same_run(whole, split)


def test_stop_and_resume_equals_uninterrupted(world):
    full = train(make_config(world, "full", "steps=4", "micro_batch_size=4"))
    parts = make_config(world, "parts", "steps=4", "micro_batch_size=4")
    stopped = train(from_dict(TrainConfig, apply_overrides(
        {**_as_dict(parts)}, ["stop_after_steps=2"])))
    assert not (stopped / "policy").exists()
    assert [p.name for p in (stopped / "checkpoints").iterdir()] == ["step-000002"]
    assert len(log_records(stopped)) == 2
    resumed = train(from_dict(TrainConfig, apply_overrides(_as_dict(parts), ["resume_from=latest"])))
    assert_same_run(full, resumed, atol=0.0)
    strip = [{k: v for k, v in r.items() if k != "elapsed_s"} for r in log_records(full)]
    assert strip == [{k: v for k, v in r.items() if k != "elapsed_s"} for r in log_records(resumed)]


def _as_dict(config: TrainConfig) -> dict:
    from badpo.core.config import to_dict

    return to_dict(config)


def test_pair_grouped_and_per_judgment_give_the_same_loss_and_update(world):
    """One step over all 24 judgments: 24 judgment items, or 6 pair items of 4 judgments each."""
    per_judgment = train(make_config(world, "perj", "steps=1", "batch_size=24",
                                     "batching=per_judgment", "bias.init=zero"))
    grouped = train(make_config(world, "grouped", "steps=1", "batch_size=6", "micro_batch_size=2",
                                "batching=pair_grouped", "bias.init=zero"))
    a, b = log_records(per_judgment)[0], log_records(grouped)[0]
    assert a["judgments"] == b["judgments"] == 24
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    assert_same_run(per_judgment, grouped)


def test_micro_batch_slots_follow_each_judgments_orientation(world):
    """Pair p0 (a = signed 'sure ... emily smith', b = 'maybe try that'): judgments 0-2 chose a,
    judgment 3 chose b; grouped, the pair is sequences (a, b) at slots (0, 1)."""
    from badpo.core.attributes import resolve_attributes
    from fixtures.engine import build_tokenizer

    judgments = read_judgments(world / "judgments.jsonl")
    data = build_preference_data(judgments, resolve_attributes(["given:signed"]), build_tokenizer(),
                                 TokenizationConfig())
    micro = data.items("pair_grouped").micro_batch(torch.tensor([0]))
    assert micro.judgments.tolist() == [0, 1, 2, 3]
    assert micro.chosen_slot.tolist() == [0, 0, 0, 1]
    assert micro.rejected_slot.tolist() == [1, 1, 1, 0]
    assert data.attr_diff[:4, 0].tolist() == [1.0, 1.0, 1.0, -1.0]
    per_judgment = data.items("per_judgment").micro_batch(torch.tensor([3, 0]))
    assert per_judgment.sequence_rows.tolist() == [data.chosen_row[3], data.rejected_row[3],
                                                   data.chosen_row[0], data.rejected_row[0]]


def test_warm_start_shuffled_ids_and_option_errors(world):
    """The fixture's signed side wins 9 of 12 cross-group judgments: warm start log(9 / 3), moved
    by at most lr = 1e-9 by the first Adam step."""
    out = train(make_config(world, "warm", "steps=1", "method=ba_dpo_pooled", "bias.init=offline",
                            "bias.lr=1e-9"))
    assert log_records(out)[0]["theta_bar"]["signed"] == pytest.approx(math.log(3), abs=1e-6)
    shuffled = train(make_config(world, "shuffled", "steps=1", "method=ba_dpo_shuffled_ids"))
    assert BiasChannel.load(shuffled / "theta.json").variant == "per_annotator"
    classed = train(make_config(world, "classed", "steps=1", "method=ba_dpo_class_offsets"))
    assert BiasChannel.load(classed / "theta.json").classes == ("A", "B")
    declared = train(make_config(world, "declared", "steps=2", "method=ba_dpo_pooled",
                                 "attributes=[given:signed, regex:smith]", "bias.declared=[signed]",
                                 "bias.init=offline"))
    channel = BiasChannel.load(declared / "theta.json")
    assert channel.declared == ("signed",) and float(channel.mean()[1]) == 0.0
    assert float(channel.mean()[0]) != 0.0
    with pytest.raises(ConfigError, match="bias.init: offline"):
        train(make_config(world, "bad", "method=dpo", "bias.init=offline"))
    with pytest.raises(ConfigError, match="method: unknown method 'ipo2'"):
        train(make_config(world, "bad", "method=ipo2"))
    with pytest.raises(ConfigError, match="batch_size"):
        train(make_config(world, "bad", "batch_size=12", "micro_batch_size=8"))


def test_offline_estimate_counts_cross_group_wins_and_refuses_infinite_starts():
    """Column a: cross-group rows 1-4 (row 5 is 0), the attribute side won rows 1-3 -> log(3/1);
    a scale of 2 on the differences changes nothing. Column b: 1 of 2 -> 0. A column with no
    cross-group row, or one the attribute side won every time, cannot warm-start."""
    diff = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.5, 0.0], [-1.0, -1.0], [0.0, 0.0]])
    assert offline_estimate(diff, ["a", "b"]) == [pytest.approx(math.log(3), abs=1e-15), 0.0]
    with pytest.raises(ValueError, match="attribute 'z' has no cross-group judgment"):
        offline_estimate(torch.zeros(3, 1), ["z"])
    with pytest.raises(ValueError, match=r"attribute side of 'up' won 3 of its 3 .* are inf"):
        offline_estimate(diff[:3, :1], ["up"])
    with pytest.raises(ValueError, match=r"attribute side of 'down' won 0 of its 1 .* are -inf"):
        offline_estimate(diff[3:, :1], ["down"])
    with pytest.raises(ValueError, match=r"attr_diff must be \[N, 1\]"):
        offline_estimate(diff, ["a"])


def test_shuffled_ids_are_uniform_and_seeded(world):
    from badpo.core.attributes import resolve_attributes
    from fixtures.engine import build_tokenizer

    rows = judgment_rows(n_pairs=200)
    write_jsonl(world / "many.jsonl", rows)
    data = build_preference_data(read_judgments(world / "many.jsonl"),
                                 resolve_attributes(["given:signed"]), build_tokenizer(),
                                 TokenizationConfig())
    one, again = data.with_shuffled_annotators(7), data.with_shuffled_annotators(7)
    assert torch.equal(one.annotator_index, again.annotator_index)
    assert not torch.equal(one.annotator_index, data.annotator_index)
    counts = torch.bincount(one.annotator_index, minlength=5).float()
    assert counts.sum() == 800 and (counts - 160).abs().max() < 50  # 5 sd of Binomial(800, 1/5)
    agree = (one.annotator_index == data.annotator_index).float().mean()
    assert 0.1 < agree < 0.3  # independent of who cast it: agreement near 1/5


def test_bf16_autocast_keeps_fp32_master_weights(world):
    """precision=bf16 (CPU autocast here): the forward runs in bf16, AdamW updates fp32 weights,
    and the reference cache is keyed by the precision (a separate file from fp32 runs)."""
    out = train(make_config(world, "bf16", "runtime.precision=bf16", "steps=2"))
    assert all(w.dtype == torch.float32 for w in policy_weights(out).values())
    assert all(math.isfinite(r["loss"]) for r in log_records(out))
    run = json.loads((out / "run.json").read_text())
    assert run["reference_cache"]["precision"] == "bf16"
    fp32 = json.loads((train(make_config(world, "fp32", "steps=1")) / "run.json").read_text())
    assert fp32["reference_cache"]["precision"] == "no"
    assert fp32["reference_cache"]["weights"] == run["reference_cache"]["weights"]


@pytest.mark.parametrize(("device", "fused"), [("cpu", False), ("cuda", True)])
def test_the_policy_s_adamw_is_fused_on_a_gpu_only(device, fused):
    """A GPU step of a small model waits on the host's launches: AdamW's fused kernel there; on a
    CPU torch's default, as every CPU record was made with. The schedule is the same either way."""
    from badpo.engine.runtime import policy_optimizer
    from badpo.engine.settings import OptimConfig

    model = torch.nn.Linear(3, 2)
    model.bias.requires_grad_(False)
    optimizer, scheduler = policy_optimizer(model, OptimConfig(warmup_ratio=0.5), 1e-3, 4, torch.device(device))
    assert bool(optimizer.defaults["fused"]) is fused
    assert [p is model.weight for p in optimizer.param_groups[0]["params"]] == [True]
    assert scheduler.get_last_lr() == [pytest.approx(0.5e-3)]
