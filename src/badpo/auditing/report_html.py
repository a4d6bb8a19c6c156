"""``report.html`` of ``badpo audit --report`` and ``badpo audit --discover --report``: one
self-contained page (:mod:`badpo.core.html_page`) with what was found, per annotator, the plots and
what the terminal printed (its caveats included), to send to the people who hired the annotators.
The tables carry the numbers of ``audit.json`` / ``discover.json`` at three decimals."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from badpo.auditing.discover import Discovery
from badpo.core.html_page import html_image, html_page, html_pre, html_table, markdown_html

__all__ = ["ANNOTATOR_COLUMNS", "audit_html", "discover_html"]

ANNOTATOR_COLUMNS = ("annotator", "class", "judgments", "cross", "wins", "estimate", "low", "high", "outlying",
                     "reliability", "reliability_low", "reliability_high", "unreliable")


def _shown(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:+.3f}"
    return value


def audit_html(document: Mapping[str, Any], readme: str, printed: str, folder: Path) -> str:
    """The audit's page: its README (what was estimated, what a flag means, the levels), then per
    attribute the forest plot and every annotator's row, then the printed audit."""
    sections = [markdown_html(readme.split("\n", 1)[1] if readme.startswith("# ") else readme)]
    for index, report in enumerate(document["attributes"]):
        rows = [[_shown(row.get(column)) for column in ANNOTATOR_COLUMNS] for row in report["annotators"]]
        sections += [f"<h2>Per annotator: {html.escape(str(report['name']))}</h2>",
                     html_image(folder / report["plot"], f"forest plot of {report['name']}"),
                     html_table(ANNOTATOR_COLUMNS, rows, table_id=f"annotators-{index}")]
    sections += ["<h2>What <code>badpo audit</code> printed</h2>", html_pre(printed)]
    meta = f"badpo audit of {document['source']}" if document.get("source") else "badpo audit"
    return html_page("Annotator audit", sections, meta)


FINDING_COLUMNS = ("attribute", "spec", "effect", "low", "high", "held-out", "level", "annotators")


def discover_html(result: Discovery, printed: str, plot: Path, source: str | None) -> str:
    """Discover's page: the findings as a table (or the best candidates when none), the plot and
    the printed screen with its cautions and notes."""
    rows = [[f.name, f.spec, _shown(f.effect[0]), _shown(f.effect[1]), _shown(f.effect[2]),
             _shown(f.heldout[0]), _shown(f.level), f.annotators] for f in result.findings]
    found = (html_table(FINDING_COLUMNS, rows, table_id="findings") if rows else
             "<p>No attribute was found and confirmed on the held-out half: read the screen below for what "
             "these data could have shown.</p>")
    sections = [f"<h2>Found: {len(result.findings)} attribute(s)</h2>", found,
                html_image(plot, "the findings with their 95% intervals"),
                "<h2>What <code>badpo audit --discover</code> printed</h2>", html_pre(printed)]
    return html_page("Which attributes are the raters biased on?", sections,
                     f"badpo audit --discover of {source}" if source else "badpo audit --discover")
