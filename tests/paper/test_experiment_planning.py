"""Planning an experiment against the engine: the shipped configs resolve, the engine's own checks
run before anything trains, readouts are keyed apart from training (a fake backend unless a test
says otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from badpo.core.config import ConfigError, load_config
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from badpo.experiment.pipeline import run_experiment
from badpo.experiment.runner import Backend, plan_experiment, prepare_corpus
from experiments.cure.config import is_cure_config
from fixtures.experiment import fake_backend, make_config, quiet

CONFIGS = Path(__file__).resolve().parents[2] / "experiments" / "configs"


@pytest.mark.parametrize("path", [experiment_config_path("tiny"), *sorted(
    p for p in CONFIGS.glob("experiment_*.yaml") if not is_cure_config(p))],  # cures (extends too): test_cure
                         ids=lambda p: p.name)
def test_shipped_configs_resolve_against_the_engine(path, tmp_path):
    from badpo.experiment.backend import resolve_arm, resolve_reference

    config = load_config(ExperimentConfig, path, [f"output_dir={tmp_path}"])
    calls: list[str] = []
    fake = fake_backend(calls)
    backend = Backend(fake.build_corpus, resolve_reference, resolve_arm, fake.run_reference, fake.run_arm)
    plan = plan_experiment(config, backend, prepare_corpus(config, backend, tmp_path, quiet))
    assert len(plan.runs) == len(config.arms) * len(config.seeds) == len({r.key for r in plan.runs})


def test_the_real_backend_end_to_end_on_a_small_tiny_world(tmp_path, engine_backend, monkeypatch):
    """The shipped tiny config, shrunk: corpus, SFT, three arms at two seeds, readouts, tables;
    then a second invocation finds every run logged and trains nothing. The reference's answers
    are sampled once, by its own readout, and every arm reads them from its record."""
    from badpo.readouts import reading

    sampled = []
    real_generate = reading.generate

    def counted(*args, **kwargs):
        sampled.append(args[-1])  # what: "policy answers" or "reference answers"
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(reading, "generate", counted)
    overrides = [f"output_dir={tmp_path}", "corpus.config.n_pairs=120", "reference.epochs=1.0",
                 "train.steps=3", "seeds=[42,123]", "evaluation.max_prompts=3",
                 "evaluation.max_new_tokens=6", "evaluation.surnames=2",
                 "train.report.progress_bar=false", "reference.report.progress_bar=false"]
    config = load_config(ExperimentConfig, experiment_config_path("tiny"), overrides)
    result = run_experiment(config, engine_backend(), log=quiet)
    records = result["records"]
    assert len(records) == 1 + 3 * 2
    reference = next(r for r in records.values() if r["kind"] == "reference")
    assert sampled.count("reference answers") == 1 and sampled.count("policy answers") == 6
    assert (tmp_path / reference["artifacts"]["samples"]).is_file()
    assert "kl" not in reference["readouts"] and "kl" in reference["readouts"]["omitted"]
    assert (tmp_path / reference["artifacts"]["model"] / "config.json").exists()
    shared = [r for r in records.values() if r["method"] == "ba_dpo_shared_mean"]
    assert all(len(r["theta"]["per_annotator"]) == 60 for r in shared)
    assert all(r["readouts"]["kl"] > -0.05 for r in records.values() if r["kind"] == "arm")
    # the training loop's last logged numbers, under readouts.training (the reference has none)
    for r in records.values():
        if r["kind"] == "arm":
            final = json.loads((tmp_path / r["artifacts"]["run"] / "run.json").read_text())["final"]
            assert r["readouts"]["training"]["loss"] == final["loss"] and "lr" not in r["readouts"]["training"]
    assert "training" not in reference["readouts"]
    # an arm's names.null: its shift from the reference record's per-name shares, on every names readout
    arm = next(r for r in records.values() if r["kind"] == "arm")["readouts"]["names"]
    read = reference["readouts"]["names"]
    assert set(arm["null"]) == {"first_name", "whole_signature", "sampled"} and "null" not in read
    assert arm["null"]["whole_signature"]["black_coded"]["shift"] == pytest.approx(
        arm["whole_signature"]["black_coded"] - read["whole_signature"]["black_coded"], abs=1e-12)
    # and beside its first-name rates per prompt, the reference record's, for compare's intervals
    assert arm["reference"] == {"first_name": read["first_name"], "per_prompt": {"first_name": read["per_prompt"][
        "first_name"]}}
    assert [len(v) for v in arm["per_prompt"]["first_name"].values()] == [3, 3]
    for name in ("table.md", "table.csv", "rates.png", "theta.png"):
        assert (tmp_path / name).stat().st_size > 0
    untouched = fake_backend([])

    def must_not_run(task):
        raise AssertionError(f"{task.key} ran again")

    again = run_experiment(config, Backend(untouched.build_corpus, engine_backend().resolve_reference,
                                          engine_backend().resolve_arm, must_not_run, must_not_run,
                                          corpus_sources=engine_backend().corpus_sources), log=quiet)
    assert again["markdown"] == result["markdown"]


# ------------------------------------------------------------------ readouts keyed apart from training
def test_other_readout_settings_are_new_records_of_the_same_trained_runs(tmp_path):
    """A readout setting is in every record's key but in no training key: re-reading out gives
    ten new records whose runs train in the same work folders (where the engine finds each
    finished run and trains nothing)."""
    seen: dict[str, list[Path]] = {"first": [], "second": []}

    def recording(label):
        backend = fake_backend([])

        def run_reference(task):
            seen[label].append(task.work_dir)
            return backend.run_reference(task)

        def run_arm(task):
            seen[label].append(task.work_dir)
            return backend.run_arm(task)

        return Backend(backend.build_corpus, backend.resolve_reference, backend.resolve_arm, run_reference, run_arm)

    first = run_experiment(make_config(tmp_path), recording("first"), log=quiet)["records"]
    second = run_experiment(make_config(tmp_path, evaluation={"n_prompts": 10}), recording("second"),
                            log=quiet)["records"]
    assert not set(first) & set(second) and len(second) == 10  # every record is new ...
    assert seen["second"] == seen["first"]  # ... read from the same training folders
    assert {r["training_key"] for r in first.values()} == {r["training_key"] for r in second.values()}
    assert all(p.name == r["training_key"] for p, r in zip(seen["first"], first.values()))


def test_a_table_of_a_readout_the_settings_turn_off_is_refused_before_anything_is_built(tmp_path):
    def unavailable(evaluation, metric):
        return "set evaluation.generations: true" if metric == "kl" and not evaluation.get("generations") else None

    calls: list[str] = []
    backend = fake_backend(calls)
    backend = Backend(backend.build_corpus, backend.resolve_reference, backend.resolve_arm, backend.run_reference,
                    backend.run_arm, dict, unavailable)
    with pytest.raises(ConfigError, match=r"tables\[0\].columns\[4\] \(KL\): readout 'kl' is not written "
                                          r"under this experiment's evaluation settings: set evaluation.generations"):
        run_experiment(make_config(tmp_path), backend, log=quiet)
    assert calls == []  # refused before the corpus is built: the plan is checked first, nothing built or trained
    run_experiment(make_config(tmp_path, evaluation={"generations": True}), backend, log=quiet)


def test_the_engines_readout_check_names_the_setting():
    from badpo.readouts.eval_config import EvalConfig
    from badpo.readouts.table import readout_unavailable

    config = EvalConfig(attributes=("names",), whole_signature=False, generations=False)
    assert readout_unavailable(config, "names.first_name.woman_coded") is None
    assert readout_unavailable(config, "votes/black_coded.accuracy") is None
    assert "whole_signature: true" in readout_unavailable(config, "names.whole_signature.woman_coded")
    assert "generations: true" in readout_unavailable(config, "kl")
    # the names analyses: per readout, the setting that writes it
    assert readout_unavailable(config, "names.null.first_name.black_coded.p") is None
    assert readout_unavailable(config, "names.cells.first_name.black_woman") is None
    for metric in ("names.null.whole_signature.black_coded.p", "names.per_name.whole_signature.Emily",
                   "names.cells.whole_signature.black_woman"):
        assert "whole_signature: true" in readout_unavailable(config, metric)
    for metric in ("names.null.sampled.black_coded.p", "sampled.cells.black_woman"):
        assert "generations: true" in readout_unavailable(config, metric)
    assert "'length' is not a declared attribute" in readout_unavailable(config, "heldout.length.gap")
    with_judge = EvalConfig(attributes=("names",), generations=True)
    assert "evaluation.judge" in readout_unavailable(with_judge, "rm")
    assert "markdown is declared" in readout_unavailable(with_judge, "markdown.rate")


@pytest.mark.parametrize("override, error", [
    ("train.beta=-1", r"arms\[0\] \(DPO\): beta: must be > 0, got -1"),
    ("train.bias.lr=0", r"arms\[0\] \(DPO\): bias.lr: must be > 0, got 0"),
    ("train.batch_size=20", r"arms\[0\] \(DPO\): batch_size: 20 is not a multiple of micro_batch_size \(16\)"),
    ("reference.epochs=0", r"reference: epochs: must be > 0, got 0"),
])
def test_the_engines_own_checks_run_when_the_experiment_is_planned(override, error, tmp_path):
    """A value the engine refuses fails before the corpus's reference trains, not at the first arm."""
    from badpo.experiment.backend import resolve_arm, resolve_reference

    config = load_config(ExperimentConfig, experiment_config_path("tiny"), [f"output_dir={tmp_path}", override])
    calls: list[str] = []
    fake = fake_backend(calls)
    backend = Backend(fake.build_corpus, resolve_reference, resolve_arm, fake.run_reference, fake.run_arm)
    with pytest.raises(ConfigError, match=error):
        plan_experiment(config, backend, prepare_corpus(config, backend, tmp_path, quiet))
    assert calls == ["corpus"]  # nothing trained


def test_bad_keys_in_several_sections_are_named_in_one_line(tmp_path):
    """A typo under corpus.config, evaluation, reference and train is one error naming all four
    (the arms that fail alike together), not four runs that each stop at the next one."""
    from badpo.corpora.builders import check_corpus_config
    from badpo.experiment.backend import resolve_arm, resolve_evaluation, resolve_reference

    overrides = [f"output_dir={tmp_path}", "corpus.config.n_pairz=3", "evaluation.max_promptz=3",
                 "reference.epochz=1", "train.bias.initt=zero"]
    config = load_config(ExperimentConfig, experiment_config_path("tiny"), overrides)
    calls: list[str] = []
    fake = fake_backend(calls)
    backend = Backend(fake.build_corpus, resolve_reference, resolve_arm, fake.run_reference, fake.run_arm,
                      resolve_evaluation, check_corpus=check_corpus_config)
    with pytest.raises(ConfigError) as refused:
        plan_experiment(config, backend, prepare_corpus(config, backend, tmp_path, quiet))
    message = str(refused.value)
    arms = ", ".join(f"arms[{i}] ({arm.name})" for i, arm in enumerate(config.arms))
    for part in ("unknown key(s): corpus.config.n_pairz", "evaluation: unknown key(s): max_promptz",
                 "reference: unknown key(s): epochz", f"{arms}: unknown key(s): bias.initt"):
        assert part in message
    assert "\n" not in message and calls == ["corpus"]
    one = load_config(ExperimentConfig, experiment_config_path("tiny"), [f"output_dir={tmp_path}", overrides[2]])
    with pytest.raises(ConfigError, match=r"^evaluation: unknown key\(s\): max_promptz \(known"):
        plan_experiment(one, backend, tmp_path / "corpus")  # one bad section: its message as before


def test_planning_checks_only_what_the_runner_uses():
    """The runner writes the reference into work/<key>/model, so the stage's default output_dir
    (runs/sft) equal to model.name_or_path is not an error when the experiment is planned."""
    from badpo.experiment.backend import resolve_reference

    resolved = resolve_reference({"data": "{corpus}/sft.jsonl", "model": {"name_or_path": "runs/sft"}})
    assert resolved["output_dir"] == resolved["model"]["name_or_path"] == "runs/sft"


# ------------------------------------------------------------------ what only training knows
def test_training_summary_keeps_the_last_steps_numbers_and_drops_the_bookkeeping(tmp_path):
    """Group-DRO's weight spread reaches a table only through this: run.json's final row, its
    top-level numbers without step, lr, elapsed_s and judgments; no run.json, nothing."""
    from badpo.experiment.backend import training_summary

    assert training_summary(tmp_path) == {}
    final = {"step": 1000, "loss": 0.53, "lr": 1e-9, "elapsed_s": 11.5, "judgments": 48, "group_weight_sd": 8.3,
             "group_weight_max": 1, "theta_bar": {"length": 0.0}, "finished": True}
    (tmp_path / "run.json").write_text(json.dumps({"method": "crowd_prefrl", "final": final}))
    assert training_summary(tmp_path) == {"loss": 0.53, "group_weight_sd": 8.3, "group_weight_max": 1.0}
