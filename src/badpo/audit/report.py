"""The per-annotator audit report, ``badpo audit --report DIR``: every annotator's offline bias
estimate with an interval, flags, per-class levels, a forest plot per attribute, and
pseudonymous ids on request.

The estimate of annotator k on one attribute uses only k's cross-group judgments on it (the
two sides differ on the attribute; the attribute side is the one with the larger value): with
``w`` wins of the attribute side in ``n`` such judgments it is
:func:`badpo.audit.estimates.penalised_log_odds`, ``log((w + 1/2) / (n - w + 1/2))`` (the Jeffreys
posterior mode, finite for every count) with its 95% profile-likelihood interval. The pool's
level is the same estimate on every cross-group judgment of the attribute, and a class's level
on that class's. Flags, per attribute:

- ``unidentified``: no cross-group judgment; no estimate (theta_k is not identified).
- ``divergent``: every (``+inf``) or no (``-inf``) cross-group vote went to the attribute side;
  the MLE is infinite, the penalised estimate is finite but rests on a one-sided count.
- ``outlying``: the interval excludes the pool's level (penalised likelihood-ratio p < 0.05).
  This is one test per annotator: among m annotators who all share the pool's level about
  0.05 m are flagged by chance. ``outlying_bonferroni`` (p < 0.05 / m, m = the annotators with
  an estimate) keeps the chance of any false flag under about 5% and misses more real ones.
  ``outlying_in_class`` compares with the annotator's class level instead (classes only).
  The pool's level includes k's own judgments, which pulls it slightly toward k in a small pool.

Beside a trained run (``--run RUN_DIR``) the learned theta_k of its ``theta.json`` is shown.
It is not the same quantity: theta_k explains k's votes given the policy's own margins, and
its shared level is a free choice of the method (anchoring), so compare order and spread, not
the level. ``learned_vs_offline_correlation`` is their Pearson correlation over the annotators
that have both.

Pseudonyms are ``anon-`` and 12 hex digits of HMAC-SHA256(key, id), with a key the user keeps:
the same key gives the same pseudonym on every run (so a growing pool can be followed), while
without the key a pseudonym cannot be reversed by hashing candidate ids, as an unsalted hash of
a short id could. The ids are replaced before the audit runs, so every output (the printed table
and its warnings, ``--json``, the CSV, JSON, plots and README) holds only pseudonyms.

Evaluation layer: numpy, matplotlib (Agg canvas, no pyplot) and the core audit.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from badpo.audit.estimates import (
    Audit,
    CoordinateAudit,
    LogOdds,
    audit,
    format_audit,
    penalised_log_odds,
    penalised_p_value,
)
from badpo.core.attributes import resolve_attributes
from badpo.core.judgments import Judgment
from badpo.data.coverage import check_coverage, unknown_share
from badpo.data.sources import ColumnMap, read_judgment_source

__all__ = [
    "REPORT_FORMAT", "attribute_report", "audit_with_report", "format_report", "load_learned_theta",
    "previous_report", "pseudonymise", "pseudonymiser", "summary", "write_report",
]

REPORT_FORMAT = "badpo-audit-report/1"
LEVEL = 0.95
_ALPHA = 1 - LEVEL
_CSV_COLUMNS = ("attribute", "annotator", "class", "judgments", "cross", "wins", "estimate", "low",
                "high", "p_value", "learned_theta", "unidentified", "divergent", "outlying",
                "outlying_bonferroni", "outlying_in_class")
_LABELLED_ROWS = 120  # a forest plot names each annotator up to this many rows


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
    path = Path(run_dir) / "theta.json"
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


def attribute_report(coordinate: CoordinateAudit, classes: Mapping[str, str],
                     learned: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The per-annotator estimates, flags and class levels of one audited attribute.

    ``annotators`` is sorted by estimate (unidentified annotators last, by id); ``learned`` is
    :func:`load_learned_theta`'s result or None.
    """
    ids = list(coordinate.by_annotator)
    wins = np.array([coordinate.by_annotator[a].wins for a in ids])
    cross = np.array([coordinate.by_annotator[a].cross for a in ids])
    estimate, low, high = penalised_log_odds(wins, cross, LEVEL)
    pool = _interval(coordinate.overall)
    p_value = penalised_p_value(wins, cross, pool["estimate"])
    class_levels = {c: _interval(counts) for c, counts in coordinate.by_class.items()}
    identified = cross > 0
    m = int(identified.sum())
    has_learned = learned is not None and coordinate.name in learned["attribute_names"]
    rows = []
    for k, annotator in enumerate(ids):
        cls = classes.get(annotator)
        level = class_levels.get(cls) if cls is not None else None
        known = bool(identified[k])
        theta = learned["annotators"].get(annotator, {}).get(coordinate.name) if has_learned else None
        rows.append({
            "annotator": annotator, "class": cls,
            "judgments": coordinate.by_annotator[annotator].judgments, "cross": int(cross[k]),
            "wins": int(wins[k]),
            "estimate": float(estimate[k]) if known else None,
            "low": float(low[k]) if known else None, "high": float(high[k]) if known else None,
            "p_value": float(p_value[k]) if known else None,
            "learned_theta": theta,
            "unidentified": not known,
            "divergent": coordinate.by_annotator[annotator].divergent,
            "outlying": known and bool(p_value[k] < _ALPHA),
            "outlying_bonferroni": known and bool(p_value[k] < _ALPHA / max(m, 1)),
            "outlying_in_class": bool(known and level is not None and level["cross"] > 0
                                      and not low[k] <= level["estimate"] <= high[k]),
        })
    rows.sort(key=lambda r: (r["unidentified"], r["estimate"] or 0.0, r["annotator"]))
    for cls, entry in class_levels.items():
        members = [r for r in rows if r["class"] == cls and r["learned_theta"] is not None]
        entry["annotators"] = sum(1 for r in rows if r["class"] == cls)
        entry["learned_theta_mean"] = (float(np.mean([r["learned_theta"] for r in members]))
                                       if members else None)
    both = [(r["estimate"], r["learned_theta"]) for r in rows
            if r["estimate"] is not None and r["learned_theta"] is not None]
    correlation = (float(np.corrcoef(np.array(both).T)[0, 1])
                   if len(both) > 2 and np.ptp(np.array(both), axis=0).all() else None)
    return {
        "name": coordinate.name, "pool": pool, "classes": class_levels, "annotators": rows,
        "counts": {"annotators": len(rows), "identified": m,
                   "unidentified": sum(r["unidentified"] for r in rows),
                   "divergent": sum(r["divergent"] is not None for r in rows),
                   "outlying": sum(r["outlying"] for r in rows),
                   "outlying_bonferroni": sum(r["outlying_bonferroni"] for r in rows),
                   "outlying_in_class": sum(r["outlying_in_class"] for r in rows)},
        "learned_theta_bar": learned["theta_bar"][coordinate.name] if has_learned else None,
        "learned_vs_offline_correlation": correlation,
    }


# ------------------------------------------------------------------------------ the files
def _file_stem(name: str, taken: set[str]) -> str:
    """A file-safe form of an attribute name: itself when it is safe, else a slug and a hash."""
    if re.fullmatch(r"[A-Za-z0-9_.-]+", name) and name not in taken:
        return name
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.")[:40] or "attribute"
    return f"{slug}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def _csv_value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


_REPORT_FILES = ("annotators.csv", "audit.json", "README.md")  # and the forest-*.png plots


def previous_report(directory: str | Path, overwrite: bool = False) -> list[Path]:
    """The files of the report already in ``directory``, which ``overwrite`` lets a new report
    replace; checked before the data is read. A folder holds one report: without ``overwrite``
    a report there is refused, and so is, always, a file a report would write that no report
    there lists (another tool's ``audit.json``, an old plot), so that a pseudonymised report
    never sits beside a plot with raw ids."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--report {directory}: is a file, not a folder")
    if not out.is_dir():
        return []
    listed: list[Path] = []
    document = out / "audit.json"
    if document.is_file():
        try:
            found = json.loads(document.read_text(encoding="utf-8"))
        except ValueError:
            found = None
        if isinstance(found, dict) and found.get("format") == REPORT_FORMAT:
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
                 coverage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``annotators.csv``, ``audit.json``, ``forest-<attribute>.png`` and ``README.md``
    into ``directory`` (created), replacing the report there only with ``overwrite``
    (:func:`previous_report`); returns what ``audit.json`` holds."""
    out = Path(directory)
    for path in previous_report(out, overwrite):
        path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    classes = _classes(judgments)
    if learned is not None and not set(learned["attribute_names"]) & set(result.attribute_names):
        raise ValueError(f"--run: {learned['path']} has theta on {learned['attribute_names']}, none of "
                         f"the audited attributes {list(result.attribute_names)}")
    reports = [attribute_report(c, classes, learned) for c in result.coordinates]
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
                writer.writerow([report["name"]] + [_csv_value(row[c]) for c in _CSV_COLUMNS[1:]])
    unmatched = (sorted(set(learned["annotators"]) - set(result.annotators)) if learned else [])
    document = {
        "format": REPORT_FORMAT, "level": LEVEL, "source": source, "pseudonymised": pseudonymised,
        "estimate": "log((wins + 1/2) / (cross - wins + 1/2)), Jeffreys-penalised; "
                    "interval: profile penalised likelihood",
        "run": learned["path"] if learned else None,
        "run_annotators_without_judgments": len(unmatched), "tokenizer_coverage": coverage,
        "attributes": reports, "audit": result.to_dict(),
    }
    # every value above is a plain finite number, None, str or bool: json refuses anything else
    (out / "audit.json").write_text(json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n",
                                    encoding="utf-8")
    (out / "README.md").write_text(summary(document, result), encoding="utf-8")
    return document


def _fmt(entry: Mapping[str, Any]) -> str:
    return f"{entry['estimate']:+.2f} [{entry['low']:+.2f}, {entry['high']:+.2f}]"


def summary(document: Mapping[str, Any], result: Audit) -> str:
    """The report's README: what was estimated, each attribute's level, flags and files."""
    lines = [
        "# Annotator audit", "",
        f"{result.n_judgments} judgments by {len(result.annotators)} annotators"
        + (f" from `{document['source']}`" if document["source"] else "") + "; ids "
        + ("pseudonymised (HMAC-SHA256 with the user's key)." if document["pseudonymised"]
           else "as in the data: these are per-person estimates, treat them as personal data."),
        "",
        "theta_hat_k = log((w + 1/2) / (n - w + 1/2)) over annotator k's n cross-group judgments "
        "(w won by the attribute side), with a 95% profile-likelihood interval. outlying: the "
        "interval excludes the pool's level (about 5% of annotators are flagged by chance); "
        "Bonferroni: p < 0.05 / (annotators with an estimate).",
        "",
    ]
    if document["run"]:
        lines += [f"Learned theta_k from `{document['run']}` (its level is the method's choice: "
                  "compare order and spread).", ""]
    for report in document["attributes"]:
        counts = report["counts"]
        lines += [f"## {report['name']}", "",
                  f"- pool level: {_fmt(report['pool'])} on {report['pool']['cross']} cross-group "
                  f"judgments; plot `{report['plot']}`",
                  f"- annotators: {counts['identified']} with an estimate, {counts['unidentified']} "
                  f"unidentified, {counts['divergent']} divergent, {counts['outlying']} outlying "
                  f"({counts['outlying_bonferroni']} after Bonferroni)"]
        for cls, level in report["classes"].items():
            if level["cross"]:
                lines.append(f"- class {cls}: {_fmt(level)} ({level['annotators']} annotators)")
        if report["learned_theta_bar"] is not None:
            corr = report["learned_vs_offline_correlation"]
            lines.append(f"- learned theta_bar {report['learned_theta_bar']:+.3f}; correlation of "
                         f"learned and offline theta_k: " + ("-" if corr is None else f"{corr:.2f}"))
        flagged = [r for r in report["annotators"] if r["outlying"]]
        if flagged:
            shown = ", ".join(f"{r['annotator']} {r['estimate']:+.2f}" for r in flagged[:10])
            lines.append(f"- outlying: {shown}" + (" ..." if len(flagged) > 10 else ""))
        lines.append("")
    lines += ["Files: `annotators.csv` (one row per annotator and attribute), `audit.json` (all of "
              "it, and the label audit), one forest plot per attribute.", ""]
    return "\n".join(lines)


def format_report(document: Mapping[str, Any], directory: str | Path) -> str:
    """The lines ``badpo audit`` prints after its table when it wrote a report."""
    lines = [f"report written to {directory}: annotators.csv, audit.json, README.md, "
             + ", ".join(r["plot"] for r in document["attributes"])]
    for report in document["attributes"]:
        counts = report["counts"]
        lines.append(f"  {report['name']}: pool {_fmt(report['pool'])}; {counts['identified']} annotators "
                     f"estimated, {counts['unidentified']} unidentified, {counts['divergent']} divergent, "
                     f"{counts['outlying']} outlying ({counts['outlying_bonferroni']} after Bonferroni)")
    return "\n".join(lines) + "\n"


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
                      overwrite: bool = False, tokenizer=None) -> tuple[Audit, str, dict[str, Any] | None]:
    """``badpo audit``: read (any source of :mod:`badpo.data.sources`), check how much of the text
    ``tokenizer`` (when given) reads, pseudonymise (with a key), audit, format, and write the
    report when ``report_dir`` is given (``overwrite``: replacing the report there); returns
    (audit, printed text, report document or None)."""
    attributes = resolve_attributes(specs)  # a bad spec fails before the data is read
    if report_dir is not None:  # so does a report folder that cannot take this report
        previous_report(report_dir, overwrite)
    loaded = read_judgment_source(source, data_split, columns)
    judgments = loaded.rows
    coverage = text_coverage(tokenizer, judgments, loaded.origin) if tokenizer is not None else None
    rename = None
    if pseudonym_key is not None:
        judgments, rename = pseudonymise(judgments, pseudonym_key)
    learned = load_learned_theta(run_dir, rename) if run_dir is not None else None
    result = audit(judgments, attributes, source=loaded.origin)
    text = format_audit(result) + (format_coverage(coverage) if coverage is not None else "")
    if report_dir is None:
        return result, text, None
    document = write_report(result, judgments, report_dir, learned, pseudonym_key is not None,
                            None if pseudonym_key is not None else str(source), overwrite, coverage)
    return result, text + "\n" + format_report(document, report_dir), document


# ------------------------------------------------------------------------------ the plot
def plot_forest(report: Mapping[str, Any], path: Path) -> None:
    """Annotators with an estimate, ordered by it (largest on top), each with its interval;
    the pool's level (line and band) and the class levels (dashed, points in the class's
    colour); outlying annotators' intervals and names in red, divergent ones as triangles,
    learned theta_k as crosses."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = [r for r in report["annotators"] if r["estimate"] is not None]
    classes = [c for c, level in report["classes"].items() if level["cross"]]
    colour = {c: f"C{i % 10}" for i, c in enumerate(classes)}
    height = min(40.0, 1.8 + 0.16 * (len(rows) + len(classes) + 1))
    figure = Figure(figsize=(7.5, height), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    pool = report["pool"]
    axes.axvspan(pool["low"], pool["high"], color="0.85", zorder=0)
    axes.axvline(pool["estimate"], color="black", linewidth=1.2, label=f"pool {_fmt(pool)}")
    axes.axvline(0.0, color="0.5", linewidth=0.8, linestyle=":")
    for cls in classes:
        axes.axvline(report["classes"][cls]["estimate"], color=colour[cls], linestyle="--",
                     linewidth=1, label=f"class {cls} {_fmt(report['classes'][cls])}")
    y = np.arange(len(rows), dtype=float)
    if rows:
        low, high = [r["low"] for r in rows], [r["high"] for r in rows]
        line_colour = ["red" if r["outlying"] else "0.35" for r in rows]
        axes.hlines(y, low, high, colors=line_colour, linewidth=1)
        point_colour = [colour.get(r["class"], "C0") for r in rows]
        for marker, divergent in (("o", None), (">", "+inf"), ("<", "-inf")):
            pick = [i for i, r in enumerate(rows) if r["divergent"] == divergent]
            if pick:
                axes.scatter([rows[i]["estimate"] for i in pick], y[pick], s=14, marker=marker,
                             c=[point_colour[i] for i in pick], zorder=3,
                             label=None if divergent is None else f"divergent ({divergent})")
        learned = [(r["learned_theta"], i) for i, r in enumerate(rows) if r["learned_theta"] is not None]
        if learned:
            axes.scatter([t for t, _ in learned], y[[i for _, i in learned]], marker="x", s=16,
                         color="black", zorder=4, label="learned theta_k")
    if len(rows) <= _LABELLED_ROWS:
        axes.set_yticks(y)
        axes.set_yticklabels([r["annotator"] for r in rows], fontsize=6)
        for tick, r in zip(axes.get_yticklabels(), rows):
            tick.set_color("red" if r["outlying"] else "black")
    else:
        axes.set_yticks([])
        axes.set_ylabel(f"{len(rows)} annotators, ordered by estimate (names in annotators.csv)")
    axes.set_ylim(-1, max(len(rows), 1))
    counts = report["counts"]
    axes.set_title(f"{report['name']}: offline log-odds per annotator, 95% intervals\n"
                   f"{counts['outlying']} outlying from the pool (red), {counts['divergent']} divergent, "
                   f"{counts['unidentified']} unidentified (not shown)", fontsize=9)
    axes.set_xlabel("log-odds that the attribute side wins a cross-group judgment")
    axes.legend(loc="lower right", fontsize=6)
    figure.tight_layout()
    figure.savefig(path)
