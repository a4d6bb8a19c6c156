"""The label audit as the fixed-width table ``badpo audit`` prints: one row per slice of the
judgments (all, per class, per pair type, per pair type and class) with its counts, log-odds and
standard error, then the annotator graph per attribute, where training starts theta, each annotator's
reliability (when the audit estimated it) and the warnings.

The numbers are :func:`badpo.auditing.estimates.audit`'s; this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from badpo.auditing.estimates import Audit, CoordinateAudit, LogOdds, audit
from badpo.auditing.reliability import format_reliability
from badpo.auditing.start_level import format_start_level
from badpo.core.attributes import resolve_attributes
from badpo.core.judgments import read_judgments

__all__ = ["format_audit", "format_estimate", "report"]


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def format_estimate(counts: LogOdds) -> tuple[str, str]:
    """(log-odds, standard error) of one slice as the audit table prints them."""
    if counts.cross == 0:
        return "-", "-"
    if counts.divergent:
        return counts.divergent, "-"
    return f"{counts.log_odds:+.3f}", f"{counts.se:.3f}"


def _rows(c: CoordinateAudit) -> Iterable[tuple[str, LogOdds]]:
    yield "all", c.overall
    for key, counts in c.by_class.items():
        yield f"class {key}", counts
    for pair_type, counts in c.by_pair_type.items():
        yield f"pair {pair_type}", counts
        if len(c.by_class) > 1 and counts.cross:  # no class rows under a pair type with no cross-group
            for key, sub in c.by_pair_type_class[pair_type].items():
                yield f"pair {pair_type}, class {key}", sub


def format_audit(result: Audit) -> str:
    """A fixed-width table of the audit for the terminal."""
    lines = [
        f"badpo label audit: {result.n_judgments} judgments, {len(result.annotators)} annotators, "
        f"attributes {', '.join(result.attribute_names)}",
        f"cross-group on at least one attribute: {result.cross_any} "
        f"({_percent(result.cross_any / result.n_judgments)})",
        "log-odds: that the attribute-carrying side wins a cross-group judgment; "
        "s.e. = sqrt(1/wins + 1/(cross - wins))",
        "(marginal: one attribute at a time, so attributes that go together share their votes; "
        "--report DIR estimates each annotator on all attributes jointly)",
        "",
    ]
    width = max([len("attribute")] + [len(n) for n in result.attribute_names])
    slice_width = max([len("slice")] + [len(s) for c in result.coordinates for s, _ in _rows(c)])
    header = (f"{'attribute':<{width}}  {'slice':<{slice_width}}  {'judgments':>9}  {'cross':>7}  "
              f"{'share':>6}  {'wins':>7}  {'log-odds':>8}  {'s.e.':>6}")
    lines += [header, "-" * len(header)]
    for c in result.coordinates:
        for label, counts in _rows(c):
            estimate, se = format_estimate(counts)
            lines.append(f"{c.name:<{width}}  {label:<{slice_width}}  {counts.judgments:>9}  "
                         f"{counts.cross:>7}  {_percent(counts.share_cross):>6}  {counts.wins:>7}  "
                         f"{estimate:>8}  {se:>6}")
    lines += ["", "annotator graph (edge: a cross-group pair judged by both annotators)"]
    graph_header = (f"{'graph':<{max(width, 13)}}  {'components':>10}  {'largest':>7}  "
                    f"{'no cross-group':>14}  {'theta -> +inf':>13}  {'theta -> -inf':>13}")
    lines += [graph_header, "-" * len(graph_header)]
    graphs = [("any attribute", result.graph, len(result.unidentified), "-", "-")]
    graphs += [(c.name, c.graph, len(c.unidentified), len(c.diverge_up), len(c.diverge_down))
               for c in result.coordinates]
    for label, graph, missing, up, down in graphs:
        largest = len(graph.components[0]) if graph.components else 0
        lines.append(f"{label:<{max(width, 13)}}  {graph.n_components:>10}  {largest:>7}  "
                     f"{missing:>14}  {up:>13}  {down:>13}")
    if result.start is not None:
        lines += [""] + format_start_level(result.attribute_names, result.start)
    if result.reliability is not None:
        lines += [""] + format_reliability(result.reliability)
    lines += ["", "warnings:" if result.warnings else "warnings: none"]
    lines += [f"  - {message}" for message in result.warnings]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------- entry points
def report(source: Any, specs: Sequence[str]) -> tuple[Audit, str]:
    """Read judgments (``read_judgments`` source), resolve the attribute specs, audit, format."""
    attributes = resolve_attributes(specs)  # a bad spec fails before the data is read
    result = audit(read_judgments(source), attributes)
    return result, format_audit(result)
