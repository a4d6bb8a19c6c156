"""The per-step log of a run: ``log.jsonl``, a tqdm bar, and the trackers of ``report.report_to``.

The trackers are accelerate's own (``accelerate.tracking``: tensorboard, wandb, mlflow, aim,
comet_ml, ...), built here per run folder rather than once per ``Accelerator(log_with=...)``: one
accelerator trains every policy of an arm of several policies, each into its own folder. A tracker
that writes files gets ``OUTPUT/<tracker name>`` (``OUTPUT/tensorboard``); the others log to the
project ``report.wandb_project`` under the run folder's name.

Only the main process writes. On resume the log is cut back to the checkpoint's step, so that
steps replayed after a crash are not listed twice.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from badpo.core.jsonio import dumps
from badpo.core.notices import BadpoWarning
from badpo.core.progress import step_bar
from badpo.data.coverage import WARN_SHARE
from badpo.engine.settings import ReportConfig
from badpo.run_folder.layout import LOG_FILE


def report_input(accelerator, report: dict, stage: str) -> None:
    """Say on the terminal what the data check found (the same counts go to run.json), under the
    name of the stage that read the data (``badpo rm`` runs the preference loop too)."""
    counts = [(report["truncated_prompts"], "prompt(s) cut to tokenization.max_prompt_tokens"),
              (report["truncated_responses"], "response(s) cut by tokenization.max_length"),
              (report["identical_pairs_dropped"], "judgment(s) with identical sides dropped"),
              (report["exact_duplicate_judgments"], "exact duplicate judgment(s), kept: each counts as a vote "
               "(duplicates=drop drops the repeats, as badpo audit --duplicates drop)"),
              (report.get("exact_duplicates_dropped", 0), "exact duplicate judgment(s) dropped (duplicates=drop)"),
              (report["whitespace_only_pairs"], "judgment(s) whose sides differ only in whitespace, kept "
               "(their tokens differ, so they train the policy on whitespace alone)")]
    if not accelerator.is_main_process:
        return
    for count, what in counts:
        if count:
            print(f"badpo {stage}: {count} {what}", file=sys.stderr)
    report_coverage(report.get("unknown_tokens"), stage)


def report_coverage(coverage: dict | None, stage: str) -> None:
    """One line with the share of unknown tokens per side when any is not 0 (above 5% the data
    check has warned already; the shares are in run.json either way)."""
    if not coverage:
        return
    shares = {k: v for k, v in coverage.items() if k not in ("unknown_token", "tokenizer")}
    if any(shares.values()) and max(shares.values()) <= WARN_SHARE:
        listed = ", ".join(f"{side} {share:.1%}" for side, share in shares.items())
        print(f"badpo {stage}: {coverage['unknown_token']} tokens (the tokenizer of {coverage['tokenizer']} "
              f"cannot read them): {listed}", file=sys.stderr)


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """{"theta_bar": {"x": 1}} -> {"theta_bar/x": 1}: the scalars a tracker plots."""
    out: dict[str, float] = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"{prefix}{key}"] = value
    return out


THETA_TAIL = 0.1  # the last tenth of the steps
THETA_MOVING = 0.05  # theta_bar still moving: changed by more than 5% of its size over that tail


def theta_convergence(records: list[dict[str, Any]], steps: int) -> dict[str, Any] | None:
    """Whether theta_bar settled: its change over the last tenth of the ``steps`` (log records
    with ``theta_bar``), per attribute, against its size at the end. ``converged`` is False when
    any attribute moved by more than 5% of max(|theta_bar|, 0.1) there: a theta still rising after
    tens of steps looks like a result and is not one. None without a logged theta."""
    logged = [r for r in records if isinstance(r.get("theta_bar"), dict)  # a non-finite theta is logged as null
              and all(isinstance(v, (int, float)) for v in r["theta_bar"].values())]
    if not logged:
        return None
    start_step = steps - max(1, round(THETA_TAIL * steps))
    first = next((r for r in logged if r["step"] >= start_step), logged[0])
    last = logged[-1]
    attributes = {}
    for name, end in last["theta_bar"].items():
        begin = first["theta_bar"][name]
        relative = abs(end - begin) / max(abs(end), 0.1)
        attributes[name] = {"from": begin, "to": end, "relative_change": relative,
                            "moving": relative > THETA_MOVING}
    return {"steps": [first["step"], last["step"]], "attributes": attributes,
            "converged": not any(a["moving"] for a in attributes.values())}


def theta_notice(convergence: dict[str, Any] | None, stage: str) -> None:
    """Say so on the terminal when theta_bar was still moving at the end."""
    if convergence is None or convergence["converged"]:
        return
    moving = ", ".join(f"{name} {a['from']:.3f} -> {a['to']:.3f}" for name, a in convergence["attributes"].items()
                       if a["moving"])
    first, last = convergence["steps"]
    print(f"badpo {stage}: theta_bar was still moving over steps {first}-{last} ({moving}); it has not "
          "converged: train longer (steps) or read theta as a lower bound (run.json: theta_convergence)",
          file=sys.stderr)


THETA_K_CURVES = 32  # at most this many annotators get a curve each on the trackers; more get the spread only


def annotator_theta(bias) -> dict[str, dict[str, float]] | None:
    """{attribute: {annotator: theta_k}} of a bias channel that learns one theta per annotator;
    None for DPO and pooled (one theta: theta_bar says it all)."""
    if bias is None or not (bias.facts.learns_theta and bias.facts.per_annotator):
        return None
    rows = bias.theta().detach().double().cpu().tolist()
    return {name: {annotator: row[i] for annotator, row in zip(bias.annotators, rows)}
            for i, name in enumerate(bias.attribute_names)}


def theta_k_scalars(theta_k: Mapping[str, Mapping[str, float]], ids: bool = True) -> dict[str, float]:
    """Tracker scalars of the per-annotator theta_k: ``theta_k_sd/<attribute>`` (their spread
    across annotators: the signal BA-DPO has, where theta_bar alone shows the shared level) and,
    with ``ids`` and at most :data:`THETA_K_CURVES` annotators, ``theta_k/<attribute>/<annotator>``."""
    scalars: dict[str, float] = {}
    for name, values in theta_k.items():
        numbers = list(values.values())
        mean = sum(numbers) / len(numbers)
        scalars[f"theta_k_sd/{name}"] = (sum((v - mean) ** 2 for v in numbers) / len(numbers)) ** 0.5
        if ids and len(values) <= THETA_K_CURVES:
            scalars.update({f"theta_k/{name}/{annotator}": value for annotator, value in values.items()})
    return scalars


def log_theta_k(tracker, theta_k: Mapping[str, Mapping[str, float]], step: int, final: bool = False,
                ids: bool = True) -> None:
    """The per-annotator theta_k on one accelerate tracker at ``step``: :func:`theta_k_scalars`,
    a histogram per attribute where the tracker draws one (tensorboard), and at the ``final``
    step, with ``ids``, a table annotator x attribute (a tracker's own table, or tensorboard's text)."""
    tracker.log(theta_k_scalars(theta_k, ids), step=step)
    if tracker.name == "tensorboard":
        import numpy as np

        for name, values in theta_k.items():
            tracker.tracker.add_histogram(f"theta_k/{name}", np.array(list(values.values())), global_step=step)
    if not (final and ids):
        return
    names = list(theta_k)
    annotators = list(next(iter(theta_k.values())))
    rows = [[annotator, *(theta_k[name][annotator] for name in names)] for annotator in annotators]
    if hasattr(tracker, "log_table"):
        tracker.log_table("theta_k", columns=["annotator", *names], data=rows, step=step)
    elif tracker.name == "tensorboard":
        lines = ["| annotator | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        lines += ["| " + " | ".join([str(row[0]), *(f"{v:+.4f}" for v in row[1:])]) + " |" for row in rows]
        tracker.log({"theta_k": "\n".join(lines)}, step=step)


def read_log(output_dir: Path) -> list[dict[str, Any]]:
    path = output_dir / LOG_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _kept_records(path: Path, start_step: int) -> list[str]:
    """The lines of ``path`` (a resumed run's log.jsonl) up to ``start_step``. A torn last line (a run
    killed while it wrote) is left out with a warning; a line that is not JSON elsewhere is an error
    naming the file and the line."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = []
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                warnings.warn(f"{path}: its last line is torn (a run stopped while writing it); left out",
                              BadpoWarning, stacklevel=3)
                break
            raise ValueError(f"{path} line {number}: not a JSON record; the log cannot be resumed") from None
        if record["step"] <= start_step:
            kept.append(line)
    return kept


class RunLog:
    """Append step records; ``close()`` flushes the sinks."""

    def __init__(self, output_dir: Path, report: ReportConfig, total_steps: int, start_step: int,
                 is_main: bool, run_config: dict[str, Any], description: str) -> None:
        self.report, self.total_steps, self.is_main = report, total_steps, is_main
        self.trackers: list = []
        self.bar = self.file = None
        if not is_main:
            return
        path = output_dir / LOG_FILE
        kept = _kept_records(path, start_step) if start_step > 0 and path.exists() else []
        if path.is_symlink():  # the run's log is its own file: never written through a link to elsewhere
            path.unlink()
        path.write_text("".join(line + "\n" for line in kept))
        self.file = open(path, "a", encoding="utf-8")
        self.trackers = _start_trackers(report, output_dir, run_config)
        if report.progress_bar:
            self.bar = step_bar(total_steps, start_step, description)

    def wants(self, step: int) -> bool:
        """Whether step ``step`` (1-based) is logged: every ``log_every`` and the last one."""
        return step % self.report.log_every == 0 or step == self.total_steps

    def log(self, step: int, record: dict[str, Any], theta_k: Mapping[str, Mapping[str, float]] | None = None) -> None:
        """Write ``record`` to log.jsonl and the trackers; ``theta_k`` ({attribute: {annotator:
        value}}) goes to the trackers only (:func:`log_theta_k`): log.jsonl keeps theta_bar, and
        theta.json every theta_k."""
        if not self.is_main:
            return
        record = {"step": step, **record}
        self.file.write(dumps(record) + "\n")
        self.file.flush()
        scalars = _flat(record)
        for tracker in self.trackers:
            tracker.log(scalars, step=step)
            if theta_k:
                log_theta_k(tracker, theta_k, step, final=step == self.total_steps, ids=self.report.annotator_ids)
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{record.get('loss', float('nan')):.4f}", refresh=False)

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        for sink in (self.file, self.bar):
            if sink is not None:
                sink.close()
        for tracker in self.trackers:
            tracker.finish()


def _start_trackers(report: ReportConfig, output_dir: Path, run_config: dict[str, Any]) -> list:
    """accelerate's tracker of each ``report_to`` name, started, with the run's config as its
    hyperparameters (flattened: dotted keys, lists as text, as every tracker accepts)."""
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    hyperparameters = {key: value if isinstance(value, (int, float, str, bool)) or value is None
                       else str(value) for key, value in _flat_config(run_config).items()}
    trackers = []
    for name in report.report_to:
        tracker_class = LOGGER_TYPE_TO_CLASS[name]
        if tracker_class.requires_logging_directory:
            tracker = tracker_class(name, str(output_dir))
        elif name == "wandb":
            tracker = tracker_class(report.wandb_project, name=output_dir.name, dir=str(output_dir))
        else:
            tracker = tracker_class(report.wandb_project)
        tracker.start()
        tracker.store_init_configuration(hyperparameters)
        trackers.append(tracker)
    return trackers


def _flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(_flat_config(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
