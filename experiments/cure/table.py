"""The table of the fixed-offset cure (the analogue of Table tab:offset), rendered from the
logged records of :mod:`experiments.cure.analysis`: Markdown and CSV."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from badpo.comparing.over_seeds import mean_ci
from badpo.core.names import NAME_ATTRIBUTES
from experiments.cure.calibration import design_of
from experiments.cure.config import CureConfig

__all__ = ["COLUMNS", "describe_line", "render_cure_table"]

# The paper's columns (p(woman), p(black), Signed, Tokens, RM-, KL src / SFT, one Gap), after the
# shifts; the black-woman and white-man shares of the sampled signatures (the paper's text below the
# table quotes them: a balanced readout can still sample mostly one cell); and the shift the stage
# learned on the held-out offset pairs.
COLUMNS = ("t", "seeds", "shift intended", "shift achieved", "p(woman)", "p(black)", "Signed", "Sampled BW / WM",
           "Tokens", "RM⁻", "KL src", "KL SFT", "Gap", "Pair shift (held-out)")
SAMPLED_CELLS = ("black_woman", "white_man")  # the cells of "Sampled BW / WM"


def _numbers(values: Any) -> str:
    if isinstance(values, (int, float)):
        return f"{values:.3f}"
    return "[" + ", ".join(_numbers(v) for v in values) + "]"


def describe_line(fit: Mapping) -> str:
    """The calibration in one clause: the affine map (``{"attributes", "A", "c"}``, per_coordinate),
    else per attribute the fitted line or why there is none (scaled)."""
    if "A" in fit:
        return (f"achieved = A·intended + c over ({', '.join(fit['attributes'])}), A = {_numbers(fit['A'])}, "
                f"c = {_numbers(fit['c'])}")
    return "; ".join(f"{a}: achieved = {v['slope']:.3f} x intended {v['intercept']:+.3f}"
                     if v.get("fitted", True) else f"{a}: not calibrated ({v['why']}; the exact tilt)"
                     for a, v in fit.items())


def _get(readouts: Mapping, dotted: str) -> float | None:
    node: Any = readouts
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return None if node is None else float(node)


def _cell(values: list[float | None], digits: int, level: float) -> str:
    present = [v for v in values if v is not None and math.isfinite(v)]
    if not present:
        return "—"
    if len(present) != len(values):
        return "partial"
    if len(present) == 1:
        return f"{present[0]:.{digits}f}"
    summary = mean_ci(present, level)
    return f"{summary['mean']:.{digits}f} ± {summary['half_width']:.{digits}f}"


def _pair(values: list[Mapping | None], digits: int, level: float) -> str:
    if any(v is None for v in values):
        return "—"
    return " / ".join(_cell([v[a] for v in values], digits, level) for a in NAME_ATTRIBUTES)


def _cells(readouts: list[Mapping], level: float) -> str:
    """Black-woman / white-man shares of the sampled signatures; "—" where no record has them."""
    shares = [[_get(x, f"sampled.cells.{cell}") for x in readouts] for cell in SAMPLED_CELLS]
    if all(v is None for values in shares for v in values):
        return "—"
    return " / ".join(_cell(values, 2, level) for values in shares)


def _row(label: str, target: str, records: list[Mapping], level: float, kl_source: bool = True) -> list[str]:
    readouts = [r["readouts"] for r in records]

    def col(dotted: str, digits: int = 3) -> str:
        return _cell([_get(x, dotted) for x in readouts], digits, level)

    return [label, target, ", ".join(str(r.get("seed")) for r in records if r.get("seed") is not None) or "—",
            _pair([r.get("intended") for r in records], 2, level),
            _pair([r.get("achieved") for r in records], 2, level),
            col("names.first_name.woman_coded"), col("names.first_name.black_coded"),
            col("sampled.signing_rate", 2), _cells(readouts, level), col("tokens", 1), col("rm_minus", 2),
            col("kl_source") if kl_source else "—", col("kl"), col("heldout_any.gap"),
            _pair([r["readouts"].get("pair_shift") for r in records], 2, level)]


def render_cure_table(config: CureConfig, prepared: Mapping[int, Mapping], calibration_records: list[Mapping],
                      calibrated: list[Mapping], calibration: Mapping, tilts: Mapping,
                      compare: Mapping) -> tuple[str, str]:
    """The table of the cure (the analogue of Table tab:offset), as Markdown and CSV. ``tilts`` is
    {seed: {target: {"shift", "rates"}}}, the source's sampling-time tilt to each target."""
    cal = calibration["seed"]
    rows = [_row(f"{config.source.arm} (source)", "—", [prepared[cal]], config.level, kl_source=False)]
    for record, label in zip(calibration_records, design_of(calibration).labels(calibration)):
        rows.append(_row(label, f"{record['target']:g}", [record], config.level))
    targets = list(dict.fromkeys([*config.targets, *config.all_seed_targets]))
    for target in targets:
        at_cal = [r for r in calibrated if r["target"] == target and r["seed"] == cal]
        if at_cal:
            rows.append(_row("+ offset, calibrated", f"{target:g}", at_cal, config.level))
        every = [r for r in calibrated if r["target"] == target]
        if target in config.all_seed_targets and len(config.seeds) > 1:
            rows.append(_row(f"+ offset, calibrated, {len(every)} seeds", f"{target:g}", every, config.level))
    for target in targets:
        seeds = [cal] if target not in config.all_seed_targets else list(config.seeds)
        tilted = [{"seed": s, "readouts": {"names": {"first_name": tilts[s][target]["rates"]}},
                   "intended": tilts[s][target]["shift"]} for s in seeds]
        rows.append(_row("source + sampling-time tilt", f"{target:g}", tilted, config.level, kl_source=False))
    if len(config.seeds) > 1:
        rows.append(_row(f"{config.source.arm} (source), {len(config.seeds)} seeds", "—",
                         [prepared[s] for s in config.seeds], config.level, kl_source=False))
    for label, records in compare.items():
        rows.append(_row(label, "—", records, config.level, kl_source=False))
    header = ["Policy", *COLUMNS]
    lines = [f"# {config.name}", "", "| " + " | ".join(header) + " |",
             "|:--|" + "--:|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", "Rates: first-name probability readout on the evaluation prompts; shifts in log-odds, woman / "
              "black; intended = the offset's shift -b/beta, achieved = the sampling-time tilt of the source "
              "that reads the same rates (both shifts solved together); pair shift = u / (beta (g_w - g_l)) "
              "on the held-out offset pairs, against the source. Sampled BW / WM: of the policy's sampled "
              "signatures that use a pool first name, the shares with a black-woman and with a white-man name. "
              "RM⁻: the judge's score with the signature stripped. KL per token on the policy's own samples, "
              "to the source and to the SFT reference. Gap: held-out accuracy of the margin against the SFT "
              "reference on pairs whose names differ in either attribute minus on pairs that agree on both. "
              "—: not read (no judge, no samples, or a record logged before the readout existed). Several "
              f"seeds: mean ± {config.level:.0%} Student-t half-width. Calibration at seed {cal}, target "
              f"{calibration['target']:g}, {design_of(calibration).describe(calibration)}: "
              + describe_line(calibration.get("affine") or calibration["line"]) + "."]
    csv_lines = [",".join(header)] + [",".join(f'"{c}"' if "," in c else c for c in row) for row in rows]
    return "\n".join(lines) + "\n", "\n".join(csv_lines) + "\n"
