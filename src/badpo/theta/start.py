"""Where theta's shared level starts (``bias.init`` / ``theta_init``): one row per rule, and one
function that both front doors call.

* ``conditional``: the level of a logistic fit with a per-pair random effect, with the policy at
  the reference (:mod:`badpo.core.pair_level`): the level each pair's quality does not shrink,
  read from how much more a pair's annotators agree than the attribute explains. With too few
  pairs judged twice, it is ``reference``'s and a warning says the level may be shrunk. Under a
  squared link (IPO) it is ``reference``'s: least squares is collapsible.
* ``reference`` (the default): the conditional optimum of the arm's loss in the shared level at
  the reference (:func:`badpo.core.level_step.reference_start`), where the method's logit is its
  ``start_logit`` (0 for the DPO family, the length term for R-DPO): quality left out, so the fit
  shrinks toward 0 where quality differences are strong.
* ``offline``: each attribute's log-odds on its own cross-group judgments (the paper's warm arms).
* ``zero``: theta = 0 (the paper's start).

Trusted annotators' judgments are left out of every fit, and a fixed offset is counted. Why the
reference fit is the default: docs/theta.md, "Where theta starts".
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from badpo.auditing.estimates import offline_log_odds
from badpo.core.config import ConfigError
from badpo.core.level_step import Link, NoFiniteStart, reference_start
from badpo.core.notices import BadpoWarning
from badpo.core.pair_level import pair_effect_level, pair_quality
from badpo.theta.graded import Grades, fit_cuts
from badpo.theta.labels import ThetaLabels
from badpo.theta.options import ENGINE, Front, check_init

__all__ = ["START_RULES", "initial_level", "labels_quality", "offline_estimate"]


def offline_estimate(attr_diff: Tensor, names: Sequence[str]) -> list[float]:
    """Per attribute, :func:`badpo.auditing.estimates.offline_log_odds` of its cross-group judgments.

    ``attr_diff`` [N, q] is g(y_w) - g(y_l): judgment n is cross-group on coordinate i when
    ``attr_diff[n, i] != 0``, and the attribute side won when it is > 0. This is the warm start
    of theta_bar (Appendix "Arms"), so an attribute with no cross-group judgment, or whose
    attribute side won all or none of them (log-odds +-inf), is an error naming it.
    """
    if attr_diff.dim() != 2 or attr_diff.shape[1] != len(names):
        raise ValueError(f"offline_estimate: attr_diff must be [N, {len(names)}] for {list(names)}, "
                         f"got {tuple(attr_diff.shape)}")
    estimate = []
    for i, name in enumerate(names):
        total, wins = int((attr_diff[:, i] != 0).sum()), int((attr_diff[:, i] > 0).sum())
        if total == 0:
            raise ValueError(f"bias.init: offline: attribute {name!r} has no cross-group judgment; "
                             "its offline log-odds are undefined")
        value = offline_log_odds(wins, total)
        if not math.isfinite(value):
            raise ValueError(f"bias.init: offline: the attribute side of {name!r} won {wins} of its "
                             f"{total} cross-group judgments; its offline log-odds are {value}")
        estimate.append(value)
    return estimate


class _Fit:
    """One start's inputs: the learned judgments' declared directions and logits at the start, and
    their grades (None: every label a plain win)."""

    def __init__(self, labels: ThetaLabels, columns: list[int], learned: Tensor, offsets: Tensor,
                 link: Link, declared: list[str], init: str, front: Front, fixed: bool,
                 grades: Grades | None = None) -> None:
        self.labels, self.columns, self.learned, self.offsets = labels, columns, learned, offsets
        self.link, self.declared, self.init, self.front, self.fixed = link, declared, init, front, fixed
        self.grades = grades

    def plain_wins(self) -> None:
        if self.grades is not None:
            raise ConfigError(f"{self.front.init}: {self.init} reads plain wins, and the data holds ties or "
                              f"strengths; use {self.front.init}: reference (their ordered logit) or zero")

    def directions(self) -> Tensor:
        return self.labels.attr_diff[:, self.columns].double()[self.learned]


def _zero(fit: _Fit) -> None:
    return None


def _offline(fit: _Fit) -> list[float]:
    fit.plain_wins()
    if not bool(fit.learned.all()) or fit.fixed:
        raise ConfigError(f"{fit.front.init}: offline counts every judgment as unbiased by any fixed value; "
                          f"with trusted annotators or a fixed offset use {fit.front.init}: conditional")
    return offline_estimate(fit.labels.attr_diff[:, fit.columns], fit.declared)


def _reference(fit: _Fit) -> list[float]:
    try:
        if fit.grades is not None:  # the ordered logit's joint fit with its cut points
            grades = Grades(fit.grades.grade[fit.learned], fit.grades.levels, fit.grades.ties, fit.grades.strengths)
            return fit_cuts(fit.directions(), fit.offsets[fit.learned], grades)[0]
        return reference_start(fit.directions(), fit.offsets[fit.learned], fit.link)
    except NoFiniteStart as error:  # name the attributes
        names = [fit.declared[j] for j in error.coordinates]
        raise ConfigError(f"{fit.front.init}: {fit.init}: {names}: {error.why}; declare otherwise, or start "
                          f"theta at 0 with {fit.front.init}: zero") from None


def _conditional(fit: _Fit) -> list[float]:
    fit.plain_wins()
    reference = _reference(fit)  # its one-line refusals first
    if fit.link.name != "logistic":  # least squares is collapsible: quality left out shrinks nothing
        return reference
    labels, keep = fit.labels, fit.learned
    result = pair_effect_level(fit.directions(), labels.pair[keep], labels.side[keep], fit.offsets[keep])
    if not result.identified:
        warnings.warn(f"{fit.front.init}: conditional: {result.note}", BadpoWarning, stacklevel=3)
    return result.level


START_RULES: dict[str, Callable[[_Fit], list[float] | None]] = {
    "conditional": _conditional, "reference": _reference, "offline": _offline, "zero": _zero}


def initial_level(init: str, labels: ThetaLabels, declared: Sequence[str], link: Link, *,
                  trusted: Sequence[str] = (), fixed_offset: Sequence[float] | None = None,
                  start_logits: Tensor | None = None, grades: Grades | None = None,
                  front: Front = ENGINE) -> list[float] | None:
    """theta's starting shared level under rule ``init``, one value per attribute (0 where
    undeclared), or None for theta = 0 (also when every judgment's annotator is trusted).

    ``link``: the arm's loss as a function of its logit; ``start_logits`` ``[N]``: the method's
    logit at the start, before the bias (None: 0, every margin of the DPO family at the reference);
    ``fixed_offset``: one value per attribute, added to every judgment's bias logit; ``grades``:
    ties and strengths (:mod:`badpo.theta.graded`; None: plain wins), fitted by their ordered logit."""
    check_init(init, front)
    names = labels.attribute_names
    columns = [names.index(n) for n in declared]
    known = set(trusted)
    learned = torch.tensor([labels.annotators[k] not in known for k in labels.annotator_index.tolist()],
                           dtype=torch.bool)
    if init != "zero" and not learned.any():
        return None  # theta is fixed for every judgment: no level to fit
    offset = torch.tensor(list(fixed_offset or [0.0] * len(names)), dtype=torch.float64)
    offsets = labels.attr_diff.double() @ offset
    if start_logits is not None:
        offsets = offsets + start_logits.double().reshape(len(labels))
    fit = _Fit(labels, columns, learned, offsets, link, list(declared), init, front, fixed_offset is not None,
               grades)
    start = START_RULES[init](fit)
    if start is None:
        return None
    estimate = dict(zip(declared, start))
    return [estimate.get(n, 0.0) for n in names]


def labels_quality(labels: ThetaLabels, columns: list[int], offset: Tensor) -> Tensor:
    """[N] each judgment's pair's quality as its labels tell it (first-seen orientation), from the
    same pair-effect fit as the conditional start: what ``bias.level: tilt_given_quality`` holds
    fixed when it reads the policy's lean. Zeros, with a warning, where the spread is not identified
    (the lean is then read as ``tilt`` reads it)."""
    directions, sides = labels.attr_diff[:, columns].double(), labels.side
    offsets = labels.attr_diff.double() @ offset
    fit = pair_effect_level(directions, labels.pair, sides, offsets)
    if not fit.identified:
        warnings.warn(f"bias.level: tilt_given_quality: {fit.note}; the lean is read without it",
                      BadpoWarning, stacklevel=2)
    return pair_quality(torch.tensor(fit.level, dtype=torch.float64), fit.spread, directions,
                        labels.pair, sides, offsets)
