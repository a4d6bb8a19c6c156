"""Where theta's shared level starts (``bias.init``): one row per rule, nothing else branches on it.

* ``conditional``: the level of a logistic fit with a per-pair random effect, with
  the policy at the reference (:mod:`badpo.core.pair_level`): the level each pair's quality does
  not shrink, read from how much more a pair's annotators agree than the attribute explains. With
  too few pairs judged twice, it is ``reference``'s and a warning says the level may be shrunk.
  Under a squared link (IPO) it is ``reference``'s: least squares is collapsible.
* ``reference`` (the default): the conditional optimum of the arm's loss in the shared level at the reference,
  where every margin is 0 (:func:`badpo.core.level.reference_start`): quality left out, so the
  fit shrinks toward 0 where quality differences are strong.
* ``offline``: each attribute's log-odds on its own cross-group judgments (the paper's warm arms).
* ``zero``: theta = 0 (the paper's start).

Trusted annotators' judgments are left out of every fit, and a ``bias.fixed_offset`` is counted.
Why the reference fit is the default, what the conditional level adds, and what theta does after
the start: docs/training.md, "Where theta starts".
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import Tensor

from badpo.core.config import ConfigError
from badpo.core.level import NoFiniteStart, reference_start
from badpo.core.notices import BadpoWarning
from badpo.core.pair_level import pair_effect_level, pair_quality
from badpo.engine.batches import PreferenceData, offline_estimate

__all__ = ["START_RULES", "initial_level", "judgment_sides", "labels_quality"]


def judgment_sides(data: PreferenceData) -> Tensor:
    """[N] +1 where a judgment chose its pair's first side (first-seen orientation), -1 otherwise."""
    first = data.pair_rows[data.judgment_pair, 0]
    return torch.where(data.chosen_row == first, 1.0, -1.0).double()


def _zero(*_) -> None:
    return None


def _offline(config, data: PreferenceData, columns: list[int], learned: Tensor, offset: Tensor, link,
             declared: list[str]) -> list[float]:
    if not bool(learned.all()) or config.bias.fixed_offset is not None:
        raise ConfigError("bias.init: offline counts every judgment as unbiased by any fixed value; "
                          "with bias.trusted or bias.fixed_offset use bias.init: conditional")
    return offline_estimate(data.attr_diff[:, columns], declared)


def _reference(config, data: PreferenceData, columns: list[int], learned: Tensor, offset: Tensor, link,
               declared: list[str]) -> list[float]:
    directions = data.attr_diff[:, columns].double()
    try:
        return reference_start(directions[learned], (data.attr_diff.double() @ offset)[learned], link)
    except NoFiniteStart as error:  # name the attributes, as bias.init: offline does
        names = [declared[j] for j in error.coordinates]
        raise ConfigError(f"bias.init: {config.bias.init}: {names}: {error.why}; declare otherwise, or "
                          "start theta at 0 with bias.init: zero") from None


def _conditional(config, data: PreferenceData, columns: list[int], learned: Tensor, offset: Tensor, link,
                 declared: list[str]) -> list[float]:
    if link.name != "logistic":  # least squares is collapsible: quality left out shrinks nothing
        return _reference(config, data, columns, learned, offset, link, declared)
    _reference(config, data, columns, learned, offset, link, declared)  # its one-line refusals first
    fit = pair_effect_level(data.attr_diff[learned][:, columns], data.judgment_pair[learned],
                            judgment_sides(data)[learned], (data.attr_diff.double() @ offset)[learned])
    if not fit.identified:
        warnings.warn(f"bias.init: conditional: {fit.note}", BadpoWarning, stacklevel=2)
    return fit.level


START_RULES: dict[str, Callable[..., list[float] | None]] = {
    "conditional": _conditional, "reference": _reference, "offline": _offline, "zero": _zero}


def initial_level(method, config, data: PreferenceData, declared: list[str],
                  trusted: dict[str, list[float]]) -> list[float] | None:
    """Theta's starting shared level under ``bias.init``, one value per attribute (0 where
    undeclared), or None for theta = 0 (also when every judgment's annotator is trusted)."""
    columns = [data.attribute_names.index(n) for n in declared]
    learned = ~torch.tensor([data.annotators[k] in trusted for k in data.annotator_index.tolist()],
                            dtype=torch.bool)
    if config.bias.init != "zero" and not learned.any():
        return None  # theta is fixed for every judgment: no level to fit
    offset = torch.tensor(config.bias.fixed_offset or [0.0] * len(data.attribute_names), dtype=torch.float64)
    link = method.level_link(method.parse_params(getattr(config, "method_params", {})))
    start = START_RULES[config.bias.init](config, data, columns, learned, offset, link, declared)
    if start is None:
        return None
    estimate = dict(zip(declared, start))
    return [estimate.get(n, 0.0) for n in data.attribute_names]


def labels_quality(data: PreferenceData, columns: list[int], offset: Tensor) -> Tensor:
    """[N] each judgment's pair's quality as its labels tell it (first-seen orientation), from the
    same pair-effect fit as the conditional start: what ``bias.level: tilt_given_quality`` holds
    fixed when it reads the policy's lean. Zeros, with a warning, where the spread is not identified
    (the lean is then read as ``tilt`` reads it)."""
    directions, sides = data.attr_diff[:, columns].double(), judgment_sides(data)
    offsets = data.attr_diff.double() @ offset
    fit = pair_effect_level(directions, data.judgment_pair, sides, offsets)
    if not fit.identified:
        warnings.warn(f"bias.level: tilt_given_quality: {fit.note}; the lean is read without it",
                      BadpoWarning, stacklevel=2)
    return pair_quality(torch.tensor(fit.level, dtype=torch.float64), fit.spread, directions,
                        data.judgment_pair, sides, offsets)
