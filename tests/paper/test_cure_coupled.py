"""Tests for the cure's coupled calibration (``calibration.design: per_coordinate``,
experiments.cure.calibration) on the fake world of tests/fixtures/cure.py.

Worked values. The fake stage achieves A intended + c with A = [[0.5, 0.1], [0.4, 0.9]] and
c = [0.2, 0.3] (the map tests/paper/test_anchoring.py fits and inverts by hand) on a source at
rate 0.8 on both attributes, independent at every prompt, so the achieved shift the cure reads
back is the fake's own and s*(0.5) = (-ln 4, -ln 4) = (-1.3862944, -1.3862944).
- Calibration at step 0.5: intended (-1.3862944, -1.3862944), (-0.8862944, -1.3862944) and
  (-1.3862944, -0.8862944); the offsets are -0.1 x those (beta 0.1).
- Calibrated at t = 0.5: A^-1 (s* - c) = A^-1 (-1.5862944, -1.6862944); det A = 0.41, so
  intended = (0.9 x -1.5862944 + 0.1 x 1.6862944, 0.4 x 1.5862944 - 0.5 x 1.6862944) / 0.41 =
  (-1.2590355, -0.2086294) / 0.41 = (-3.0708183, -0.5088523): offsets 0.3070818, 0.0508852.
"""

from __future__ import annotations

import math
import shutil

import pytest

from badpo.core.config import ConfigError
from experiments.cure.analysis import run_cure_experiment
from experiments.cure.config import is_cure_config, load_cure_config
from experiments.cure.plan import plan_cure
from experiments.cure.table import describe_line
from fixtures.cure import (
    CONFIGS,
    NAMES,
    cure_config,
    fake_cure_backend,
    fake_source_backend,
    log_source_experiment,
    quiet,
    write_source_experiment,
)

COUPLED = {"response": ((0.5, 0.1), (0.4, 0.9)), "intercept": (0.2, 0.3)}
S_STAR = -math.log(4.0)
PER_COORDINATE = ("calibration.design=per_coordinate", "calibration.step=0.5")


def offsets(calls: list) -> list[list[float]]:
    return [c[2] for c in calls if c[0] == "cure"]


def test_per_coordinate_calibration_moves_one_coordinate_at_a_time_and_inverts_the_coupling(tmp_path):
    source = write_source_experiment(tmp_path)
    log_source_experiment(source)
    calls: list = []
    result = run_cure_experiment(cure_config(tmp_path, source, *PER_COORDINATE), fake_cure_backend(calls, **COUPLED),
                                 fake_source_backend(), log=quiet)
    points = result["calibration"]["points"]
    assert [p["point"] for p in points] == ["s*", "woman +0.5", "black +0.5"]
    expected = [(S_STAR, S_STAR), (S_STAR + 0.5, S_STAR), (S_STAR, S_STAR + 0.5)]
    for point, offset, (w, b) in zip(points, offsets(calls)[:3], expected):
        assert [point["intended"][a] for a in NAMES] == pytest.approx([w, b], abs=1e-9)
        assert offset == pytest.approx([-0.1 * w, -0.1 * b], abs=1e-10)
    calibration = result["calibration"]
    assert calibration["design"] == "per_coordinate" and calibration["step"] == 0.5
    assert "line" not in calibration and "scales" not in calibration
    affine = calibration["affine"]
    assert affine["attributes"] == list(NAMES)
    assert [x for row in affine["A"] for x in row] == pytest.approx([0.5, 0.1, 0.4, 0.9], abs=1e-8)
    assert affine["c"] == pytest.approx([0.2, 0.3], abs=1e-8)
    # the calibrated offsets invert A, and every calibrated run reads its target on both attributes
    assert offsets(calls)[3] == pytest.approx([0.3070818, 0.0508852], abs=1e-6)
    calibrated = [r for r in result["records"].values() if r.get("role") == "calibrated"]
    assert len(calibrated) == 4
    for record in calibrated:
        assert record["readouts"]["names"]["first_name"] == pytest.approx({a: record["target"] for a in NAMES},
                                                                         abs=1e-8)
    rows = [line.split(" | ")[0].lstrip("| ") for line in result["markdown"].splitlines() if line.startswith("| ")]
    assert rows[1:5] == ["DPO (source)", "+ offset, exact tilt", "+ offset, calibration woman +0.5",
                         "+ offset, calibration black +0.5"]
    assert ("Calibration at seed 42, target 0.5, s* and s* moved by +0.5 on each attribute alone: achieved = "
            "A·intended + c over (woman_coded, black_coded), A = [[0.500, 0.100], [0.400, 0.900]], "
            "c = [0.200, 0.300].") in result["markdown"]


def test_the_run_at_s_star_is_one_run_under_both_designs(tmp_path):
    """The scaled design's exact-tilt run and the per_coordinate design's s* run have the same
    intended shift, so the same key: with the scaled run's runs/ and work/ copied into a new
    output_dir, the coupled calibration prepares no source again and trains only its two moved
    points and the calibrated runs."""
    source = write_source_experiment(tmp_path)
    log_source_experiment(source)
    scaled = run_cure_experiment(cure_config(tmp_path, source), fake_cure_backend([], **COUPLED),
                                 fake_source_backend(), log=quiet)
    coupled_dir = tmp_path / "coupled"
    for folder in ("runs", "work"):
        shutil.copytree(tmp_path / "cure" / folder, coupled_dir / folder)
    calls: list = []
    coupled = run_cure_experiment(cure_config(tmp_path, source, *PER_COORDINATE, f"output_dir={coupled_dir}"),
                                  fake_cure_backend(calls, **COUPLED), fake_source_backend(), log=quiet)
    assert [c[0] for c in calls] == ["cure"] * 6  # 2 moved points + 4 calibrated; no source, no s*
    assert coupled["calibration"]["points"][0]["key"] == scaled["calibration"]["points"][0]["key"]
    assert {p["key"] for p in coupled["calibration"]["points"][1:]}.isdisjoint(
        p["key"] for p in scaled["calibration"]["points"])


def test_the_plan_lists_the_per_coordinate_runs_by_the_keys_the_cure_logs(tmp_path):
    source = write_source_experiment(tmp_path)
    config = cure_config(tmp_path, source, *PER_COORDINATE)
    fresh = plan_cure(config, fake_cure_backend([]), fake_source_backend())
    ours = [r for r in fresh if r.label.startswith(("calibration", "calibrated"))]
    assert [(r.label, r.key) for r in ours[:3]] == [
        ("calibration s* seed 42", None), ("calibration woman +0.5 seed 42", None),
        ("calibration black +0.5 seed 42", None)]
    log_source_experiment(source)
    result = run_cure_experiment(config, fake_cure_backend([], **COUPLED), fake_source_backend(), log=quiet)
    planned = {r.label: r for r in plan_cure(config, fake_cure_backend([]), fake_source_backend())}
    assert [planned[f"calibration {p['point']} seed 42"].key for p in result["calibration"]["points"]] == [
        p["key"] for p in result["calibration"]["points"]]
    calibrated = {(r["target"], r["seed"]): r["key"] for r in result["records"].values()
                  if r.get("role") == "calibrated"}
    assert {(t, s): planned[f"calibrated t={t} seed {s}"].key for t, s in calibrated} == calibrated
    assert all(r.logged for r in planned.values() if r.label.startswith(("calibration", "calibrated")))


def test_calibration_config_errors_name_the_key(tmp_path):
    source = write_source_experiment(tmp_path)
    for bad in ("0", "-0.5", ".nan", ".inf"):
        with pytest.raises(ConfigError, match=r"^calibration.step: must be a finite log-odds > 0"):
            cure_config(tmp_path, source, *PER_COORDINATE[:1], f"calibration.step={bad}")
    with pytest.raises(ConfigError, match="calibration.design"):
        cure_config(tmp_path, source, "calibration.design=diagonal")
    with pytest.raises(ConfigError, match="calibration.scales: give two or more distinct"):
        cure_config(tmp_path, source, "calibration.scales=[1.0]")
    # per_coordinate ignores the scales (a variant of a scaled config inherits them), so it does not check them
    assert cure_config(tmp_path, source, *PER_COORDINATE, "calibration.scales=[1.0]").calibration.scales == [1.0]


def test_describe_line_says_either_form_in_one_clause():
    line = {"woman_coded": {"slope": 0.606, "intercept": 0.194, "fitted": True},
            "black_coded": {"slope": 1.0, "intercept": 0.0, "fitted": False, "why": "intended shifts span 0.001"}}
    assert describe_line(line) == ("woman_coded: achieved = 0.606 x intended +0.194; black_coded: not calibrated "
                                   "(intended shifts span 0.001; the exact tilt)")
    affine = {"attributes": list(NAMES), "A": [[0.5, 0.1], [0.4, 0.9]], "c": [0.2, -0.3]}
    assert describe_line(affine) == ("achieved = A·intended + c over (woman_coded, black_coded), "
                                     "A = [[0.500, 0.100], [0.400, 0.900]], c = [0.200, -0.300]")


def test_the_shipped_coupled_config_is_the_tiny_cure_with_the_coupled_calibration():
    path = CONFIGS / "experiment_tiny_offset_coupled.yaml"
    base, coupled = load_cure_config(CONFIGS / "experiment_tiny_offset.yaml"), load_cure_config(path)
    assert is_cure_config(path)
    assert (coupled.calibration.design, coupled.calibration.step) == ("per_coordinate", 0.5)
    assert coupled.output_dir == "runs/tiny_offset_coupled" != base.output_dir
    # everything a source preparation or the run at s* is keyed on is the base's, so copied runs are reused
    for key in ("source", "prompts", "answers", "method", "train", "evaluation", "seeds"):
        assert getattr(coupled, key) == getattr(base, key), key
    assert (coupled.calibration.seed, coupled.calibration.target) == (base.calibration.seed, base.calibration.target)


def test_an_intended_shift_beyond_the_calibration_points_is_named():
    """Points spanning woman [-1.39, -0.89] and black [0.00, 0.50]: a calibrated shift of
    -2.79 / -1.45 lies beyond both ranges (the tiny cure's parity run), -1.0 / 0.25 inside."""
    from experiments.cure.calibration import extrapolated

    points = [{"intended": {"woman_coded": w, "black_coded": b}} for w, b in
              ((-1.39, 0.0), (-0.89, 0.0), (-1.39, 0.5))]
    assert extrapolated({"woman_coded": -1.0, "black_coded": 0.25}, points) == []
    assert extrapolated({"woman_coded": -2.79, "black_coded": -1.45}, points) == [
        "woman_coded -2.790 outside the calibration points' [-1.390, -0.890]",
        "black_coded -1.450 outside the calibration points' [+0.000, +0.500]"]


def test_a_stage_that_moves_a_readout_against_its_own_offset_is_refused():
    """Points whose black-coded step lowers the black-coded readout (A's diagonal -0.2): inverting
    such a map turns noise into a large shift, so the fit stops with the coordinate named."""
    from experiments.cure.calibration import CalibrationSpec, calibration_fit

    spec = CalibrationSpec(design="per_coordinate", step=0.5)
    points = [{"intended": {"woman_coded": w, "black_coded": b},
               "achieved": {"woman_coded": 0.6 * w, "black_coded": -0.2 * b}}
              for w, b in ((-1.0, 0.0), (-0.5, 0.0), (-1.0, 0.5))]
    with pytest.raises(ValueError, match=r"the black_coded offset moved its own readout by -0.200"):
        calibration_fit(spec, points)
