"""A method's ``step_statistic`` hook: computed once over the whole optimizer step, the same for
every micro-batch, so a KTO-like reference point does not depend on how the step is split."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from badpo.engine.train import train
from badpo.methods import METHODS, LossTerms, Method, StepView
from fixtures.engine import assert_same_run, judgment_rows, log_records, make_config, write_jsonl

SEEN: list[float] = []


def mean_margin(step: StepView, params) -> torch.Tensor:
    """The step's mean detached DPO logit u (the policy read by a no-grad forward)."""
    chosen, rejected = step.policy_logprobs()
    u = step.beta * ((chosen - step.reference_chosen) - (rejected - step.reference_rejected))
    SEEN.append(float(u.mean()))
    return u.mean().detach()


def centred_loss(batch, params) -> LossTerms:
    """-log sigmoid(u - z + b) with z the step's mean u: a reference point over the whole step."""
    chosen = batch.beta * (batch.policy_chosen - batch.reference_chosen)
    rejected = batch.beta * (batch.policy_rejected - batch.reference_rejected)
    u = chosen - rejected
    losses = -torch.nn.functional.logsigmoid(u - batch.step_statistic + batch.bias_logit)
    return LossTerms(losses, chosen.detach(), rejected.detach())


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("step_statistic")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


@pytest.fixture
def centred(monkeypatch):
    row = Method("test: BA-DPO centred on the step's mean margin", loss=centred_loss,
                 step_statistic=mean_margin)
    monkeypatch.setitem(METHODS, "centred_dpo", row)
    SEEN.clear()
    return row


def test_the_statistic_is_computed_once_per_step_and_reaches_every_micro_batch(world, centred):
    out = train(make_config(world, "whole", "method=centred_dpo", "bias.variant=pooled", "steps=3", "bias.init=zero"))
    assert len(SEEN) == 3  # once per optimizer step, not once per micro-batch
    assert SEEN[0] == pytest.approx(0.0, abs=1e-6)  # step 0: the policy is the reference, u = 0
    # centred on its own mean, the first step's loss is log 2 for every judgment
    assert log_records(out)[0]["loss"] == pytest.approx(0.6931472, abs=1e-6)


def test_the_statistic_does_not_depend_on_the_micro_batch_split(world, centred):
    arm = ("method=centred_dpo", "bias.variant=pooled", "steps=3", "bias.init=zero")
    whole = train(make_config(world, "split-8", *arm))
    split = train(make_config(world, "split-2", *arm, "micro_batch_size=2"))
    assert len(SEEN) == 6
    assert SEEN[:3] == pytest.approx(SEEN[3:], abs=1e-6)
    assert_same_run(whole, split)


def test_a_method_without_the_hook_gets_none(world):
    seen = []

    def record(batch, params):
        seen.append(batch.step_statistic)
        return METHODS["dpo"].loss(batch, params)

    row = dataclasses.replace(METHODS["dpo"], loss=record)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(METHODS, "recording_dpo", row)
        train(make_config(world, "none", "method=recording_dpo", "steps=1"))
    assert seen and all(value is None for value in seen)
