"""A field's constraint is declared beside it and checked by one walk (badpo.core.constraints): the
messages name the dotted key, sections are walked, None is the default left to resolve, and a
declaration that names no field is caught rather than checking nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from badpo.core.config import ConfigError
from badpo.core.constraints import (
    AT_LEAST_ONE,
    FINITE,
    FLOAT32_MAX,
    FLOAT32_STEP,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    EachItem,
    Range,
    check_fields,
)


@pytest.mark.parametrize(("constraint", "good", "bad", "message"), [
    (POSITIVE, [1e-12, 3], [0, -1.0], "must be > 0"),
    (NON_NEGATIVE, [0, 2.5], [-1e-9], "must be >= 0"),
    (AT_LEAST_ONE, [1, 7], [0], "must be >= 1"),
    (FRACTION, [0.0, 0.999], [1.0, -0.1], "must lie in [0.0, 1.0)"),
    (Range(0, 2**32 - 1), [0, 2**32 - 1], [2**32, -1], "must lie in [0, 4294967295]"),
    (FLOAT32_STEP, [1e-7, FLOAT32_MAX], [0.0, -1.0, math.nan], "must be > 0"),
])
def test_a_range_passes_its_inside_and_refuses_its_outside_naming_the_key(constraint, good, bad, message):
    for value in good:
        constraint.check(value, "a.b")
    for value in bad:
        with pytest.raises(ConfigError) as refused:
            constraint.check(value, "a.b")
        assert str(refused.value) == f"a.b: {message}, got {value}"


def test_a_rate_past_float32_says_why_the_end_is_there():
    with pytest.raises(ConfigError, match=r"^lr: must be at most 3.403e\+38 \(the float32 range\), got 1e\+39$"):
        FLOAT32_STEP.check(1e39, "lr")
    with pytest.raises(ConfigError, match=r"^lr: must be at most .*, got inf$"):
        FLOAT32_STEP.check(math.inf, "lr")


def test_a_weight_decay_of_inf_is_refused_as_not_finite():
    """AdamW with weight_decay=inf turns every weight to NaN at the first step."""
    from badpo.core.constraints import FINITE_NON_NEGATIVE

    FINITE_NON_NEGATIVE.check(0, "wd")
    with pytest.raises(ConfigError, match=r"^wd: must be finite and >= 0, got inf$"):
        FINITE_NON_NEGATIVE.check(math.inf, "wd")
    with pytest.raises(ConfigError, match=r"^wd: must be finite and >= 0, got -1$"):
        FINITE_NON_NEGATIVE.check(-1, "wd")


def test_a_numpy_number_is_a_number():
    import numpy as np

    POSITIVE.check(np.int64(8), "batch_size")
    POSITIVE.check(np.float32(0.5), "x")
    FINITE.check([np.float64(1.0)], "offset")


def test_a_section_switched_off_is_not_checked():
    """A disabled LoRA's rank is never read; a resumed run's config with rank 0 and LoRA off keeps loading."""
    from badpo.engine.settings import LoraSettings, TrainConfig

    check_fields(TrainConfig(lora=LoraSettings(enabled=False, rank=0)))
    with pytest.raises(ConfigError, match=r"^lora.rank: must be > 0, got 0$"):
        check_fields(TrainConfig(lora=LoraSettings(enabled=True, rank=0)))


def test_a_non_number_and_a_bool_are_refused_as_not_a_number():
    for value in ("0.1", True, None):
        with pytest.raises(ConfigError, match=r"^x: a number, got "):
            POSITIVE.check(value, "x")


def test_list_constraints_name_the_item_or_the_list():
    EachItem(FRACTION).check((0.9, 0.999), "betas")
    with pytest.raises(ConfigError, match=r"^betas\[1\]: must lie in \[0.0, 1.0\), got 1.0$"):
        EachItem(FRACTION).check((0.9, 1.0), "betas")
    FINITE.check([0.0, -3.5], "offset")
    with pytest.raises(ConfigError, match=r"^offset: must be finite, got \[0.0, nan\]$"):
        FINITE.check([0.0, math.nan], "offset")


@dataclass(frozen=True)
class _Inner:
    constraints: ClassVar = {"rate": POSITIVE}
    rate: float | None = 1.0


@dataclass(frozen=True)
class _Outer:
    constraints: ClassVar = {"steps": AT_LEAST_ONE}
    steps: int = 1
    inner: _Inner = field(default_factory=_Inner)


@dataclass(frozen=True)
class _Child(_Outer):
    constraints: ClassVar = {"share": FRACTION}
    share: float = 0.5


def test_the_walk_reaches_sections_and_bases_and_skips_null():
    check_fields(_Child())
    check_fields(_Child(inner=_Inner(rate=None)))  # null: the default, resolved later
    with pytest.raises(ConfigError, match=r"^inner.rate: must be > 0, got 0$"):
        check_fields(_Child(inner=_Inner(rate=0)))
    with pytest.raises(ConfigError, match=r"^steps: must be >= 1, got 0$"):  # the base's declaration
        check_fields(_Child(steps=0))
    with pytest.raises(ConfigError, match=r"^share: must lie in"):
        check_fields(_Child(share=1.0))


def test_a_declaration_naming_no_field_is_an_error_not_a_check_that_passes():
    @dataclass(frozen=True)
    class Typo:
        constraints: ClassVar = {"stpes": AT_LEAST_ONE}
        steps: int = 0

    with pytest.raises(TypeError, match=r"Typo.constraints names no field: \['stpes'\]"):
        check_fields(Typo())


def test_every_stage_config_declares_only_its_own_fields_and_its_defaults_pass():
    from badpo.engine.settings import RMConfig, SFTConfig, TrainConfig

    for config in (TrainConfig(), RMConfig(), SFTConfig()):
        check_fields(config)


def test_both_front_doors_check_theta_s_rate_with_one_object():
    from badpo.engine.settings import BiasSettings
    from badpo.theta.options import ENGINE, THETA_LR, TRL, check_lr

    assert BiasSettings.constraints["lr"] is THETA_LR
    for front in (ENGINE, TRL):
        with pytest.raises(ConfigError, match=rf"^{front.lr}: must be at most .* \(the float32 range\), got 1e\+39$"):
            check_lr(1e39, front)
    with pytest.raises(ConfigError, match=r"^bias.lr: must be at most .* got 1e\+39$"):
        check_fields(BiasSettings(lr=1e39), "bias.")
