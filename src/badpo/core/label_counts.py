"""What the labels of a set of judgments are: how many rows came in each form, how many are ties,
how many wins at each strength. A reader records the forms (:mod:`badpo.data.label_forms`); the rest
is read off the validated judgments (:func:`label_counts`), so that every command that reads
labels says the same numbers in the same words.

An estimate whose likelihood knows plain wins only (the label audit, discover, today) leaves the ties
out and reads a graded win as a win; :func:`wins_for_estimates` does that and says so in one line,
so no row is left out without a word. Standard library only.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from badpo.core.judgments import Judgment, JudgmentError
from badpo.core.notices import BadpoWarning

__all__ = ["LabelCounts", "LabelTally", "decisive_votes", "estimates_line", "label_counts", "no_ties",
           "wins_for_estimates"]


@dataclass(frozen=True)
class LabelCounts:
    """The labels of ``rows`` judgments: ``ties``, ``plain`` wins (no strength) and ``strengths``
    (strength -> wins at it, ascending); ``forms`` (form -> rows) as the reader recorded them, empty
    when the judgments were not read from a file."""

    rows: int
    ties: int
    plain: int
    strengths: Mapping[int, int]
    forms: Mapping[str, int] = field(default_factory=dict)
    weighted: int = 0  # judgments that carry a loss weight (the weight column)

    @property
    def graded(self) -> int:
        """Wins that carry a strength."""
        return sum(self.strengths.values())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (strength levels as string keys, as JSON keys are)."""
        return {"rows": self.rows, "forms": dict(self.forms), "ties": self.ties, "plain_wins": self.plain,
                "strengths": {str(level): n for level, n in self.strengths.items()},
                **({"weighted": self.weighted} if self.weighted else {})}

    def line(self) -> str:
        """One line: the forms read, the ties, the wins at each strength."""
        forms = ", ".join(f"{form} {n}" for form, n in self.forms.items())
        levels = ", ".join(f"strength {level}: {n}" for level, n in self.strengths.items())
        return (f"labels: {self.rows} judgments" + (f" (rows by form: {forms})" if forms else "")
                + f"; {self.ties} ties; {self.plain} plain wins" + (f"; {levels}" if levels else ""))


class LabelTally:
    """:class:`LabelCounts` kept up as judgments go by, one at a time, none of them kept (a reader that
    streams its judgments counts them so)."""

    def __init__(self) -> None:
        self.rows = self.ties = self.plain = self.weighted = 0
        self.strengths: dict[int, int] = {}

    def add(self, judgment: Judgment) -> None:
        self.rows += 1
        self.weighted += judgment.weight is not None
        if judgment.tie:
            self.ties += 1
        elif judgment.strength is None:
            self.plain += 1
        else:
            self.strengths[judgment.strength] = self.strengths.get(judgment.strength, 0) + 1

    def counts(self, forms: Mapping[str, int] | None = None) -> LabelCounts:
        return LabelCounts(self.rows, self.ties, self.plain, dict(sorted(self.strengths.items())), dict(forms or {}),
                           self.weighted)


def label_counts(judgments: Iterable[Judgment], forms: Mapping[str, int] | None = None) -> LabelCounts:
    """The :class:`LabelCounts` of ``judgments``; ``forms`` as the reader counted them."""
    tally = LabelTally()
    for judgment in judgments:
        tally.add(judgment)
    return tally.counts(forms)


def estimates_line(counts: LabelCounts, what: str = "the estimates") -> str | None:
    """What ``what``, whose likelihood knows plain wins only, does with ties and graded wins, in one
    line; None when there are neither."""
    parts = []
    if counts.ties:
        parts.append(f"{counts.ties} ties left out of {what}: a tie prefers neither side and their likelihood "
                     "reads wins only (that of a tie is not written yet)")
    if counts.graded:
        levels = ", ".join(f"strength {level}: {n}" for level, n in counts.strengths.items())
        parts.append(f"{counts.graded} graded wins ({levels}) read as plain wins of the chosen side")
    if counts.weighted:
        parts.append(f"{counts.weighted} judgments' loss weights not read by {what} (each counts once; "
                     "training weighs them)")
    if not parts:
        return None
    if counts.ties:
        return "; ".join(parts)
    head = f"{parts[0][0].upper()}{parts[0][1:]}" + (f" by {what}" if counts.graded else "")
    return "; ".join([head, *parts[1:]])


def wins_for_estimates(judgments: Sequence[Judgment]) -> list[Judgment]:
    """The judgments without the ties (graded wins kept, as wins), in order: what an estimate that
    reads wins only may take. Say what was left out with :func:`estimates_line`."""
    return [j for j in judgments if not j.tie]


def decisive_votes(judgments: Sequence[Judgment], what: str, source: str) -> list[Judgment]:
    """The decisive votes of ``judgments`` (ties left out, graded wins read as wins) for ``what``,
    which scores a chosen side; one warning line says how many were left out of ``source``."""
    line = estimates_line(label_counts(judgments), what)
    if line is not None:
        warnings.warn(f"{source}: {line}", BadpoWarning, stacklevel=2)
    return wins_for_estimates(judgments)


def no_ties(judgments: Iterable[Judgment], what: str) -> None:
    """Refuse a tie before ``what``, which reads wins only (a graded win is a win there), can read it
    as a win of ``chosen``; the :class:`JudgmentError` names the first tie (0-based)."""
    for index, j in enumerate(judgments):
        if j.tie:
            pair = f" (pair_id {j.pair_id!r})" if j.pair_id else ""
            raise JudgmentError(f"row {index}{pair}, field 'tie': a tie; {what} read wins only (leave the ties "
                                "out first, as badpo audit does, saying so)", row=index, field="tie")
