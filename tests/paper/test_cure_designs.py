"""The cure's calibration designs are rows of one table: each places, names, fits and describes its
own runs, and the table and the plan read them through the row (issue 35, item 4)."""

from __future__ import annotations

import pytest

from badpo.core.config import ConfigError
from badpo.core.names import NAME_ATTRIBUTES
from experiments.cure.calibration import DESIGNS, CalibrationSpec, calibration_fit, design_of


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_each_design_names_places_fits_and_labels_the_same_runs(name):
    spec = CalibrationSpec(design=name, scales=[1.0, 2.0, 3.0], step=0.5)
    exact = {"woman_coded": 1.0, "black_coded": 0.4}
    names, intended = DESIGNS[name].point_names(spec), DESIGNS[name].intended(spec, exact)
    assert len(names) == len(intended) == 3 and intended[0] == exact  # s* itself is always a run
    # a stage that achieves 0.5 x intended + 0.1 on each attribute, with no coupling
    points = [{"intended": i, "achieved": {a: 0.5 * i[a] + 0.1 for a in NAME_ATTRIBUTES}} for i in intended]
    fit = calibration_fit(spec, points)
    calibration = {"design": name, **DESIGNS[name].settings(spec), **fit,
                   "points": [{"point": n, **p} for n, p in zip(names, points)]}
    assert design_of(calibration) is DESIGNS[name]
    assert len(DESIGNS[name].labels(calibration)) == 3
    assert DESIGNS[name].labels(calibration)[0] == "+ offset, exact tilt"
    assert DESIGNS[name].describe(calibration)


def test_the_designs_fit_what_they_see_and_refuse_what_they_cannot_use():
    scaled = CalibrationSpec(design="scaled", scales=[1.0, 2.0])
    points = [{"intended": {"woman_coded": s, "black_coded": s}, "achieved": {"woman_coded": 0.5 * s + 0.1,
                                                                              "black_coded": 2 * s}}
              for s in (1.0, 2.0)]
    line = calibration_fit(scaled, points)["line"]
    assert line["woman_coded"]["slope"] == pytest.approx(0.5) and line["woman_coded"]["intercept"] == pytest.approx(0.1)
    assert design_of({"scales": [1.0]}) is DESIGNS["scaled"]  # a calibration.json from before designs
    with pytest.raises(ConfigError, match="calibration.scales"):
        CalibrationSpec(design="scaled", scales=[1.0, 1.0])
    CalibrationSpec(design="per_coordinate", scales=[1.0, 1.0])  # scales are not read there
