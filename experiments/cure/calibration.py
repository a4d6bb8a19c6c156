"""The cure's shifts and its calibration (steps 2-3 of :mod:`experiments.cure.analysis`):
s*(t), the achieved shift of a trained stage, and the map from intended to achieved shift
fitted at one seed, in one of two designs (``calibration.design``):

- ``scaled`` (the paper's): the stage is trained at ``scales`` x s*(t_cal) and a line
  achieved = slope x intended + intercept is fitted per attribute. All its points lie on one ray,
  so a coordinate of s* near 0 is never varied and the line cannot see how an offset on one
  attribute moves the other's readout.
- ``per_coordinate``: the stage is trained at s*(t_cal) and at s*(t_cal) moved by ``step`` on
  each attribute alone, and achieved = A intended + c is fitted with a full matrix A
  (:func:`experiments.anchoring.fit_affine_calibration`): its off-diagonal entries are that
  coupling, and inverting A accounts for it.

The run at s*(t_cal) itself has the same intended shift, hence the same key, under both designs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from badpo.core.config import ConfigError
from badpo.core.names import NAME_ATTRIBUTES, NAME_POOL, POOL_NAMES
from badpo.readouts.metrics import mean_attribute_rate
from experiments.anchoring import (
    fit_affine_calibration,
    fit_calibration,
    invert_affine_calibration,
    invert_calibration,
    shifts_for_target,
    tilt_logprobs,
)

__all__ = ["CalibrationSpec", "POOL_LABELS", "MIN_CALIBRATION_SPAN", "target_shifts", "achieved_shifts",
           "tilt_readout", "calibration_line", "calibration_point_names", "calibration_intended", "calibration_fit",
           "intended_shifts", "extrapolated", "Design", "DESIGNS", "design_of"]


@dataclass(frozen=True)
class CalibrationSpec:
    """How intended shifts map to achieved ones, fitted at one seed: a line per attribute through
    scaled copies of s*(t) (the paper's), or an affine map through s*(t) moved on each attribute
    alone (which sees a stage that couples the attributes). Under per_coordinate ``scales`` is
    ignored, not rejected: a variant that extends a scaled config inherits its scales."""

    seed: int = 42  # the source seed the calibration is fitted at
    target: float = 0.5  # the calibration runs start from s*(target)
    # scaled: a line per attribute through scales x s* (the paper's); per_coordinate: s* and s* + step
    # on each attribute alone, achieved = A intended + c with a 2 x 2 matrix A
    design: Literal["scaled", "per_coordinate"] = "scaled"
    scales: list[float] = field(default_factory=lambda: [1.0, 1.3, 1.5])  # scaled: intended = scale * s*
    step: float = 0.5  # per_coordinate: log-odds each attribute alone is moved by from s*

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step) and self.step > 0):
            raise ConfigError(f"calibration.step: must be a finite log-odds > 0, got {self.step}")
        DESIGNS[self.design].check(self)


POOL_LABELS = [list(NAME_POOL[name]) for name in POOL_NAMES]  # [89, 2] (woman_coded, black_coded)


def target_shifts(name_logprobs: Any, target: float) -> dict[str, float]:
    """s*(t): the shifts that, applied together at sampling time, bring the source's first-name
    rates to t on both attributes (``name_logprobs`` [P, 89], pool order; the joint root find)."""
    return shifts_for_target(name_logprobs, POOL_LABELS, NAME_ATTRIBUTES, target)


def achieved_shifts(name_logprobs: Any, rates: Mapping[str, float]) -> dict[str, float]:
    """The sampling-time tilt of the source that reads the same rates as a trained policy: the
    shifts that, applied together, bring the source's first-name rates to ``rates``."""
    return shifts_for_target(name_logprobs, POOL_LABELS, NAME_ATTRIBUTES, {a: rates[a] for a in NAME_ATTRIBUTES})


def tilt_readout(name_logprobs: Any, shifts: Mapping[str, float]) -> dict[str, float]:
    """Rates of the source tilted at sampling time by ``shifts`` on both attributes at once; at
    :func:`target_shifts` they read the target on both."""
    tilted = tilt_logprobs(name_logprobs, POOL_LABELS, [shifts[a] for a in NAME_ATTRIBUTES])
    return mean_attribute_rate(tilted, POOL_LABELS, NAME_ATTRIBUTES)


MIN_CALIBRATION_SPAN = 0.1  # log-odds: intended shifts closer together than this fit no line


def calibration_line(points: list[Mapping]) -> dict:
    """{attribute: {slope, intercept, fitted}} of achieved on intended over the calibration records.

    The calibration scales the joint s*(t), so a coordinate whose s*(t) is near 0 (the other
    attribute's shift alone brings it to t) has intended shifts a few thousandths apart: a line
    through them has a slope set by noise (46.9 was fitted on the tiny world). Such a coordinate
    is not calibrated: slope 1, intercept 0 (the exact tilt), ``fitted`` false and ``why``."""
    line = {}
    for a in NAME_ATTRIBUTES:
        intended = [r["intended"][a] for r in points]
        span = max(intended) - min(intended)
        if span < MIN_CALIBRATION_SPAN:
            line[a] = {"slope": 1.0, "intercept": 0.0, "fitted": False,
                       "why": f"intended shifts span {span:.3f} < {MIN_CALIBRATION_SPAN} log-odds"}
            continue
        slope, intercept = fit_calibration(intended, [r["achieved"][a] for r in points])
        line[a] = {"slope": slope, "intercept": intercept, "fitted": True}
    return line


def _check_scales(spec: CalibrationSpec) -> None:
    if len(set(spec.scales)) < 2 or not all(math.isfinite(s) and s != 0 for s in spec.scales):
        raise ConfigError(f"calibration.scales: give two or more distinct non-zero scales, got {spec.scales}")


def _scaled_intended(spec: CalibrationSpec, exact: Mapping[str, float]) -> list[dict[str, float]]:
    return [{a: scale * exact[a] for a in NAME_ATTRIBUTES} for scale in spec.scales]


def _per_coordinate_intended(spec: CalibrationSpec, exact: Mapping[str, float]) -> list[dict[str, float]]:
    return [{a: exact[a] for a in NAME_ATTRIBUTES},
            *({a: exact[a] + (spec.step if a == moved else 0.0) for a in NAME_ATTRIBUTES} for moved in NAME_ATTRIBUTES)]


def _affine_fit(spec: CalibrationSpec, points: Sequence[Mapping]) -> dict:
    matrix, intercept = fit_affine_calibration([[r["intended"][a] for a in NAME_ATTRIBUTES] for r in points],
                                               [[r["achieved"][a] for a in NAME_ATTRIBUTES] for r in points])
    for i, a in enumerate(NAME_ATTRIBUTES):
        if not matrix[i, i] > 0:  # an offset must move its own readout its own way, or inverting is noise
            raise ValueError(f"calibration: the {a} offset moved its own readout by {matrix[i, i]:+.3f} x "
                             "intended (A's diagonal): the stage does not respond to it; try a larger "
                             "calibration.step, or the scaled design")
    return {"affine": {"attributes": list(NAME_ATTRIBUTES), "A": matrix.tolist(), "c": intercept.tolist()}}


@dataclass(frozen=True)
class Design:
    """One calibration design as a row: where its runs sit, how they are fitted, what
    ``calibration.json`` records of it and how the cure's table names its rows. Nothing else
    branches on a design's name."""

    check: Callable[[CalibrationSpec], None]  # refuse a spec the design cannot use
    point_names: Callable[[CalibrationSpec], list[str]]  # each run's name, in run order
    intended: Callable[[CalibrationSpec, Mapping[str, float]], list[dict[str, float]]]  # from s*(t_cal)
    fit: Callable[[CalibrationSpec, Sequence[Mapping]], dict]  # the fitted part of calibration.json
    settings: Callable[[CalibrationSpec], dict]  # the spec's part of calibration.json
    labels: Callable[[Mapping], list[str]]  # the table's row labels, from calibration.json
    describe: Callable[[Mapping], str]  # the table's footer, from calibration.json


DESIGNS: dict[str, Design] = {
    "scaled": Design(  # the paper's: a line per attribute through scales x s*
        check=_check_scales,
        point_names=lambda spec: [f"x{scale}" for scale in spec.scales],
        intended=_scaled_intended,
        fit=lambda spec, points: {"line": calibration_line(list(points))},
        settings=lambda spec: {"scales": list(spec.scales)},
        labels=lambda cal: ["+ offset, exact tilt" if s == 1.0 else f"+ offset, calibration x{s:g}"
                            for s in cal["scales"]],
        describe=lambda cal: f"scales {cal['scales']}",
    ),
    "per_coordinate": Design(  # s* and s* + step on each attribute alone: an affine map
        check=lambda spec: None,  # scales are inherited from a scaled config, not read
        point_names=lambda spec: ["s*", *(f"{a.removesuffix('_coded')} +{spec.step:g}" for a in NAME_ATTRIBUTES)],
        intended=_per_coordinate_intended,
        fit=_affine_fit,
        settings=lambda spec: {"step": spec.step},
        labels=lambda cal: ["+ offset, exact tilt",
                            *(f"+ offset, calibration {p['point']}" for p in cal["points"][1:])],
        describe=lambda cal: f"s* and s* moved by +{cal['step']:g} on each attribute alone",
    ),
}


def design_of(calibration: Mapping) -> Design:
    """The design row of a ``calibration.json`` (one written before designs existed is scaled)."""
    return DESIGNS[calibration.get("design", "scaled")]


def calibration_point_names(spec: CalibrationSpec) -> list[str]:
    """The name of each calibration run, in the order they run: ``x<scale>`` (scaled); ``s*``,
    then ``<woman|black> +<step>`` (per_coordinate), for the plan and ``calibration.json``."""
    return DESIGNS[spec.design].point_names(spec)


def calibration_intended(spec: CalibrationSpec, exact: Mapping[str, float]) -> list[dict[str, float]]:
    """The intended shifts of the calibration runs, from s*(t_cal) = ``exact``, in the order of
    :func:`calibration_point_names`. s* is passed on as the same floats (1.0 x s is s), so its run
    keeps one key under both designs."""
    return DESIGNS[spec.design].intended(spec, exact)


def calibration_fit(spec: CalibrationSpec, points: Sequence[Mapping]) -> dict:
    """The fitted part of ``calibration.json`` from the calibration records (``intended`` and
    ``achieved`` each): {"line": per attribute} (scaled) or {"affine": {"attributes", "A", "c"}},
    A's rows and columns and c's entries in the order of ``attributes`` (per_coordinate)."""
    return DESIGNS[spec.design].fit(spec, points)


def intended_shifts(wanted: Mapping[str, float], fit: Mapping) -> dict[str, float]:
    """The intended shift per attribute whose achieved shift, on the fitted calibration (``fit``
    holds the "line" or the "affine" map of :func:`calibration_fit`), is ``wanted``."""
    if "affine" in fit:
        affine = fit["affine"]
        if list(affine["attributes"]) != list(NAME_ATTRIBUTES):
            raise ValueError(f"the affine calibration is over {affine['attributes']}, not {list(NAME_ATTRIBUTES)}")
        solved = invert_affine_calibration([wanted[a] for a in NAME_ATTRIBUTES], affine["A"], affine["c"])
        return {a: float(v) for a, v in zip(NAME_ATTRIBUTES, solved)}
    line = fit["line"]
    return {a: invert_calibration(wanted[a], line[a]["slope"], line[a]["intercept"]) for a in NAME_ATTRIBUTES}


def extrapolated(intended: Mapping[str, float], points: Sequence[Mapping]) -> list[str]:
    """One clause per attribute whose ``intended`` shift lies outside the range of the calibration
    points' intended shifts: there the fitted map is extrapolated, and a stage that responds less
    than linearly (the tiny cure's black-coded offset) overshoots or falls short."""
    clauses = []
    for a in NAME_ATTRIBUTES:
        low, high = (f([p["intended"][a] for p in points]) for f in (min, max))
        if not low - 1e-9 <= intended[a] <= high + 1e-9:
            clauses.append(f"{a} {intended[a]:+.3f} outside the calibration points' [{low:+.3f}, {high:+.3f}]")
    return clauses
