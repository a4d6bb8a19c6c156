"""A run's key holds the class of device it trains on (issue 37 item 7): ``cpu`` adds nothing to the
hash, so every committed CPU record keeps its key; ``cuda`` (or ``mps``) is mixed in, so a GPU record
of the same settings is another run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from badpo.experiment import provenance as provenance_module
from badpo.experiment import records
from badpo.experiment.records import keyed_settings, read_records, run_key
from badpo.experiment.runner import plan_experiment, prepare_corpus
from fixtures.experiment import fake_backend, make_config, quiet

RESULTS = Path(__file__).resolve().parents[2] / "results"
COMMITTED = sorted(RESULTS.glob("*/runs"))


def identities(record: dict, records: dict[str, dict]) -> tuple[str, dict, dict]:
    """(name, keyed, trained) of a committed record, as the plan made them from its settings (its
    data inside its corpus: keyed by the corpus's fingerprint alone)."""
    trained = {"settings": keyed_settings(record["settings"]), "corpus": record["corpus"]}
    if record["kind"] == "arm":
        trained["reference"] = records[record["reference"]]["training_key"]
    name = "reference" if record["kind"] == "reference" else record["method"]
    return name, {**trained, "evaluation": record["evaluation"]}, trained


def test_there_are_committed_records_to_check():
    assert {folder.parent.name for folder in COMMITTED} >= {"demo", "smol_cpu", "smol_default", "smol_gpu"}


@pytest.mark.parametrize("runs", COMMITTED, ids=lambda folder: folder.parent.name)
def test_every_committed_record_is_keyed_by_the_device_it_was_made_on(runs):
    """Each record's key and training key recompute from its own settings with the device class its
    provenance names: a CPU record keeps the key it was made under (no logged CPU run re-runs), and
    results/smol_gpu's H100 records carry cuda keys (re-keyed by experiments/scripts/reconstruct_provenance.py),
    so no CPU run can reuse one."""
    records = read_records(runs)
    for key, record in records.items():
        name, keyed, trained = identities(record, records)
        made_on = record["provenance"]["device"]["kind"]
        assert run_key(name, keyed, record["seed"], device=made_on) == key
        assert run_key(name, trained, record["seed"], device=made_on) == record["training_key"]
        assert (made_on == "cuda") == (runs.parent.name == "smol_gpu"), key


def test_every_committed_record_names_its_commit_device_and_threads():
    """Issue 49: each run record under results/ carries the commit, the device kind and the threads
    it ran with, or says which of them were reconstructed after the fact and how."""
    checked = 0
    for path in RESULTS.rglob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(record, dict) and "key" in record and "settings" in record):
            continue
        provenance = record.get("provenance") or {}
        where = path.relative_to(RESULTS)
        assert provenance.get("source", {}).get("commit"), where
        assert provenance.get("device", {}).get("kind") in ("cpu", "cuda", "mps", "xpu"), where
        assert "torch_threads" in provenance, where
        reconstructed = provenance.get("reconstructed", {}).get("fields", [])
        assert provenance.get("packages") or "packages" in reconstructed, where
        checked += 1
    assert checked >= 600


def test_a_cuda_key_differs_from_the_cpu_key_of_the_same_run():
    records = read_records(RESULTS / "demo" / "runs")
    key = next(k for k, r in records.items() if r["method"] == "dpo" and r["seed"] == 42)
    name, keyed, _ = identities(records[key], records)
    keys = {device: run_key(name, keyed, 42, device=device) for device in ("cpu", "cuda", "mps")}
    assert keys["cpu"] == key and len(set(keys.values())) == 3
    assert all(k.startswith("dpo-seed42-") for k in keys.values())  # only the hash part moves


def test_the_plan_keys_every_run_by_the_device_this_process_trains_on(tmp_path, monkeypatch):
    config = make_config(tmp_path)
    stages = fake_backend([])
    corpus = prepare_corpus(config, stages, tmp_path, quiet)
    on_cpu = plan_experiment(config, stages, corpus)
    monkeypatch.setattr(records, "device_class", lambda: "cuda")
    on_gpu = plan_experiment(config, stages, corpus)
    for cpu_run, gpu_run in zip((on_cpu.reference, *on_cpu.runs), (on_gpu.reference, *on_gpu.runs), strict=True):
        name = cpu_run.method or "reference"
        assert cpu_run.key == run_key(name, cpu_run.keyed, cpu_run.seed, device="cpu")
        assert gpu_run.key == run_key(name, gpu_run.keyed, gpu_run.seed, device="cuda")  # the arms' own
        # settings are the same; they name the reference's training key, itself of the CUDA class
        assert gpu_run.key != cpu_run.key and gpu_run.training_key != cpu_run.training_key


def test_the_device_class_is_the_one_accelerate_trains_on(monkeypatch):
    monkeypatch.setattr(provenance_module.torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    assert provenance_module.device_class() == "cuda"
    monkeypatch.setenv("ACCELERATE_USE_CPU", "true")  # accelerate launch --cpu beside a GPU
    assert provenance_module.device_class() == "cpu"
