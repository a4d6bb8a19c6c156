"""What the fixed-offset cure reads and makes, planned without running it (``python -m experiments reproduce --plan``).

Each step is keyed as :mod:`experiments.cure.analysis` keys it, as far as the logged records
let a key be known: a source preparation from its source run's key; a calibration run from the
prepared source's first-name log-probs (logged with the preparation), one per point of
``calibration.design``; a calibrated run from the calibration's fit (the line or the affine map,
from the calibration runs' records). A run whose key waits on a run not logged yet
is planned without a key. The source experiment's records are found as the cure finds them
(``source.match``), and its corpus is never built here (:func:`badpo.experiment.runner.plan_unbuilt`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from badpo.core.config import ConfigError, to_dict
from badpo.experiment.records import read_records
from badpo.experiment.runner import Backend, Plan, PlannedRecord, plan_unbuilt
from experiments.cure.analysis import (
    CureBackend,
    calibrated_run,
    calibrated_targets,
    calibration_runs,
    narrowed_source,
    read_out_alike,
    source_run_key,
)
from experiments.cure.calibration import calibration_fit, calibration_point_names
from experiments.cure.config import CureConfig

__all__ = ["plan_cure"]


def plan_cure(config: CureConfig, backend: CureBackend, source_backend: Backend,
              chains: Mapping[Path, Sequence[Path]] | None = None) -> list[PlannedRecord]:
    """Every record the cure reads or makes, in the order it makes them: the source experiment's
    (made here only for the source arm under ``source.run_missing``), then its own. ``chains``:
    a folder -> that folder and the folders a sweep copies runs into it from, first to last; the
    source experiment's corpus and records are looked for along its folder's chain."""
    evaluation = backend.resolve_evaluation(to_dict(config.evaluation))
    runs, source_keys = _source_records(config, source_backend, chains or {})
    out = Path(config.output_dir)
    logprobs = {}
    for seed in config.seeds:
        key = source_run_key(config, source_keys[seed], evaluation, seed)
        record = _record(out, key)
        runs.append(PlannedRecord(f"source seed {seed}", out, key, record is not None))
        if record is not None:
            path = out / record["artifacts"]["name_logprobs"]
            logprobs[seed] = np.array(json.loads(path.read_text(encoding="utf-8")), dtype=np.float64)
    cal = config.calibration
    points: list[dict | None] = []
    if cal.seed in logprobs:
        for run in calibration_runs(config, backend, source_keys[cal.seed], logprobs[cal.seed], evaluation):
            points.append(_record(out, run.key))
            runs.append(PlannedRecord(f"calibration {run.point} seed {cal.seed}", out, run.key, points[-1] is not None))
    else:
        runs += [PlannedRecord(f"calibration {point} seed {cal.seed}", out, None, False)
                 for point in calibration_point_names(cal)]
    fit = calibration_fit(cal, points) if all(p is not None for p in points) and points else None
    for seed, target in calibrated_targets(config):
        label = f"calibrated t={target} seed {seed}"
        if fit is None or seed not in logprobs:
            runs.append(PlannedRecord(label, out, None, False))
            continue
        run = calibrated_run(config, backend, source_keys[seed], seed, target, logprobs[seed], fit, evaluation)
        runs.append(PlannedRecord(label, out, run.key, _record(out, run.key) is not None))
    return runs


def _record(out: Path, key: str) -> dict | None:
    path = out / "runs" / f"{key}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _source_records(config: CureConfig, backend: Backend, chains: Mapping[Path, Sequence[Path]]
                    ) -> tuple[list[PlannedRecord], dict[int, str]]:
    """The source experiment's records the cure reads (its reference, the source arm and the
    compare arms at the cure's seeds), and the source arm's key at each seed."""
    source, narrowed = narrowed_source(config)
    names = [config.source.arm, *config.compare_arms]
    folder = Path(source.output_dir)
    chain = list(chains.get(folder.resolve(), [folder]))
    plan, _ = plan_unbuilt(narrowed, backend, chain[1:])
    found = _by_arm_seed(chain, plan, names) if config.source.match == "arm_seed" else {}
    references = {r["reference"] for (arm, _), r in found.items() if arm == config.source.arm}
    records, keys = [], {}
    for planned in (plan.reference, *plan.runs):
        record = found.get((planned.arm, planned.seed))
        key = record["key"] if record else planned.key
        if planned.kind == "reference" and len(references) == 1:
            key = next(iter(references))  # the reference the found records were trained from
        made = config.source.run_missing and planned.arm in (None, config.source.arm)
        label = "reference" if planned.kind == "reference" else f"{planned.arm} seed {planned.seed}"
        logged = any((f / "runs" / f"{key}.json").exists() for f in chain)
        records.append(PlannedRecord(f"{source.name}: {label}", folder, key, logged, made))
        if planned.arm == config.source.arm:
            keys[planned.seed] = key
    return records, keys


def _by_arm_seed(chain: list[Path], plan: Plan, names: list[str]) -> dict[tuple[str, int], dict]:
    """``source.match: arm_seed``: the logged record of each (arm, seed) on the plan's corpus,
    whatever its key, read out under the plan's readout settings, in the source's folder or one its
    runs are copied from; two for one (arm, seed) is the cure's own error."""
    found: dict[tuple[str, int], dict] = {}
    seeds = {p.seed for p in plan.runs}
    runs_dir = chain[0] / "runs"
    logged: dict[str, dict] = {}
    for folder in reversed(chain):  # as the copies will leave them: a file already there is kept
        logged.update(read_records(folder / "runs") if (folder / "runs").is_dir() else {})
    for key, record in logged.items():
        cell = (record.get("arm"), record.get("seed"))
        if (cell[0] in names and cell[1] in seeds and record.get("corpus") == plan.corpus_id
                and read_out_alike(record.get("evaluation", {}), plan.runs[0].keyed["evaluation"])):
            if cell in found:
                raise ConfigError(f"source.match: arm_seed: {runs_dir} holds two records of {cell[0]!r} at "
                                  f"seed {cell[1]} ({found[cell]['key']}, {key}); use match: key")
            found[cell] = record
    return found
