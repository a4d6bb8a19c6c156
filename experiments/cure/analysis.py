"""The fixed-offset cure (paper, Appendix "Experiment: a fixed offset cures the DPO policy").

A biased DPO policy (the *source*: one arm of a logged experiment, one policy per seed) is moved
to a target attribute rate t by one more DPO stage on its own answers, with the source as
reference and a frozen offset b = -beta * s in the bias logit. The steps:

1. the source answers fresh prompts that ask for a signature (``prompts``); the answers signed
   with a pool first name are kept and each gives one counterfactual pair per attribute in both
   orders, same surname (:func:`experiments.anchoring.fixed_offset_pairs`); 10% of the answers are
   held out (:mod:`experiments.cure.backend`);
2. s*(t), the log-odds shifts that, applied together, bring the source's first-name rates on
   both attributes to t, are found on the evaluation prompts from the source's probabilities of
   the 89 pool names (:func:`experiments.anchoring.shifts_for_target`: a joint root find, since
   the two attributes are correlated under a DPO source);
3. calibration: at one seed the stage is trained at a few intended shifts around s*(t_cal); the
   *achieved* shifts of each run are the shifts that, applied together to the source at sampling
   time, give the rates the trained policy reads (the sampling-time tilt of the same size). The
   paper's design (``calibration.design: scaled``) trains at ``calibration.scales`` x s*(t_cal)
   and fits the line achieved = slope * intended + intercept per coordinate
   (:func:`experiments.anchoring.fit_calibration`); ``per_coordinate`` trains at s*(t_cal) and
   at s*(t_cal) moved by ``calibration.step`` on each coordinate alone, and fits achieved =
   A intended + c with a full matrix A (:mod:`experiments.cure.calibration`);
4. every other run trains at the intended shift the fit says achieves s*(t) (the line or A
   inverted): each target at the calibration seed, and ``all_seed_targets`` at every seed, with
   the fit unchanged.

Every source preparation and every trained run is logged once as ``OUT/runs/<key>.json`` (the
runner's record format and atomic writes), so a second invocation trains nothing. The table
(``OUT/table.md``, ``table.csv``) is rendered from those records and ``OUT/calibration.json``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from badpo.core.config import ConfigError, load_config, to_dict
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.core.names import NAME_ATTRIBUTES
from badpo.engine.settings import BETA
from badpo.experiment.config import ExperimentConfig, merge_settings
from badpo.experiment.provenance import provenance
from badpo.experiment.records import (
    SCHEMA,
    keyed_settings,
    read_records,
    read_records_for,
    relative_artifact,
    run_key,
    write_record,
)
from badpo.experiment.runner import Backend, fill_placeholders, plan_experiment, prepare_corpus, run_all
from badpo.methods import arm_settings
from badpo.readouts.eval_config import EvalConfig
from experiments.cure.calibration import (
    DESIGNS,
    achieved_shifts,
    calibration_fit,
    calibration_intended,
    calibration_point_names,
    extrapolated,
    intended_shifts,
    target_shifts,
    tilt_readout,
)
from experiments.cure.config import CureConfig
from experiments.cure.table import describe_line, render_cure_table

__all__ = ["CureBackend", "SourceRun", "READOUT_DEFAULTS", "read_out_alike", "narrowed_source", "resolve_sources",
           "source_run_key", "calibration_runs", "calibrated_targets", "calibrated_run", "run_cure_experiment"]


# ------------------------------------------------------------------------------------ backend
@dataclass(frozen=True)
class SourceRun:
    """One source policy and what reading it needs (from the source experiment's records)."""

    seed: int
    key: str  # the source arm's run key
    policy: Path
    reference: Path  # the SFT reference of the source experiment
    corpus_dir: Path
    settings: dict  # the source arm's resolved train settings (model, tokenization, beta)
    bodies: Path | None  # the reference's answer bodies, when the evaluation reads after them


@dataclass(frozen=True)
class CureBackend:
    """The model-facing functions the cure's steps call (the real ones:
    :func:`experiments.cure.backend.cure_backend`; tests fake them).

    - ``prepare_source(source, prompts, config, work_dir) -> dict``: the source's answers, its
      offset pairs (``{"train", "heldout"}`` paths under ``artifacts``), its readouts, and
      ``name_logprobs`` [P, 89] on the evaluation prompts (pool order).
    - ``run_cure(source, settings, pairs_dir, config, work_dir) -> dict``: train the stage with
      ``settings`` (a complete TrainConfig mapping) and return {"readouts", "artifacts"}.
    - ``resolve_train(settings) -> dict``: the complete, checked TrainConfig mapping.
    """

    prepare_source: Callable[..., Mapping]
    run_cure: Callable[..., Mapping]
    resolve_train: Callable[[dict], dict]
    resolve_evaluation: Callable[[dict], dict] = dict


READOUT_DEFAULTS = to_dict(EvalConfig())


def read_out_alike(logged: Mapping, planned: Mapping) -> bool:
    """A record read out under the planned readout settings: equal on every setting both name; a
    setting the record lacks (logged before it existed, so read out as its default then did) only
    where the plan asks for that default; a setting the plan lacks (since removed) is ignored."""
    return (all(planned[k] == v for k, v in logged.items() if k in planned)
            and all(k in READOUT_DEFAULTS and planned[k] == READOUT_DEFAULTS[k] for k in planned if k not in logged))


def _records_by_arm_seed(runs_dir: Path, arm: str, seeds: list[int], corpus_id: str,
                         evaluation: Mapping) -> dict[int, dict]:
    """The logged records of ``arm`` at each seed, whatever their key (``source.match: arm_seed``),
    among those read out under the source experiment's ``evaluation`` (the same runs read out under
    other settings, e.g. ``evaluation.body=own``, are other records of the same seed)."""
    found: dict[int, dict] = {}
    for key, record in read_records(runs_dir).items():
        if (record.get("arm") == arm and record.get("seed") in seeds
                and read_out_alike(record.get("evaluation", {}), evaluation)):
            if record["seed"] in found:
                raise ConfigError(f"source.match: arm_seed: {runs_dir} holds two records of {arm!r} at "
                                  f"seed {record['seed']} ({found[record['seed']]['key']}, {key}); use match: key")
            if record.get("corpus") != corpus_id:
                raise ConfigError(f"source.match: arm_seed: {key} was trained on another corpus")
            found[record["seed"]] = record
    missing = sorted(set(seeds) - set(found))
    if missing:
        raise FileNotFoundError(f"{runs_dir}: no record of arm {arm!r} at seeds {missing}")
    return found


def narrowed_source(config: CureConfig) -> tuple[ExperimentConfig, ExperimentConfig]:
    """The source experiment, and the same narrowed to what the cure reads: its source arm and
    compare arms at the cure's seeds, no tables; a name or seed it lacks is a ConfigError."""
    source = load_config(ExperimentConfig, config.source.experiment)
    arms = {arm.name: arm for arm in source.arms}
    for name in (config.source.arm, *config.compare_arms):
        if name not in arms:
            raise ConfigError(f"source.arm/compare_arms: {name!r} is not an arm of "
                              f"{config.source.experiment} ({list(arms)})")
    missing_seeds = sorted(set(config.seeds) - set(source.seeds))
    if missing_seeds:
        raise ConfigError(f"seeds: {missing_seeds} are not seeds of {config.source.experiment} ({source.seeds})")
    wanted = [arms[config.source.arm], *(arms[n] for n in config.compare_arms)]
    return source, replace(source, arms=wanted, seeds=list(config.seeds), tables=[], baseline=config.source.arm)


def resolve_sources(config: CureConfig, backend: Backend, log: Callable[[str], None]) -> tuple[dict, dict]:
    """{seed: SourceRun} of the source arm, and {label: [records]} of the reference and compare arms.

    The source experiment is planned exactly as ``badpo experiment`` plans it. With ``source.match:
    key`` its records are those of the planned keys (with ``source.run_missing`` the reference and
    the source arm's missing seeds are run first, else a missing record is an error naming the
    command that makes it). With ``match: arm_seed`` they are the logged records of each arm and
    seed on the same corpus, whatever their key: a record logged before a settings field was
    added to the engine (which changes every key) is still found; a warning line says so.
    """
    source, narrowed = narrowed_source(config)
    out = Path(source.output_dir)
    runs_dir = out / "runs"
    corpus_dir = prepare_corpus(narrowed, backend, out, log, build=config.source.run_missing)
    plan = plan_experiment(narrowed, backend, corpus_dir)
    if config.source.run_missing:
        sub = replace(narrowed, arms=[narrowed.arms[0]])  # the source arm alone
        run_all(sub, backend, plan_experiment(sub, backend, corpus_dir), out, log)

    def arm_records(name: str) -> dict[int, dict]:
        if config.source.match == "arm_seed":
            found = _records_by_arm_seed(runs_dir, name, list(config.seeds), plan.corpus_id,
                                         plan.runs[0].keyed["evaluation"])  # one evaluation per experiment
            planned = {p.seed: p.key for p in plan.runs if p.arm == name}
            drifted = [r["key"] for s, r in found.items() if planned[s] != r["key"]]
            if drifted:
                log(f"source: {drifted} are not the keys the current settings give ({sorted(planned.values())}): "
                    "logged before a settings change; used as logged (match: arm_seed)")
            return found
        keys = {p.seed: p.key for p in plan.runs if p.arm == name}
        try:
            records = read_records_for(runs_dir, list(keys.values()))
        except FileNotFoundError as error:
            raise FileNotFoundError(f"{error}; run `badpo experiment {config.source.experiment}` first "
                                    "(or set source.run_missing: true)") from None
        return {seed: records[key] for seed, key in keys.items()}

    found = arm_records(config.source.arm)
    reference_keys = {r["reference"] for r in found.values()}
    if len(reference_keys) != 1:
        raise ConfigError(f"source: the seeds of {config.source.arm!r} have different references {reference_keys}")
    reference = read_records_for(runs_dir, reference_keys)[reference_keys.pop()]
    bodies = reference.get("artifacts", {}).get("bodies")
    sources = {seed: SourceRun(seed, record["key"], out / record["artifacts"]["policy"],
                               out / reference["artifacts"]["model"], corpus_dir, record["settings"],
                               out / bodies if bodies is not None else None)
               for seed, record in sorted(found.items())}
    compare: dict[str, list[dict]] = {source.reference_label: [reference]}
    for name in config.compare_arms:
        compare[name] = [record for _, record in sorted(arm_records(name).items())]
    return sources, compare


# ------------------------------------------------------------------------------------ pipeline
@dataclass(frozen=True)
class _Run:
    key: str
    role: Literal["calibration", "calibrated"]
    seed: int
    target: float
    intended: dict[str, float]
    settings: dict  # resolved train settings, placeholders unfilled
    point: str = ""  # a calibration run's name (calibration_point_names)


def _plan_run(config: CureConfig, backend: CureBackend, source_key: str, role: str, seed: int,
              target: float, intended: Mapping[str, float], evaluation: dict, point: str = "") -> _Run:
    beta = float(merge_settings({}, config.train).get("beta", BETA))
    offset = [-beta * intended[a] for a in NAME_ATTRIBUTES]  # fixed_offset_for_shift, per coordinate
    merged = merge_settings(config.train, {
        **arm_settings(config.method), "data": "{pairs}/train.jsonl", "model.name_or_path": "{source}",
        "bias.fixed_offset": offset, "runtime.seed": seed})
    settings = backend.resolve_train(merged)
    if list(settings.get("attributes", [])) != ["names"]:
        raise ConfigError(f"train.attributes: the cure's offset is on {list(NAME_ATTRIBUTES)}; declare "
                          f"[names], got {settings.get('attributes')}")
    keyed = {"source": source_key, "settings": keyed_settings(settings), "evaluation": evaluation}
    return _Run(run_key(f"offset_{role}", keyed, seed), role, seed, target, dict(intended), settings, point)


def source_run_key(config: CureConfig, source_key: str, evaluation: dict, seed: int) -> str:
    """The key of step 1 on one source policy: its answers, pairs and readouts."""
    keyed = {"source": source_key, "prompts": to_dict(config.prompts), "answers": to_dict(config.answers),
             "evaluation": evaluation}
    return run_key("offset_source", keyed, seed)


def calibration_runs(config: CureConfig, backend: CureBackend, source_key: str, name_logprobs: Any,
                     evaluation: dict) -> list[_Run]:
    """Step 3's runs at the calibration seed, one per point of the design around s*(t_cal)."""
    cal = config.calibration
    intended = calibration_intended(cal, target_shifts(name_logprobs, cal.target))
    return [_plan_run(config, backend, source_key, "calibration", cal.seed, cal.target, shifts, evaluation, point)
            for point, shifts in zip(calibration_point_names(cal), intended)]


def calibrated_targets(config: CureConfig) -> list[tuple[int, float]]:
    """Step 4's (seed, target): every target at the calibration seed, ``all_seed_targets`` at every seed."""
    wanted = [(config.calibration.seed, t) for t in config.targets]
    return wanted + [(s, t) for t in config.all_seed_targets for s in config.seeds if (s, t) not in wanted]


def calibrated_run(config: CureConfig, backend: CureBackend, source_key: str, seed: int, target: float,
                   name_logprobs: Any, fit: Mapping, evaluation: dict) -> _Run:
    """Step 4's run at ``target``: the intended shift the fit (:func:`calibration_fit`: the line
    or the affine map) says achieves s*(target)."""
    return _plan_run(config, backend, source_key, "calibrated", seed, target,
                     intended_shifts(target_shifts(name_logprobs, target), fit), evaluation)


def _record(kind: str, key: str, seed: int, readouts: Mapping, extra: Mapping) -> dict:
    """A cure record, with the commit, versions and device that made it, as an arm's record."""
    return {"schema": SCHEMA, "key": key, "kind": kind, "seed": seed, "readouts": dict(readouts), **extra,
            "provenance": provenance()}


@dataclass
class _CureSweep:
    """What the cure's steps share: the output folder, the logged records, the sources."""

    config: CureConfig
    backend: CureBackend
    evaluation: dict
    sources: dict
    say: Callable[[str], None]
    render_only: bool
    records: dict = field(default_factory=dict)
    prepared: dict = field(default_factory=dict)
    _logprobs: dict = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return Path(self.config.output_dir)

    def logprobs(self, seed: int) -> np.ndarray:
        """The source's [P, 89] first-name log-probs at ``seed`` (its logged artifact), read once."""
        if seed not in self._logprobs:
            path = self.out / self.prepared[seed]["artifacts"]["name_logprobs"]
            self._logprobs[seed] = np.array(json.loads(path.read_text(encoding="utf-8")), dtype=np.float64)
        return self._logprobs[seed]

    def logged(self, key: str, label: str, produce: Callable[[], dict]) -> dict:
        """The record of ``key``: read when logged, else produced and written (never when render-only)."""
        runs_dir = self.out / "runs"
        path = runs_dir / f"{key}.json"
        if not path.exists():
            if self.render_only:
                raise FileNotFoundError(f"{path}: {label} is not logged (render-only trains nothing)")
            self.say(f"{label} ({key}): running ...")
            began = time.perf_counter()
            record = produce()
            record["wall_time_s"] = round(time.perf_counter() - began, 3)
            write_record(path, record)
            self.say(f"{label}: done in {record['wall_time_s']:.1f} s")
        else:
            self.say(f"{label} ({key}): logged, skipped")
        self.records[key] = read_records_for(runs_dir, [key])[key]
        return self.records[key]

    def prepare_sources(self) -> None:
        """Step 1: each source's answers, pairs, readouts and log-odds on the evaluation prompts."""
        config, out = self.config, self.out
        for seed in config.seeds:
            source = self.sources[seed]
            key = source_run_key(config, source.key, self.evaluation, seed)

            def prepare(source=source, key=key, work=out / "work" / key) -> dict:
                work.mkdir(parents=True, exist_ok=True)
                result = self.backend.prepare_source(source, config, work)
                logps_file = work / "name_logprobs.json"
                atomic_write_text(logps_file, dumps(np.asarray(result["name_logprobs"]).tolist()) + "\n")
                artifacts = {**result["artifacts"], "name_logprobs": logps_file}
                extra = {"source": source.key, "source_policy": str(source.policy), "pairs": result["pairs"],
                         "artifacts": {k: relative_artifact(v, out) for k, v in artifacts.items()},
                         "evaluation": self.evaluation}
                return _record("source", key, source.seed, result["readouts"], extra)

            self.prepared[seed] = self.logged(key, f"source seed {seed}", prepare)

    def train_run(self, run: _Run) -> dict:
        """One cure run (a calibration point or a calibrated target), logged once."""
        source, record, out = self.sources[run.seed], self.prepared[run.seed], self.out

        def produce() -> dict:
            work = out / "work" / run.key
            work.mkdir(parents=True, exist_ok=True)
            pairs_dir = out / Path(record["artifacts"]["train"]).parent
            settings = fill_placeholders(run.settings, {"source": str(source.policy.resolve()),
                                            "pairs": str(pairs_dir.resolve())})
            settings = {**settings, "output_dir": str(work), "cache_dir": str(out / "reference_cache"),
                        "resume_from": "latest"}
            result = self.backend.run_cure(source, settings, pairs_dir, self.config, work)
            readouts = dict(result["readouts"])
            rates = readouts["names"]["first_name"]
            extra = {"role": run.role, "target": run.target, "source": source.key, "intended": run.intended,
                     "achieved": achieved_shifts(self.logprobs(run.seed), rates), "settings": run.settings,
                     "artifacts": {k: relative_artifact(v, out) for k, v in result.get("artifacts", {}).items()},
                     "evaluation": self.evaluation}
            return _record("cure", run.key, run.seed, readouts, extra)

        label = f"{run.role} t={run.target} seed {run.seed} shift " + "/".join(
            f"{run.intended[a]:+.3f}" for a in NAME_ATTRIBUTES)
        return self.logged(run.key, label, produce)

    def calibrate(self) -> tuple[list[dict], dict]:
        """Steps 2-3: at one seed, the design's intended shifts around s*(t_cal), achieved read
        back, the line or the affine map fitted (``calibration.json``)."""
        cal = self.config.calibration
        runs = calibration_runs(self.config, self.backend, self.sources[cal.seed].key, self.logprobs(cal.seed),
                                self.evaluation)
        points = [self.train_run(run) for run in runs]
        fit = calibration_fit(cal, points)
        design = DESIGNS[cal.design].settings(cal)
        calibration = {"seed": cal.seed, "target": cal.target, "design": cal.design, **design, **fit,
                       "points": [{"key": r["key"], "point": run.point, "intended": r["intended"],
                                   "achieved": r["achieved"]} for run, r in zip(runs, points)]}
        atomic_write_text(self.out / "calibration.json", dumps(calibration, indent=2) + "\n")
        self.say("calibration: " + describe_line(fit.get("affine") or fit["line"]))
        return points, calibration

    def calibrated_runs(self, calibration: Mapping) -> list[dict]:
        """Step 4: every target at the calibration seed, ``all_seed_targets`` at every seed; a line
        says where a run's intended shift lies beyond the calibration points (extrapolated)."""
        records = []
        for seed, target in calibrated_targets(self.config):
            run = calibrated_run(self.config, self.backend, self.sources[seed].key, seed, target,
                                 self.logprobs(seed), calibration, self.evaluation)
            beyond = extrapolated(run.intended, calibration["points"])
            if beyond:
                self.say(f"calibrated t={target} seed {seed}: extrapolated, " + "; ".join(beyond))
            records.append(self.train_run(run))
        return records


def _tilt(name_logprobs: np.ndarray, target: float) -> dict:
    """The sampling-time tilt of a source to ``target``: its shifts and the rates it reads."""
    shift = target_shifts(name_logprobs, target)
    return {"shift": shift, "rates": tilt_readout(name_logprobs, shift)}


def run_cure_experiment(config: CureConfig, backend: CureBackend, source_backend: Backend,
                        log: Callable[[str], None] | None = None, render_only: bool = False) -> dict:
    """Run what is not logged yet (unless ``render_only``) and write ``calibration.json``,
    ``table.md`` and ``table.csv`` under ``output_dir``. Returns {"markdown", "csv", "records",
    "calibration"}. ``source_backend`` plan (and with ``source.run_missing`` run) the source
    experiment; :func:`experiments.cure.backend.run_cure_config` passes the real ones."""
    out = Path(config.output_dir)
    start = time.perf_counter()
    provenance()  # taken now, before any source is read or run: the code this process loaded

    def say(message: str) -> None:
        (log or (lambda s: print(s, flush=True)))(f"[{config.name} {time.perf_counter() - start:7.1f}s] {message}")

    sources, compare = resolve_sources(config, source_backend, say)
    sweep = _CureSweep(config, backend, backend.resolve_evaluation(to_dict(config.evaluation)), sources, say,
                       render_only)
    sweep.prepare_sources()
    calibration_records, calibration = sweep.calibrate()
    calibrated = sweep.calibrated_runs(calibration)
    tilts = {seed: {t: _tilt(sweep.logprobs(seed), t) for t in sorted({*config.targets, *config.all_seed_targets})}
             for seed in config.seeds}
    markdown, csv_text = render_cure_table(config, sweep.prepared, calibration_records, calibrated, calibration,
                                           tilts, compare)
    atomic_write_text(out / "table.md", markdown)
    atomic_write_text(out / "table.csv", csv_text)
    print(markdown, flush=True)
    say(f"wrote {out / 'calibration.json'}, {out / 'table.md'}, {out / 'table.csv'}")
    return {"markdown": markdown, "csv": csv_text, "records": sweep.records, "calibration": calibration}
