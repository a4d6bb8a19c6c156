"""The plots of ``badpo compare``: each run's rate with its interval against the reference, and
the learned theta_k per annotator beside the audit's offline estimates.

Drawn on matplotlib's Agg canvas directly (no pyplot): no display needed, and the caller's
backend is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from badpo.auditing.forest import labels_as_text, plot_label

__all__ = ["plot_rates", "plot_theta"]

MAX_TICK_LABELS = 40  # more annotators than this: no ids under the axis


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=120)
    FigureCanvasAgg(figure)
    return figure


def _removal_text(entry: Mapping) -> str | None:
    removal = entry.get("removal")
    if removal is None:
        return None
    if removal.get("measurable") is False:
        return "not measurable"
    if removal.get("value") is None:
        return None
    if removal.get("low") is None:
        return f"{100 * removal['value']:.0f}% removed (no interval)"
    return f"{100 * removal['value']:.0f}% [{100 * removal['low']:.0f}, {100 * removal['high']:.0f}] removed"


def _rate_panel(axes, comparison: Mapping, readout: Mapping, name: str) -> None:
    """One attribute on one readout: a point per run with its interval (hollow: no interval), the
    reference as a line with its band, and the removal written above each run that has one."""
    key = readout["key"]
    attribute, runs = comparison[key][name], comparison["runs"]
    reference = attribute["reference"]
    if reference is not None:
        axes.axhline(reference["value"], color="black", linestyle="--", linewidth=1,
                     label=f"{comparison['reference']['label']} (band: its interval)")
        if reference.get("low") is not None:
            axes.axhspan(reference["low"], reference["high"], color="black", alpha=0.08)
    for i, run in enumerate(runs):
        rate = run[key][name].get("rate")
        if rate is None:
            continue
        colour = f"C{i % 10}"
        if rate.get("low") is None:
            axes.plot(i, rate["value"], "o", markerfacecolor="none", color=colour)
        else:
            axes.errorbar(i, rate["value"], yerr=[[rate["value"] - rate["low"]], [rate["high"] - rate["value"]]],
                          fmt="o", color=colour, capsize=4)
        text = _removal_text(run[key][name])
        if text is not None:
            top = rate["high"] if rate.get("high") is not None else rate["value"]
            axes.annotate(text, (i, top), textcoords="offset points", xytext=(0, 6), ha="center",
                          fontsize="x-small", color=colour)
    axes.set_xticks(range(len(runs)))
    axes.set_xticklabels([plot_label(run["label"]) for run in runs], rotation=20, ha="right", fontsize="small")
    axes.set_xlim(-0.6, len(runs) - 0.4)
    axes.set_title(f"{plot_label(name)}\n{readout['phrase']}", fontsize="medium")
    axes.set_ylabel("mean tokens" if attribute["unit"] == "tokens" else readout["title"].split(" (")[0],
                    fontsize="small")
    axes.margins(y=0.2)


def _interval_phrase(comparison: Mapping) -> str:
    """What the title can say of the intervals: every rate has one, some do not (hollow points:
    too few prompts), or none does."""
    rates = [run[readout["key"]][name].get("rate") for readout in comparison["readouts"]
             for name in comparison[readout["key"]] for run in comparison["runs"]]
    with_interval = [rate.get("low") is not None for rate in rates if rate is not None]
    level = f"{comparison['level']:.0%}"
    if with_interval and all(with_interval):
        return f"with {level} intervals over prompts"
    if any(with_interval):
        return f"with {level} intervals over prompts where there are enough (hollow: too few for one)"
    return "without intervals (too few prompts for one)"


@labels_as_text
def plot_rates(comparison: Mapping, path: Path) -> None:
    """compare.png: one panel per readout and attribute (the rates on generated answers, then from
    first-name probabilities), each run's rate with its interval and removal, the reference dashed
    with its interval shaded."""
    panels = [(readout, name) for readout in comparison["readouts"] for name in comparison[readout["key"]]]
    panels = panels or [(None, None)]
    columns = min(len(panels), 3 if len(panels) != 4 else 2)
    rows = -(-len(panels) // columns)
    figure = _figure(max(4.2, 1.1 + 1.0 * len(comparison["runs"])) * columns, 3.9 * rows)
    for j, (readout, name) in enumerate(panels):
        axes = figure.add_subplot(rows, columns, j + 1)
        if name is None:
            axes.text(0.5, 0.5, "no attribute read on generated answers", ha="center", va="center")
            axes.set_axis_off()
            continue
        _rate_panel(axes, comparison, readout, name)
        if j == 0 and comparison[readout["key"]][name]["reference"] is not None:
            axes.legend(loc="best", fontsize="small")
    figure.suptitle(f"rates {_interval_phrase(comparison)}; removal of {comparison['baseline'] or 'no baseline'}'s "
                    "shift above each run", fontsize="medium")
    figure.tight_layout()
    figure.savefig(path)


def _theta_panel(axes, name: str, runs: list[tuple[int, Mapping]]) -> None:
    """One attribute: annotators along x (sorted by offline estimate), each run's theta_k as
    points and its theta_bar dashed, the offline estimates as grey crosses (the pooled one dotted)."""
    offline = {a: v for _, run in runs for a, v in run["theta"][name]["offline_k"].items() if v is not None}
    ids = sorted({a for _, run in runs for a in run["theta"][name]["theta_k"]},
                 key=lambda a: (offline.get(a) is None, offline.get(a, 0.0), a))
    position = {a: x for x, a in enumerate(ids)}
    if offline:
        shown = [a for a in ids if a in offline]
        axes.scatter([position[a] for a in shown], [offline[a] for a in shown], marker="x", color="grey",
                     s=18, label="offline estimate (audit)")
    pooled = next((run["theta"][name]["offline"] for _, run in runs if run["theta"][name]["offline"] is not None), None)
    if pooled is not None:
        axes.axhline(pooled, color="grey", linestyle=":", linewidth=1)
    for i, run in runs:
        entry, colour = run["theta"][name], f"C{i % 10}"
        points = [(position[a], v) for a, v in entry["theta_k"].items() if v is not None]
        axes.scatter([x for x, _ in points], [y for _, y in points], color=colour, s=14, label=plot_label(run["label"]))
        axes.axhline(entry["theta_bar"], color=colour, linestyle="--", linewidth=1)
    axes.axhline(0.0, color="black", linewidth=0.5)
    if len(ids) <= MAX_TICK_LABELS:
        axes.set_xticks(range(len(ids)))
        axes.set_xticklabels([plot_label(i) for i in ids], rotation=90, fontsize="x-small")
    else:
        axes.set_xticks([])
    axes.set_xlabel("annotator (sorted by offline estimate)")
    axes.set_ylabel(f"theta_k ({plot_label(name)})")
    axes.set_title(f"{plot_label(name)}: theta_k per annotator (dashed: theta_bar; dotted: pooled offline)",
                   fontsize="medium")
    axes.legend(loc="best", fontsize="x-small")


@labels_as_text
def plot_theta(comparison: Mapping, path: Path) -> bool:
    """theta.png: per attribute, the theta_k each run learned per annotator against the offline
    estimates of its audit. Returns False (and draws nothing) when no run learned theta_k per
    annotator."""
    panels = []
    for name in dict.fromkeys(name for run in comparison["runs"] for name in run.get("theta") or {}):
        runs = [(i, run) for i, run in enumerate(comparison["runs"])
                if (run.get("theta") or {}).get(name, {}).get("theta_k")]
        if runs:
            panels.append((name, runs))
    if not panels:
        return False
    figure = _figure(6.0 * len(panels), 4.4)
    for j, (name, runs) in enumerate(panels):
        _theta_panel(figure.add_subplot(1, len(panels), j + 1), name, runs)
    figure.tight_layout()
    figure.savefig(path)
    return True
