"""A diverging run stops at the step it diverges (issue 37, item 3).

Before: ``optim.lr=1e8`` trained every step on a NaN loss (logged as null), then crashed in
``reporting.theta_convergence`` with a traceback, writing nothing; a checkpoint of NaN weights
resumed into the same. Now a non-finite loss, gradient or weight stops the run at that step with
one line (the step, what, the last good checkpoint), the folder keeps the good steps' log and
checkpoints, and a checkpoint holding NaN is refused on resume with a line naming its file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

from badpo.cli import main
from badpo.core.config import dump_yaml
from badpo.engine.checkpoint import list_checkpoints
from badpo.engine.finite import TrainingDiverged, check_loss_and_gradients, check_weights
from badpo.engine.reporting import theta_convergence
from badpo.engine.train import train
from fixtures.engine import judgment_rows, log_records, make_config, write_jsonl

ONE_PROCESS = SimpleNamespace(device=torch.device("cpu"), num_processes=1)


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("training_stops_on_nan")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def test_a_diverging_run_stops_at_the_step_and_keeps_the_good_steps(world):
    with pytest.raises(TrainingDiverged) as raised:
        train(make_config(world, "diverged", "optim.lr=1e8", "steps=10", "save_every=1"))
    out, error = world / "diverged", raised.value
    checkpoints = list_checkpoints(out)
    assert 1 < error.step < 10 and "loss" in error.what  # lr 1e8: the second step's loss is NaN
    assert [c.name for c in checkpoints] == [f"step-{error.step - 1:06d}"]  # keep_checkpoints 1
    message = str(error)
    assert f"at step {error.step}" in message and str(checkpoints[-1]) in message and "\n" not in message
    records = log_records(out)
    assert [r["step"] for r in records] == list(range(1, error.step))
    assert all(math.isfinite(r["loss"]) for r in records)
    assert not (out / "run.json").exists() and not (out / "policy").exists()  # no result of a diverged run
    weights = load_file(checkpoints[-1] / "policy_trainable_0.safetensors")
    assert all(bool(torch.isfinite(w).all()) for w in weights.values())


def test_badpo_train_says_a_diverged_run_in_one_line(world, capsys):
    config = world / "diverged_cli.yaml"
    dump_yaml(make_config(world, "diverged_cli", "optim.lr=1e8", "steps=10"), config)
    capsys.readouterr()
    assert main(["train", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("badpo train:")]  # progress bars aside
    assert len(lines) == 1 and "Traceback" not in err, err
    line = lines[0]
    assert line.startswith("badpo train: training diverged at step ") and "loss is not finite" in line, line
    assert "no checkpoint was saved" in line, line


def test_a_non_finite_gradient_or_weight_stops_the_step():
    policy, theta = torch.nn.Linear(2, 2), torch.nn.Linear(1, 1)
    for param in (*policy.parameters(), *theta.parameters()):
        param.grad = torch.zeros_like(param)
    check_loss_and_gradients(ONE_PROCESS, 4, torch.tensor(0.5), policy, theta)  # all finite: no stop
    check_weights(ONE_PROCESS, 4, policy, theta)
    theta.weight.grad[0, 0] = math.inf
    with pytest.raises(TrainingDiverged, match="step 5: a gradient of theta is not finite"):
        check_loss_and_gradients(ONE_PROCESS, 4, torch.tensor(0.5), policy, theta)
    with torch.no_grad():
        policy.bias[1] = math.nan
    with pytest.raises(TrainingDiverged, match="step 5: a weight of the policy is not finite"):
        check_weights(ONE_PROCESS, 4, policy, theta)


@pytest.mark.parametrize("torch_before_2_6", [False, True])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_one_non_finite_value_among_many_is_found_and_huge_finite_ones_are_not(bad, torch_before_2_6, monkeypatch):
    """The check reads the largest |value| of all tensors at once: a sum of squares of 3e38 would
    overflow and call a finite weight infinite; a NaN must not be lost in a max. Tensors of
    several dtypes and an empty one are read together; so on a torch without get_total_norm."""
    if torch_before_2_6:
        monkeypatch.delattr(torch.nn.utils, "get_total_norm")
    policy = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2).double(), torch.nn.Linear(0, 2))
    with torch.no_grad():
        policy[0].weight.fill_(3e38)
    check_weights(ONE_PROCESS, 0, policy)
    with torch.no_grad():
        policy[1].weight[1, 3] = bad
    with pytest.raises(TrainingDiverged, match="step 1: a weight of the policy is not finite"):
        check_weights(ONE_PROCESS, 0, policy)
    with torch.no_grad():
        policy[1].weight[1, 3] = 0.0
        policy[0].bias[0] = bad
    with pytest.raises(TrainingDiverged, match="step 1: a weight of the policy is not finite"):
        check_weights(ONE_PROCESS, 0, policy)


def test_the_limit_is_on_the_bias_logit_not_on_theta():
    """An attribute on a small scale (g_w - g_l ~ 1e-5) may need theta ~ 1e5 for a log-odds of 1:
    a large theta with small logits trains on; a logit past 1e4 stops."""
    policy, theta = torch.nn.Linear(2, 2), torch.nn.Linear(1, 1)
    with torch.no_grad():
        theta.weight.fill_(1e5)
    check_weights(ONE_PROCESS, 0, policy, theta, lambda: torch.tensor(1.0))
    with pytest.raises(TrainingDiverged, match="step 1: a bias logit of theta is beyond ±10000"):
        check_weights(ONE_PROCESS, 0, policy, theta, lambda: torch.tensor(2e4))


def test_a_bias_logit_past_the_limit_names_the_datas_largest_difference(tmp_path):
    """theta . (g_w - g_l) grows with g's scale as with theta: a `given:` difference of 1e6 in one
    row breaches the limit at a small theta, so the stop names that row beside bias.lr."""
    from badpo.engine.finite import LOGIT_BREACH, stop_message
    from badpo.engine.loop import largest_difference

    run = SimpleNamespace(attr_diff=torch.tensor([[0.5, -1.0], [2.0, -1e6], [0.0, 3.0]]),
                          data=SimpleNamespace(attribute_names=["length", "given:score"]))
    where = largest_difference(run)
    assert where == ("the largest |g(y_w) - g(y_l)| in the data is 1e+06 "
                     "(attribute 'given:score', row 1 of the training judgments)")
    message = stop_message(TrainingDiverged(3, LOGIT_BREACH), tmp_path, [], where)
    assert f"{where}: give that attribute on a smaller scale, or lower bias.lr, and train again" in message
    other = stop_message(TrainingDiverged(3, "theta is not finite"), tmp_path, [], where)
    assert "largest" not in other and "; lower bias.lr and train again" in other
    assert largest_difference(SimpleNamespace()) is None


def test_a_blown_up_theta_stops_the_run_though_it_is_finite(world):
    """bias.lr=1e30 takes theta to ~1e30 in one Adam step: finite, but its logits theta_k . (g_w -
    g_l) are log-odds no label supports, with no gradient left to bring them back. The run stops
    there, naming theta and bias.lr, instead of finishing as a run whose theta "has not converged"."""
    with pytest.raises(TrainingDiverged) as raised:
        train(make_config(world, "theta_blown", "method=ba_dpo_pooled", "bias.lr=1e30", "steps=4"))
    assert raised.value.step == 1 and "a bias logit of theta is beyond ±10000" in str(raised.value)
    assert "lower bias.lr" in str(raised.value)
    assert not (world / "theta_blown" / "run.json").exists()


@pytest.mark.parametrize("key", ["optim.lr", "bias.lr"])
def test_an_update_past_the_float32_range_stops_the_run_in_one_line(world, key):
    """3e38 is inside the float32 range, but Adam's first step divides it by 1 - beta1 = 0.1: torch
    cannot apply the update ('value cannot be converted to type float without overflow'). The run
    stops there as a diverged one, naming what and the rate to lower."""
    with pytest.raises(TrainingDiverged) as raised:
        train(make_config(world, f"overflow_{key}", "method=ba_dpo_pooled", f"{key}=3e38", "steps=4"))
    what = "theta" if key == "bias.lr" else "the policy"
    assert raised.value.step == 1 and f"the update of {what} overflows float32" in str(raised.value)
    assert f"lower {key}" in str(raised.value) and "no log line (it stopped at its first step)" in str(raised.value)


@pytest.mark.parametrize("key", ["optim.lr", "bias.lr"])
def test_a_learning_rate_past_the_float32_range_is_a_config_error(world, key):
    """1e40 cannot be applied to float32 weights at all (torch: 'value cannot be converted to type
    float without overflow'): refused before anything loads."""
    from badpo.core.config import ConfigError

    with pytest.raises(ConfigError, match=f"^{key}: must be at most 3.403e\\+38 \\(the float32 range\\), got 1e\\+40$"):
        train(make_config(world, "lr_overflow", "method=ba_dpo_pooled", f"{key}=1e40", "steps=2"))


def test_theta_convergence_skips_records_whose_theta_was_not_finite():
    records = [{"step": s, "theta_bar": {"signed": 0.1 * s}} for s in range(1, 9)]
    records += [{"step": s, "theta_bar": {"signed": None}} for s in (9, 10)]  # NaN is logged as null
    result = theta_convergence(records, 10)
    assert result["steps"] == [1, 8] and result["attributes"]["signed"]["to"] == pytest.approx(0.8)


@pytest.fixture()
def stopped(world, tmp_path) -> tuple[Path, Path]:
    """(config, folder) of a run stopped with a checkpoint at step 2 of 4."""
    config = make_config(world, "unused", "steps=4", "stop_after_steps=2")
    config = dataclasses.replace(config, output_dir=str(tmp_path / "run"))
    train(config)
    return config, list_checkpoints(tmp_path / "run")[-1]


def test_a_checkpoint_with_nan_weights_is_refused_on_resume(stopped, world):
    config, checkpoint = stopped
    path = checkpoint / "policy_trainable_0.safetensors"
    weights = load_file(path)
    name = sorted(weights)[0]
    weights[name].view(-1)[0] = math.nan
    save_file(weights, path)
    with pytest.raises(ValueError, match="NaN or inf") as raised:
        train(dataclasses.replace(config, resume_from="latest", stop_after_steps=None))
    assert str(path) in str(raised.value) and name in str(raised.value)


def test_a_checkpoint_with_a_nan_theta_is_refused_on_resume(stopped):
    config, checkpoint = stopped
    path = checkpoint / "state.safetensors"
    tensors = load_file(path)
    tree = json.loads((checkpoint / "state.json").read_text())
    theta_names = [v["$tensor"] for v in tree["states"]["theta"].values() if isinstance(v, dict)]
    tensors[theta_names[0]].view(-1)[0] = math.inf
    save_file(tensors, path)
    with pytest.raises(ValueError, match="NaN or inf") as raised:
        train(dataclasses.replace(config, resume_from="latest", stop_after_steps=None))
    assert str(path) in str(raised.value) and "theta" in str(raised.value)


def test_a_checkpoint_with_a_nan_in_the_optimizers_state_is_refused_on_resume(stopped):
    """An Adam moment of NaN would train the policy to NaN at the first resumed step, and the stop
    line would then call that checkpoint the last good one: it is refused before, naming it."""
    config, checkpoint = stopped
    path = checkpoint / "state.safetensors"
    tensors = load_file(path)
    tensors["states/optimizer/state/0/exp_avg"].view(-1)[0] = math.nan  # the first weight's Adam moment
    save_file(tensors, path)
    with pytest.raises(ValueError, match="NaN or inf") as raised:
        train(dataclasses.replace(config, resume_from="latest", stop_after_steps=None))
    assert str(path) in str(raised.value) and "optimizer.state.0" in str(raised.value)


def test_a_diverging_sft_stops_at_the_step_and_writes_no_reference(world):
    from badpo.core.config import apply_overrides, from_dict
    from badpo.engine.settings import SFTConfig
    from badpo.engine.sft import sft

    base = {"data": str(world / "judgments.jsonl"), "source": "judgments",
            "model": {"name_or_path": str(world / "model")}, "epochs": 4.0, "batch_size": 6,
            "micro_batch_size": 6, "optim": {"lr": 1e8, "max_grad_norm": 0.0}, "runtime": {"num_threads": 1},
            "report": {"progress_bar": False}, "output_dir": str(world / "sft_diverged")}
    with pytest.raises(TrainingDiverged, match="training diverged at step"):
        sft(from_dict(SFTConfig, apply_overrides(base, ())))
    assert not (world / "sft_diverged" / "sft.json").exists()


def test_a_checkpoint_of_another_shape_is_refused_naming_the_file(stopped):
    config, checkpoint = stopped
    path = checkpoint / "policy_trainable_0.safetensors"
    weights = load_file(path)
    name = sorted(weights)[0]
    weights[name] = torch.zeros(3, 5)
    save_file(weights, path)
    with pytest.raises(ValueError, match=r"has shape \[3, 5\], this run's model") as raised:
        train(dataclasses.replace(config, resume_from="latest", stop_after_steps=None))
    assert str(path) in str(raised.value) and name in str(raised.value)


def test_a_model_folder_with_a_weight_of_another_shape_is_refused_in_one_line(tmp_path, save_model_dir):
    """train's model.name_or_path and evaluate's policy: transformers raised a RuntimeError after
    its load report, and badpo printed the traceback."""
    from transformers import AutoModelForCausalLM

    from badpo.core.config import ConfigError
    from badpo.engine.runtime import from_pretrained
    from badpo.evaluation.trained_run import load_causal_lm

    folder = save_model_dir(tmp_path / "model")
    weights = load_file(folder / "model.safetensors")
    name = sorted(weights)[0]
    weights[name] = torch.zeros(3, 5)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    message = f"cannot load {str(folder)!r} (model.safetensors: {name} has shape [3, 5], its config.json's model"
    with pytest.raises(ConfigError, match=r"^model\.name_or_path: ") as raised:
        from_pretrained(AutoModelForCausalLM, str(folder), "model.name_or_path")
    assert message in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        load_causal_lm(folder, {})
    assert message in str(raised.value)


def test_a_weight_of_another_shape_is_named_before_transformers_prints_its_load_report(tmp_path, save_model_dir,
                                                                                      capfd):
    """transformers printed a multi-line load report (a table, in colour), then an error naming no
    tensor, so badpo's line had to point at the report; the shapes are now read from the files'
    headers against the config's model on the meta device, before any load."""
    from transformers import AutoModelForCausalLM

    from badpo.core.config import ConfigError
    from badpo.engine.runtime import from_pretrained

    folder = save_model_dir(tmp_path / "model")
    weights = load_file(folder / "model.safetensors")
    name = sorted(weights)[-1]
    weights[name] = torch.zeros(2, 2)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ConfigError, match=rf"model\.safetensors: {re.escape(name)} has shape \[2, 2\]"):
        from_pretrained(AutoModelForCausalLM, str(folder), "model.name_or_path")
    captured = capfd.readouterr()
    assert "LOAD REPORT" not in captured.out + captured.err


def test_a_quantized_folder_is_not_called_damaged_by_the_shape_check(tmp_path, save_model_dir):
    """A pre-quantized folder (bitsandbytes and the like) keeps each weight's name but packs its
    shape, so comparing shapes with the plain config's model would call it damaged: the check
    stands aside where config.json has a quantization_config, and the load says what it says."""
    import json

    from transformers import AutoModelForCausalLM

    from badpo.engine.runtime import _shape_mismatch

    folder = save_model_dir(tmp_path / "model")
    weights = load_file(folder / "model.safetensors")
    name = sorted(weights)[-1]
    weights[name] = torch.zeros(2, 1)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    assert _shape_mismatch(AutoModelForCausalLM, str(folder), {}) is not None  # plain: named
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    (folder / "config.json").write_text(json.dumps(config))
    assert _shape_mismatch(AutoModelForCausalLM, str(folder), {}) is None


def test_a_pickle_in_a_run_s_policy_folder_is_refused_before_any_model_loads(stopped, monkeypatch):
    from badpo.evaluation import trained_run as evaluate_run

    config, _ = stopped
    out = train(dataclasses.replace(config, stop_after_steps=None, resume_from="latest"))  # finished
    (out / "policy" / "pytorch_model.bin").write_bytes(b"\x80\x04planted")
    monkeypatch.setattr(evaluate_run, "load_causal_lm", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(ValueError, match="a pickle in the run's policy folder") as raised:
        evaluate_run.evaluate_run_dir(out, {}, evaluate_run.EvalData())
    assert str(out / "policy" / "pytorch_model.bin") in str(raised.value)


def test_a_run_folder_that_holds_its_own_data_is_refused(world):
    from badpo.core.config import ConfigError
    from badpo.engine.config_checks import check_train

    config = make_config(world, "unused")
    with pytest.raises(ConfigError, match="holds the run's data"):
        check_train(dataclasses.replace(config, output_dir=str(world)))  # world/ holds judgments.jsonl
    check_train(dataclasses.replace(config, output_dir=str(world / "elsewhere")))


def test_the_stop_line_names_the_rate_of_what_diverged(tmp_path):
    from badpo.engine.finite import stop_message

    policy = stop_message(TrainingDiverged(3, "the loss is not finite"), tmp_path, [])
    theta = stop_message(TrainingDiverged(3, "a gradient of theta is not finite"), tmp_path,
                         [tmp_path / "checkpoint-2"])
    assert "training diverged at step 3: the loss is not finite, so the run stopped there" in policy
    assert "lower optim.lr" in policy and "no checkpoint was saved" in policy
    assert "lower bias.lr" in theta and f"the last good checkpoint is {tmp_path / 'checkpoint-2'}" in theta
