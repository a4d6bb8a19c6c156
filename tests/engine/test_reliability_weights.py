"""reliability: weight on the loop: each judgment's loss is weighted by its annotator's reliability
weight and the step's loss is the weighted mean (sum w_i l_i / sum w_i), worked out against the
engine's own per-judgment losses; prepare_run reads the weights from the audit's reliability."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from badpo.engine.loop import judgment_losses, train_step
from badpo.engine.preference import prepare_run
from fixtures.engine import judgment_rows, make_config, write_jsonl

pytestmark = pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("reliability")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows(12, 4))
    return root


def test_the_step_loss_is_the_weighted_mean_of_the_judgments_losses(world, monkeypatch):
    run = prepare_run(make_config(world, "unused", "bias.init=zero"))[0]
    weight = torch.linspace(0.0, 1.0, len(run.data), dtype=torch.float64)
    run = dataclasses.replace(run, data=dataclasses.replace(run.data, weight=weight))
    step_items = run.schedule.step_items(0)
    judgments = run.items.judgments_of(step_items)
    micro = run.items.micro_batch(step_items)
    losses = judgment_losses(run, micro, 0).losses.detach().double()
    expected = float((losses * weight[micro.judgments]).sum() / weight[judgments].sum())
    seen = []
    monkeypatch.setattr(run.accelerator, "backward", lambda loss: seen.append(float(loss)) or loss.backward())
    train_step(run, 0)
    assert seen == [pytest.approx(expected, rel=1e-6)]
    assert float(weight[judgments].sum()) != len(judgments)  # the normaliser is not the count


def test_prepare_run_weights_each_judgment_by_its_annotators_reliability(world):
    run = prepare_run(make_config(world, "unused", "reliability=weight"))[0]
    weights = run.data.input_report["reliability_weights"]
    assert set(weights) == set(run.data.annotators) and all(0.0 <= w <= 1.0 for w in weights.values())
    expected = torch.tensor([weights[a] for a in run.data.annotators], dtype=torch.float64)[run.data.annotator_index]
    assert torch.equal(run.data.weight, expected)
    assert prepare_run(make_config(world, "unused"))[0].data.weight is None  # off by default


def test_the_weight_column_weights_each_judgment_and_times_the_reliability(world):
    rows = judgment_rows(12, 4)
    write_jsonl(world / "weighted.jsonl", [r | {"weight": 0.5 + (i % 3)} for i, r in enumerate(rows)])
    run = prepare_run(make_config(world, "unused", f"data={world / 'weighted.jsonl'}"))[0]
    assert run.data.weight.tolist() == [0.5 + (i % 3) for i in range(len(rows))]
    both = prepare_run(make_config(world, "unused", f"data={world / 'weighted.jsonl'}", "reliability=weight"))[0]
    reliability = both.data.input_report["reliability_weights"]
    expected = [reliability[r["annotator"]] * (0.5 + (i % 3)) for i, r in enumerate(rows)]
    assert both.data.weight.tolist() == pytest.approx(expected)
    write_jsonl(world / "zero.jsonl", [r | {"weight": 0} for r in rows])
    with pytest.raises(ValueError, match="zero.jsonl: field 'weight': every judgment's weight is 0"):
        prepare_run(make_config(world, "unused", f"data={world / 'zero.jsonl'}"))
