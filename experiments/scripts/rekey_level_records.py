"""Re-key the run records made while ``bias.level`` was keyed at its default (wave 5, first
session, before it joined ``KEYED_WHEN_SET``): each record of an experiment gets the key today's
planner gives its (arm, seed), its ``key`` and ``training_key`` fields and file name follow, and
every ``layout.json`` beside it names the new keys. The records' readouts and settings are kept
byte for byte; a record whose arm or seed the plan lacks is an error.

    python experiments/scripts/rekey_level_records.py experiments/configs/experiment_tiny_level_rule.yaml \
        results/level_rule/tiny_length
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from badpo.core.config import load_config
from badpo.core.jsonio import atomic_write_text
from badpo.experiment.backend import engine_backend
from badpo.experiment.config import ExperimentConfig
from badpo.experiment.runner import plan_experiment, prepare_corpus


def main(config_path: str, *folders: str) -> None:
    config = load_config(ExperimentConfig, Path(config_path))
    backend = engine_backend()
    corpus = prepare_corpus(config, backend, Path(config.output_dir), lambda _: None, build=False)
    plan = plan_experiment(config, backend, corpus)
    new = {("reference", None): (plan.reference.key, plan.reference.training_key)}
    new |= {(run.arm, run.seed): (run.key, run.training_key) for run in plan.runs}
    renamed: dict[str, str] = {}
    for folder in map(Path, folders):
        for path in sorted((folder / "runs").glob("*.json")):
            text = path.read_text(encoding="utf-8")
            record = json.loads(text)
            slot = ("reference", None) if record["kind"] == "reference" else (record["arm"], record["seed"])
            key, training_key = new[slot]
            if key == record["key"]:
                continue
            for old, fresh in ((record["key"], key), (record["training_key"], training_key)):
                text = text.replace(f'"{old}"', f'"{fresh}"')
                renamed[old] = fresh
            atomic_write_text(path.with_name(f"{key}.json"), text)
            path.unlink()
        layout = folder / "layout.json"
        if layout.exists():
            text = layout.read_text(encoding="utf-8")
            for old, fresh in renamed.items():
                text = text.replace(f'"{old}"', f'"{fresh}"')
            atomic_write_text(layout, text)
    print(f"{config_path}: {len(renamed) // 2} records re-keyed")


if __name__ == "__main__":
    main(*sys.argv[1:])
