"""A run is identified by its data's content, not only by the path its config names (issue 21,
item 4): after the file is regenerated in place (every label flipped), ``sft``, ``train`` and
``rm`` refuse the folder as they refuse another config, and ``overwrite=true`` trains again; an
unchanged file is not read twice; the sweep's keys change with data outside its corpus."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest

from badpo.cli import main
from badpo.core.config import ConfigError, apply_overrides, from_dict, load_config
from badpo.engine.settings import RMConfig, SFTConfig, TrainConfig
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from badpo.experiment.runner import Backend, plan_experiment, prepare_corpus
from fixtures.engine import judgment_rows, write_jsonl
from fixtures.experiment import fake_backend, quiet

DATA_FILE = "data_fingerprint.json"  # badpo.run_folder.layout.DATA_FILE
COMMON = {"runtime": {"num_threads": 1}, "report": {"progress_bar": False},
          "optim": {"lr": 1e-3, "warmup_ratio": 0.0, "schedule": "constant"}}
STAGES = {
    "train": (TrainConfig, {"method": "ba_dpo_shared_mean", "attributes": ["given:signed"], "steps": 2,
                            "batch_size": 8, "micro_batch_size": 8}),
    "rm": (RMConfig, {"variant": "shared_mean", "attributes": ["given:signed"], "steps": 2, "batch_size": 8,
                      "micro_batch_size": 8}),
    "sft": (SFTConfig, {"source": "judgments", "epochs": 1.0, "batch_size": 6, "micro_batch_size": 6}),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("data_identity")
    save_model_dir(root / "model")
    return root


def flipped(rows: list[dict]) -> list[dict]:
    return [{**r, "chosen": r["rejected"], "rejected": r["chosen"], "g_chosen": r["g_rejected"],
             "g_rejected": r["g_chosen"]} for r in rows]


def stage_cli(world: Path, stage: str, name: str, *overrides: str) -> list[str]:
    config_class, settings = STAGES[stage]
    base = {**COMMON, **settings, "data": str(world / f"{name}.jsonl"),
            "model": {"name_or_path": str(world / "model")}, "output_dir": str(world / name)}
    if stage == "train":
        base["cache_dir"] = str(world / "cache")
    path = world / f"{name}-{len(overrides)}.yaml"
    path.write_text(json.dumps(dataclasses.asdict(from_dict(config_class, apply_overrides(base, list(overrides))))))
    return [stage, "-c", str(path)]


@pytest.mark.parametrize("stage", ["sft", "train", "rm"])
def test_data_changed_in_place_is_refused_like_another_config(world, stage, cli_error, capsys):
    data = write_jsonl(world / f"{stage}.jsonl", judgment_rows())
    out = world / stage
    assert main(stage_cli(world, stage, stage)) == 0
    sha256 = hashlib.sha256(data.read_bytes()).hexdigest()
    os.utime(data)  # touched, same bytes: the same run, kept
    assert main(stage_cli(world, stage, stage)) == 0
    assert "finished" in capsys.readouterr().err
    kept = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"}
    write_jsonl(data, flipped(judgment_rows()))  # every label flipped, same path
    line = cli_error(stage_cli(world, stage, stage))
    assert f"output_dir: {out} holds a run on other data: the content of {data} changed since that run " \
           f"read it (sha256 {sha256[:12]} -> " in line
    assert "set overwrite=true to delete that run and train on the data as it is now" in line
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"} == kept
    assert json.loads((out / DATA_FILE).read_text())["sha256"] == sha256
    assert main(stage_cli(world, stage, stage, "overwrite=true")) == 0
    assert json.loads((out / DATA_FILE).read_text())["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()


def test_a_checkpoint_of_a_run_on_other_data_is_not_resumed(world, capsys):
    from badpo.engine.checkpoint import list_checkpoints
    from badpo.engine.train import train

    data = write_jsonl(world / "resume.jsonl", judgment_rows())
    config = load_config(TrainConfig, None, [f"data={data}", f"model.name_or_path={world / 'model'}",
                                             "attributes=[given:signed]", "method=ba_dpo_shared_mean",
                                             "steps=3", "stop_after_steps=1", "batch_size=8",
                                             "micro_batch_size=8", "runtime.num_threads=1",
                                             f"cache_dir={world / 'cache'}", "report.progress_bar=false",
                                             f"output_dir={world / 'resume'}"])
    checkpoint = list_checkpoints(train(config))[-1]
    write_jsonl(data, flipped(judgment_rows()))
    resumed = dataclasses.replace(config, stop_after_steps=None, resume_from=str(checkpoint),
                                  output_dir=str(world / "resume-elsewhere"))
    with pytest.raises(ConfigError, match=r"resume_from: .*step-000001 holds a run on other data"):
        train(resumed)
    with pytest.raises(ConfigError, match=r"output_dir: .*resume holds a run on other data"):
        train(dataclasses.replace(config, stop_after_steps=None, resume_from="latest"))
    assert not (world / "resume-elsewhere").exists()  # the refused run left nothing


def test_an_unchanged_file_is_hashed_once(tmp_path, monkeypatch):
    from badpo.data import fingerprint

    data = tmp_path / "big.bin"
    data.write_bytes(os.urandom(3 << 20))
    first = fingerprint.data_fingerprint(str(data))
    monkeypatch.setattr(fingerprint, "_MEMO", {})  # a new process: only the record is known
    monkeypatch.setattr(fingerprint, "file_sha256", lambda path: pytest.fail("an unchanged file was read"))
    assert fingerprint.data_fingerprint(str(data), known=first) == first
    data.write_bytes(os.urandom(3 << 20))
    monkeypatch.undo()
    assert fingerprint.data_fingerprint(str(data), known=first)["sha256"] != first["sha256"]


def test_the_sweep_keys_a_run_by_the_content_of_data_outside_its_corpus(tmp_path):
    from badpo.experiment.backend import check_data, data_key, resolve_arm, resolve_reference

    outside = write_jsonl(tmp_path / "mine.jsonl", judgment_rows())

    def plan(*overrides: str):
        config = load_config(ExperimentConfig, experiment_config_path("tiny"),
                             [f"output_dir={tmp_path / 'sweep'}", *overrides])
        fake = fake_backend([])
        backend = Backend(fake.build_corpus, resolve_reference, resolve_arm, fake.run_reference, fake.run_arm,
                        check_data=lambda settings, kind: None, data_fingerprint=data_key)
        return plan_experiment(config, backend, prepare_corpus(config, backend, tmp_path / "sweep", quiet))

    corpus_keys = [run.key for run in plan().runs]
    assert "data" not in plan().runs[0].keyed  # corpus data is keyed by the corpus: keys as before
    before = [run.key for run in plan(f"train.data={outside}").runs]
    assert set(before).isdisjoint(corpus_keys) and plan(f"train.data={outside}").runs[0].keyed["data"]
    write_jsonl(outside, flipped(judgment_rows()))
    after = [run.key for run in plan(f"train.data={outside}").runs]
    assert set(after).isdisjoint(before)
    assert check_data  # the real check is exercised in test_user_data_errors
