"""``badpo experiment`` end to end on a user's own CSV: their column names, a regex attribute,
held-out judgments split off by prompt, the tiny fixture model for a few steps, and the table
with its Removed column checked against the logged rates."""

from __future__ import annotations

import csv
import io
import math

from badpo.core.config import from_dict
from badpo.core.judgments import read_judgments
from badpo.experiment.config import ExperimentConfig
from badpo.experiment.pipeline import run_experiment
from fixtures.own_data import ATTRIBUTE, COLUMNS, user_rows, write_user_csv

RATE = "attribute_rates.emily.policy"


def _small(lr: float) -> dict:
    return {"optim": {"lr": lr, "warmup_ratio": 0.0, "schedule": "constant"},
            "tokenization": {"max_prompt_tokens": 16, "max_length": 48},
            "runtime": {"num_threads": 1}, "report": {"progress_bar": False}}


def _config(tmp_path, model) -> dict:
    """A few steps of everything; sized so that DPO moves the rate on the 10 held-out prompts (the
    fixture model at these seeds: reference 0.0, DPO 0.3, BA-DPO 0.2), else the removal is undefined."""
    return {
        "name": "mine", "output_dir": str(tmp_path / "out"),
        "corpus": {"builder": "own-data", "config": {
            "data": str(write_user_csv(tmp_path / "mine.csv", user_rows(40))), "columns": COLUMNS,
            "heldout_share": 0.25}},
        "reference": {"data": "{corpus}/train.jsonl", "source": "judgments", "model": {"name_or_path": str(model)},
                      "epochs": 3.0, "batch_size": 8, "micro_batch_size": 8, **_small(3e-3)},
        "train": {"data": "{corpus}/train.jsonl", "attributes": [ATTRIBUTE], "model": {"name_or_path": "{reference}"},
                  "steps": 8, "batch_size": 4, "micro_batch_size": 4, "save_policy": True, **_small(5e-3)},
        "arms": [{"name": "DPO", "method": "dpo"}, {"name": "BA-DPO (pooled)", "method": "ba_dpo_pooled"}],
        "seeds": [42],
        "evaluation": {"attributes": [ATTRIBUTE], "max_prompts": 10, "max_new_tokens": 10, "batch_size": 8},
        "tables": [{"title": "My data", "interval": "none", "columns": [
            {"header": "rate (emily)", "metric": RATE},
            {"header": "Removed", "metric": RATE, "kind": "removed", "digits": 0},
            {"header": "KL", "metric": "kl"}]}],
        "plots": {"rates": [{"header": "rate (emily)", "metric": RATE}], "theta": False},
    }


def test_an_experiment_on_a_user_csv_renders_its_table_with_a_removed_column(tmp_path, save_model_dir,
                                                                             engine_backend):
    """40 prompts x 4 judgments in the user's columns, 10 prompts held out; the reference trained by
    SFT on the training split's majority answers, DPO and BA-DPO 8 steps each, read on the 10
    held-out prompts. The Removed cell is (DPO - BA-DPO) / (DPO - reference) of the logged rates."""
    model = save_model_dir(tmp_path / "model", "gpt2")
    config = from_dict(ExperimentConfig, _config(tmp_path, model))
    lines: list[str] = []
    result = run_experiment(config, engine_backend(), log=lines.append)
    corpus = tmp_path / "out" / "corpus"
    assert len(read_judgments(corpus / "train.jsonl")) == 120 and len(read_judgments(corpus / "heldout.jsonl")) == 40
    assert any("corpus: held out: 40 judgments on 10 of the 40 distinct prompt ids" in line for line in lines)
    records = {r["arm"] or "reference": r for r in result["records"].values()}
    assert set(records) == {"reference", "DPO", "BA-DPO (pooled)"}
    reference, dpo, ba = (records[k]["readouts"]["attribute_rates"]["emily"]["policy"]
                          for k in ("reference", "DPO", "BA-DPO (pooled)"))
    assert records["DPO"]["readouts"]["attribute_rates"]["emily"]["n"] == 10 and dpo != reference
    assert "| Removed |" in result["markdown"]
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(result["csv"]))}
    removed = float(rows[("BA-DPO (pooled)", "Removed")]["mean"])
    assert math.isclose(removed, (dpo - ba) / (dpo - reference), rel_tol=1e-9, abs_tol=1e-12)
    assert float(rows[("Reference (SFT)", "rate (emily)")]["mean"]) == reference
    for name in ("table.md", "table.csv", "rates.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
