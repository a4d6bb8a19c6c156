"""The forest plot of one attribute of the audit report (``forest-<attribute>.png``).

Kept apart from :mod:`badpo.auditing.report` so that the report's numbers do not import matplotlib;
drawn on an Agg canvas without pyplot (no display, no global figure state).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LABEL_CHARS", "LABELLED_ROWS", "plot_forest", "plot_label"]

LABELLED_ROWS = 120  # a forest plot names each annotator up to this many rows
LABEL_CHARS = 120  # a label from the data drawn longer than this is cut in its middle (far above a
# run label compare makes distinct with its path, which a cut at 48 merged)


def plot_label(label: Any, limit: int = LABEL_CHARS) -> str:
    """A label from the data (an annotator id, a run, arm or attribute name) as a plot draws it: cut
    in its middle past ``limit`` characters, saying how many it holds. matplotlib lays out and renders
    every glyph of a tick label, so a 64 KB annotator id took minutes a plot (issue 76); the whole
    label stays in the report's CSV and JSON."""
    text = str(label)
    if len(text) <= limit:
        return text
    return f"{text[: limit * 2 // 3]}...{text[-(limit // 4):]} ({len(text):,} chars)"


def labels_as_text(draw: Callable) -> Callable:
    """Draw with every label read as plain text: annotator ids, attribute and file names in badpo's
    plots are data, and matplotlib would otherwise read ``$...$`` in them as a formula (``paid $5
    then $6`` drawn as maths; a crafted id failing the whole report)."""
    @functools.wraps(draw)
    def plain(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)
    return plain


def _draw_rows(axes, rows: list[Mapping[str, Any]], colour: Mapping[str, str]) -> None:
    """Each annotator's joint estimate with its interval (red when outlying), divergent ones as
    triangles, the marginal estimate as a hollow circle and the learned theta_k as a cross."""
    y = np.arange(len(rows), dtype=float)
    axes.hlines(y, [r["low"] for r in rows], [r["high"] for r in rows],
                colors=["red" if r["outlying"] else "0.35" for r in rows], linewidth=1)
    point_colour = [colour.get(r["class"], "C0") for r in rows]
    for marker, divergent in (("o", None), (">", "+inf"), ("<", "-inf")):
        pick = [i for i, r in enumerate(rows) if r["divergent"] == divergent]
        if pick:
            axes.scatter([rows[i]["estimate"] for i in pick], y[pick], s=14, marker=marker,
                         c=[point_colour[i] for i in pick], zorder=3,
                         label=None if divergent is None else f"divergent ({divergent})")
    marginal = [(r["marginal_estimate"], i) for i, r in enumerate(rows) if r["marginal_estimate"] is not None]
    if marginal:
        axes.scatter([m for m, _ in marginal], y[[i for _, i in marginal]], s=14, facecolors="none",
                     edgecolors="0.55", linewidths=0.7, zorder=2, label="marginal (one attribute alone)")
    learned = [(r["learned_theta"], i) for i, r in enumerate(rows) if r["learned_theta"] is not None]
    if learned:
        axes.scatter([t for t, _ in learned], y[[i for _, i in learned]], marker="x", s=16,
                     color="black", zorder=4, label="learned theta_k")


@labels_as_text
def plot_forest(report: Mapping[str, Any], path: Path) -> None:
    """Annotators with an estimate, ordered by it (largest on top), each with its interval; the
    robust pool level (black line) and the class levels (dashed, points in the class's colour);
    the log-odds pooled over all judgments (dotted grey), for contrast; rows as
    :func:`_draw_rows` draws them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = [r for r in report["annotators"] if r["estimate"] is not None]
    classes = [c for c, level in report["classes"].items() if level["estimate"] is not None]
    colour = {c: f"C{i % 10}" for i, c in enumerate(classes)}
    height = min(40.0, 1.8 + 0.16 * (len(rows) + len(classes) + 1))
    figure = Figure(figsize=(7.5, height), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    level = report["pool_level"]["estimate"]
    if level is not None:
        axes.axvline(level, color="black", linewidth=1.2, label=f"pool level {level:+.2f} (robust)")
    pooled = report["pooled_marginal"]
    if pooled["cross"]:
        axes.axvline(pooled["estimate"], color="0.6", linewidth=1, linestyle="-.",
                     label=f"pooled log-odds {pooled['estimate']:+.2f} (all judgments)")
    axes.axvline(0.0, color="0.5", linewidth=0.8, linestyle=":")
    for cls in classes:
        axes.axvline(report["classes"][cls]["estimate"], color=colour[cls], linestyle="--",
                     linewidth=1, label=f"class {cls} {report['classes'][cls]['estimate']:+.2f}")
    if rows:
        _draw_rows(axes, rows, colour)
    y = np.arange(len(rows), dtype=float)
    if len(rows) <= LABELLED_ROWS:
        axes.set_yticks(y)
        axes.set_yticklabels([plot_label(r["annotator"]) for r in rows], fontsize=6)
        for tick, r in zip(axes.get_yticklabels(), rows):
            tick.set_color("red" if r["outlying"] else "black")
    else:
        axes.set_yticks([])
        axes.set_ylabel(f"{len(rows)} annotators, ordered by estimate (names in annotators.csv)")
    axes.set_ylim(-1, max(len(rows), 1))
    counts = report["counts"]
    axes.set_title(f"{plot_label(report['name'])}: each annotator's bias, all attributes estimated jointly, 95% "
                   f"intervals\n{counts['outlying']} outlying from the pool level (red), "
                   f"{counts['divergent']} divergent, {counts['unidentified']} unidentified (not shown)",
                   fontsize=9)
    axes.set_xlabel("theta_k: log-odds per unit of the attribute (0/1 attribute: that its side wins)")
    axes.legend(loc="lower right", fontsize=6)
    figure.tight_layout()
    figure.savefig(path)
