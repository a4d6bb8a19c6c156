"""The sweep: one corpus, one reference, then every (arm, seed), each logged once as JSON.

Every run is keyed twice, by stable hashes with a readable prefix (``dpo-seed42-1f0c9a2b7d3e``):
its *training* key hashes what trains it (method, resolved settings, seed, corpus, the
reference's training key) and names its folder ``OUT/work/<training key>``; its *record* key adds
the readout settings. The record (readouts, learned theta, wall time, the resolved settings) is
written to ``OUT/runs/<record key>.json`` atomically (a temporary file, then ``os.replace``) and
only once the run has finished, so a crashed sweep resumes by skipping every key whose JSON
exists: nothing is run twice. A run read out under other settings gets a new record from the
same folder, where training finds its finished run and trains nothing (``badpo.engine`` keeps a
finished run): re-scoring never retrains. The tables are rendered from the records alone. Keys and
records themselves (hashing, reading, writing) are :mod:`badpo.experiment.records`.

The runner knows nothing of models. It calls the functions of a :class:`Backend`, what builds the
corpus, resolves the settings, trains and reads out: the real one wraps the engine and the readouts
(:mod:`badpo.experiment.backend`), tests pass fakes.
:func:`badpo.experiment.pipeline.run_experiment` puts the corpus, the plan, this sweep, the
tables and the plots together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np

from badpo.core.config import ConfigError, to_dict
from badpo.experiment.config import ExperimentConfig, merge_settings
from badpo.experiment.provenance import provenance
from badpo.experiment.records import (
    SCHEMA,
    canonical_json,
    keyed_settings,
    read_records_for,
    relative_artifact,
    run_key,
    stable_hash,
    write_record,
)
from badpo.methods import arm_settings

__all__ = [
    "Backend", "RunTask", "PlannedRun", "PlannedRecord", "Plan", "corpus_fingerprint", "fill_placeholders",
    "prepare_corpus", "plan_experiment", "plan_unbuilt", "run_all", "eta_note",
]

CORPUS_MARKER = ".badpo-corpus.json"  # written into OUT/corpus once a build has finished
RESULT_KEYS = frozenset({"readouts", "theta", "artifacts"})


@dataclass(frozen=True)
class RunTask:
    """What ``run_reference`` / ``run_arm`` get: the run's identity, its settings with placeholders
    filled, its folders."""

    key: str
    kind: Literal["reference", "arm"]
    arm: str | None  # arm name (None for the reference)
    method: str | None
    seed: int | None  # None for the reference (its seed is in its settings)
    settings: dict  # resolved settings, {corpus} / {reference} filled; output_dir is the backend's to set
    evaluation: dict  # readout settings
    corpus_dir: Path
    work_dir: Path  # the run writes its model, logs and checkpoints here
    out_dir: Path  # OUT, e.g. for a cache shared by every run
    reference: dict | None  # the reference's record (arms only)


@dataclass(frozen=True)
class Backend:
    """The functions the runner calls to touch data and models (each documented by what it must
    return); a bundle of them so that tests swap in fakes.

    - ``build_corpus(builder, config, outdir)``: build the named corpus into ``outdir``; a string it
      returns (what the builder chose and wrote) is logged line by line.
    - ``resolve_reference(settings) -> dict`` / ``resolve_arm(settings) -> dict``: the complete,
      checked settings (defaults filled; an unknown key or bad value raises ConfigError).
    - ``resolve_evaluation(settings) -> dict``: the complete, checked readout settings (by
      default taken as they are).
    - ``readout_unavailable(evaluation, metric) -> str | None``: why no run read out under the
      resolved ``evaluation`` has the readout at ``metric`` (None: it may have it); a table or
      plot that names such a metric is refused when the experiment is planned.
    - ``check_data(settings, kind)`` / ``data_fingerprint(settings)``: see the fields below; the
      settings have ``{corpus}`` filled.
    - ``run_reference(task) -> dict`` / ``run_arm(task) -> dict``: train and evaluate; return
      {"readouts": {...}, "theta": {...} or None, "artifacts": {name: path}}. The reference must
      return ``artifacts["model"]`` when an arm's settings use ``{reference}``. ``theta`` is
      {"attribute_names": [...], "mean": [...], "per_annotator": {id: [...]}} (the last only for
      arms with a theta per annotator).
    """

    build_corpus: Callable[[str, dict, Path], Any]
    resolve_reference: Callable[[dict], dict]
    resolve_arm: Callable[[dict], dict]
    run_reference: Callable[[RunTask], Mapping]
    run_arm: Callable[[RunTask], Mapping]
    resolve_evaluation: Callable[[dict], dict] = dict
    readout_unavailable: Callable[[dict, str], str | None] = lambda evaluation, metric: None
    # check_data(settings, kind): the data a run reads fits its settings (mapped columns exist),
    # checked when the sweep is planned; data_fingerprint(settings) -> str | None: the content of
    # data outside the corpus folder (None: nothing to add), part of the run's key
    check_data: Callable[[dict, str], None] = lambda settings, kind: None
    data_fingerprint: Callable[[dict], str | None] = lambda settings: None
    # corpus_sources(builder, config) -> {source: sha256} of the user's files the corpus is built
    # from (None: none), kept in the corpus marker so that a corpus built before they changed is refused
    corpus_sources: Callable[[str, dict], dict | None] = lambda builder, config: None
    # check_corpus(builder, config): raises ConfigError on an unknown builder or a bad key of its config
    check_corpus: Callable[[str, dict], None] = lambda builder, config: None


@dataclass(frozen=True)
class PlannedRun:
    key: str  # the record's key: what trains the run and how it is read out
    kind: Literal["reference", "arm"]
    arm: str | None
    method: str | None
    seed: int | None
    settings: dict  # resolved, placeholders unfilled
    keyed: dict  # exactly what the key hashes (besides method and seed)
    training_key: str  # what trains it alone: the name of its folder under OUT/work


@dataclass(frozen=True)
class PlannedRecord:
    """One run record a table reads, as a sweep's plan sees it before anything runs."""

    label: str  # e.g. "DPO seed 42"
    folder: Path  # the OUT whose runs/ holds (or will hold) its record
    key: str | None  # None: its key depends on a run not logged yet (a cure's later steps)
    logged: bool  # its record exists
    made_here: bool = True  # the table makes it when it is missing (else it must come from elsewhere)


@dataclass(frozen=True)
class Plan:
    corpus_dir: Path
    corpus_id: str
    reference: PlannedRun
    runs: tuple[PlannedRun, ...]  # seed-major: every arm at the first seed, then the next seed


# files of a built corpus that say how the build went, not what it holds: smol-multipref's
# timings.json differs at every build, so keying on it re-ran every arm after a rebuild of the same world
UNKEYED_FILES = frozenset({CORPUS_MARKER, "timings.json"})


def corpus_fingerprint(corpus_dir: Path) -> str:
    """sha256 over every file of the corpus (relative path and content), :data:`UNKEYED_FILES`
    aside: a run's key changes when its data does, wherever the corpus lives, and not when only
    the build's timings do."""
    files = sorted(p for p in corpus_dir.rglob("*") if p.is_file() and p.name not in UNKEYED_FILES)
    if not files:
        raise ConfigError(f"corpus: {corpus_dir} holds no files")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(corpus_dir).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# ------------------------------------------------------------------------------------ corpus
def prepare_corpus(config: ExperimentConfig, backend: Backend, out: Path, log: Callable[[str], None],
                   build: bool = True) -> Path:
    """The corpus directory: ``corpus.path``, or OUT/corpus built once by ``corpus.builder``.

    A build goes into a temporary folder that is renamed into place with a marker (builder and
    config) once complete; a later run reuses the folder when the marker matches and refuses one
    built from another config.
    """
    spec = config.corpus
    if spec.path is not None:
        path = Path(spec.path)
        if not path.is_dir():
            raise ConfigError(f"corpus.path: {path} is not a directory")
        log(f"corpus: using {path}")
        return path
    directory = out / "corpus"
    marker = directory / CORPUS_MARKER
    wanted: dict[str, Any] = {"builder": spec.builder, "config": spec.config}
    sources = backend.corpus_sources(spec.builder, dict(spec.config))
    if sources:
        wanted["sources"] = sources
    if marker.exists():
        _check_marker(json.loads(marker.read_text(encoding="utf-8")), wanted, directory)
        log(f"corpus: reusing {directory} ({spec.builder})")
        return directory
    if directory.exists():
        raise ConfigError(f"corpus: {directory} exists but was not built by this runner (no "
                          f"{CORPUS_MARKER}); use another output_dir or delete that folder")
    if not build:
        raise FileNotFoundError(f"corpus: {directory} has not been built; nothing is logged under {out}")
    start = time.perf_counter()
    log(f"corpus: building {spec.builder} into {directory} ...")
    building = out / ".corpus-building"  # a crashed build leaves only this, cleared next time
    shutil.rmtree(building, ignore_errors=True)
    described = backend.build_corpus(spec.builder, dict(spec.config), building)
    for line in described.splitlines() if isinstance(described, str) else ():
        log(f"corpus: {line.replace(str(building), str(directory))}")
    write_record(building / CORPUS_MARKER, wanted)
    os.replace(building, directory)
    log(f"corpus: built in {time.perf_counter() - start:.1f} s")
    return directory


def _check_marker(built: dict, wanted: dict, directory: Path) -> None:
    """A corpus folder is reused only when built from the same builder, config and source files."""
    if canonical_json(built) == canonical_json(wanted):
        return
    same_config = all(canonical_json(built.get(k)) == canonical_json(wanted.get(k)) for k in ("builder", "config"))
    if same_config and "sources" in wanted:
        changed = sorted(k for k, v in wanted["sources"].items() if (built.get("sources") or {}).get(k) != v)
        raise ConfigError(f"corpus: {', '.join(changed)} changed since {directory} was built from it; delete "
                          "that folder to build it again from the data as it is now (the runs logged on "
                          "the old data keep their own keys), or use another output_dir")
    raise ConfigError(f"corpus: {directory} was built from {built}, not from {wanted}; "
                      "use another output_dir or delete that folder")


# -------------------------------------------------------------------------------------- plan
def _resolve(resolver: Callable[[dict], dict], settings: dict, where: str) -> dict:
    try:
        resolved = resolver(settings)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
    return to_dict(resolved)


def _arm_settings(config: ExperimentConfig, arm, where: str, seed: int) -> dict:
    """An arm's preference settings before resolving: ``train``, its own ``params``, its method (an
    arm's name: its method and bias variant, :func:`badpo.methods.arm_settings`) and seed."""
    merged = merge_settings(config.train, arm.params, where)
    named = arm_settings(arm.method)
    given = merged.get("bias", {}).get("variant") if isinstance(merged.get("bias"), dict) else None
    if given is not None and "bias.variant" in named and given != named["bias.variant"]:
        raise ConfigError(f"{where}: method {arm.method!r} trains bias.variant {named['bias.variant']!r}, "
                          f"but bias.variant is {given!r}; give one")
    return merge_settings(merged, {**named, "runtime.seed": seed}, where)


def _refuse_bad_sections(config: ExperimentConfig, backend: Backend) -> None:
    """Bad keys or values in more than one section (the corpus's config, evaluation, reference,
    each arm) named in one line, so a user who fixes one does not meet the next on the next run.
    Arms that fail alike (a typo under ``train``) are named together."""
    checks: list[tuple[str, Callable[[], Any]]] = [
        ("evaluation", lambda: backend.resolve_evaluation(to_dict(config.evaluation))),
        ("reference", lambda: backend.resolve_reference(merge_settings({}, config.reference, "reference")))]
    if config.corpus.builder is not None:
        checks.insert(0, ("", lambda: backend.check_corpus(config.corpus.builder, dict(config.corpus.config))))
    for index, arm in enumerate(config.arms if config.seeds else ()):
        where = f"arms[{index}] ({arm.name})"
        checks.append((where, lambda where=where, arm=arm: backend.resolve_arm(
            _arm_settings(config, arm, where, config.seeds[0]))))
    failed: dict[str, list[str]] = {}
    for where, check in checks:
        try:
            check()
        except ConfigError as error:
            message = str(error).removeprefix(f"{where}: ")
            failed.setdefault(message, []).append(where)
    if len(failed) > 1:
        raise ConfigError("; ".join(f"{', '.join(w for w in wheres if w)}: {message}" if any(wheres)
                                    else message for message, wheres in failed.items()))


def plan_experiment(config: ExperimentConfig, backend: Backend, corpus_dir: Path,
                    corpus_id: str | None = None) -> Plan:
    """Resolve and key every run before anything trains, so a bad setting fails at once (bad
    settings in several sections all in one line). ``corpus_id``: the corpus's fingerprint
    (default: read from ``corpus_dir``)."""
    _refuse_bad_sections(config, backend)
    corpus_id = corpus_id or corpus_fingerprint(corpus_dir)
    evaluation = _resolve(backend.resolve_evaluation, to_dict(config.evaluation), "evaluation")
    _check_metrics(config, backend, evaluation)
    settings = _resolve(backend.resolve_reference, merge_settings({}, config.reference, "reference"),
                        "reference")
    trained = {"settings": keyed_settings(settings), "corpus": corpus_id,
               **_data_identity(backend, settings, corpus_dir, "reference", "reference")}
    keyed = {**trained, "evaluation": evaluation}
    reference = PlannedRun(run_key("reference", keyed, None), "reference", None, None, None,
                           settings, keyed, run_key("reference", trained, None))
    runs, owners = [], {}
    for seed in config.seeds:
        for index, arm in enumerate(config.arms):
            where = f"arms[{index}] ({arm.name})"
            settings = _resolve(backend.resolve_arm, _arm_settings(config, arm, where, seed), where)
            trained = {"settings": keyed_settings(settings), "corpus": corpus_id,
                       "reference": reference.training_key,
                       **_data_identity(backend, settings, corpus_dir, "arm", where)}
            keyed = {**trained, "evaluation": evaluation}
            name = trained["settings"]["method"]  # the arm's one name, however the config spells it
            key = run_key(name, keyed, seed)
            if key in owners:
                raise ConfigError(f"{where}: the same method and settings as {owners[key]}; "
                                  "two rows would be one run")
            owners[key] = where
            runs.append(PlannedRun(key, "arm", arm.name, name, seed, settings, keyed,
                                   run_key(name, trained, seed)))
    return Plan(corpus_dir, corpus_id, reference, tuple(runs))


def plan_unbuilt(config: ExperimentConfig, backend: Backend, folders: Sequence[Path] = ()) -> tuple[Plan, bool]:
    """The plan of an experiment without building anything: (plan, whether its corpus is built).

    Its corpus is its own OUT/corpus or, when that is not built, the first of ``folders`` that
    holds one built from the same config (a sweep copies it from there first). A corpus not built
    anywhere yet stands in as the hash of its builder and config, with the data checks left to
    the build: no run on it can be logged, and two experiments that would build the same corpus
    still give one run the same key."""
    quiet: Callable[[str], None] = lambda text: None  # noqa: E731
    for out in (Path(config.output_dir), *folders):
        try:
            corpus_dir = prepare_corpus(config, backend, out, quiet, build=False)
        except FileNotFoundError:
            continue
        return plan_experiment(config, backend, corpus_dir), True
    stand_in = "unbuilt-" + stable_hash({"builder": config.corpus.builder, "config": config.corpus.config})
    unchecked = dataclasses.replace(backend, check_data=lambda settings, kind: None)
    return plan_experiment(config, unchecked, Path(config.output_dir) / "corpus", stand_in), False


def _data_identity(backend: Backend, settings: dict, corpus_dir: Path, kind: str, where: str) -> dict:
    """Check the data a run reads when the sweep is planned (not when the run starts, after the
    reference and other arms trained), and key data outside the corpus folder by its content (the
    corpus is keyed by its own fingerprint, so a key of a run on corpus data stays as it was)."""
    filled = fill_placeholders(settings, {"corpus": str(corpus_dir.resolve())})
    data = filled.get("data")
    try:
        backend.check_data(filled, kind)
        inside = isinstance(data, str) and corpus_dir.resolve() in Path(data).resolve().parents
        fingerprint = None if inside or "{" in str(data) else backend.data_fingerprint(filled)
    except (ValueError, OSError) as error:
        raise ConfigError(f"{where}: {error}") from None
    return {} if fingerprint is None else {"data": fingerprint}


def _check_metrics(config: ExperimentConfig, backend: Backend, evaluation: dict) -> None:
    """Every readout a table or plot names must be one the readout settings produce."""
    named = [(f"tables[{t}].columns[{c}] ({column.header})", metric)
             for t, table in enumerate(config.tables) for c, column in enumerate(table.columns)
             for metric in (column.metric, column.ceiling) if metric is not None]
    named += [(f"plots.rates[{i}] ({column.header})", column.metric)
              for i, column in enumerate(config.plots.rates)]
    for where, metric in named:
        reason = backend.readout_unavailable(evaluation, metric)
        if reason is not None:
            raise ConfigError(f"{where}: readout {metric!r} is not written under this experiment's "
                              f"evaluation settings: {reason}")


# --------------------------------------------------------------------------------------- run
def fill_placeholders(value: Any, replacements: Mapping[str, str]) -> Any:
    """Replace ``{name}`` (``{corpus}``, ``{reference}``, ``{source}``…) by its text in every string
    of a settings tree."""
    if isinstance(value, str):
        for name, replacement in replacements.items():
            value = value.replace("{" + name + "}", replacement)
        return value
    if isinstance(value, dict):
        return {k: fill_placeholders(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(v, replacements) for v in value]
    return value


def _uses(value: Any, placeholder: str) -> bool:
    return placeholder in canonical_json(value)


def _jsonable(value: Any, where: str) -> Any:
    """A run's result as plain JSON values: numpy scalars and 0-d tensors become Python
    numbers (exactly), tuples lists; anything else that JSON cannot hold is an error naming it."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"{where}: key {key!r} is not a string")
        return {k: _jsonable(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor) and value.dim() == 0:
        return value.item()
    raise TypeError(f"{where}: {type(value).__name__} is not a JSON value (convert it to a number, "
                    "a string, a list or a mapping)")


def _check_result(result: Any, planned: PlannedRun) -> Mapping:
    if not isinstance(result, Mapping) or not isinstance(result.get("readouts"), Mapping):
        raise TypeError(f"{planned.key}: the run returned {type(result).__name__}; expected a "
                        "mapping with a 'readouts' mapping")
    unknown = sorted(set(result) - RESULT_KEYS)
    if unknown:
        raise TypeError(f"{planned.key}: the run returned unknown keys {unknown}; "
                        f"expected {sorted(RESULT_KEYS)}")
    return result


def _execute(planned: PlannedRun, plan: Plan, config: ExperimentConfig, backend: Backend, out: Path,
             reference: dict | None) -> dict:
    """Run one planned run through the backend and build its record (not yet written)."""
    replacements = {"corpus": str(plan.corpus_dir.resolve())}
    if planned.kind == "arm" and _uses(planned.settings, "{reference}"):
        model = (reference or {}).get("artifacts", {}).get("model")
        if model is None:
            raise ValueError(f"{planned.key}: the settings use {{reference}} but the reference "
                             "record has no artifacts.model")
        replacements["reference"] = str((out / model).resolve())
    elif _uses(planned.settings, "{reference}"):
        raise ConfigError("reference: its own settings cannot use {reference}")
    work_dir = out / "work" / planned.training_key
    work_dir.mkdir(parents=True, exist_ok=True)
    task = RunTask(planned.key, planned.kind, planned.arm, planned.method, planned.seed,
                   fill_placeholders(planned.settings, replacements), to_dict(config.evaluation),
                   plan.corpus_dir, work_dir, out, reference)
    run = backend.run_reference if planned.kind == "reference" else backend.run_arm
    start = time.perf_counter()
    result = _check_result(run(task), planned)
    wall = time.perf_counter() - start
    return {
        "schema": SCHEMA, "key": planned.key, "kind": planned.kind, "arm": planned.arm,
        "method": planned.method, "seed": planned.seed, "settings": planned.settings,
        "corpus": plan.corpus_id, "reference": (reference or {}).get("key"),
        "training_key": planned.training_key,
        "evaluation": planned.keyed["evaluation"],
        "readouts": _jsonable(result["readouts"], f"{planned.key}: readouts"),
        "theta": _jsonable(result.get("theta"), f"{planned.key}: theta"),
        "artifacts": {k: relative_artifact(v, out) for k, v in (result.get("artifacts") or {}).items()},
        "wall_time_s": round(wall, 3),
        "provenance": provenance(),  # the commit, versions, device and threads that made it
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _label(planned: PlannedRun) -> str:
    return "reference" if planned.kind == "reference" else f"{planned.arm} seed {planned.seed}"


def run_all(config: ExperimentConfig, backend: Backend, plan: Plan, out: Path,
            log: Callable[[str], None]) -> dict[str, dict]:
    """Run every planned key whose record is missing, the reference first; return the records
    of the plan as read back from disk."""
    runs_dir = out / "runs"
    provenance()  # taken now, before any run: the code this process loaded (paper/provenance.py)
    todo = [p for p in (plan.reference, *plan.runs) if not (runs_dir / f"{p.key}.json").exists()]
    total = 1 + len(plan.runs)
    log(f"plan: reference + {len(config.arms)} arm(s) x {len(config.seeds)} seed(s) = {total} runs; "
        f"{total - len(todo)} logged, {len(todo)} to run")
    reference = None
    arm_seconds: list[float] = []
    left = sum(1 for p in todo if p.kind != "reference")
    for number, planned in enumerate((plan.reference, *plan.runs)):
        path = runs_dir / f"{planned.key}.json"
        prefix = f"[{number}/{total - 1}] {_label(planned)} ({planned.key})"
        if path.exists():
            log(f"{prefix}: logged, skipped")
        else:
            log(f"{prefix}: running ...")
            record = _execute(planned, plan, config, backend, out, reference)
            write_record(path, record)
            if planned.kind != "reference":
                arm_seconds.append(record["wall_time_s"])
                left -= 1
            log(f"{prefix}: done in {record['wall_time_s']:.1f} s{eta_note(arm_seconds, left)}")
        if planned.kind == "reference":
            reference = read_records_for(runs_dir, [planned.key])[planned.key]
    return read_records_for(runs_dir, [p.key for p in (plan.reference, *plan.runs)])


def eta_note(arm_seconds: Sequence[float], left: int) -> str:
    """"; ETA ..." for the arm runs still to run, at the mean wall time of those run so far (the
    reference, trained once, is not an arm's cost); empty before the first arm or after the last."""
    if not arm_seconds or left <= 0:
        return ""
    seconds = left * sum(arm_seconds) / len(arm_seconds)
    return f"; {left} arm run(s) left, ETA {seconds / 60:.0f} min"
