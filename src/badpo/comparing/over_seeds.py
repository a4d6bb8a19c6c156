"""What runs over seeds add up to (paper, Appendix "Readouts"): the share of DPO's shift an arm
removes, per seed and averaged, and the Student-t interval of a mean over seeds.

A readout of one run is :mod:`badpo.readouts.metrics`; the paper reports each as a mean over seeds
with its interval, and an arm's effect as the removal of DPO's shift. The Student-t quantile is
computed here exactly (a regularised incomplete beta, bisected) so that the pure readouts need
neither scipy nor a table. Same conventions as :mod:`badpo.readouts.metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

from badpo.core.array_checks import ArrayLike, as_float64, check_finite

__all__ = ["removal", "removal_per_seed", "student_t_quantile", "mean_ci"]


def removal(rate_dpo: float, rate_arm: float, rate_ref: float) -> float:
    """Share of DPO's shift the arm removes: (dpo - arm) / (dpo - ref); 0 is DPO, 1 the reference.

    Example: ref 0.50, DPO 0.96, arm 0.55 -> 0.41 / 0.46 = 0.8913.
    """
    for name, value in (("rate_dpo", rate_dpo), ("rate_arm", rate_arm), ("rate_ref", rate_ref)):
        if not math.isfinite(value):
            raise ValueError(f"{name} is {value}; expected a finite rate")
    if rate_dpo == rate_ref:
        raise ValueError(f"rate_dpo equals rate_ref ({rate_ref}): DPO moved nothing, removal undefined")
    return (rate_dpo - rate_arm) / (rate_dpo - rate_ref)


def removal_per_seed(rate_dpo: Mapping[Hashable, float], rate_arm: Mapping[Hashable, float],
                     rate_ref: float | Mapping[Hashable, float], level: float = 0.95) -> dict:
    """Removal per seed against the DPO run of the same seed, then averaged (Appendix Readouts).

    ``rate_ref`` is one number (the reference is trained once) or one per seed. Every seed of the
    arm needs a DPO run of that seed. Returns {"per_seed": {seed: removal}, **mean_ci(...)}.
    This is not the removal computed from the means over seeds: with reference 0.5, DPO 0.9 / 0.7
    and the arm 0.6 / 0.5 at two seeds, the seeds remove 0.3/0.4 = 0.75 and 0.2/0.2 = 1.0, mean
    0.875, while the means give (0.8 - 0.55)/(0.8 - 0.5) = 0.833.
    """
    if not rate_arm:
        raise ValueError("rate_arm: no seeds")
    per_seed = {}
    for seed, arm in rate_arm.items():
        if seed not in rate_dpo:
            raise ValueError(f"seed {seed!r}: the arm has a run but DPO has none to compare with")
        if isinstance(rate_ref, Mapping):
            if seed not in rate_ref:
                raise ValueError(f"seed {seed!r}: no reference rate for this seed")
            reference = rate_ref[seed]
        else:
            reference = rate_ref
        per_seed[seed] = removal(rate_dpo[seed], arm, reference)
    return {"per_seed": per_seed, **mean_ci(list(per_seed.values()), level)}


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta I_x(a, b) (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 10_000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < eps:
            return fraction
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def _regularised_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) = B(x; a, b) / B(a, b), for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (a * math.log(x) + b * math.log1p(-x)
                 + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def _student_t_two_sided_tail(t: float, df: float) -> float:
    """P(|T| > t) for T ~ Student t with df degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    return _regularised_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def student_t_quantile(level: float, df: float) -> float:
    """The t with P(|T| <= t) = level, i.e. the (1 + level)/2 quantile of Student t.

    Bisection on the exact tail (regularised incomplete beta). Closed forms to check it by hand:
    df = 1 gives tan(pi * level / 2) (12.7062 at 0.95); df = 2 gives
    (2p - 1) / sqrt(2 p (1 - p)) with p = (1 + level)/2 (4.3027 at 0.95).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    tail = 1.0 - level
    low, high = 0.0, 1.0
    while _student_t_two_sided_tail(high, df) > tail:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if _student_t_two_sided_tail(middle, df) > tail:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def mean_ci(values: ArrayLike, level: float = 0.95) -> dict[str, float]:
    """Mean and Student-t interval over seeds: {"mean", "half_width", "low", "high", "sd", "n"}.

    half_width = t_{(1+level)/2, n-1} * sd / sqrt(n), sd with n - 1 in the denominator. One value
    has no interval: its half_width, sd, low and high are nan.
    Example: 1, 2, 3 -> mean 2, sd 1, half_width 4.3027 / sqrt(3) = 2.4841.
    """
    array = as_float64(values, "values").flatten()
    if array.numel() == 0:
        raise ValueError("values: no values to average")
    check_finite(array, "values")
    n, mean = array.numel(), float(array.mean())
    if n == 1:
        return {"mean": mean, "half_width": math.nan, "low": math.nan, "high": math.nan,
                "sd": math.nan, "n": 1}
    sd = float(array.std(unbiased=True))
    half_width = student_t_quantile(level, n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "half_width": half_width, "low": mean - half_width,
            "high": mean + half_width, "sd": sd, "n": n}
