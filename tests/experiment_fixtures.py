"""The fake experiment world shared by the runner and planning tests: stages that return rates
looked up by (method, seed), so every number in a rendered table can be worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from badpo.core.config import from_dict
from badpo.experiment import ExperimentConfig, Stages

T_975_2 = 4.302653  # Student t, 0.975 quantile, 2 degrees of freedom: (2p-1)/sqrt(2p(1-p)), p=0.975
REFERENCE = {"woman": 0.50, "black": 0.52}
# (method, seed) -> (woman, black, kl). BA-DPO's seeds are crafted so that removal per seed
# (0.75, 1.0, 0.8333) and removal of the means (0.8333) differ.
RATES = {
    ("dpo", 42): (0.90, 0.98, 0.040), ("dpo", 123): (0.70, 0.96, 0.036), ("dpo", 456): (0.80, 0.97, 0.038),
    ("ba_dpo_pooled", 42): (0.60, 0.60, 0.026), ("ba_dpo_pooled", 123): (0.50, 0.62, 0.025),
    ("ba_dpo_pooled", 456): (0.55, 0.58, 0.027),
    ("ba_dpo_shared_mean", 42): (0.58, 0.59, 0.026), ("ba_dpo_shared_mean", 123): (0.52, 0.60, 0.026),
    ("ba_dpo_shared_mean", 456): (0.54, 0.61, 0.026),
}
PLANTED = {"a1": [1.0, 2.0], "a2": [0.5, -0.5], "a3": [1.5, 1.0]}


class Crash(RuntimeError):
    pass


def fake_stages(calls: list[str], crash_at: int | None = None) -> Stages:
    """Stages that log each call; ``crash_at`` = n makes the n-th arm run (1-based) raise."""

    def build_corpus(builder, config, outdir: Path):
        outdir.mkdir(parents=True)
        (outdir / "train.jsonl").write_text(json.dumps({"builder": builder, **config}) + "\n")
        (outdir / "planted.json").write_text(json.dumps({
            "attribute_names": ["woman_coded", "black_coded"],
            "annotators": [{"annotator": a, "theta": t} for a, t in PLANTED.items()]}))
        calls.append("corpus")

    def resolve(settings):  # fills a default, like the engine's dataclasses do
        return {"optim": {"lr": 5e-7, **settings.get("optim", {})},
                **{k: v for k, v in settings.items() if k != "optim"}}

    def run_reference(task):
        calls.append(task.key)
        return {"readouts": {"rate": dict(REFERENCE)}, "artifacts": {"model": task.work_dir / "model"}}

    def run_arm(task):
        calls.append(task.key)
        if crash_at is not None and sum(not c.startswith(("corpus", "reference")) for c in calls) == crash_at:
            raise Crash(task.key)
        assert task.settings["model"] == str(task.out_dir.resolve() / "work" / task.reference["training_key"] / "model")
        woman, black, kl = RATES[(task.method, task.seed)]
        theta = None
        if task.method == "ba_dpo_shared_mean":
            theta = {"attribute_names": ["woman_coded", "black_coded"], "mean": [1.0, 0.8],
                     "per_annotator": {a: [v[0] * 0.9, v[1] * 0.8 + 0.1] for a, v in PLANTED.items()}}
        readouts = {"rate": {"woman": woman, "black": black}, "kl": kl,
                    "tokens": np.int64(7), "loss": np.float32(0.25), "margin": torch.tensor(1.5)}
        return {"readouts": readouts,
                "theta": theta}

    return Stages(build_corpus, resolve, resolve, run_reference, run_arm)


def config_dict(out: Path) -> dict:
    return {
        "name": "fake", "output_dir": str(out),
        "corpus": {"builder": "fake", "config": {"n_pairs": 10}},
        "reference": {"steps": 3},
        "train": {"model": "{reference}", "beta": 0.1},
        "arms": [{"name": "DPO", "method": "dpo"},
                 {"name": "BA-DPO (pooled)", "method": "ba_dpo_pooled"},
                 {"name": "BA-DPO (θ̄+ε_k)", "method": "ba_dpo_shared_mean", "params": {"optim.lr": 5e-7}}],
        "seeds": [42, 123, 456],
        "tables": [{"title": "Signed world", "columns": [
            {"header": "p(woman)", "metric": "rate.woman"},
            {"header": "Removed", "metric": "rate.woman", "kind": "removed", "digits": 0},
            {"header": "p(black)", "metric": "rate.black"},
            {"header": "Removed", "metric": "rate.black", "kind": "removed", "digits": 0},
            {"header": "KL", "metric": "kl"}]}],
        "plots": {"rates": [{"header": "p(woman)", "metric": "rate.woman"},
                            {"header": "p(black)", "metric": "rate.black"}]},
    }


def make_config(out: Path, **changes) -> ExperimentConfig:
    return from_dict(ExperimentConfig, {**config_dict(out), **changes})


def quiet(_line: str) -> None:
    pass


def cells(csv_text: str) -> dict[tuple[str, str], dict]:
    """(row, column header + metric) -> CSV row."""
    import csv
    import io

    return {(r["row"], r["column"] + ":" + r["metric"]): r for r in csv.DictReader(io.StringIO(csv_text))}
