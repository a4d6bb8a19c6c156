"""BADPOTrainer's run folders: checkpoints and resume (θ, its Adam and the group weights go on as
in the uninterrupted run), and the saved folder that `badpo evaluate` and `badpo compare` read.
The world is tests/integrations/conftest.py's."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
import torch

pytest.importorskip("trl", reason="TRL is the optional extra 'trl' (installed by the 'test' extra)")

from transformers import AutoModelForCausalLM  # noqa: E402

from badpo.core.bias import BiasChannel  # noqa: E402
from fixtures.engine import build_tokenizer  # noqa: E402
from fixtures.trl import config, trl_world  # noqa: E402

if TYPE_CHECKING:
    from trl import DPOConfig


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    yield from trl_world(tmp_path_factory.mktemp("trl"), save_model_dir)


# ---------------------------------------------------------------- checkpoints, resume, run folders
def resume_config(out, **overrides) -> DPOConfig:
    """Four steps of 8 rows (an epoch is 3), a checkpoint every 2, the policy's lr on a schedule."""
    return config(out, max_steps=4, per_device_train_batch_size=8, save_strategy="steps", save_steps=2,
                  lr_scheduler_type="linear", **overrides)


def test_a_resumed_run_goes_on_as_the_uninterrupted_one(world, tmp_path):
    """Train 4 steps (checkpoints at 2 and 4); a fresh trainer resumes from checkpoint-2 and trains
    the last 2: theta, a policy weight and the logged records of steps 3-4 are the first run's.
    theta's Adam is restored too: at step 3 it is on its third step (bias correction), not its first."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"],
                  bias="shared_mean")
    whole = BADPOTrainer(str(path / "policy"), ref_model=AutoModelForCausalLM.from_pretrained(path / "model"),
                         args=resume_config(tmp_path / "a"), **kwargs)
    whole.train()
    checkpoint = tmp_path / "a" / "checkpoint-2"
    assert {"theta_state.json", "theta_state.safetensors", "theta.json", "badpo_run.json"} <= {
        p.name for p in checkpoint.iterdir()}
    assert BiasChannel.load(checkpoint / "theta.json").mean().abs().item() > 1e-3  # theta had moved at step 2

    resumed = BADPOTrainer(str(path / "policy"), ref_model=AutoModelForCausalLM.from_pretrained(path / "model"),
                           args=resume_config(tmp_path / "b"), **kwargs)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.theta_optimizer.state_dict()["state"][0]["step"] == 4
    torch.testing.assert_close(resumed.bias.theta(), whole.bias.theta(), rtol=0, atol=1e-7)
    for (name, a), b in zip(whole.model.named_parameters(), resumed.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)
    later = {r["step"]: r for r in whole.state.log_history if "loss" in r and r["step"] > 2}
    again = {r["step"]: r for r in resumed.state.log_history if "loss" in r and r["step"] > 2}
    assert sorted(later) == sorted(again) == [3, 4]
    for step, record in later.items():
        for key in ("loss", "theta_bar/signed", "theta_k_sd/signed", "rewards/margins", "num_tokens"):
            assert again[step][key] == pytest.approx(record[key], rel=1e-5, abs=1e-7), (step, key)


def test_group_weights_move_after_each_step_are_logged_and_resume_from_a_checkpoint(world, tmp_path):
    """Group-DRO with BA-DPO inside TRL: the annotators' weights move after every optimizer step
    (toward the higher-loss ones), are logged per annotator, saved in each checkpoint and restored
    on resume, so the resumed run's weights, loss and theta at step 4 are the uninterrupted run's."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"],
                  method="group_dro_dpo_ba_shared_mean", method_params={"groups": "annotators", "eta": 5.0})
    whole = BADPOTrainer(str(path / "policy"), ref_model=AutoModelForCausalLM.from_pretrained(path / "model"),
                         args=resume_config(tmp_path / "a"), **kwargs)
    whole.train()
    assert whole.weighting.q.std() > 1e-3  # moved away from uniform
    logged = [r for r in whole.state.log_history if "loss" in r]
    assert all(f"group_weight/{a}" in logged[-1] for a in whole.bias.annotators)
    assert logged[0]["group_weight_sd"] != logged[-1]["group_weight_sd"]
    resumed = BADPOTrainer(str(path / "policy"), ref_model=AutoModelForCausalLM.from_pretrained(path / "model"),
                           args=resume_config(tmp_path / "b"), **kwargs)
    resumed.train(resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-2"))
    torch.testing.assert_close(resumed.weighting.q, whole.weighting.q, rtol=0, atol=1e-10)
    torch.testing.assert_close(resumed.bias.theta(), whole.bias.theta(), rtol=0, atol=1e-7)
    again = [r for r in resumed.state.log_history if "loss" in r]
    assert again[-1]["loss"] == pytest.approx(logged[-1]["loss"], rel=1e-5)


def test_group_weights_need_the_whole_step_in_one_batch(world, tmp_path):
    """Loss weights relative to the optimizer step are exact inside TRL only when the step is one
    batch: gradient accumulation is refused in one line naming the method."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    with pytest.raises(ValueError, match="^method 'crowd_prefrl' weights each judgment within the whole optimizer "
                                         "step, .* \\(got 2 on 1\\); train it with badpo train$"):
        BADPOTrainer(str(path / "policy"), ref_model=AutoModelForCausalLM.from_pretrained(path / "model"),
                     args=config(tmp_path, gradient_accumulation_steps=2), train_dataset=data,
                     processing_class=build_tokenizer(), attributes=["given:signed"], method="crowd_prefrl",
                     method_params={"groups": "annotators", "eta": 0.5})


def test_resume_refuses_a_checkpoint_without_theta_or_of_another_channel(world, tmp_path):
    """Both are refused before any training, with one line naming the file."""
    import shutil

    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"])
    first = BADPOTrainer(str(path / "model"), args=config(tmp_path / "a", max_steps=1), **kwargs)
    first.save_model(str(tmp_path / "a" / "checkpoint-1"))
    first.save_theta_state(tmp_path / "a" / "checkpoint-1")
    bare = shutil.copytree(tmp_path / "a" / "checkpoint-1", tmp_path / "bare")
    (bare / "theta_state.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"bare/theta_state.json is missing"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path / "b"), **kwargs).train(resume_from_checkpoint=str(bare))
    other = BADPOTrainer(str(path / "model"), args=config(tmp_path / "c"), bias="pooled", **kwargs)
    with pytest.raises(ValueError, match=r"checkpoint-1/theta_state.json: variant 'shared_mean' is not .*'pooled'"):
        other.train(resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-1"))
    with pytest.raises(ValueError, match="resume_from_checkpoint: no checkpoint folder in"):
        other.train(resume_from_checkpoint=True)


def test_the_trainer_checkpoints_theta_s_parts_under_the_engine_s_names(world, tmp_path):
    """theta_state holds exactly the parts badpo.theta.state names (those the engine's checkpoint
    holds for the same run); one without theta's Adam is refused as another run's parts."""
    from badpo.engine.checkpoint import read_state_files
    from badpo.integrations.trl import BADPOTrainer
    from badpo.theta.state import THETA_PARTS

    path, data = world
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"])
    first = BADPOTrainer(str(path / "model"), args=config(tmp_path / "a", max_steps=1), **kwargs)
    folder = tmp_path / "a" / "checkpoint-1"
    first.save_model(str(folder))
    first.save_theta_state(folder)
    saved = read_state_files(folder, "theta_state")
    assert sorted(set(saved) & set(THETA_PARTS)) == ["theta", "theta_optimizer"]
    saved.pop("theta_optimizer")
    from badpo.engine.checkpoint import write_state_files

    write_state_files(folder, "theta_state", {**saved, "cuts": None})
    with pytest.raises(ValueError, match=r"theta_state.json: holds theta's parts \['theta'\], this run trains "
                                         r"\['theta', 'theta_optimizer'\]"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path / "b"), **kwargs).load_theta_state(folder)


def test_a_frozen_theta_s_checkpoint_of_the_old_format_still_resumes(world, tmp_path):
    """Before theta's parts were named once the trainer saved a frozen theta with theta_optimizer None;
    a frozen theta is the channel the trainer is given, so that file loads and the channel stays."""
    import torch

    from badpo.core.bias import BiasChannel
    from badpo.engine.checkpoint import write_state_files
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    channel = BiasChannel("pooled", ["signed"], [f"ann{k}" for k in range(5)])
    for parameter in channel.parameters():
        parameter.requires_grad_(False)
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"], bias=channel)
    trainer = BADPOTrainer(str(path / "model"), args=config(tmp_path / "a", max_steps=1), **kwargs)
    assert trainer.theta_optimizer is None and trainer.theta_parts() == {}
    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    old = {**trainer.theta_state(), "theta": channel.state_dict(), "theta_optimizer": None, "weighting": None,
           "cuts": None}
    write_state_files(folder, "theta_state", old)
    before = [p.clone() for p in channel.parameters()]
    trainer.load_theta_state(folder)
    assert all(torch.equal(a, b) for a, b in zip(before, channel.parameters()))


@pytest.fixture(scope="module")
def trl_runs(world, tmp_path_factory):
    """A DPO run (bias 'none') and a BA-DPO run of BADPOTrainer, one step each, with a regex
    attribute that generated text can be read for; each folder as save_model leaves it."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    out = tmp_path_factory.mktemp("trl-runs")
    for name, bias in (("dpo", "none"), ("ba", "shared_mean")):
        reference = AutoModelForCausalLM.from_pretrained(path / "model")
        trainer = BADPOTrainer(str(path / "policy"), ref_model=reference, args=config(out / name),
                               train_dataset=data, processing_class=build_tokenizer(),
                               attributes=["signed=regex:emily"], bias=bias)
        trainer.train()
        trainer.save_model()
    return path, out


def test_a_saved_folder_holds_no_pickle_and_records_the_run(trl_runs):
    from badpo.run_folder.external import read_external_run

    path, out = trl_runs
    names = {p.name for p in (out / "ba").iterdir()}
    assert {"model.safetensors", "tokenizer.json", "theta.json", "badpo_run.json", "training_args.json"} <= names
    assert not [n for n in names if n.endswith((".bin", ".pt", ".pth", ".pkl", ".pickle"))]
    record = read_external_run(out / "ba")
    assert (record.method, record.variant, record.attributes) == ("ba_dpo_shared_mean", "shared_mean",
                                                                  ["signed=regex:emily"])
    assert record.reference == str((path / "model").resolve()) and record.beta == 0.1
    assert record.annotators == [f"ann{k}" for k in range(5)] and record.step == 1
    assert record.theta_convergence is not None and read_external_run(out / "dpo").method == "dpo"


def test_the_folder_holds_badpos_model_card_not_trls(trl_runs):
    """The card names the method, the reference and theta (TRL's said "a fine-tuned version of
    [None]"); TRL's own hook (create_model_card, at every checkpoint and before a push) writes it too."""
    path, out = trl_runs
    card = (out / "ba" / "README.md").read_text(encoding="utf-8")
    assert "# ba_dpo_shared_mean: a policy trained with badpo" in card and "fine-tuned version of" not in card
    assert f"`{(path / 'model').resolve()}`" in card and "24 judgments of 6 pairs by 5 annotators" in card
    assert "| signed | " in card and "Declared attributes: `signed=regex:emily`." in card
    plain = (out / "dpo" / "README.md").read_text(encoding="utf-8")
    assert "No annotator bias was learned" in plain


def test_badpo_evaluate_and_compare_read_a_trl_folder(trl_runs, tmp_path, capsys):
    from badpo.cli import main

    path, out = trl_runs
    for name in ("dpo", "ba"):
        assert main(["evaluate", str(out / name), "--heldout", str(path / "judgments.jsonl"),
                     "max_new_tokens=6", "whole_signature=false"]) == 0
        readouts = json.loads((out / name / "readouts.json").read_text())
        rate = readouts["attribute_rates"]["signed"]
        assert rate["n"] == 3 and 0.0 <= rate["policy"] <= 1.0 and 0.0 <= rate["reference"] <= 1.0
        assert readouts["inputs"]["attributes"] == ["signed"] and readouts["kl"] is not None
    assert "votes/signed" in readouts  # read with the run's own theta_k
    capsys.readouterr()
    assert main(["compare", str(out / "dpo"), str(out / "ba"), "--out", str(tmp_path / "cmp")]) == 0
    comparison = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    text = capsys.readouterr().out
    assert "DPO" in text and "BA-DPO (shared_mean)" in text
    assert comparison["baseline"] == "DPO"


def test_evaluate_names_a_bad_record(trl_runs, tmp_path):
    import shutil

    from badpo.evaluation.trained_run import evaluate_run_dir

    _, out = trl_runs
    broken = shutil.copytree(out / "ba", tmp_path / "broken")
    record = json.loads((broken / "badpo_run.json").read_text())
    (broken / "badpo_run.json").write_text(json.dumps(record | {"beta": "high"}))
    with pytest.raises(ValueError, match=r"broken/badpo_run.json: beta: expected a number"):
        evaluate_run_dir(broken)
    (broken / "badpo_run.json").write_text(json.dumps(record | {"reference": None}))
    with pytest.raises(Exception, match=r"badpo_run.json: reference is null"):
        evaluate_run_dir(broken)
