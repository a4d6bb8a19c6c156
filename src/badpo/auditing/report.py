"""The per-annotator audit report, ``badpo audit --report DIR``: every annotator's bias on every
declared attribute, estimated jointly, with a standard error, flags against a robust pool level,
per-class levels, a forest plot per attribute, and pseudonymous ids on request.

**The estimate** of annotator k is one penalised logistic regression on the attribute
differences of all of k's judgments, every declared attribute at once
(:mod:`badpo.auditing.joint`: a normal prior of sd 2.5 on the log-odds scale keeps it finite), so a
vote is credited to the attribute that explains it: a rater who likes emoji is not read as
disliking the sign-off that the emoji side tends to lack. Its interval is estimate +- 1.96 se.
The marginal estimate (one attribute at a time, k's cross-group judgments on it only:
``log((w + 1/2) / (n - w + 1/2))`` with its profile interval,
:func:`badpo.auditing.estimates.penalised_log_odds`) is kept beside it as ``marginal_*``: where the
two differ in sign or size, the attributes are confounded in k's judgments.

**The level** of the pool is a biweight location of the annotators' joint estimates
(:func:`badpo.auditing.joint.robust_level`): the annotators far from the bulk get weight 0
(``level_weight``), so the biased raters the flags are meant to find do not pull it toward
themselves, as they pull the log-odds pooled over all judgments (kept as ``pooled_marginal``). A
class's level is the same over the class's annotators. Flags, per attribute:

- ``unidentified``: no cross-group judgment; no estimate (theta_k is not identified).
- ``divergent``: every (``+inf``) or no (``-inf``) cross-group vote went to the attribute side;
  the maximum likelihood is infinite, the penalised estimate is finite but rests on a one-sided
  count.
- ``outlying``: ``|estimate - level| / se > 1.96`` (two-sided p < 0.05): the annotator's bias on
  this attribute differs from the pool's, other attributes held fixed. One test per annotator:
  among m annotators who all share the level about 0.05 m are flagged by chance.
  ``outlying_bonferroni`` (p < 0.05 / m, m = the annotators with an estimate) keeps the chance of
  any false flag under about 5% and misses more real ones. ``outlying_in_class`` compares with the
  annotator's class level instead (classes only). The level's own uncertainty is not in the test.

Beside a trained run (``--run RUN_DIR``) the learned theta_k of its ``theta.json`` is shown.
It is not the same quantity: theta_k explains k's votes given the policy's own margins, and
its shared level is a free choice of the method (anchoring), so compare order and spread, not
the level. ``learned_vs_offline_correlation`` is their Pearson correlation (learned against the
joint estimate) over the annotators that have both.

Pseudonyms are ``anon-`` and 12 hex digits of HMAC-SHA256(key, id), with a key the user keeps:
the same key gives the same pseudonym on every run (so a growing pool can be followed), while
without the key a pseudonym cannot be reversed by hashing candidate ids, as an unsalted hash of
a short id could. The ids are replaced before the audit runs, so every output (the printed table
and its warnings, ``--json``, the CSV, JSON, plots and README) holds only pseudonyms.

Audit layer: numpy, matplotlib (Agg canvas, no pyplot, in :mod:`badpo.auditing.forest`) and the label
audit.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from badpo.auditing.estimates import (
    Audit,
    CoordinateAudit,
    LogOdds,
    attribute_differences,
    audit,
    penalised_log_odds,
)
from badpo.auditing.forest import plot_forest
from badpo.auditing.joint import PRIOR_SCALE, JointFit, fit_joint, robust_level, two_sided_p
from badpo.auditing.reliability import reliability_row
from badpo.auditing.report_html import audit_html
from badpo.auditing.report_text import format_report, summary
from badpo.auditing.terminal_table import format_audit
from badpo.core.attributes import resolve_attributes
from badpo.core.file_sets import folder_lock
from badpo.core.jsonio import atomic_write_text
from badpo.core.judgments import Judgment, handle_duplicates
from badpo.core.label_counts import estimates_line, label_counts, wins_for_estimates
from badpo.core.outputs import check_not_input, check_writable_folder, spreadsheet_safe
from badpo.data.coverage import check_coverage, unknown_share
from badpo.data.sources import ColumnMap, read_judgment_source

__all__ = ["REPORT_FORMAT", "attribute_report", "audit_with_report", "format_report", "load_learned_theta",
           "previous_report", "pseudonymise", "pseudonymiser", "summary", "write_report"]

REPORT_FORMAT = "badpo-audit-report/2"  # 2: joint estimates against a robust level
_FORMATS = (REPORT_FORMAT, "badpo-audit-report/1")  # reports an --overwrite may replace
LEVEL = 0.95
_ALPHA = 1 - LEVEL
_Z = NormalDist().inv_cdf(1 - _ALPHA / 2)
_CSV_COLUMNS = ("attribute", "annotator", "class", "judgments", "cross", "wins", "estimate", "se", "low",
                "high", "z", "p_value", "level_weight", "outlying", "outlying_bonferroni",
                "outlying_in_class", "unidentified", "divergent", "marginal_estimate", "marginal_low",
                "marginal_high", "learned_theta", "reliability", "reliability_low", "reliability_high",
                "reliability_p", "unreliable")


# ------------------------------------------------------------------------------ pseudonyms
def pseudonymiser(key: str) -> Callable[[str], str]:
    """id -> ``anon-`` + 12 hex digits of HMAC-SHA256(key, id): stable for one key, not
    reversible without it. An empty key is refused (it would be an unsalted hash)."""
    if not key:
        raise ValueError("--pseudonymise needs a non-empty key (--pseudonym-key KEY or the "
                         "BADPO_PSEUDONYM_KEY environment variable)")
    secret = key.encode("utf-8")

    def pseudonym(annotator: str) -> str:
        return "anon-" + hmac.new(secret, annotator.encode("utf-8"), hashlib.sha256).hexdigest()[:12]

    return pseudonym


def pseudonymise(judgments: Sequence[Judgment], key: str) -> tuple[list[Judgment], Callable[[str], str]]:
    """The judgments with every annotator id replaced by its pseudonym, and the map used."""
    pseudonym = pseudonymiser(key)
    mapping = {a: pseudonym(a) for a in {j.annotator for j in judgments}}
    if len(set(mapping.values())) != len(mapping):  # 48 bits: only with millions of annotators
        raise ValueError("two annotator ids share a pseudonym under this key; choose another key")
    return [dataclasses.replace(j, annotator=mapping[j.annotator]) for j in judgments], pseudonym


# --------------------------------------------------------------------------- learned theta
def load_learned_theta(run_dir: str | Path, rename: Callable[[str], str] | None = None
                       ) -> dict[str, Any]:
    """``{"attribute_names", "theta_bar": {name: v}, "annotators": {id: {name: v}}}`` from
    ``RUN_DIR/theta.json`` (as ``BiasChannel.save`` writes it), ids passed through ``rename``."""
    from badpo.run_folder.layout import THETA_FILE

    path = Path(run_dir) / THETA_FILE
    if not path.is_file():
        raise FileNotFoundError(f"--run {run_dir}: no theta.json (is it a finished training run?)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        names = list(data["attribute_names"])
        theta_bar = {n: data["theta_bar"][n] for n in names}
        annotators = {(rename or str)(a): entry["theta"] for a, entry in data["annotators"].items()}
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a theta.json written by badpo ({type(error).__name__}: {error})"
                         ) from error
    return {"path": str(path), "attribute_names": names, "theta_bar": theta_bar, "annotators": annotators}


# ------------------------------------------------------------------------------- estimates
def _interval(counts: LogOdds) -> dict[str, Any]:
    estimate, low, high = (float(v) for v in penalised_log_odds(counts.wins, counts.cross, LEVEL))
    return {"judgments": counts.judgments, "cross": counts.cross, "wins": counts.wins,
            "estimate": estimate, "low": low, "high": high}


def _classes(judgments: Sequence[Judgment]) -> dict[str, str]:
    """annotator -> class ("/"-joined if an annotator appears under several); {} without classes."""
    seen: dict[str, set[str]] = {}
    for j in judgments:
        if j.annotator_class is not None:
            seen.setdefault(j.annotator, set()).add(j.annotator_class)
    return {a: "/".join(sorted(c)) for a, c in seen.items()}


def _level(estimate: np.ndarray, se: np.ndarray, members: list[int], ids: Sequence[str]) -> dict[str, Any]:
    """The robust level over the annotators at ``members`` (indices with an estimate)."""
    found = robust_level(estimate[members], se[members])
    return {"estimate": found.level, "scale": found.scale, "annotators": len(members),
            "weights": {ids[i]: float(w) for i, w in zip(members, found.weights)},
            "left_out": [ids[i] for i, w in zip(members, found.weights) if w == 0]}


def _number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _rows(coordinate: CoordinateAudit, ids: list[str], classes: Mapping[str, str], estimate: np.ndarray,
          se: np.ndarray, pool: Mapping[str, Any], class_levels: Mapping[str, Any],
          learned_theta: Callable[[str], float | None]) -> list[dict[str, Any]]:
    """One row per annotator: the joint estimate and its flags, the marginal estimate, learned theta."""
    counts = [coordinate.by_annotator[a] for a in ids]
    wins, cross = np.array([c.wins for c in counts]), np.array([c.cross for c in counts])
    marginal, marginal_low, marginal_high = penalised_log_odds(wins, cross, LEVEL)
    known = ~np.isnan(estimate)
    m = int(known.sum())
    level = pool["estimate"] if pool["estimate"] is not None else math.nan
    z = (estimate - level) / se
    p_value = two_sided_p(z)
    rows = []
    for k, annotator in enumerate(ids):
        cls = classes.get(annotator)
        own = class_levels.get(cls, {}).get("estimate") if cls is not None else None
        in_class = bool(known[k] and own is not None and abs(estimate[k] - own) > _Z * se[k])
        rows.append({
            "annotator": annotator, "class": cls, "judgments": counts[k].judgments,
            "cross": int(cross[k]), "wins": int(wins[k]),
            "estimate": _number(estimate[k]), "se": _number(se[k]),
            "low": _number(estimate[k] - _Z * se[k]), "high": _number(estimate[k] + _Z * se[k]),
            "z": _number(z[k]), "p_value": _number(p_value[k]),
            "level_weight": pool["weights"].get(annotator),
            "outlying": bool(known[k] and p_value[k] < _ALPHA),
            "outlying_bonferroni": bool(known[k] and p_value[k] < _ALPHA / max(m, 1)),
            "outlying_in_class": in_class,
            "unidentified": not known[k], "divergent": counts[k].divergent,
            "marginal_estimate": float(marginal[k]) if cross[k] else None,
            "marginal_low": float(marginal_low[k]) if cross[k] else None,
            "marginal_high": float(marginal_high[k]) if cross[k] else None,
            "learned_theta": learned_theta(annotator),
        })
    rows.sort(key=lambda r: (r["unidentified"], r["estimate"] or 0.0, r["annotator"]))
    return rows


def attribute_report(coordinate: CoordinateAudit, classes: Mapping[str, str], fit: JointFit,
                     learned: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The per-annotator estimates, flags and levels of one audited attribute.

    ``fit`` holds every annotator's joint estimate (:func:`badpo.auditing.joint.fit_joint`);
    ``annotators`` is sorted by it (unidentified annotators last, by id); ``learned`` is
    :func:`load_learned_theta`'s result or None.
    """
    column = fit.names.index(coordinate.name)
    position = {a: k for k, a in enumerate(fit.annotators)}
    ids = list(coordinate.by_annotator)
    estimate = np.array([fit.estimate[position[a], column] for a in ids])
    se = np.array([fit.se[position[a], column] for a in ids])
    known = [i for i in range(len(ids)) if not math.isnan(estimate[i])]
    pool = _level(estimate, se, known, ids)  # the robust level every annotator is flagged against
    class_levels = {cls: {**_level(estimate, se, [i for i in known if classes.get(ids[i]) == cls], ids),
                          "marginal": _interval(counts)}
                    for cls, counts in coordinate.by_class.items()}
    has_learned = learned is not None and coordinate.name in learned["attribute_names"]

    def learned_theta(annotator: str) -> float | None:
        return learned["annotators"].get(annotator, {}).get(coordinate.name) if has_learned else None

    rows = _rows(coordinate, ids, classes, estimate, se, pool, class_levels, learned_theta)
    for cls, entry in class_levels.items():
        members = [r["learned_theta"] for r in rows if r["class"] == cls and r["learned_theta"] is not None]
        entry["learned_theta_mean"] = float(np.mean(members)) if members else None
    both = np.array([(r["estimate"], r["learned_theta"]) for r in rows
                     if r["estimate"] is not None and r["learned_theta"] is not None]).reshape(-1, 2)
    correlation = (float(np.corrcoef(both.T)[0, 1]) if len(both) > 2 and np.ptp(both, axis=0).all() else None)
    flags = ("unidentified", "outlying", "outlying_bonferroni", "outlying_in_class")
    return {
        "name": coordinate.name, "pool_level": pool, "pooled_marginal": _interval(coordinate.overall),
        "classes": class_levels, "annotators": rows, "prior_sd": float(fit.prior_sd[column]),
        "counts": {"annotators": len(rows), "identified": len(known),
                   "divergent": sum(r["divergent"] is not None for r in rows),
                   **{flag: sum(r[flag] for r in rows) for flag in flags}},
        "learned_theta_bar": learned["theta_bar"][coordinate.name] if has_learned else None,
        "learned_vs_offline_correlation": correlation,
    }


# ------------------------------------------------------------------------------ the files
def _file_stem(name: str, taken: set[str]) -> str:
    """A file-safe form of an attribute name: itself when it is safe and short (a file name holds at
    most 255 bytes), else a slug and a hash."""
    if re.fullmatch(r"[A-Za-z0-9_.-]{1,80}", name) and name not in taken:
        return name
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.")[:40] or "attribute"
    return f"{slug}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def _csv_value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else spreadsheet_safe(value)


_REPORT_FILES = ("annotators.csv", "audit.json", "README.md", "report.html")  # and the forest-*.png plots


def previous_report(directory: str | Path, overwrite: bool = False) -> list[Path]:
    """The files of the report already in ``directory``, which ``overwrite`` lets a new report
    replace; checked before the data is read. A folder holds one report: without ``overwrite``
    a report there is refused, and so is, always, a file a report would write that no report
    there lists (another tool's ``audit.json``, an old plot), so that a pseudonymised report
    never sits beside a plot with raw ids."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--report {directory}: is a file, not a folder")
    check_writable_folder(out, "--report", directory)
    if not out.is_dir():
        return []
    listed: list[Path] = []
    document = out / "audit.json"
    if document.is_file():
        try:
            found = json.loads(document.read_text(encoding="utf-8"))
        except ValueError:
            found = None
        if isinstance(found, dict) and found.get("format") in _FORMATS:
            plots = [r.get("plot") for r in found.get("attributes", []) if isinstance(r, dict)]
            listed = [out / name for name in (*_REPORT_FILES, *plots)
                      if isinstance(name, str) and Path(name).name == name and (out / name).exists()]
    foreign = sorted(p.name for p in (*map(out.joinpath, _REPORT_FILES), *out.glob("forest-*.png"))
                     if p.exists() and p not in listed)
    if foreign:
        raise FileExistsError(f"--report {directory}: holds {', '.join(foreign)}, which no report there lists; "
                              "choose an empty folder (a report folder holds one report)")
    if listed and not overwrite:
        raise FileExistsError(f"--report {directory}: holds another report ({len(listed)} files); give "
                              "--overwrite to replace it (exactly its files are deleted first), or "
                              "choose another folder")
    return listed


def write_report(result: Audit, judgments: Sequence[Judgment], directory: str | Path,
                 learned: Mapping[str, Any] | None = None, pseudonymised: bool = False,
                 source: str | None = None, overwrite: bool = False,
                 coverage: Mapping[str, Any] | None = None, *, fit: JointFit) -> dict[str, Any]:
    """Write ``annotators.csv``, ``audit.json``, ``forest-<attribute>.png`` and ``README.md``
    into ``directory`` (created), replacing the report there only with ``overwrite``
    (:func:`previous_report`); ``fit`` is the joint fit of the same judgments
    (:func:`badpo.auditing.joint.fit_joint`). Returns what ``audit.json`` holds."""
    out = Path(directory)
    for path in previous_report(out, overwrite):
        path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    classes = _classes(judgments)
    if learned is not None and not set(learned["attribute_names"]) & set(result.attribute_names):
        raise ValueError(f"--run: {learned['path']} has theta on {learned['attribute_names']}, none of "
                         f"the audited attributes {list(result.attribute_names)}")
    reports = [attribute_report(c, classes, fit, learned) for c in result.coordinates]
    for row in (row for report in reports for row in report["annotators"]):  # reliability is per annotator
        row.update(reliability_row(result.reliability, row["annotator"]))
    there = set(out.iterdir())
    try:
        return _write_files(out, reports, result, learned, pseudonymised, source, coverage)
    except OSError as error:  # a full disk: what this call wrote would block the next run there
        for path in set(out.iterdir()) - there:
            path.unlink(missing_ok=True)
        reason = error.strerror or str(error)
        raise OSError(f"--report {out}: the report could not be written ({reason}); what it had written there "
                      "is removed, so the same command can run again once there is room") from error


def _write_files(out: Path, reports: list[dict], result: Audit, learned: Mapping[str, Any] | None,
                 pseudonymised: bool, source: str | None, coverage: Mapping[str, Any] | None) -> dict[str, Any]:
    """The report's files, written into ``out``; returns what ``audit.json`` holds."""
    taken: set[str] = set()
    for report in reports:
        stem = _file_stem(report["name"], taken)
        taken.add(stem)
        report["plot"] = f"forest-{stem}.png"
        plot_forest(report, out / report["plot"])
    with open(out / "annotators.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(_CSV_COLUMNS)
        for report in reports:
            for row in report["annotators"]:
                writer.writerow([_csv_value(report["name"])] + [_csv_value(row[c]) for c in _CSV_COLUMNS[1:]])
    unmatched = (sorted(set(learned["annotators"]) - set(result.annotators)) if learned else [])
    document = {
        "format": REPORT_FORMAT, "level": LEVEL, "source": source, "pseudonymised": pseudonymised,
        "estimate": f"joint: one logistic regression per annotator on the differences of every "
                    f"attribute, prior N(0, ({PRIOR_SCALE} / rms of the attribute's non-zero differences)^2), "
                    "interval +- 1.96 se; pool level: biweight over the annotators; marginal: "
                    "log((wins + 1/2) / (cross - wins + 1/2)) with its profile interval",
        "run": learned["path"] if learned else None,
        "run_annotators_without_judgments": len(unmatched), "tokenizer_coverage": coverage,
        "attributes": reports, "audit": result.to_dict(),
    }
    # every value above is a plain finite number, None, str or bool: json refuses anything else
    (out / "audit.json").write_text(json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n",
                                    encoding="utf-8")
    (out / "README.md").write_text(summary(document, result), encoding="utf-8")
    return document


def text_coverage(tokenizer, judgments: Sequence[Judgment], origin: str) -> dict | None:
    """The share of ``tokenizer``'s unknown token among the tokens of the prompts, chosen and
    rejected responses (:func:`badpo.data.coverage.check_coverage`: a warning above 5%, an
    error above 50%); None for a tokenizer without an unknown token."""
    if getattr(tokenizer, "unk_token_id", None) is None:
        return None
    shares = {side: unknown_share(tokenizer, (getattr(j, side) for j in judgments))
              for side in ("chosen", "rejected", "prompt")}
    return check_coverage({"chosen": shares["chosen"], "rejected": shares["rejected"],
                           "prompts": shares["prompt"]}, tokenizer, origin)


def format_coverage(coverage: Mapping[str, Any]) -> str:
    """The line ``badpo audit`` prints with the shares of unknown tokens."""
    shares = ", ".join(f"{side} {coverage[side]:.1%}" for side in ("prompts", "chosen", "rejected"))
    return f"\ntokens the tokenizer of {coverage['tokenizer']} cannot read ({coverage['unknown_token']}): {shares}\n"


def audit_with_report(source: Any, specs: Sequence[str], report_dir: str | Path | None = None,
                      run_dir: str | Path | None = None, pseudonym_key: str | None = None, *,
                      data_split: str | None = None, columns: ColumnMap = ColumnMap(),
                      overwrite: bool = False, tokenizer=None,
                      duplicates: str = "keep") -> tuple[Audit, str, dict[str, Any] | None]:
    """``badpo audit``: read (any source of :mod:`badpo.data.sources`), keep or drop exact
    duplicate judgments (``duplicates``, saying so), check how much of the text ``tokenizer`` (when
    given) reads, pseudonymise (with a key), audit, format, and write the report when
    ``report_dir`` is given (``overwrite``: replacing the report there); returns (audit, printed
    text, report document or None)."""
    attributes = resolve_attributes(specs)  # a bad spec fails before the data is read
    if report_dir is None:
        return _audited(source, attributes, None, run_dir, pseudonym_key, data_split, columns, overwrite, tokenizer,
                        duplicates)
    _check_report_folder(report_dir, overwrite, source)  # so does a folder that cannot take it
    with folder_lock(report_dir, "--report"):  # a second writer (audit or discover) is refused
        _check_report_folder(report_dir, overwrite, source)  # again: another may have filled it since
        return _audited(source, attributes, report_dir, run_dir, pseudonym_key, data_split, columns, overwrite,
                        tokenizer, duplicates)


def _check_report_folder(report_dir: str | Path, overwrite: bool, source: Any) -> None:
    """A report folder that cannot take this report, or whose files would replace the data, is refused."""
    for name in _REPORT_FILES:
        check_not_input(Path(report_dir) / name, "--report", [("DATA", source)])
    for path in previous_report(report_dir, overwrite):  # --overwrite deletes these
        check_not_input(path, "--report", [("DATA", source)])


def _differences_of(origin: str, judgments, attributes, dropped: int, ties: int) -> np.ndarray | None:
    """:func:`attribute_differences`, an error about a row naming the file it is in (the rows are
    counted after any duplicates dropped and ties left out, and the error says so)."""
    if not judgments:
        return None
    try:
        return attribute_differences(judgments, attributes)
    except ValueError as error:
        less = [f"the {dropped} exact duplicates dropped"] * bool(dropped) + [f"the {ties} ties left out"] * bool(ties)
        counted = f" (its rows less {' and '.join(less)})" if less else ""
        raise ValueError(f"{origin}{counted}: {error}") from None


def _audited(source: Any, attributes, report_dir: str | Path | None, run_dir, pseudonym_key, data_split, columns,
             overwrite: bool, tokenizer, duplicates: str) -> tuple[Audit, str, dict[str, Any] | None]:
    """:func:`audit_with_report` once its report folder, if any, is checked and held."""
    loaded = read_judgment_source(source, data_split, columns)
    judgments, repeated = handle_duplicates(loaded.rows, duplicates, loaded.origin)
    coverage = text_coverage(tokenizer, judgments, loaded.origin) if tokenizer is not None else None
    labels = label_counts(judgments, loaded.forms)
    kept = wins_for_estimates(judgments)  # the estimates read wins only: the ties are left out, and said so
    if not kept:
        raise ValueError(f"{loaded.origin}: every one of the {labels.ties} judgments is a tie; the audit's "
                         "estimates read wins only")
    dropped = len(loaded.rows) - len(judgments)
    judgments, rename = (pseudonymise(kept, pseudonym_key) if pseudonym_key is not None else (kept, None))
    learned = load_learned_theta(run_dir, rename) if run_dir is not None else None
    diffs = _differences_of(loaded.origin, judgments, attributes, dropped, labels.ties)
    result = audit(judgments, attributes, source=loaded.origin, differences=diffs, start=True)
    result = dataclasses.replace(result, labels=labels.to_dict())
    text = "".join(f"{line}\n" for line in (repeated, labels.line(), estimates_line(labels)) if line) + format_audit(
        result) + (format_coverage(coverage) if coverage is not None else "")
    if report_dir is None:
        return result, text, None
    position = {a: k for k, a in enumerate(result.annotators)}
    vertex = np.array([position[j.annotator] for j in judgments], dtype=np.int64)
    fit = fit_joint(diffs, vertex, result.annotators, result.attribute_names)
    document = write_report(result, judgments, report_dir, learned, pseudonym_key is not None,
                            None if pseudonym_key is not None else str(source), overwrite, coverage, fit=fit)
    out = Path(report_dir)
    atomic_write_text(out / "report.html", audit_html(document, (out / "README.md").read_text(encoding="utf-8"),
                                                      text, out))
    return result, text + "\n" + format_report(document, report_dir), document
