"""bias.level: orthogonal on the loop: the gradient that reaches the policy's (and the reward
model's) scores has no component along the judgments' declared attribute differences, theta keeps
its own gradient, a run resumes bit for bit, and the rule refuses what it cannot honour."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
import yaml

from badpo.cli import main
from badpo.core.config import ConfigError, apply_overrides, from_dict, to_dict
from badpo.engine import loop
from badpo.engine.config_checks import check_rm, check_train
from badpo.engine.loop import judgment_losses
from badpo.engine.preference import prepare_run
from badpo.engine.settings import RMConfig, TrainConfig
from badpo.engine.train import train
from fixtures.engine import assert_same_run, judgment_rows, make_config, policy_weights, write_jsonl
from fixtures.orthogonal import spy_orthogonal

pytestmark = pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("orthogonal")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows(12, 4))
    return root


@pytest.mark.parametrize("method", ["ba_dpo_pooled", "ba_dpo_shared_mean"])
def test_the_policys_gradient_has_nothing_along_the_attribute_and_thetas_is_kept(world, monkeypatch, method):
    """One micro-batch's loss with theta at 0 (so the loss's own gradient leans along the
    attribute): the gradient reaching the chosen and the rejected log-probs is orthogonal to
    g(y_w) - g(y_l) of its judgments where the one the loss sends is not; theta's gradient, not 0,
    equals the plain run's."""
    seen = spy_orthogonal(monkeypatch, loop)
    grads = {}
    for rule in ("adam", "orthogonal"):
        run = prepare_run(make_config(world, "unused", f"method={method}", f"bias.level={rule}", "bias.init=zero"))[0]
        assert run.orthogonal == (rule == "orthogonal")
        micro = run.items.micro_batch(torch.arange(8))
        judgment_losses(run, micro, 0).losses.sum().backward()
        grads[rule] = [p.grad.clone() for p in run.bias.parameters() if p.grad is not None]
    chosen, rejected = seen
    expected = run.attr_diff[micro.judgments][:, run.bias.declared_index]
    for side in (chosen, rejected):
        assert torch.equal(side["directions"], expected) and expected.abs().sum() > 0
        assert float((expected.T.double() @ side["incoming"].double()).abs().max()) > 1e-3
        assert float((expected.T.double() @ side["gradient"].double()).abs().max()) < 1e-6
        assert side["gradient"].abs().max() > 1e-4  # not everything is projected away
    assert grads["adam"] and all(torch.allclose(a, b) for a, b in zip(grads["adam"], grads["orthogonal"]))
    assert max(float(g.abs().max()) for g in grads["orthogonal"]) > 1e-4


def test_an_orthogonal_run_trains_differently_and_resumes_bit_for_bit(world):
    settings = ("steps=4", "micro_batch_size=4", "method=ba_dpo_pooled", "bias.level=orthogonal")
    full = train(make_config(world, "orthogonal", *settings))
    plain = train(make_config(world, "plain", *settings[:-1]))
    assert not all(torch.equal(a, b) for a, b in zip(policy_weights(full).values(), policy_weights(plain).values()))
    parts = make_config(world, "orthogonal-parts", *settings)
    train(from_dict(TrainConfig, apply_overrides(to_dict(parts), ["stop_after_steps=2"])))
    resumed = train(from_dict(TrainConfig, apply_overrides(to_dict(parts), ["resume_from=latest"])))
    assert_same_run(full, resumed, atol=0.0)
    assert yaml.safe_load((full / "config.yaml").read_text())["bias"]["level"] == "orthogonal"


def test_the_rule_refuses_trusted_annotators(world):
    with pytest.raises(Exception, match="bias.level: orthogonal keeps the policy's lean at the reference's"):
        train(make_config(world, "orthogonal-trusted", "steps=1", "bias.trusted=[ann1]", "bias.level=orthogonal"))


def test_a_micro_batch_no_larger_than_the_declared_attributes_is_refused(world):
    """One declared attribute and one judgment a forward: its direction is the whole micro-batch,
    so the projected policy gradient would be exactly 0 on every step."""
    settings = ("method=ba_dpo_pooled", "bias.level=orthogonal", "batch_size=2")
    with pytest.raises(ConfigError, match=r"^bias.level: orthogonal .* raise micro_batch_size above 1$"):
        prepare_run(make_config(world, "unused", *settings, "micro_batch_size=1"))
    assert prepare_run(make_config(world, "unused", *settings, "micro_batch_size=2"))[0].orthogonal


ORTHOGONAL_TWO = ("attributes=[given:signed,given:length]", "bias.level=orthogonal", "batch_size=2",
                  "micro_batch_size=2")


def rm_config(world: Path, *overrides: str) -> RMConfig:
    base = {"variant": "pooled", "data": str(world / "judgments.jsonl"),
            "model": {"name_or_path": str(world / "model")}, "output_dir": str(world / "unused-rm")}
    return from_dict(RMConfig, apply_overrides(base, list(overrides)))


@pytest.mark.parametrize("check", ["train", "rm"])
def test_the_config_checks_refuse_a_micro_batch_no_larger_than_the_declared_coordinates(world, check):
    """Refused before anything loads (a run would load the model and the reference first): two
    declared coordinates in a micro-batch of two; declaring one leaves that micro-batch a free
    direction and passes."""
    def checked(*extra: str) -> None:
        if check == "train":
            check_train(make_config(world, "unused", "method=ba_dpo_pooled", *ORTHOGONAL_TWO, *extra))
        else:
            check_rm(rm_config(world, *ORTHOGONAL_TWO, *extra))
    with pytest.raises(ConfigError, match=r"^bias.level: orthogonal .* raise micro_batch_size above 2$"):
        checked()
    checked("bias.declared=[signed]")


def test_the_config_check_refuses_what_the_rule_cannot_honour(world):
    """Trusted annotators and a method that reads per-token ratios: one line each from train's
    config check, as from the run."""
    with pytest.raises(ConfigError, match=r"trusted annotators \(bias.trusted\) anchor it on their own judgments"):
        check_train(make_config(world, "unused", "method=ba_dpo_pooled", "bias.level=orthogonal",
                                "bias.trusted=[ann1]"))
    with pytest.raises(ConfigError, match="^bias.level: orthogonal projects the summed log-probs; SamPO"):
        check_train(make_config(world, "unused", "method=sampo_ba_pooled", "bias.level=orthogonal"))


@pytest.mark.parametrize("rule", ["orthogonal", "tilt", "tilt_given_quality"])
def test_a_rule_for_theta_on_a_method_without_theta_is_refused(world, rule):
    """DPO learns no theta (its channel only carries fixed offsets): a rule that needs one is a
    one-line error naming the option, before the policy is loaded."""
    with pytest.raises(ConfigError, match=f"^bias.level: {rule} needs a theta.*method 'dpo' learns none"):
        prepare_run(make_config(world, "unused", "method=dpo", f"bias.level={rule}"))
    run = prepare_run(make_config(world, "unused", "method=dpo", "bias.level=adam"))[0]
    assert not run.orthogonal


def test_the_reward_model_projects_its_rewards(world, monkeypatch, tmp_path):
    seen = spy_orthogonal(monkeypatch, loop)  # the reward model's scores pass through the loop's helper
    base = {"variant": "pooled", "data": str(world / "judgments.jsonl"), "attributes": ["given:signed"],
            "model": {"name_or_path": str(world / "model")}, "steps": 2, "batch_size": 8, "micro_batch_size": 8,
            "optim": {"lr": 1e-3, "warmup_ratio": 0.0, "schedule": "constant"}, "bias": {"level": "orthogonal"},
            "runtime": {"num_threads": 1}, "report": {"progress_bar": False}, "output_dir": str(tmp_path / "rm")}
    config = tmp_path / "rm.yaml"
    config.write_text(json.dumps(dataclasses.asdict(from_dict(RMConfig, base))))
    assert main(["rm", "-c", str(config)]) == 0
    assert len(seen) == 4  # chosen and rejected, two steps
    for entry in seen:
        assert float((entry["directions"].T.double() @ entry["gradient"].double()).abs().max()) < 1e-6
