"""The level step on the loop (``bias.trusted_level``, badpo.engine.level): its cache (one process or
two), the final pass (forwards per process, eval mode), its two modes on a real run, the theta vote
prediction reads, checkpoint and resume, BA-IPO's squared link, and the reward model."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from badpo.core.bias import BiasChannel
from badpo.core.config import apply_overrides, from_dict, to_dict
from badpo.core.level_step import LOGISTIC
from badpo.engine.batches import ItemTable
from badpo.engine.loop import final_level
from badpo.engine.settings import TrainConfig
from badpo.engine.train import train
from badpo.evaluation.trained_run import EvalData, evaluate_run_dir
from badpo.experiment.backend import evaluate_run
from badpo.experiment.runner import RunTask
from badpo.methods import LossTerms
from badpo.run_folder.layout import TRAINED_THETA_FILE
from badpo.theta.level import LevelStep
from fixtures.engine import assert_same_run, judgment_rows, log_records, make_config, policy_weights, write_jsonl

pytestmark = pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")


def _one_process(values: torch.Tensor) -> torch.Tensor:
    """The reduce of a single process: the values as they are."""
    return values


def test_the_cache_keeps_the_latest_margins_and_a_second_step_moves_nothing():
    """Judgments 0-3 by trusted k0 (coded side wins 3 of 4), 4-9 by k1 (wins 5 of 6) at zero margin:
    the first step moves k1 by log 5 - log 3; on the same margins a second moves it by 0. A later
    observation replaces a judgment's margin; the state round-trips and refuses another size."""
    channel = BiasChannel("shared_mean", ["g"], ["k0", "k1"], trusted=["k0"])
    index = torch.tensor([0] * 4 + [1] * 6)
    diff = torch.tensor([[1.0], [1.0], [1.0], [-1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [-1.0]])
    level = LevelStep(LOGISTIC, 10, every_step=True)
    level.observe(torch.arange(10), torch.zeros(10), torch.zeros(10))
    first = level.apply(channel, index, diff, _one_process)
    assert first["level_shift"]["g"] == pytest.approx(math.log(5 / 3), abs=1e-9)
    assert first["trusted_shift"]["g"] == pytest.approx(math.log(3), abs=1e-9)
    assert level.apply(channel, index, diff, _one_process)["level_shift"]["g"] == pytest.approx(0.0, abs=1e-6)
    level.observe(torch.tensor([2]), torch.tensor([0.5]), torch.tensor([0.25]))
    level.apply(channel, index, diff, _one_process)
    assert float(level.logits[2]) == 0.25 and bool(level.seen.all())
    copy = LevelStep(LOGISTIC, 10, every_step=True)
    copy.load_state_dict(level.state_dict())
    assert torch.equal(copy.logits, level.logits)
    with pytest.raises(ValueError, match="margins of 10 judgments, this run has 3"):
        LevelStep(LOGISTIC, 3, every_step=True).load_state_dict(level.state_dict())


def _gathered(other: LevelStep, channel: BiasChannel, index: torch.Tensor, diff: torch.Tensor):
    """The reduce of one of two processes: what it holds plus what ``other``, the second process,
    contributes (recorded from ``other``'s own apply, on a copy of theta)."""
    contributed = []
    other.apply(copy.deepcopy(channel), index, diff, lambda values: contributed.append(values.clone()) or values)
    pending = iter(contributed)
    return lambda values: values + next(pending)


def test_a_judgment_seen_on_two_processes_in_one_step_counts_once():
    """A step that wraps the epoch holds judgment 5 twice: one process sees it in both of its
    micro-batches, two processes once each (margins 0.25 and 0.75). Either way its margin is their
    mean, 0.5, and the shift is the same (summed, it was 1.0 on two processes)."""
    index = torch.tensor([0] * 4 + [1] * 6)
    diff = torch.tensor([[1.0], [1.0], [1.0], [-1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [-1.0]])
    first, second = torch.arange(6), torch.arange(5, 10)
    margins = {5: 0.25}, {5: 0.75}
    z = [torch.tensor([m.get(int(j), 0.1 * int(j)) for j in rows]) for m, rows in zip(margins, (first, second))]
    channels = [BiasChannel("shared_mean", ["g"], ["k0", "k1"], trusted=["k0"]) for _ in range(2)]
    one = LevelStep(LOGISTIC, 10, every_step=True)
    for rows, logits in zip((first, second), z):
        one.observe(rows, logits, torch.zeros(len(rows)))
    alone = one.apply(channels[0], index, diff, _one_process)
    processes = [LevelStep(LOGISTIC, 10, every_step=True) for _ in range(2)]
    for process, rows, logits in zip(processes, (first, second), z):
        process.observe(rows, logits, torch.zeros(len(rows)))
    shared = processes[0].apply(channels[1], index, diff, _gathered(processes[1], channels[1], index, diff))
    assert float(one.logits[5]) == float(processes[0].logits[5]) == 0.5
    assert torch.equal(one.logits, processes[0].logits)
    assert shared["level_shift"]["g"] == pytest.approx(alone["level_shift"]["g"], abs=1e-12)
    assert torch.equal(channels[0].theta(), channels[1].theta())


def test_unseen_and_unestimable_coordinates_keep_their_level():
    """Only trusted judgments seen so far, all on the coded side: no estimate, theta unchanged,
    logged as None."""
    channel = BiasChannel("per_annotator", ["g"], ["k0", "k1"], trusted=["k0"], init_mean=[0.4])
    level = LevelStep(LOGISTIC, 4, every_step=True)
    level.observe(torch.tensor([0, 1]), torch.zeros(2), torch.zeros(2))
    logged = level.apply(channel, torch.tensor([0, 0, 1, 1]), torch.ones(4, 1), _one_process)
    assert logged == {"level_shift": {"g": None}, "trusted_shift": {"g": None}}
    assert channel.theta()[:, 0].tolist() == pytest.approx([0.0, 0.4])


# ------------------------------------------------------------------------- final_level on a fake run
def _fake_run(process: int, processes: int, n_items: int, seen: list) -> SimpleNamespace:
    """A run of ``n_items`` one-judgment items whose policy is a dropout and whose loss records, per
    forward, (process, the policy's mode, whether the dropout changed its input, the judgments)."""
    def losses(run, micro, step, statistic=None) -> LossTerms:
        ones = torch.ones(256)
        seen.append((process, run.policy.training, not torch.equal(run.policy(ones), ones),
                     micro.judgments.tolist()))
        zeros = torch.zeros(len(micro.judgments))
        return LossTerms(zeros, zeros, zeros, logits=0.1 * micro.judgments.double())

    accelerator = SimpleNamespace(process_index=process, num_processes=processes, device=torch.device("cpu"),
                                  reduce=lambda values, reduction: values)
    items = ItemTable(sequences=torch.arange(2 * n_items).reshape(n_items, 2), offsets=torch.arange(n_items + 1),
                      order=torch.arange(n_items), chosen_side=torch.zeros(n_items, dtype=torch.long))
    policy = torch.nn.Sequential(torch.nn.Dropout(0.5)).train()
    return SimpleNamespace(accelerator=accelerator, items=items, policy=policy, losses=losses,
                           config=SimpleNamespace(micro_batch_size=2, steps=3),
                           level=LevelStep(LOGISTIC, n_items, every_step=False),
                           bias=BiasChannel("shared_mean", ["g"], ["k0", "k1"], trusted=["k0"]),
                           annotator_index=torch.arange(n_items) % 2, attr_diff=torch.ones(n_items, 1))


@pytest.mark.parametrize("n_items", [5, 1])
def test_final_level_runs_as_many_forwards_on_every_process_in_eval_mode(n_items):
    """Items split over two processes unevenly (5: three and two; 1: one and none): every process
    runs the forwards of the fuller one, the padding's margins unrecorded; the policy is in eval
    mode throughout (dropout off) and back in train mode after."""
    seen = []
    runs = [_fake_run(process, 2, n_items, seen) for process in range(2)]
    for run in runs:
        final_level(run)
        assert run.policy.training
    forwards = [sum(1 for p, *_ in seen if p == process) for process in range(2)]
    assert forwards[0] == forwards[1] == math.ceil(math.ceil(n_items / 2) / 2)
    assert not any(training or dropped for _, training, dropped, _ in seen)
    recorded = [sorted(runs[p].level.seen.nonzero().flatten().tolist()) for p in range(2)]
    assert recorded == [list(range(0, n_items, 2)), list(range(1, n_items, 2))]


# ------------------------------------------------------------------------- on the training loop
@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    """Twelve pairs: trusted ann1 casts four cross-group judgments, the coded side winning three."""
    root = tmp_path_factory.mktemp("level")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows(12, 4))
    return root


def _theta(out: Path) -> dict[str, float]:
    channel = BiasChannel.load(out / "theta.json")
    return dict(zip(channel.annotators, channel.theta()[:, 0].tolist()))


def _stripped(out: Path) -> list[dict]:
    """The log records without their wall time."""
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in log_records(out)]


@pytest.fixture(scope="module")
def recounted(world) -> tuple[Path, Path]:
    """The same run under bias.trusted_level gradient and final (the default)."""
    common = ("steps=3", "bias.trusted=[ann1]")
    return (train(make_config(world, "gradient", *common, "bias.trusted_level=gradient")),
            train(make_config(world, "final", *common)))


def test_final_recounts_theta_from_the_trusted_zero_and_trains_as_gradient(recounted):
    """final and gradient train the same policy with the same log; their theta differ by one
    constant on the untrusted annotators, the level_shift run.json records, and not at all on the
    trusted one; final saves the theta before the step, gradient's, as theta_trained.json.
    gradient writes no trusted_level and no theta_trained.json."""
    plain, final = recounted
    assert _stripped(plain) == _stripped(final)
    trained = BiasChannel.load(final / TRAINED_THETA_FILE).theta()
    assert torch.equal(trained, BiasChannel.load(plain / "theta.json").theta())
    assert not (plain / TRAINED_THETA_FILE).exists()
    for name, weights in policy_weights(plain).items():
        assert torch.equal(weights, policy_weights(final)[name])
    shift = json.loads((final / "run.json").read_text())["trusted_level"]["level_shift"]["signed"]
    assert shift is not None and abs(shift) > 1e-3
    assert "trusted_level" not in json.loads((plain / "run.json").read_text())
    before, after = _theta(plain), _theta(final)
    assert after["ann1"] == before["ann1"] == 0.0
    for annotator in before:
        if annotator != "ann1":
            assert after[annotator] - before[annotator] == pytest.approx(shift, abs=1e-6)


def test_votes_pair_the_policy_with_the_theta_it_was_trained_against(world, recounted, tmp_path):
    """Under final the policy was fitted against gradient's theta; moving theta alone is not the flat
    direction of the likelihood (that also moves the policy's tilt), so vote prediction reads
    theta_trained.json: final's votes are gradient's (its saved theta, about 0.4 lower on the
    untrusted annotators, predicts other votes), while theta_mean reads the recounted theta.
    So in `badpo evaluate` and in an experiment's readouts."""
    plain, final = recounted
    heldout = world / "judgments.jsonl"
    settings = {"generations": False}
    read = [evaluate_run_dir(run, settings, EvalData(heldout=str(heldout))) for run in (plain, final)]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copyfile(heldout, corpus / "heldout.jsonl")
    write_jsonl(corpus / "eval_prompts.jsonl", [{"prompt": "write code"}])
    task = RunTask("final", "arm", "final", "ba_dpo_shared_mean", 42,
                   yaml.safe_load((final / "config.yaml").read_text()),
                   {"generations": False, "body": "given", "attributes": ["given:signed"]},
                   corpus, final, tmp_path, None)
    in_experiment = evaluate_run(task, final / "policy", world / "model", final / "theta.json")
    assert read[1]["votes/signed"] == read[0]["votes/signed"] == in_experiment["votes/signed"]
    assert read[1]["theta_mean"]["signed"] == pytest.approx(_mean_theta(final), abs=1e-6)
    assert read[1]["theta_mean"]["signed"] < read[0]["theta_mean"]["signed"] - 0.1


def _mean_theta(out: Path) -> float:
    return sum(_theta(out).values()) / len(_theta(out))


def test_every_step_logs_its_shift_and_resumes_bit_for_bit(world):
    """every_step: each record carries the step's shift, the first on the judgments of one step;
    stopping after 2 of 4 steps and resuming gives the uninterrupted run (the cache is saved)."""
    settings = ("steps=4", "micro_batch_size=4", "bias.trusted=[ann1]", "bias.trusted_level=every_step")
    full = train(make_config(world, "every", *settings))
    assert all("level_shift" in r and "trusted_shift" in r for r in log_records(full))
    parts = make_config(world, "every-parts", *settings)
    train(from_dict(TrainConfig, apply_overrides(to_dict(parts), ["stop_after_steps=2"])))
    resumed = train(from_dict(TrainConfig, apply_overrides(to_dict(parts), ["resume_from=latest"])))
    assert_same_run(full, resumed, atol=0.0)
    assert _stripped(full) == _stripped(resumed)


def test_ba_ipo_sets_its_level_through_the_squared_link(world):
    """BA-IPO's loss is squared in h + b: its level step is least squares, always estimable."""
    out = train(make_config(world, "ipo", "method=ba_ipo_shared_mean", "steps=2", "bias.trusted=[ann1]",
                            "bias.trusted_level=every_step"))
    shifts = [r["level_shift"]["signed"] for r in log_records(out)]
    assert all(s is not None for s in shifts) and _theta(out)["ann1"] == 0.0


@pytest.mark.parametrize(("method", "rule"), [("ba_dpo_pooled", "tilt"), ("ba_dpo_shared_mean", "tilt"),
                                            ("ba_dpo_pooled", "tilt_given_quality")])
def test_the_tilt_rule_logs_the_policys_lean_and_resumes_bit_for_bit(world, method, rule):
    """bias.level: tilt (and tilt_given_quality): every record carries the policy's lean and the
    step's shift; stopped after 2 of 4 steps and resumed, the run is the uninterrupted one."""
    settings = ("steps=4", "micro_batch_size=4", f"method={method}", f"bias.level={rule}")
    full = train(make_config(world, f"{rule}-{method}", *settings))
    assert all("policy_tilt" in r and "level_shift" in r for r in log_records(full))
    parts = make_config(world, f"{rule}-parts-{method}", *settings)
    train(from_dict(TrainConfig, apply_overrides(to_dict(parts), ["stop_after_steps=2"])))
    resumed = train(from_dict(TrainConfig, apply_overrides(to_dict(parts), ["resume_from=latest"])))
    assert_same_run(full, resumed, atol=0.0)


@pytest.mark.parametrize("rule", ["tilt", "tilt_given_quality"])
def test_the_tilt_rules_refuse_trusted_annotators(world, rule):
    with pytest.raises(Exception, match=f"bias.level: {rule} anchors the level on the policy's own lean"):
        train(make_config(world, f"{rule}-trusted", "steps=1", "bias.trusted=[ann1]", f"bias.level={rule}"))
