"""The floor under ``badpo compare``'s verdicts: when a shift counts as a move.

A bootstrap over prompts measures how the numbers would change with other prompts; it cannot see
a readout's own noise. A near-deterministic readout (a probability read with the body fixed) gives
every resample the same tiny shift, so its interval is tight around a number that means nothing,
and the removal ratio divides by it ("removes 897% [847, 966]"). So a shift counts as a move
(``measurable``) only when all of these hold:

* it is at least :data:`MIN_EFFECT` of its unit in size (0.01 of a rate: one point in a hundred;
  1 token of a mean length): a documented practical minimum, below which no verdict is given;
* it has an interval (at least :data:`MIN_PROMPTS` prompts, per-prompt values on the same prompts);
* its interval has a nonzero width and does not hold 0;
* where ``badpo evaluate`` computed the readout's relabelling null (``names.null.first_name``: the
  shift toward the coded names against relabelling the name pool at random), the shift is outside
  it: two-sided p below 1 - level, from evaluate's one-sided p as ``2 min(p, 1 - p)``.

A removal is measured only against a baseline shift that counts as a move. Pure: no model, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["MIN_EFFECT", "MIN_PROMPTS", "judge_shift", "too_few", "two_sided"]

MIN_EFFECT = {"rate": 0.01, "tokens": 1.0}  # the smallest shift a verdict calls a move, per unit
MIN_PROMPTS = 10  # fewer prompts than this: no bootstrap interval (it would be of a handful of values)
WIDTH_TOLERANCE = 1e-9  # an interval narrower than this (relative to the shift, at least 1) has zero width


def too_few(n: int | None, minimum: int = MIN_PROMPTS) -> str | None:
    """Why ``n`` prompts give no interval, or None."""
    if n is None or n >= minimum:
        return None
    return (f"{n} prompt{' is' if n == 1 else 's are'} too few for an interval (at least {minimum}): "
            "evaluate on more prompts (max_prompts)")


def two_sided(p: float) -> float:
    """A two-sided p from a one-sided one: 2 min(p, 1 - p), at most 1."""
    return min(1.0, 2.0 * min(p, 1.0 - p))


def _reason(shift: Mapping, unit: str, p: float | None, level: float) -> str | None:
    """Why ``shift`` is not a move, or None when it is (None too when it cannot be tested)."""
    value, low, high = shift["value"], shift.get("low"), shift.get("high")
    minimum = MIN_EFFECT[unit]
    if abs(value) < minimum:
        return f"below the minimum effect of {minimum:g} {'token' if unit == 'tokens' else 'in the rate'}"
    if low is None:
        return None
    if high - low <= WIDTH_TOLERANCE * max(1.0, abs(value)):  # zero but for float rounding
        return ("its interval has zero width: the readout gave one value on every resample of the "
                "prompts, so the bootstrap cannot tell this shift from the readout's own noise")
    if low <= 0.0 <= high:
        return f"its {level:.0%} interval holds 0"
    if p is not None and two_sided(p) >= 1.0 - level:
        return (f"relabelling the name pool at random gives a shift this large (two-sided p "
                f"{two_sided(p):.2f}, names.null): indistinguishable from the readout's own noise")
    return None


def judge_shift(shift: Mapping, unit: str, p: float | None, level: float) -> dict:
    """``shift`` ({"value", "low", "high", ...}) with ``measurable`` decided by the floor (module
    docstring) and, when it is not a move, ``why``; ``measurable`` None when it cannot be tested
    (no interval) yet is above the minimum effect. ``p``: evaluate's one-sided relabelling p."""
    reason = _reason(shift, unit, p, level)
    judged = dict(shift)
    if reason is not None:
        judged.update(measurable=False, why=reason)
    elif shift.get("low") is None:
        judged["measurable"] = None
    else:
        judged["measurable"] = True
    if p is not None:
        judged["null_p"] = two_sided(p)
    return judged
