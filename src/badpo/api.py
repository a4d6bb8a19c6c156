"""The Python API: ``badpo.train``, ``badpo.sft``, ``badpo.rm``, ``badpo.evaluate``, ``badpo.audit`` and
``badpo.compare``, each one call taking what its command takes.

A config is a YAML path, a dict or a config object, with keyword overrides on top (a dict value
updates that section: ``optim={"lr": 1e-3}`` keeps the other ``optim`` keys). Wherever a command
reads data (``data``; evaluate's ``heldout`` and ``prompts``; the audit's ``data``) the call also
takes a ``datasets.Dataset`` or a list of dict rows: it is read in memory and ``config.yaml``
records its fingerprint (``datasets.Dataset:<fingerprint>``, ``rows:<fingerprint>``), so that the
same call with the same data resumes or finds the same run. Each result has ``summary()``: the
lines its command prints. These functions are reached through ``badpo.<name>``, which imports
this module only when one is first used; torch, transformers and accelerate are imported by the
call that needs them (``badpo audit`` goes through :func:`audit` without loading torch).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError, from_dict, load_config, to_dict
from badpo.core.jsonio import atomic_write_text
from badpo.data.sources import in_memory
from badpo.run_folder.layout import SFT_RECORD

__all__ = ["AuditResult", "EvalResult", "RMResult", "SFTResult", "TrainResult", "audit", "compare", "evaluate",
           "rm", "sft", "train"]


def _final_line(final: dict) -> str:
    """The last log record's loss and theta_bar, as a line."""
    parts = [f"loss {final['loss']:.4f}"] if isinstance(final.get("loss"), (int, float)) else []
    theta = final.get("theta_bar")
    if isinstance(theta, dict) and theta:
        parts.append("theta_bar " + ", ".join(f"{name} {value:+.3f}" for name, value in theta.items()))
    return "; ".join(parts)


@dataclass(frozen=True)
class TrainResult:
    """A finished preference run: its folder, ``theta.json`` as a dict (None when the method learns
    no theta), and the last log record (loss, theta_bar, ...)."""

    run_dir: Path
    theta: dict | None
    final: dict

    @property
    def folder(self) -> Path:
        """What ``badpo train`` (``badpo rm``) prints on stdout."""
        return self.run_dir

    def summary(self) -> str:
        """The folder (all ``badpo train`` prints on stdout), then the final loss and theta_bar."""
        return "\n".join(filter(None, (str(self.run_dir), _final_line(self.final))))

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class RMResult(TrainResult):
    """A finished reward model (``badpo rm``): its folder (the model is ``run_dir/reward_model``),
    ``theta.json`` as a dict (None for variant none) and the last log record."""


@dataclass(frozen=True)
class SFTResult:
    """The reference's folder (Hugging Face format) and its ``sft.json`` record."""

    model_dir: Path
    record: dict  # sft.json: rows read, pairs with tied votes, steps, ...

    @property
    def folder(self) -> Path:
        """What ``badpo sft`` prints on stdout."""
        return self.model_dir

    def summary(self) -> str:
        """The folder, which is what ``badpo sft`` prints."""
        return str(self.model_dir)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class EvalResult:
    """The readouts of a run, as written to ``path`` (``run_dir/readouts.json`` by default)."""

    run_dir: Path
    readouts: dict
    path: Path | None = None

    def summary(self) -> str:
        """The lines ``badpo evaluate`` prints: what was read, each readout, what was skipped and why."""
        from badpo.evaluation.trained_run import summary

        return summary(self.readouts, self.path)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class AuditResult:
    """``badpo audit``'s findings: ``audit`` (a :class:`badpo.auditing.estimates.Audit`: per attribute
    the cross-group shares and offline log-odds, the annotator graph, the warnings), ``text`` (what
    the command prints) and ``report`` (what ``REPORT_DIR/audit.json`` holds, when one was written)."""

    audit: Any
    text: str
    report: dict | None = None

    def summary(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def to_json(self) -> str:
        """The audit as ``badpo audit --json`` writes it."""
        return self.audit.to_json()


def train(config: Any = None, /, **overrides: Any) -> TrainResult:
    """Run (or resume, or find finished) one preference run; see ``badpo train``."""
    from badpo.engine.settings import TrainConfig
    from badpo.engine.train import train as train_stage

    with _resolved(TrainConfig, config, overrides, stage="train") as resolved:
        run_dir = Path(train_stage(resolved))
    theta, final = _finished(run_dir)
    return TrainResult(run_dir=run_dir, theta=theta, final=final)


def rm(config: Any = None, /, **overrides: Any) -> RMResult:
    """Train (or resume, or find finished) one reward model; see ``badpo rm``."""
    from badpo.engine.reward import train_reward_model
    from badpo.engine.settings import RMConfig

    with _resolved(RMConfig, config, overrides, stage="rm") as resolved:
        run_dir = Path(train_reward_model(resolved))
    theta, final = _finished(run_dir)
    return RMResult(run_dir=run_dir, theta=theta, final=final)


def sft(config: Any = None, /, **overrides: Any) -> SFTResult:
    """Train the SFT reference; see ``badpo sft``."""
    from badpo.engine.settings import SFTConfig
    from badpo.engine.sft import sft as sft_stage

    with _resolved(SFTConfig, config, overrides, stage="sft") as resolved:
        model_dir = Path(sft_stage(resolved))
    return SFTResult(model_dir=model_dir, record=_read_json(model_dir / SFT_RECORD) or {})


def evaluate(run_dir: str | os.PathLike, config: Any = None, *, heldout: Any = None, prompts: Any = None,
             corpus: str | os.PathLike | None = None, columns: Mapping[str, str] | None = None,
             out: str | os.PathLike | None = None, trust_remote_code: bool = False, overwrite: bool = False,
             **overrides: Any) -> EvalResult:
    """Every readout of a finished run (``badpo evaluate``), also written to ``out`` (default
    ``run_dir/readouts.json``; never another file inside a run folder, and an existing file,
    ``run_dir/readouts.json`` included, only with ``overwrite``: checked before any model is
    loaded). ``config`` and ``overrides`` are :class:`badpo.readouts.eval_config.EvalConfig` keys;
    without ``attributes`` among them the run's own are read. ``heldout`` and ``prompts`` are each a path, a Hub id, a
    ``datasets.Dataset`` or a list of dict rows; ``corpus`` a folder; ``columns`` (field ->
    column, on top of the run's mapping) as ``--column``: :class:`badpo.evaluation.trained_run.EvalData`."""
    from badpo.core.jsonio import dumps
    from badpo.data.sources import ColumnMap
    from badpo.evaluation.trained_run import EvalData, evaluate_run_dir, readouts_path
    from badpo.readouts.eval_config import EvalConfig
    from badpo.run_folder.ownership import evaluation_lock

    mapped = from_dict(ColumnMap, dict(columns), prefix="columns") if columns is not None else None
    given = EvalData(prompts=prompts, heldout=heldout, corpus=corpus)  # rows in memory are no file it could be
    if Path(run_dir).is_file():  # else the output check below named an --out the user never gave
        raise NotADirectoryError(f"RUN_DIR {run_dir}: is a file, not a run folder (the output folder of "
                                 "badpo train or badpo rm, or a folder BADPOTrainer saved)")
    written = readouts_path(run_dir, out, overwrite, given)  # before anything is read
    with (evaluation_lock(Path(run_dir)), _readable(heldout, "heldout") as heldout_name,
          _readable(prompts, "prompts") as prompts_name):
        data = EvalData(prompts=prompts_name, heldout=heldout_name,
                        corpus=os.fspath(corpus) if corpus is not None else None, columns=mapped)
        readouts = evaluate_run_dir(run_dir, _as_dict(EvalConfig, config, overrides), data,
                                    trust_remote_code=trust_remote_code)
        atomic_write_text(written, dumps(readouts, indent=1, sort_keys=True) + "\n")
    return EvalResult(run_dir=Path(run_dir), readouts=readouts, path=written)


def audit(data: Any = None, attributes: str | Sequence[str] = (), *, split: str | None = None,
          columns: Mapping[str, str] | None = None, report: str | os.PathLike | None = None,
          run: str | os.PathLike | None = None, pseudonym_key: str | None = None, tokenizer: Any = None,
          json_out: str | os.PathLike | None = None, overwrite: bool = False, example: bool = False,
          seed: int = 0, duplicates: str = "keep", discover: bool = False) -> AuditResult:
    """The label audit (``badpo audit``) of ``data`` (a path, a Hub id, a ``datasets.Dataset`` or a
    list of dict rows) on the declared ``attributes`` (specs, as ``-a``), before any training.
    ``report``: write the per-annotator report to that folder (``run``: beside the learned theta_k
    of that run); ``pseudonym_key``: replace annotator ids by keyed hashes in every output;
    ``tokenizer`` (a name, a path or a loaded tokenizer): say how much of the text it reads;
    ``json_out``: also write the audit as JSON; ``example``: the built-in corpus with planted biases
    (data seed ``seed``) instead of ``data``; ``duplicates``: keep (each a vote) or drop exact
    duplicate judgments, as ``--duplicates``; ``discover``: find the attributes instead of declaring
    them (``--discover``; ``seed`` then seeds its split; ``.audit`` is a
    :class:`badpo.auditing.discover.Discovery`). Returns an :class:`AuditResult`, whose ``summary()``
    is what the command prints; the audit's warnings are in the text, not raised."""
    import warnings

    from badpo.run_folder.layout import check_outside_runs

    for option, path in (("json_out", json_out), ("report", report)):
        if path is not None:  # a run's theta.json or a model's weights are no place for an audit's output
            check_outside_runs(path, option)
    if discover:
        return _discover(data, attributes, split, columns, report, json_out, overwrite, seed,
                         run is not None or pseudonym_key is not None or tokenizer is not None or example,
                         duplicates)

    from badpo.auditing.estimates import BiasIdentifiabilityWarning
    from badpo.core.outputs import check_output_file

    specs = [attributes] if isinstance(attributes, str) else list(attributes)
    _check_audit_call(data, specs, example, (report, run, pseudonym_key, tokenizer), run is not None and report is None)
    if json_out is not None:  # before the data is read
        check_output_file(json_out, "json_out", overwrite, [("data", data)])
    with warnings.catch_warnings():  # the text lists them; do not raise them twice
        warnings.simplefilter("ignore", BiasIdentifiabilityWarning)
        if example:
            from badpo.corpora.example import example_report

            result, text = example_report(seed)
            document = None
        else:
            result, text, document = _audit_data(data, specs, split, columns, report, run, pseudonym_key,
                                                 tokenizer, overwrite, duplicates)
    if json_out is not None:
        atomic_write_text(json_out, result.to_json())
    return AuditResult(audit=result, text=text, report=document)


def _discover(data: Any, attributes: Any, split: str | None, columns: Mapping[str, str] | None, report: Any,
              json_out: Any, overwrite: bool, seed: int, others: bool, duplicates: str = "keep") -> AuditResult:
    """:func:`audit` with ``discover=True``."""
    from badpo.auditing.discover import DiscoverySettings
    from badpo.auditing.discover_report import discover_source
    from badpo.core.outputs import check_output_file
    from badpo.data.sources import ColumnMap

    if attributes or others or data is None:
        raise ConfigError("discover=True: give data, and no attributes, run, pseudonym_key, tokenizer or example")
    if json_out is not None:
        check_output_file(json_out, "json_out", overwrite, [("data", data)])
    with _readable(data, "data") as name:
        result, text = discover_source(name, report, data_split=split, overwrite=overwrite,
                                       columns=from_dict(ColumnMap, dict(columns or {}), prefix="columns"),
                                       settings=DiscoverySettings(seed=seed), progress=False,
                                       duplicates=duplicates)
    if json_out is not None:
        atomic_write_text(json_out, result.to_json())
    return AuditResult(audit=result, text=text)


def _check_audit_call(data: Any, specs: list[str], example: bool, data_only: tuple, run_without_report: bool) -> None:
    """The argument errors of :func:`audit`, each one line naming the argument."""
    if example and (data is not None or specs):
        raise ConfigError("example=True audits the built-in corpus; give no data or attributes")
    if example and any(value is not None for value in data_only):
        raise ConfigError("report, run, pseudonym_key and tokenizer apply to data, not to example=True")
    if not example and (data is None or not specs):
        raise ConfigError("audit: give data and at least one attribute spec (or example=True)")
    if run_without_report:
        raise ConfigError("run: the learned theta_k are shown in the report; give report=DIR too")


def _audit_data(data: Any, specs: list[str], split: str | None, columns: Mapping[str, str] | None,
                report: Any, run: Any, key: str | None, tokenizer: Any, overwrite: bool,
                duplicates: str = "keep") -> tuple:
    """:func:`badpo.auditing.report.audit_with_report` on any data the API takes."""
    from badpo.auditing.report import audit_with_report
    from badpo.data.sources import ColumnMap

    if isinstance(tokenizer, (str, os.PathLike)):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(os.fspath(tokenizer))
    mapped = from_dict(ColumnMap, dict(columns or {}), prefix="columns")
    with _readable(data, "data") as name:
        return audit_with_report(name, specs, report, run, key, data_split=split, columns=mapped,
                                 overwrite=overwrite, tokenizer=tokenizer, duplicates=duplicates)


def compare(runs: str | os.PathLike | Sequence[str | os.PathLike], *, reference: str | os.PathLike | None = None,
            baseline: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
            overwrite: bool = False, force: bool = False):
    """Evaluated runs side by side (``badpo compare``): each declared attribute's rate with an
    interval over prompts (with names declared, also the rate from first-name probabilities),
    each run's removal of the baseline's shift, KL, held-out accuracy, theta against the audit's
    estimate and a verdict per run and readout. ``runs`` is one run folder or
    several; with ``out`` the compare files are written there. Runs evaluated or trained
    differently are refused unless ``force`` (the comparison then says so at its top). Returns a
    :class:`badpo.comparing.compare_runs.Comparison`: ``.comparison`` (the dict of compare.json),
    ``.files``, and ``print()`` shows what the command prints."""
    from badpo.comparing.compare_runs import compare_runs

    folders = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)
    return compare_runs(folders, reference=reference, baseline=baseline, out=out, overwrite=overwrite, force=force)


@contextlib.contextmanager
def _resolved(config_class: type, config: Any, overrides: dict[str, Any], stage: str):
    """The typed config, with a ``datasets.Dataset`` or a list of rows in ``data`` readable for the
    block; without a config, a notice names the paper's settings in force (as ``-c`` left out)."""
    from badpo.engine.settings import warn_paper_defaults

    data = _as_dict(config_class, config, overrides)
    with _readable(data.get("data"), "data") as name:
        resolved = from_dict(config_class, {**data, "data": name} if name is not None else data)
        if config is None:
            warn_paper_defaults(stage, overrides, resolved)
        yield resolved


@contextlib.contextmanager
def _readable(source: Any, key: str) -> Iterator[str | None]:
    """A data source as the text a config holds: a path or Hub id as it is; a ``datasets.Dataset``
    or a list of dict rows under its in-memory name (readable for the block); None as None."""
    if source is None or isinstance(source, (str, os.PathLike)):
        yield os.fspath(source) if source is not None else None
        return
    if not isinstance(source, (list, tuple)) and type(source).__module__.split(".")[0] != "datasets":
        raise ConfigError(f"{key}: expected a path, a Hub dataset id, a datasets.Dataset or a list of dict "
                          f"rows, got {type(source).__name__}")
    if isinstance(source, (list, tuple)):
        bad = next((i for i, row in enumerate(source) if not isinstance(row, Mapping)), None)
        if bad is not None:
            raise ConfigError(f"{key}: row {bad} is a {type(source[bad]).__name__}, not a dict of column -> value")
    elif type(source).__name__ != "Dataset":
        raise ConfigError(f"{key}: expected one split (a datasets.Dataset), got a {type(source).__name__}")
    with in_memory(source) as name:
        yield name


def _as_dict(config_class: type, config: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    if config is None:
        base: dict[str, Any] = {}
    elif isinstance(config, config_class):
        base = to_dict(config)
    elif isinstance(config, (str, os.PathLike)):
        base = to_dict(load_config(config_class, config))
    elif isinstance(config, Mapping):
        base = dict(config)
    else:
        raise ConfigError(f"config: expected a YAML path, a dict or a {config_class.__name__}, "
                          f"got {type(config).__name__}")
    return _merged(base, overrides)


def _merged(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` on top; a dict updates a dict section key by key."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _finished(run_dir: Path) -> tuple[dict | None, dict]:
    """A finished run's theta.json and run.json's ``final``, read through
    :class:`badpo.run_folder.saved.SavedRun`."""
    from badpo.run_folder.saved import SavedRun

    saved = SavedRun(run_dir)
    return saved.theta(), saved.final()


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
