"""The audit report's text: ``README.md`` (:func:`summary`: what was estimated, what a flag means,
each attribute's levels and flags) and the lines ``badpo audit`` prints after writing a report
(:func:`format_report`). Split from :mod:`badpo.auditing.report`, which writes the files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from badpo.auditing.estimates import Audit
from badpo.auditing.reliability import FDR, MIN_SHARED, format_reliability
from badpo.core.markdown_escape import code_span, markdown_text

__all__ = ["FLAGS_MEAN", "RELIABILITY_MEANS", "format_report", "summary"]


def _fmt(entry: Mapping[str, Any]) -> str:
    return f"{entry['estimate']:+.2f} [{entry['low']:+.2f}, {entry['high']:+.2f}]"


def _level_text(level: Mapping[str, Any]) -> str:
    if level["estimate"] is None:
        return "- (no annotator with an estimate)"
    left = level["left_out"]
    return (f"{level['estimate']:+.2f} (biweight over {level['annotators']} annotators"
            + (f", {len(left)} left out" if left else "") + ")")


def _disagree(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Annotators whose marginal interval excludes 0 on one side while the joint estimate lies on
    the other side of 0 or holds it: the vote went to another attribute that goes with this one."""
    found = []
    for r in rows:
        if r["estimate"] is None or r["marginal_low"] is None:
            continue
        marginal_sign = 1 if r["marginal_low"] > 0 else -1 if r["marginal_high"] < 0 else 0
        joint_sign = 1 if r["low"] > 0 else -1 if r["high"] < 0 else 0
        if marginal_sign and joint_sign != marginal_sign:
            found.append(r)
    return found


FLAGS_MEAN = (
    "Each annotator's estimate is one logistic regression on the differences of every declared "
    "attribute at once (prior sd 2.5 on the log-odds scale), so a vote is credited to the attribute "
    "that explains it, with a 95% interval (estimate +- 1.96 se). The pool level is a biweight "
    "location of those estimates: annotators far from the bulk get weight 0, so the biased raters "
    "do not pull it toward themselves. **outlying**: the annotator's bias on this attribute differs "
    "from the pool level, the other declared attributes held fixed (p < 0.05; about 5% of "
    "annotators who share the level are flagged by chance; Bonferroni: p < 0.05 / annotators with "
    "an estimate). A flag says how this annotator labels compared with the others; it does not say "
    "the level itself is free of bias (read the level for that).")


RELIABILITY_MEANS = (
    "**reliability** s: how much an annotator's votes follow what the other annotators of the same pairs "
    "chose (the pair's consensus, the attributes' pooled bias included): `P(vote) = sigmoid(s z)`, z "
    "the consensus logit left out of the annotator's own votes; 1 is a typical rater, 0 a coin, below 0 "
    "against the task, with a 95% profile interval (`reliability_low`, `reliability_high`). "
    "**unreliable**: evidence that s is below half a typical rater's (one-sided p `reliability_p`, "
    f"Benjamini-Hochberg over the annotators at a false discovery rate of {FDR:g}). It is not a bias flag: "
    f"a biased rater who reads the pairs as the others do is reliable. No estimate under {MIN_SHARED} votes "
    "on pairs another annotator judged.")


def summary(document: Mapping[str, Any], result: Audit) -> str:
    """The report's README: what was estimated and what a flag means, each attribute's levels,
    flags and files."""
    lines = [
        "# Annotator audit", "",
        f"{result.n_judgments} judgments by {len(result.annotators)} annotators"
        + (f" from {code_span(document['source'])}" if document["source"] else "") + "; ids "
        + ("pseudonymised (HMAC-SHA256 with the user's key)." if document["pseudonymised"]
           else "as in the data: these are per-person estimates, treat them as personal data."),
        "", FLAGS_MEAN, "",
    ]
    if document["run"]:
        lines += [f"Learned theta_k from {code_span(document['run'])} (its level is the method's choice: "
                  "compare order and spread).", ""]
    for report in document["attributes"]:
        counts, pooled = report["counts"], report["pooled_marginal"]
        lines += [f"## {markdown_text(report['name'])}", "",
                  f"- pool level: {_level_text(report['pool_level'])}; the log-odds pooled over all "
                  f"{pooled['cross']} cross-group judgments (which biased raters pull toward themselves) "
                  f"is {_fmt(pooled)}; plot {code_span(report['plot'])}",
                  f"- annotators: {counts['identified']} with an estimate, {counts['unidentified']} "
                  f"unidentified, {counts['divergent']} divergent, {counts['outlying']} outlying "
                  f"({counts['outlying_bonferroni']} after Bonferroni)"]
        for cls, level in report["classes"].items():
            if level["estimate"] is not None:
                lines.append(f"- class {markdown_text(cls)}: {_level_text(level)}")
        if report["learned_theta_bar"] is not None:
            corr = report["learned_vs_offline_correlation"]
            lines.append(f"- learned theta_bar {report['learned_theta_bar']:+.3f}; correlation of "
                         f"learned and offline theta_k: " + ("-" if corr is None else f"{corr:.2f}"))
        flagged = [r for r in report["annotators"] if r["outlying"]]
        if flagged:
            shown = ", ".join(f"{markdown_text(r['annotator'])} {r['estimate']:+.2f}" for r in flagged[:10])
            lines.append(f"- outlying: {shown}" + (" ..." if len(flagged) > 10 else ""))
        disagree = _disagree(report["annotators"])
        if disagree:
            shown = ", ".join(f"{markdown_text(r['annotator'])} {r['marginal_estimate']:+.2f} -> {r['estimate']:+.2f}"
                              for r in disagree[:10])
            lines.append(f"- marginal and joint disagree (another attribute goes with this one in their "
                         f"judgments; read the joint): {shown}" + (" ..." if len(disagree) > 10 else ""))
        lines.append("")
    lines += _reliability_lines(result)
    lines += ["Files: `annotators.csv` (one row per annotator and attribute), `audit.json` (all of "
              "it, and the label audit), one forest plot per attribute, `report.html` (all of it in one page).", ""]
    return "\n".join(lines)


def _reliability_lines(result: Audit) -> list[str]:
    """The README's section on annotator reliability (the same on every attribute's rows)."""
    if result.reliability is None:
        return []
    lines = ["## Annotator reliability", "", RELIABILITY_MEANS, ""]
    return lines + [f"- {markdown_text(line.strip())}" for line in format_reliability(result.reliability)[1:]] + (
        [f"- {result.reliability.note}"] if result.reliability.note is not None else []) + [""]


def format_report(document: Mapping[str, Any], directory: str | Path) -> str:
    """The lines ``badpo audit`` prints after its table when it wrote a report."""
    lines = [f"report written to {directory}: report.html (one page to share), annotators.csv, audit.json, README.md, "
             + ", ".join(r["plot"] for r in document["attributes"]),
             "per annotator: every attribute estimated jointly; outlying = differs from the robust pool "
             "level, the other attributes held fixed (README.md says more)"]
    for report in document["attributes"]:
        counts = report["counts"]
        lines.append(f"  {report['name']}: pool level {_level_text(report['pool_level'])}, pooled "
                     f"log-odds {_fmt(report['pooled_marginal'])}; {counts['identified']} annotators "
                     f"estimated, {counts['unidentified']} unidentified, {counts['divergent']} divergent, "
                     f"{counts['outlying']} outlying ({counts['outlying_bonferroni']} after Bonferroni)")
    return "\n".join(lines) + "\n"
