"""Tests for the fixed-offset cure (experiments.cure.analysis, experiments.cure.backend).

Worked values.
- The shifts: two prompts whose name probabilities make the attributes independent, with rates
  1/2 and 3/4 on both (log-odds 0 and ln 3), target 0.825: independent attributes stay
  independent under the tilt, so each is the 1-D search: sigmoid(ln 3) = 3/4, sigmoid(ln 9) =
  9/10, mean 0.825, so s* = ln 3 = 1.0986123 on both.
- The issue's source on the 89-name pool: cell masses 0.95 black-woman, 0.02 white-woman, 0.02
  black-man, 0.01 white-man (spread evenly over each cell's names). Each attribute alone: rate
  0.97, s = -ln(97/3); applied together the rates read 1437 / 11428 = 0.1257438 on both. Jointly
  s = -ln(95) / 2 = -2.2769384 on both (0.95 e^{2s} = 0.01), rates 0.5 / 0.5.
- The pipeline with a fake stage that achieves 0.8 x intended - 0.3 on a source whose attributes
  are independent with rate 0.8 on both at every prompt (log-odds ln 4), so the joint shifts are
  the 1-D ones: s*(0.5) = -ln 4 = -1.3862944; scales 1, 1.5, 2 give the
  intended shifts -1.3862944, -2.0794415, -2.7725887 and the achieved -1.4090355, -1.9635532,
  -2.5180710, on the line slope 0.8, intercept -0.3. Calibrated: t 0.5 needs (-1.3862944 + 0.3)
  / 0.8 = -1.3578680; t 0.3: s* = ln(3/7) - ln 4 = -2.2335922, intended -2.4169903; t 0.7: s* =
  -0.5389965, intended -0.2987456. The offset is -beta x intended (beta 0.1): 0.1357868 at t 0.5.
- Sampling-time tilt on uniform name log-probs (pool: 23 white women, 23 white men, 18 black
  women, 25 black men): shift ln 2 on woman alone -> 82 / 130 = 0.6307692; ln 2 on woman and ln 3
  on black -> weights 46, 23, 108, 75 (total 252): p(woman) 154/252 = 0.6111111, p(black)
  183/252 = 0.7261905.
- Step-1 loss of the stage (policy = reference, u = 0): each pair in both orders gives
  softplus(b) + softplus(-b) over its two rows, so the mean over rows is the mean over pairs of
  (softplus(b_j) + softplus(-b_j)) / 2; b = 0 gives ln 2.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from badpo.core.config import ConfigError, load_config
from badpo.core.judgments import read_judgments
from badpo.core.names import NAME_POOL, read_signature, strip_signature
from badpo.experiment.backend import resolve_arm, resolve_evaluation
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from experiments.anchoring import fixed_offset_pairs
from experiments.cure.analysis import CureBackend, run_cure_experiment
from experiments.cure.calibration import achieved_shifts, target_shifts, tilt_readout
from experiments.cure.config import is_cure_config, load_cure_config
from fixtures.cure import (
    CONFIGS,
    NAMES,
    cure_config,
    fake_cure_backend,
    fake_source_backend,
    independent,
    log_source_experiment,
    pool_logprobs,
    quiet,
    write_source_experiment,
)


# ----------------------------------------------------------------------------------- the maths
def test_shifts_hand_worked_and_their_inverse():
    logps = [independent(0.5), independent(0.75)]
    shifts = target_shifts(logps, 0.825)
    assert shifts == pytest.approx({a: math.log(3.0) for a in NAMES}, abs=1e-9)
    assert tilt_readout(logps, shifts) == pytest.approx({a: 0.825 for a in NAMES}, abs=1e-12)
    # the achieved shift of a policy reading rate 0.625 (the source's own) is 0
    assert achieved_shifts(logps, {a: 0.625 for a in NAMES}) == pytest.approx({a: 0.0 for a in NAMES}, abs=1e-9)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        target_shifts(logps, 1.0)


def test_shifts_are_joint_on_a_source_whose_mass_sits_on_black_woman_names():
    logps = [pool_logprobs({(1, 1): 0.95, (1, 0): 0.02, (0, 1): 0.02, (0, 0): 0.01})]
    alone = {a: -math.log(97 / 3) for a in NAMES}  # each attribute solved with the other unshifted
    assert tilt_readout(logps, alone) == pytest.approx({a: 1437 / 11428 for a in NAMES}, abs=1e-12)
    shifts = target_shifts(logps, 0.5)
    assert shifts == pytest.approx({a: -math.log(95) / 2 for a in NAMES}, abs=1e-10)
    assert tilt_readout(logps, shifts) == pytest.approx({a: 0.5 for a in NAMES}, abs=1e-9)
    # the achieved shift reads a trained policy's rates back through the same joint tilt
    assert achieved_shifts(logps, {a: 0.5 for a in NAMES}) == pytest.approx(shifts, abs=1e-10)


def test_sampling_time_tilt_readout_hand_worked():
    uniform = np.zeros((3, len(NAME_POOL)))
    assert tilt_readout(uniform, {"woman_coded": 0.0, "black_coded": 0.0}) == pytest.approx(
        {"woman_coded": 41 / 89, "black_coded": 43 / 89}, abs=1e-12)
    assert tilt_readout(uniform, {"woman_coded": math.log(2), "black_coded": 0.0})["woman_coded"] == \
        pytest.approx(82 / 130, abs=1e-12)
    assert tilt_readout(uniform, {"woman_coded": math.log(2), "black_coded": math.log(3)}) == pytest.approx(
        {"woman_coded": 154 / 252, "black_coded": 183 / 252}, abs=1e-12)


def test_pairs_in_both_orders_same_surname_and_the_split_keeps_an_answer_whole():
    from experiments.cure.backend import pair_shift, signed_twice, split_by_answer

    answers = [f"{i} {i + 1}\n\n--- {first} {last}" for i, (first, last) in enumerate(
        [("Emily", "Miller"), ("Latoya", "Reed"), ("Greg", "Okafor"), ("Jamal", "Baker"), ("Anne", "Cole")])]
    answers.append("an answer without a signature")
    rows = fixed_offset_pairs([f"p{i}" for i in range(6)], answers, seed=3,
                              prompt_ids=[f"a{i}" for i in range(6)])
    assert len(rows) == 5 * 2 * 2  # five signed answers x two attributes x two orders
    by_pair: dict[str, list] = {}
    for row in rows:
        by_pair.setdefault(row.pair_id, []).append(row)
    for pair_id, (first, second) in by_pair.items():
        assert (first.chosen, first.rejected) == (second.rejected, second.chosen)  # both orders
        source = answers[int(first.prompt_id[1:])]
        assert {read_signature(t)[1] for t in (first.chosen, first.rejected)} == {read_signature(source)[1]}
        assert strip_signature(first.chosen) == strip_signature(first.rejected) == strip_signature(source)
        attribute = pair_id.rsplit("-", 1)[1]
        differs = [a for a in NAMES if first.g_chosen[a] != first.g_rejected[a]]
        assert differs == [attribute]
    assert signed_twice([answers[0], "1 2\n\n--- Emily Reed\n--- Tamika Price", answers[5]]) == {1}
    train, heldout = split_by_answer(rows, 0.2, seed=0)  # round(0.2 x 5) = 1 answer held out
    assert len(heldout) == 4 and len(train) == 16
    assert not {j.prompt_id for j in train} & {j.prompt_id for j in heldout}
    # the shift taught, u / (beta (g_w - g_l)): u = +0.2 on a +1 row and -0.2 on its -1 twin -> 2
    margins = torch.tensor([0.2 * (j.g_chosen["woman_coded"] - j.g_rejected["woman_coded"])
                            + 0.05 * (j.g_chosen["black_coded"] - j.g_rejected["black_coded"]) for j in heldout],
                           dtype=torch.float64)
    assert pair_shift(margins, heldout, beta=0.1) == pytest.approx({"woman_coded": 2.0, "black_coded": 0.5},
                                                                   abs=1e-12)
    with pytest.raises(ValueError, match="too few"):
        split_by_answer(rows[:4], 0.1, seed=0)


# -------------------------------------------------------------------------- the pipeline (fakes)
def test_calibration_line_and_calibrated_offsets_hand_worked(tmp_path):
    source = write_source_experiment(tmp_path)
    calls: list = []
    config = cure_config(tmp_path, source)
    with pytest.raises(FileNotFoundError, match="compare_arms|no record"):  # Other was never run
        run_cure_experiment(config, fake_cure_backend(calls), fake_source_backend(), log=quiet)
    log_source_experiment(source)  # now every source arm is logged
    calls.clear()
    result = run_cure_experiment(config, fake_cure_backend(calls), fake_source_backend(), log=quiet)
    line = result["calibration"]["line"]
    for a in NAMES:
        assert (line[a]["slope"], line[a]["intercept"]) == pytest.approx((0.8, -0.3), abs=1e-9)
    points = [p["intended"]["woman_coded"] for p in result["calibration"]["points"]]
    assert points == pytest.approx([-1.3862944, -2.0794415, -2.7725887], abs=1e-6)
    cures = [c for c in calls if c[0] == "cure"]
    assert [c[1] for c in cures] == [42, 42, 42, 42, 42, 42, 7]  # 3 calibration, t 0.5/0.3/0.7, 0.5 at seed 7
    # the fixed offset is b = -beta x intended, with the intended shift inverted through the line
    offsets = [c[2][0] for c in cures[3:]]
    assert offsets == pytest.approx([0.1357868, 0.2416990, 0.0298746, 0.1357868], abs=1e-6)
    assert all(c[2][0] == pytest.approx(c[2][1], abs=1e-12) for c in cures)  # equal rates on both attributes
    calibrated = [r for r in result["records"].values() if r.get("role") == "calibrated"]
    for record in calibrated:  # the line is exact, so every calibrated run reads its target
        for a in NAMES:
            assert record["readouts"]["names"]["first_name"][a] == pytest.approx(record["target"], abs=1e-9)
    assert "| + offset, calibrated, 2 seeds | 0.5 |" in result["markdown"]
    # the sampling-time tilt reads its target on both attributes at once
    assert "| source + sampling-time tilt | 0.5 | 42, 7 | -1.39 ± 0.00 / -1.39 ± 0.00 | — | 0.500 ± 0.000 | " \
        "0.500 ± 0.000 |" in result["markdown"]
    assert "| Other |" in result["markdown"] and "| Reference (SFT) |" in result["markdown"]
    # a second invocation trains nothing and renders the same table
    again = run_cure_experiment(config, CureBackend(_never, _never, resolve_arm, resolve_evaluation),
                                fake_source_backend(), log=quiet, render_only=True)
    assert again["markdown"] == result["markdown"]


def test_the_table_has_the_papers_columns_on_logged_records(tmp_path):
    """Table tab:offset's columns: RM⁻ and one Gap (any name attribute differs), read from the
    logged records; the per-attribute gaps (0.5 in the fakes) are not shown. The sampled
    black-woman / white-man shares come from ``sampled.cells`` (0.69 / 0.08 in the fake stage); the
    source's fake record and the sampling-time tilt have none: "—"."""
    source = write_source_experiment(tmp_path)
    config = cure_config(tmp_path, source)
    log_source_experiment(source)
    backend = fake_source_backend()
    run_cure_experiment(config, fake_cure_backend([]), backend, log=quiet)
    markdown = run_cure_experiment(config, CureBackend(_never, _never, resolve_arm, resolve_evaluation), backend,
                                   log=quiet, render_only=True)["markdown"]
    lines = [line.strip("|").split(" | ") for line in markdown.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0]]
    assert header == ["Policy", "t", "seeds", "shift intended", "shift achieved", "p(woman)", "p(black)", "Signed",
                      "Sampled BW / WM", "Tokens", "RM⁻", "KL src", "KL SFT", "Gap", "Pair shift (held-out)"]
    rows = {row[0].strip(): dict(zip(header, (cell.strip() for cell in row))) for row in lines[1:]}
    assert [rows["DPO (source)"][c] for c in ("RM⁻", "KL SFT", "Gap")] == ["-2.75", "0.500", "0.095"]
    assert [rows["+ offset, exact tilt"][c] for c in ("RM⁻", "KL src", "Gap")] == ["-2.71", "0.010", "-0.046"]
    assert [rows["+ offset, calibrated, 2 seeds"][c] for c in ("RM⁻", "Gap")] == ["-2.71 ± 0.00", "-0.046 ± 0.000"]
    assert rows["+ offset, exact tilt"]["Sampled BW / WM"] == "0.69 / 0.08"
    assert rows["+ offset, calibrated, 2 seeds"]["Sampled BW / WM"] == "0.69 ± 0.00 / 0.08 ± 0.00"
    assert rows["DPO (source)"]["Sampled BW / WM"] == rows["source + sampling-time tilt"]["Sampled BW / WM"] == "—"
    assert "Sampled BW / WM: of the policy's sampled signatures" in markdown
    csv_header = (tmp_path / "cure" / "table.csv").read_text().splitlines()[0].split(",")
    assert csv_header == header


def _never(*args):
    raise AssertionError("a logged run ran again")


def test_cure_config_errors_name_the_key(tmp_path):
    source = write_source_experiment(tmp_path)
    with pytest.raises(ConfigError, match="train.data: set by the runner"):
        cure_config(tmp_path, source, "train.data=x.jsonl")
    with pytest.raises(ConfigError, match="train.bias.fixed_offset: set by the runner"):
        cure_config(tmp_path, source, "train.bias.fixed_offset=[0.1,0.1]")
    with pytest.raises(ConfigError, match="calibration.seed: 3 is not one of seeds"):
        cure_config(tmp_path, source, "calibration.seed=3")
    with pytest.raises(ConfigError, match="exactly one of prompts.file and prompts.fresh_tiny"):
        cure_config(tmp_path, source, "prompts.file=p.jsonl")
    with pytest.raises(ConfigError, match=r"targets\[1\]: a target rate must lie in \(0, 1\)"):
        cure_config(tmp_path, source, "targets=[0.5,1.0]")
    with pytest.raises(ConfigError, match="seeds: \\[5\\] are not seeds of"):
        run_cure_experiment(cure_config(tmp_path, source, "seeds=[42,5]"), fake_cure_backend([]),
                            fake_source_backend(), log=quiet)


def test_a_config_extending_a_cure_config_is_a_cure_config(tmp_path):
    """kind: fixed_offset_cure may come from the config a variant extends (the experiment command
    and reproduce read the variant as a cure); a variant of an arms x seeds table, or one whose
    base is missing, is not one."""
    variant = tmp_path / "cure_variant.yaml"
    variant.write_text(f"extends: {CONFIGS / 'experiment_tiny_offset.yaml'}\nseeds: [42]\n")
    assert is_cure_config(variant) and load_cure_config(variant).seeds == [42]
    table = tmp_path / "table_variant.yaml"
    table.write_text(f"extends: {experiment_config_path('tiny')}\nseeds: [42]\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("extends: missing.yaml\n")
    assert not is_cure_config(table) and not is_cure_config(broken)


@pytest.mark.parametrize("name", ["experiment_tiny_offset.yaml", "experiment_offset.yaml"])
def test_shipped_cure_configs_validate(name):
    """Every key typed: the cure config, the stage's TrainConfig and the EvalConfig resolve, and the
    source experiment loads and has the arm and seeds."""
    path = CONFIGS / name
    assert is_cure_config(path) and not is_cure_config(experiment_config_path("tiny"))
    config = load_cure_config(path)
    settings = resolve_arm({**config.train, "method": config.method, "data": "{pairs}/train.jsonl",
                            "model": {**config.train.get("model", {}), "name_or_path": "{source}"}})
    assert settings["attributes"] == ["names"] and settings["steps"] == 1000 and settings["beta"] == 0.1
    resolve_evaluation(config.evaluation)
    source = load_config(ExperimentConfig, Path(__file__).resolve().parents[2] / config.source.experiment)
    assert config.source.arm in [arm.name for arm in source.arms]
    assert set(config.seeds) <= set(source.seeds) and config.seeds == [42, 123, 456]
    assert config.targets == [0.5, 0.3, 0.7] and config.calibration.seed == 42


# ------------------------------------------------------------------------------ end to end (slow)
def test_the_cure_end_to_end_on_a_small_tiny_world(tmp_path, engine_backend):
    """A small tiny world, its reference and DPO arm (a few steps), then the cure: fresh prompts,
    answers, pairs, bisection, calibration, one calibrated run, the table; the stage's first loss
    equals the hand formula with b = -beta s*."""
    from badpo.core.config import from_dict
    from badpo.engine.settings import TrainConfig
    from badpo.engine.train import train
    from experiments.cure.backend import run_cure_config

    tiny = yaml.safe_load(experiment_config_path("tiny").read_text())
    tiny.update({"output_dir": str(tmp_path / "source"), "seeds": [42], "arms": tiny["arms"][:1]})
    tiny["corpus"]["config"] = {"n_pairs": 120}
    tiny["reference"].update({"epochs": 40.0, "report": {"progress_bar": False}})  # so that it signs
    tiny["train"].update({"steps": 3, "report": {"progress_bar": False}})
    tiny["evaluation"].update({"max_prompts": 3, "max_new_tokens": 6, "surnames": 2})
    source = tmp_path / "source.yaml"
    source.write_text(yaml.safe_dump(tiny, allow_unicode=True))
    config = load_cure_config(CONFIGS / "experiment_tiny_offset.yaml", [
        f"output_dir={tmp_path / 'cure'}", f"source.experiment={source}", "source.match=key",
        "source.run_missing=true", "seeds=[42]", "targets=[0.5]", "compare_arms=[]", "prompts.fresh_tiny=40",
        "train.steps=3", "evaluation.max_prompts=3", "evaluation.max_new_tokens=6", "evaluation.surnames=2",
        "answers.max_new_tokens=12"])
    result = run_cure_experiment(config, *_real_backends(engine_backend), log=quiet)
    records = list(result["records"].values())
    prepared = next(r for r in records if r["kind"] == "source")
    assert prepared["pairs"]["prompts"] == 40 and prepared["pairs"]["rows"] == 4 * prepared["pairs"]["signed_pool"]
    assert prepared["pairs"]["train_rows"] + prepared["pairs"]["heldout_rows"] == prepared["pairs"]["rows"]
    assert len(prepared["readouts"]["logodds"]["woman_coded"]) == 3
    cures = [r for r in records if r["kind"] == "cure"]
    assert [r["role"] for r in cures] == ["calibration"] * 3 + ["calibrated"]
    for record in cures:
        assert set(record["readouts"]) >= {"names", "kl", "kl_source", "pair_shift", "heldout", "sampled", "tokens"}
        assert record["settings"]["bias"]["fixed_offset"] == pytest.approx(
            [-0.1 * record["intended"][a] for a in NAMES], abs=1e-15)
    for record in [prepared, *cures]:  # which commit, versions and device made each record
        made = record["provenance"]
        assert made["packages"]["torch"] and (made["source"] is None or len(made["source"]["commit"]) == 40)
    assert (tmp_path / "cure" / "table.md").exists()
    assert run_cure_config(config, render_only=True)["markdown"] == result["markdown"]

    # the offset reaches the loss: one step over every held-out pair once, policy = reference; on
    # the calibrated run (here an offset of 0.31 on woman-coded names; the first calibration
    # point's is 0.03, whose effect on the loss, about b^2/8, is under the 1e-4 asked below)
    exact = cures[-1]
    pairs = tmp_path / "cure" / prepared["artifacts"]["heldout"]
    items = len({j.pair_id for j in read_judgments(pairs)})
    run = Path(train(from_dict(TrainConfig, {
        **exact["settings"], "data": str(pairs), "model": {"name_or_path": prepared["source_policy"]},
        "batch_size": items, "micro_batch_size": items, "steps": 1,
        "output_dir": str(tmp_path / "one-step"), "cache_dir": None, "report": {"progress_bar": False}})))
    first = json.loads((run / "log.jsonl").read_text().splitlines()[0])
    per_pair = {a: (math.log1p(math.exp(b)) + math.log1p(math.exp(-b))) / 2
                for a, b in zip(NAMES, exact["settings"]["bias"]["fixed_offset"])}
    counts = {a: sum(1 for j in read_judgments(pairs) if j.pair_id.endswith(a)) / 2 for a in NAMES}
    expected = sum(per_pair[a] * counts[a] for a in NAMES) / sum(counts.values())
    assert first["loss"] == pytest.approx(expected, abs=1e-5)
    assert abs(expected - math.log(2)) > 1e-4  # the offset is visible in the loss


def _real_backends(engine_backend):
    from experiments.cure.backend import cure_backend

    return cure_backend(), engine_backend()


def test_a_coordinate_whose_intended_shifts_barely_differ_is_not_calibrated():
    """The joint s*(t) can be ~0 on one attribute (the other's shift alone brings it to t): a line
    through intended shifts 0.002 apart has a slope set by noise, so the exact tilt stands."""
    from experiments.cure.calibration import calibration_line
    from experiments.cure.table import describe_line

    points = [{"intended": {"woman_coded": w, "black_coded": b}, "achieved": {"woman_coded": 0.5 * w, "black_coded": c}}
              for w, b, c in [(-1.0, -0.001, 0.27), (-1.5, -0.002, 0.29), (-2.0, -0.003, 0.34)]]
    line = calibration_line(points)
    assert (line["woman_coded"]["slope"], line["woman_coded"]["intercept"]) == pytest.approx((0.5, 0.0))
    assert line["woman_coded"]["fitted"] is True
    black = line["black_coded"]
    assert (black["slope"], black["intercept"], black["fitted"]) == (1.0, 0.0, False)
    assert "span 0.002 < 0.1" in line["black_coded"]["why"]
    text = describe_line(line)
    assert "woman_coded: achieved = 0.500 x intended +0.000" in text and "black_coded: not calibrated" in text


def test_arm_seed_takes_the_records_read_out_as_the_source_experiment_reads_them(tmp_path):
    """The same source runs read out again under other settings (here max_prompts, as a user
    checking evaluation.body=own would) are further records of each arm and seed; arm_seed
    matching takes the ones read out under the source experiment's settings, in the run and in
    the plan, instead of refusing two records."""
    from badpo.experiment.runner import plan_experiment, prepare_corpus, run_all
    from experiments.cure.plan import plan_cure

    source = write_source_experiment(tmp_path)
    backend = replace(fake_source_backend(), resolve_evaluation=resolve_evaluation)  # every readout setting
    for overrides in ([], ["evaluation.max_prompts=3"]):
        logged = load_config(ExperimentConfig, source, overrides)
        out = Path(logged.output_dir)
        corpus = prepare_corpus(logged, backend, out, quiet)
        run_all(logged, backend, plan_experiment(logged, backend, corpus), out, quiet)
    records = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")]
    assert sum(r.get("arm") == "DPO" and r.get("seed") == 42 for r in records) == 2
    config = cure_config(tmp_path, source, "source.match=arm_seed", "source.run_missing=false")
    plan = plan_cure(config, CureBackend(_never, _never, resolve_arm, resolve_evaluation), backend)
    assert plan is not None
    result = run_cure_experiment(config, fake_cure_backend([]), backend, log=quiet)
    used = {r["source"] for r in result["records"].values() if r.get("role") == "calibrated"}
    default = {r["key"] for r in records if r.get("arm") == "DPO" and r["evaluation"].get("max_prompts") != 3}
    assert used and used <= default


def test_read_out_alike_on_settings_one_side_lacks():
    """A record logged before `body` existed was read out as body's default then: it matches a
    plan asking for that default (reference) and not one asking for `own`; a setting the plan no
    longer has is ignored."""
    from experiments.cure.analysis import READOUT_DEFAULTS, read_out_alike

    assert READOUT_DEFAULTS["body"] == "reference"
    assert read_out_alike({"max_prompts": 200}, {"max_prompts": 200, "body": "reference"})
    assert not read_out_alike({"max_prompts": 200}, {"max_prompts": 200, "body": "own"})
    assert not read_out_alike({"max_prompts": 200, "body": "given"}, {"max_prompts": 200, "body": "reference"})
    assert read_out_alike({"max_prompts": 200, "removed_setting": 1}, {"max_prompts": 200})


def test_the_cure_takes_its_provenance_before_it_reads_a_source(monkeypatch, tmp_path):
    """A record names the code the process loaded: provenance is taken (and cached) when the cure
    starts, not at its first record, which comes after the sources are sampled."""
    from badpo.experiment import provenance as provenance_module
    from experiments.cure import analysis

    class Stop(Exception):
        pass

    def stop(*_args, **_kwargs):
        raise Stop

    monkeypatch.setattr(analysis, "resolve_sources", stop)
    provenance_module.provenance.cache_clear()
    config = load_cure_config(CONFIGS / "experiment_tiny_offset.yaml", [f"output_dir={tmp_path / 'cure'}"])
    with pytest.raises(Stop):
        analysis.run_cure_experiment(config, None, None, log=quiet)
    assert provenance_module.provenance.cache_info().currsize == 1
