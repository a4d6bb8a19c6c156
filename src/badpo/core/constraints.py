"""A config field's allowed values, declared beside the field and checked by one walker.

A settings dataclass names the constraints of its numeric fields in a ``constraints`` mapping (a
``ClassVar``) next to the fields, as scikit-learn declares ``_parameter_constraints`` beside an
estimator; :func:`check_fields` walks a config and its sections once and refuses the first bad
value in one line naming its dotted key (``optim.warmup_ratio: must lie in [0.0, 1.0), got 1.5``).
A constraint is an object, so two front doors that take one value under two names (``bias.lr``,
BADPOTrainer's ``theta_lr``) check it with the same object and say it with their own key. Rules
that read several fields stay with the stage that needs them (:mod:`badpo.engine.config_checks`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from badpo.core.config import ConfigError

__all__ = ["FINITE", "FINITE_NON_NEGATIVE", "FLOAT32_MAX", "FLOAT32_STEP", "FRACTION", "NON_NEGATIVE", "POSITIVE",
           "AT_LEAST_ONE",
           "EachItem", "Finite", "Range", "check_fields", "constraints_of"]

FLOAT32_MAX = float(np.finfo(np.float32).max)  # the largest number a float32 weight or step can hold


@dataclass(frozen=True)
class Range:
    """A number in [low, high] (an end open where ``*_open``); ``high_note`` says why the upper end
    is where it is, in place of the interval, when only that end is passed."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    high_note: str = ""

    def check(self, value: Any, key: str) -> None:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(f"{key}: a number, got {value!r}")
        above_low = value > self.low if self.low_open else value >= self.low
        below_high = value < self.high if self.high_open else value <= self.high
        if above_low and below_high:
            return
        if above_low and self.high_note:
            raise ConfigError(f"{key}: must be at most {self.high:.4g} ({self.high_note}), got {value}")
        raise ConfigError(f"{key}: {self.describe()}, got {value}")

    def describe(self) -> str:
        """The allowed values in words: ``must be > 0``, ``must be >= 1``, ``must lie in [0.0, 1.0)``."""
        if self.high == math.inf and self.high_open:
            return f"must be finite and {'>' if self.low_open else '>='} {self.low:g}"
        if self.high == math.inf or self.high_note:
            return f"must be {'>' if self.low_open else '>='} {self.low:g}"
        return (f"must lie in {'(' if self.low_open else '['}{self.low}, {self.high}"
                f"{')' if self.high_open else ']'}")


@dataclass(frozen=True)
class Finite:
    """A list of numbers, every one finite (a fixed offset of NaN or inf trains every weight to NaN)."""

    def check(self, value: Any, key: str) -> None:
        if not all(isinstance(v, numbers.Real) and math.isfinite(v) for v in value):
            raise ConfigError(f"{key}: must be finite, got {value}")


@dataclass(frozen=True)
class EachItem:
    """Every item of a list or tuple meets ``item``; a refusal names the item (``optim.adam_betas[1]``)."""

    item: Range

    def check(self, value: Any, key: str) -> None:
        for index, entry in enumerate(value):
            self.item.check(entry, f"{key}[{index}]")


POSITIVE = Range(0, low_open=True)
NON_NEGATIVE = Range(0)
FINITE_NON_NEGATIVE = Range(0, math.inf, high_open=True)  # a weight decay of inf turns every weight to NaN
AT_LEAST_ONE = Range(1)
FRACTION = Range(0.0, 1.0, high_open=True)  # a share of something: 0 allowed, the whole not
FINITE = Finite()
# a learning rate: > 0, and a float32 number: the optimizers step float32 weights with it (a rate past
# the float32 range cannot be applied at all, it is not a step that diverges)
FLOAT32_STEP = Range(0, FLOAT32_MAX, low_open=True, high_note="the float32 range")


def constraints_of(cls: type) -> dict[str, Any]:
    """The ``constraints`` a dataclass and its bases declare, the subclass's winning."""
    merged: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        merged.update(vars(klass).get("constraints", {}))
    return merged


def check_fields(config: Any, prefix: str = "") -> None:
    """Every declared constraint of ``config`` and of its dataclass sections, once, in field order;
    a value left at None (null: the default resolved later) is not checked, nor a section switched
    off (``enabled: false``, as ``lora``: a disabled adapter's rank is never read)."""
    if getattr(config, "enabled", True) is False:
        return
    constraints = constraints_of(type(config))
    unknown = set(constraints) - {field.name for field in dataclasses.fields(config)}
    if unknown:  # a typo in a declaration would check nothing; say so at the first use
        raise TypeError(f"{type(config).__name__}.constraints names no field: {sorted(unknown)}")
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None:
            continue
        if field.name in constraints:
            constraints[field.name].check(value, f"{prefix}{field.name}")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check_fields(value, f"{prefix}{field.name}.")
