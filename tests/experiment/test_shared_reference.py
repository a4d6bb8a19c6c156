"""The reference's values an experiment computes once per world and shares between its arms (its
log-probs on the training judgments, per token included, and its side of the held-out margins, in
OUT/reference_cache): an experiment's records are the same bytes whether its arms read them cold,
warm or not at all (issue 50, item 1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from badpo.core.config import load_config
from badpo.experiment import backend
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from badpo.experiment.pipeline import run_experiment
from fixtures.experiment import quiet

ARMS = ("arms=[{name: DPO, method: dpo}, {name: SamPO, method: sampo}, "
        "{name: 'BA-DPO (shared mean)', method: ba_dpo_shared_mean}]")


def _readouts(out: Path) -> dict[str, str]:
    """Each record's readouts and theta as canonical JSON (what a table is made of)."""
    records = {}
    for path in sorted((out / "runs").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        records[path.name] = json.dumps({"readouts": record["readouts"], "theta": record["theta"]}, sort_keys=True)
    return records


def _forget_arms(out: Path) -> None:
    """Delete every arm's record and training folder: the next run trains and reads them again
    (the corpus and the reference, trained once, stay)."""
    for path in (out / "runs").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record["kind"] == "arm":
            shutil.rmtree(out / "work" / record["training_key"])
            path.unlink()


def test_records_are_the_same_bytes_with_cold_warm_and_no_shared_reference_values(tmp_path, engine_backend,
                                                                                   monkeypatch):
    out = tmp_path / "experiment"
    overrides = [f"output_dir={out}", "corpus.config.n_pairs=120", "reference.epochs=1.0", "train.steps=2",
                 "seeds=[42]", "evaluation.max_prompts=3", "evaluation.max_new_tokens=6", "evaluation.surnames=2",
                 "evaluation.whole_signature_prompts=2", "train.report.progress_bar=false",
                 "reference.report.progress_bar=false", ARMS]
    config = load_config(ExperimentConfig, experiment_config_path("tiny"), overrides)
    run_experiment(config, engine_backend(), log=quiet)
    cold = _readouts(out)
    # one reference pass on the training judgments serves DPO, SamPO (per token) and BA-DPO; one
    # held-out pass serves the three arms' margins
    assert len(list((out / "reference_cache").glob("*.safetensors"))) == 2
    assert all("heldout" in json.loads(text)["readouts"] for name, text in cold.items()
               if not name.startswith("reference"))

    _forget_arms(out)
    with monkeypatch.context() as patch:  # warm: every arm reads what the first run left, writes nothing
        patch.setattr("badpo.engine.cache.write_cached", lambda *args: pytest.fail("computed again"))
        run_experiment(config, engine_backend(), log=quiet)
    assert _readouts(out) == cold

    _forget_arms(out)
    shutil.rmtree(out / "reference_cache")
    with monkeypatch.context() as patch:  # nothing shared: every arm computes the reference's values itself
        patch.setattr(backend, "reference_cache", lambda task: None)
        run_experiment(config, engine_backend(), log=quiet)
    assert _readouts(out) == cold and not (out / "reference_cache").exists()
