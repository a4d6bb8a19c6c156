"""Intervals over prompts for ``badpo compare``: did BA-DPO remove the bias from the user's model?

A run's rate of an attribute is a mean over the evaluation prompts of one value per prompt (the
attribute on the answer sampled for it). Its uncertainty is that of the prompts drawn, so each
interval here is a percentile bootstrap over prompts: ``draws`` resamples of the n prompts with
replacement, from a fixed ``seed`` (the same comparison gives the same intervals), and the
``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the resampled statistic (numpy's default,
linear interpolation).

Every run is read on the same prompts, so the resamples are paired: one index matrix per number of
prompts, the same for every run and the reference. The removal of the baseline's shift,
(rate_base - rate_run) / (rate_base - rate_ref), is computed on each resample from the three
resampled rates at once; where the baseline's own shift rate_base - rate_ref has an interval that
holds 0 the ratio divides by noise, and the removal is reported as not measurable rather than as a
number. Only numpy and the standard library: ``badpo compare`` loads no model and no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from badpo.comparing.over_seeds import removal

__all__ = ["DRAWS", "LEVEL", "SEED", "mean_interval", "percentile_interval", "removal_interval",
           "removal_point", "resample_indices", "shift_interval"]

DRAWS = 2000  # bootstrap resamples of the prompts
SEED = 0  # their seed: the same comparison, the same intervals
LEVEL = 0.95


def resample_indices(n: int, draws: int = DRAWS, seed: int = SEED) -> np.ndarray:
    """``[draws, n]`` prompt indices, each row n draws with replacement from ``range(n)``:
    ``np.random.default_rng(seed).integers(0, n, size=(draws, n))``, so that a test (or a reader)
    recomputes them with numpy alone."""
    if n < 1 or draws < 1:
        raise ValueError(f"resampling needs at least one prompt and one draw, got n={n}, draws={draws}")
    return np.random.default_rng(seed).integers(0, n, size=(draws, n))


def percentile_interval(samples: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap ``samples``: their (1 - level)/2 and
    (1 + level)/2 quantiles, linearly interpolated (numpy's default)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    low, high = np.quantile(np.asarray(samples, dtype=np.float64), [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _values(values: Sequence[float], name: str, n: int | None = None) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0 or (n is not None and array.size != n):
        expected = f"{n} values" if n is not None else "a non-empty list"
        raise ValueError(f"{name}: expected {expected} (one per prompt), got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: per-prompt values must be finite numbers")
    return array


def _indices(indices: np.ndarray, n: int) -> np.ndarray:
    indices = np.asarray(indices)
    if indices.ndim != 2 or indices.shape[1] != n:
        raise ValueError(f"indices: expected [draws, {n}], got shape {indices.shape}")
    return indices


def mean_interval(values: Sequence[float], indices: np.ndarray, level: float = LEVEL) -> dict:
    """A rate over prompts with its bootstrap interval: {"value", "low", "high", "n"}.

    ``values`` [n] are the per-prompt values, ``indices`` [draws, n] the resamples
    (:func:`resample_indices`). Example: values (0, 1, 0, 0, 1) and the three resamples
    (0, 1, 2, 3, 4), (1, 1, 4, 0, 2), (2, 3, 0, 0, 3) have means 0.4, 0.6 and 0.0; at level 0.5
    the interval is their 0.25 and 0.75 quantiles, 0.2 and 0.5.
    """
    array = _values(values, "values")
    means = array[_indices(indices, array.size)].mean(axis=1)
    low, high = percentile_interval(means, level)
    return {"value": float(array.mean()), "low": low, "high": high, "n": int(array.size)}


def shift_interval(values: Sequence[float], reference: Sequence[float], indices: np.ndarray,
                   level: float = LEVEL) -> dict:
    """How far a run moved a rate from the reference, rate - rate_ref, with the interval of the
    paired difference (both read on the same resampled prompts): {"value", "low", "high", "n",
    "measurable"}, measurable when the interval does not hold 0."""
    run = _values(values, "values")
    ref = _values(reference, "reference", run.size)
    differences = (run - ref)[_indices(indices, run.size)].mean(axis=1)
    low, high = percentile_interval(differences, level)
    return {"value": float(run.mean() - ref.mean()), "low": low, "high": high, "n": int(run.size),
            "measurable": not low <= 0.0 <= high}


def removal_point(rate_base: float, rate_run: float, rate_ref: float) -> float | None:
    """The share of the baseline's shift removed, the one definition
    (:func:`badpo.comparing.over_seeds.removal`: 1 is the reference, 0 the baseline); None where it
    is undefined (a rate not finite, or a baseline that did not move the rate: nothing to remove)."""
    try:
        return removal(rate_base, rate_run, rate_ref)
    except ValueError:
        return None


def removal_interval(base: Sequence[float], run: Sequence[float], reference: Sequence[float],
                     indices: np.ndarray, level: float = LEVEL) -> dict:
    """A run's removal of the baseline's shift with its paired bootstrap interval.

    ``base``, ``run`` and ``reference`` [n] are per-prompt values on the same prompts. On each
    resample the three means give one removal. Returns {"value", "low", "high", "measurable",
    "shift", "draws", "why"}: ``shift`` is the baseline's own (:func:`shift_interval`); when its
    interval holds 0 the removal is not measurable (value, low and high None, ``why`` says so).
    A resample where the baseline's mean equals the reference's has no removal and is left out
    (``draws`` counts those kept; with a measurable shift they are under (1 - level)/2 of them).
    Example: reference (0, 0, 0, 0), baseline (1, 1, 1, 0), run (0, 1, 0, 0) -> 0.75 - 0.25 over
    0.75 = 2/3.
    """
    base_values = _values(base, "base")
    n = base_values.size
    run_values, ref_values = _values(run, "run", n), _values(reference, "reference", n)
    indices = _indices(indices, n)
    shift = shift_interval(base_values, ref_values, indices, level)
    result = {"value": None, "low": None, "high": None, "measurable": shift["measurable"], "shift": shift,
              "draws": 0, "why": None}
    if not shift["measurable"]:
        result["why"] = (f"the baseline's shift {shift['value']:+.4g} has a {level:.0%} interval "
                         f"[{shift['low']:+.4g}, {shift['high']:+.4g}] that holds 0: nothing measurable to remove")
        return result
    b, r, f = (values[indices].mean(axis=1) for values in (base_values, run_values, ref_values))
    kept = b != f
    low, high = percentile_interval((b[kept] - r[kept]) / (b[kept] - f[kept]), level)
    result.update(value=removal_point(float(base_values.mean()), float(run_values.mean()),
                                      float(ref_values.mean())),
                  low=low, high=high, draws=int(kept.sum()))
    return result
