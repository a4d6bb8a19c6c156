"""The experiment runner's run keys and resume, on a fake backend (no model trains here; the fake
world is in fixtures/experiment.py); its tables are tests/experiment/test_experiment.py's."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from badpo.core.config import ConfigError
from badpo.experiment.pipeline import run_experiment
from badpo.experiment.records import read_records, run_key
from badpo.experiment.runner import plan_experiment, prepare_corpus
from fixtures.experiment import (
    Crash,
    config_dict,
    fake_backend,
    make_config,
    quiet,
)


# ----------------------------------------------------------------------------- resume and keys
def test_crashed_sweep_resumes_with_only_the_missing_keys(tmp_path):
    calls: list[str] = []
    with pytest.raises(Crash):
        run_experiment(make_config(tmp_path), fake_backend(calls, crash_at=5), log=quiet)
    logged = set(read_records(tmp_path / "runs"))
    assert len(logged) == 1 + 4  # the reference and the four arm runs before the crash
    crashed = calls[-1]
    assert crashed not in logged  # a run is logged only once it has finished
    assert not [p for p in (tmp_path / "runs").iterdir() if p.suffix != ".json"]

    again: list[str] = []
    result = run_experiment(make_config(tmp_path), fake_backend(again), log=quiet)
    assert "corpus" not in again  # the corpus is built once
    assert again[0] == crashed and len(again) == 9 - 4  # the crashed run and the four never started
    assert not set(again) & logged  # nothing is run twice
    assert set(read_records(tmp_path / "runs")) == set(result["records"])

    third: list[str] = []
    run_experiment(make_config(tmp_path), fake_backend(third), log=quiet)
    assert third == []


def test_a_record_is_written_only_after_the_run_and_atomically(tmp_path, monkeypatch):
    import badpo.experiment.runner as runner

    real_replace = os.replace

    def failing_replace(src, dst):
        if Path(dst).parent.name == "runs":
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(runner.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    assert list((tmp_path / "runs").glob("*.json")) == []  # only a hidden temporary, never read
    monkeypatch.undo()
    calls: list[str] = []
    run_experiment(make_config(tmp_path), fake_backend(calls), log=quiet)
    assert len([c for c in calls if c != "corpus"]) == 10  # the reference and nine arm runs


def test_key_is_sha256_of_canonical_json_and_stable_across_processes():
    params = {"b": 1, "a": [1.5, "x"], "optim": {"lr": 5e-7}}
    text = '{"method":"dpo","params":{"a":[1.5,"x"],"b":1,"optim":{"lr":5e-07}},"seed":42}'
    expected = "dpo-seed42-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    assert run_key("dpo", params, 42, device="cpu") == expected  # the CPU class adds nothing
    script = ("from badpo.experiment.records import run_key; "
              "print(run_key('dpo', {'optim': {'lr': 5e-7}, 'a': [1.5, 'x'], 'b': 1}, 42, device='cpu'))")
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                env=env, check=True).stdout.strip()
        assert output == expected


def _keys(tmp_path: Path, **changes) -> dict[tuple[str, int], str]:
    config = make_config(tmp_path, **changes)
    backend = fake_backend([])
    plan = plan_experiment(config, backend, prepare_corpus(config, backend, tmp_path, quiet))
    return {(r.arm, r.seed): r.key for r in plan.runs} | {("reference", 0): plan.reference.key}


def test_key_changes_with_any_parameter_and_only_then(tmp_path):
    base = _keys(tmp_path)
    assert len(set(base.values())) == 10
    arms = config_dict(tmp_path)["arms"]
    renamed = [{**arms[0], "name": "Plain DPO"}, *arms[1:]]
    same = _keys(tmp_path, arms=renamed, baseline="Plain DPO", tables=[])
    assert sorted(same.values()) == sorted(base.values())  # a row label is not a parameter
    assert _keys(tmp_path, output_dir=str(tmp_path))  # (same folder, same corpus)

    def changed(**changes) -> set[str]:
        return set(_keys(tmp_path, **changes).values()) - set(base.values())

    assert len(changed(train={"model": "{reference}", "beta": 0.2})) == 9  # every arm, not the reference
    assert len(changed(train={"model": "{reference}", "beta": 0.1, "optim": {"lr": 1e-6}})) == 6
    assert len(changed(reference={"steps": 4})) == 10  # a new reference changes every arm's key
    assert len(changed(evaluation={"n_prompts": 10})) == 10
    arm_params = [*arms[:2], {**arms[2], "params": {"optim.lr": 1e-6}}]
    assert len(changed(arms=arm_params)) == 3  # the one arm, at its three seeds
    assert len(changed(seeds=[42, 123, 457])) == 3


def test_two_arms_that_are_one_run_and_runner_owned_keys_are_errors(tmp_path):
    arms = config_dict(tmp_path)["arms"]
    twin = [*arms, {"name": "DPO again", "method": "dpo"}]
    with pytest.raises(ConfigError, match=r"arms\[3\] \(DPO again\): the same method and settings as arms\[0\]"):
        _keys(tmp_path, arms=twin)
    with pytest.raises(ConfigError, match=r"arms\[1\].params.runtime.seed: set by the runner"):
        make_config(tmp_path, arms=[arms[0], {**arms[1], "params": {"runtime": {"seed": 1}}}])
    with pytest.raises(ConfigError, match=r"train.output_dir: set by the runner"):
        make_config(tmp_path, train={"output_dir": "x"})
    with pytest.raises(ConfigError, match=r"baseline: 'GRPO' is not an arm"):
        make_config(tmp_path, baseline="GRPO")


def test_a_corpus_built_from_another_config_is_refused(tmp_path):
    run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    with pytest.raises(ConfigError, match="was built from"):
        run_experiment(make_config(tmp_path, corpus={"builder": "fake", "config": {"n_pairs": 11}}),
                       fake_backend([]), log=quiet)


def test_an_experiment_arm_with_fsdp_is_refused_by_what_the_runner_does():
    """The runner trains each arm in one process and resumes it from checkpoints (resume_from, a key
    it owns): fsdp there is refused for that reason, not through a key the user cannot set."""
    from badpo.experiment.backend import resolve_arm

    with pytest.raises(ConfigError, match="^fsdp: an experiment trains each arm in one process"):
        resolve_arm({"fsdp": True, "resume_from": "latest"})


def test_the_corpus_fingerprint_follows_the_data_not_the_build_timings(tmp_path):
    """smol-multipref writes timings.json into its world; a rebuild of the same world must keep its
    runs' keys (the timings entered the fingerprint, and every arm ran again)."""
    from badpo.experiment.runner import corpus_fingerprint

    world = tmp_path / "corpus"
    world.mkdir()
    (world / "train.jsonl").write_text('{"prompt": "q"}\n')
    (world / "timings.json").write_text('{"sampling_s": 61.2}\n')
    first = corpus_fingerprint(world)
    (world / "timings.json").write_text('{"sampling_s": 75.9}\n')
    assert corpus_fingerprint(world) == first
    (world / "train.jsonl").write_text('{"prompt": "q2"}\n')
    assert corpus_fingerprint(world) != first
