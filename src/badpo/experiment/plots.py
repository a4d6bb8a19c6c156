"""PNG plots from the logged runs: rates per arm with intervals, learned vs planted theta_k.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot), so plotting neither needs a
display nor changes the caller's matplotlib backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from badpo.auditing.forest import labels_as_text, plot_label
from badpo.comparing.over_seeds import mean_ci
from badpo.experiment.tables import ABSENT, arm_values, metric_value

__all__ = ["plot_rates", "plot_theta", "write_plots"]


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=120)
    FigureCanvasAgg(figure)
    return figure


@labels_as_text
def plot_rates(layout, records: Mapping[str, Mapping], path: Path) -> None:
    """One marker per (arm, rate) at the mean over seeds with its interval; the reference as a
    dashed line per rate."""
    specs = layout.plots.rates
    figure = _figure(1.6 + 1.3 * len(layout.arms), 3.6)
    axes = figure.add_subplot(1, 1, 1)
    colours = [f"C{i}" for i in range(len(specs))]
    offsets = np.linspace(-0.15, 0.15, len(specs)) if len(specs) > 1 else [0.0]
    for spec, colour, offset in zip(specs, colours, offsets):
        reference = metric_value(records[layout.reference_key], spec.metric)
        if reference is not ABSENT and not np.isnan(reference):
            axes.axhline(reference, color=colour, linestyle="--", linewidth=1)
        for index, arm in enumerate(layout.arms):
            values = arm_values(arm, records, spec.metric)
            # not measured for this arm, or undefined at some seed (the table says nan): no point
            if values is None or np.isnan(list(values.values())).any():
                continue
            stats = mean_ci(list(values.values()), layout.level)
            error = 0.0 if np.isnan(stats["half_width"]) else stats["half_width"]
            axes.errorbar(index + offset, stats["mean"], yerr=error, fmt="o", color=colour,
                          capsize=3, label=spec.header if index == 0 else None)
    axes.set_xticks(range(len(layout.arms)))
    axes.set_xticklabels([plot_label(arm.name) for arm in layout.arms], rotation=15, ha="right")
    axes.set_ylabel(f"rate (mean, {layout.level * 100:g}% interval; dashed: reference)")
    axes.set_title(layout.title)
    axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    figure.savefig(path)


def _theta_points(record: Mapping, planted: Mapping[str, list[float]], column: int, name: str
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Planted and learned theta_k [m] on one attribute (planted ``column``, learned ``name``)."""
    theta = record["theta"]
    learned_column = list(theta["attribute_names"]).index(name)
    ids = sorted(theta["per_annotator"])
    unknown = [a for a in ids if a not in planted]
    if unknown:
        raise ValueError(f"run {record['key']}: annotators {unknown[:5]} have no planted theta")
    learned = np.array([theta["per_annotator"][a][learned_column] for a in ids], dtype=float)
    return np.array([planted[a][column] for a in ids], dtype=float), learned


def _declares(record: Mapping, name: str) -> bool:
    theta = record.get("theta") or {}
    return bool(theta.get("per_annotator")) and name in theta.get("attribute_names", ())


@labels_as_text
def plot_theta(layout, records: Mapping[str, Mapping], planted_file: Path, path: Path) -> bool:
    """Learned vs planted theta_k, one panel per planted attribute that some arm declared, with
    every per-annotator arm and seed that declared it (an arm declaring only some of the planted
    attributes appears in those panels only).

    Returns False (and draws nothing) when no run logged a theta per annotator.
    """
    data = json.loads(planted_file.read_text(encoding="utf-8"))
    planted = {row["annotator"]: row["theta"] for row in data["annotators"]}
    panels = []  # (planted column, attribute name, arms that declared it)
    for column, name in enumerate(data["attribute_names"]):
        arms = [arm for arm in layout.arms if all(_declares(records[r.key], name) for r in arm.runs)]
        if arms:
            panels.append((column, name, arms))
    if not panels:
        return False
    colours = {arm.name: f"C{i}" for i, arm in enumerate(layout.arms)}
    figure = _figure(4.2 * len(panels), 4.0)
    for j, (column, name, arms) in enumerate(panels):
        axes = figure.add_subplot(1, len(panels), j + 1)
        for arm in arms:
            rs = []
            for run in arm.runs:
                truth, learned = _theta_points(records[run.key], planted, column, name)
                rs.append(float(np.corrcoef(truth, learned)[0, 1]))
                axes.scatter(truth, learned, s=10, alpha=0.6, color=colours[arm.name],
                             label=f"{plot_label(arm.name)} (r = {np.mean(rs):.2f})" if run is arm.runs[-1] else None)
        low, high = axes.get_xlim()
        axes.plot([low, high], [low, high], color="grey", linewidth=1, linestyle=":")
        axes.set_xlabel(f"planted theta_k ({name})")
        axes.set_ylabel(f"learned theta_k ({name})")
        axes.legend(loc="best", fontsize="small")
    figure.suptitle(f"{layout.title}: learned vs planted theta_k (every seed; r = mean over seeds)")
    figure.tight_layout()
    figure.savefig(path)
    return True


def write_plots(out: Path, layout, records: Mapping[str, Mapping], planted_file: Path | None,
                log: Callable[[str], None]) -> list[str]:
    """rates.png and theta.png as the layout asks; says why a plot is skipped."""
    files = []
    if layout.plots.rates:
        plot_rates(layout, records, out / "rates.png")
        files.append(str(out / "rates.png"))
    if layout.plots.theta:
        if planted_file is None:
            log("theta.png: skipped (the corpus has no planted.json)")
        elif plot_theta(layout, records, planted_file, out / "theta.png"):
            files.append(str(out / "theta.png"))
        else:
            log("theta.png: skipped (no arm logged a theta per annotator)")
    return files
