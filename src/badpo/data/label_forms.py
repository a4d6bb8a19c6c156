"""The three forms a judgment row comes in, turned into one: chosen over rejected, with its label.

- **chosen/rejected** (``chosen_rejected``): ``chosen``, ``rejected`` and, optionally, ``tie`` and
  ``strength``: badpo's own form (:mod:`badpo.core.judgments`);
- **A/B with a number** (``ab_numeric``): ``response_a``, ``response_b`` and a numeric
  ``preference``, HelpSteer3's convention: negative, A is better; positive, B; 0, a tie; its absolute
  value is the strength (a whole number: 2.0 reads as 2, 1.5 is refused);
- **A/B with MultiPref's labels** (``ab_labels``): ``response_a``, ``response_b`` and a
  ``preference`` (or ``overall_pref``) that is one of :data:`MULTIPREF_LABELS`: "slightly" is
  strength 1, "clearly" strength 2, "Tie" a tie.

An A/B row becomes ``chosen`` = the better side, ``rejected`` = the other; a tie keeps A as
``chosen`` and B as ``rejected``. Precomputed attributes of the sides are ``g_a`` / ``g_b`` and go
with their side (to ``g_chosen`` / ``g_rejected``). Everything else in the row (prompt, annotator,
ids) is as in the chosen/rejected form, chat messages included: the row is turned before its chat
fields are rendered. A CSV cell is text, so a preference cell such as ``-2`` reads as the number.

A source holds one form: a row in another form than the first row's, a row with both ``chosen`` and
``response_a``, or a preference that is neither a number nor one of the five labels is an error naming
the file, the row and the field. :class:`LabelForms` counts the rows of each form as they go by.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

from badpo.core.config import ConfigError
from badpo.core.judgments import JudgmentError, describe_row

__all__ = ["AB_FIELDS", "FORM_NAMES", "MULTIPREF_LABELS", "LabelForms", "plan_columns"]

AB_FIELDS = ("response_a", "response_b", "preference", "g_a", "g_b")
PAIR_ONLY = ("chosen", "rejected", "tie", "strength", "g_chosen", "g_rejected")  # fields of the chosen/rejected form
PREFERENCE_ALIAS = "overall_pref"  # MultiPref's name of the preference column, read without a mapping
MULTIPREF_LABELS: dict[str, tuple[str | None, int | None]] = {  # label -> (the better side, strength)
    "A-is-clearly-better": ("a", 2), "A-is-slightly-better": ("a", 1), "Tie": (None, None),
    "B-is-slightly-better": ("b", 1), "B-is-clearly-better": ("b", 2),
}
FORM_NAMES = {"chosen_rejected": "chosen/rejected", "ab_numeric": "A/B with a numeric preference",
              "ab_labels": "A/B with MultiPref's labels"}
_NUMBER_TEXT = re.compile(r"[+-]?\d+(\.\d+)?")


def plan_columns(renames: dict[str, str], present: list | None, origin: str, required: tuple[str, ...],
                 fields: tuple[str, ...]) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """(the column renames, the fields a column must hold, the fields read) of a judgment source with
    the columns ``present`` (None: not known before the rows are read). A source with a
    ``response_a`` or ``response_b`` column is in the A/B form: it needs ``response_a``,
    ``response_b`` and a preference instead of ``chosen`` and ``rejected`` (with columns of both forms,
    neither: each row is checked in its own form), and MultiPref's ``overall_pref`` is its preference
    when no other column is. Any other source reads the A/B fields only when mapped: a chosen/rejected
    file with a ``preference`` column of its own ignores it, as any column no field reads."""
    if not present:
        return renames, required, fields
    named = {renames.get(column, column) for column in present}
    if not {"response_a", "response_b"} & named:
        mapped = set(renames.values())
        return renames, required, tuple(name for name in fields if name not in AB_FIELDS or name in mapped)
    if PREFERENCE_ALIAS in present and PREFERENCE_ALIAS not in renames:
        if "preference" in named:
            raise ConfigError(f"{origin}: both the column {PREFERENCE_ALIAS!r} and a preference column; map the "
                              "one to read with --column preference=COLUMN (columns.preference=COLUMN)")
        renames = {**renames, PREFERENCE_ALIAS: "preference"}
        named.add("preference")
    required = tuple(name for name in required if name not in ("chosen", "rejected"))
    if not {"chosen", "rejected"} & named:
        required += ("response_a", "response_b", "preference")
    return renames, required, fields


class LabelForms:
    """Turns each row of a source into the chosen/rejected form (module docstring), holds that the
    source has one form, and counts its rows by form (``counts``)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: tuple[int, str] | None = None  # (row, form) of the first row

    def convert(self, label: tuple, row: Any) -> Any:
        if not isinstance(row, Mapping):
            return row  # the validator names it
        where = describe_row(*label, row)
        given = [name for name in AB_FIELDS if row.get(name) is not None]
        if not given:
            form, out = "chosen_rejected", row
        else:
            both = [name for name in PAIR_ONLY if row.get(name) is not None]
            if both:
                raise _error(where, label, both[0], f"given with {given[0]!r}; a row holds one form: chosen/"
                             "rejected (with tie, strength) or response_a/response_b with a preference")
            form, out = _from_ab(row, where, label)
        if self.first is None:
            self.first = (label[0], form)
        elif self.first[1] != form:
            name = given[0] if given else next((n for n in PAIR_ONLY if n in row), "chosen")
            raise _error(where, label, name, f"in the {FORM_NAMES[form]} form, but row {self.first[0]} is in the "
                         f"{FORM_NAMES[self.first[1]]} form; a source holds one form")
        self.counts[form] = self.counts.get(form, 0) + 1
        return out


def _error(where: str, label: tuple, name: str, problem: str) -> JudgmentError:
    return JudgmentError(f"{where}, field {name!r}: {problem}", row=label[0], field=name)


def _from_ab(row: Mapping[str, Any], where: str, label: tuple) -> tuple[str, dict[str, Any]]:
    """(form, the row in the chosen/rejected form) of an A/B row."""
    for name in ("response_a", "response_b", "preference"):
        if row.get(name) is None:
            raise _error(where, label, name, f"{'missing' if name not in row else 'null'}; the A/B form needs "
                         "response_a, response_b and preference")
    form, better, strength = _preference(row["preference"], where, label)
    out = {name: value for name, value in row.items() if name not in AB_FIELDS}
    sides = {"a": (row["response_a"], row.get("g_a")), "b": (row["response_b"], row.get("g_b"))}
    first, second = ("b", "a") if better == "b" else ("a", "b")
    out["chosen"], out["rejected"] = sides[first][0], sides[second][0]
    if sides[first][1] is not None or sides[second][1] is not None:
        out["g_chosen"], out["g_rejected"] = sides[first][1], sides[second][1]
    if better is None:
        out["tie"] = True
    elif strength is not None:
        out["strength"] = strength
    return form, out


def _preference(value: Any, where: str, label: tuple) -> tuple[str, str | None, int | None]:
    """(form, the better side 'a' / 'b' or None for a tie, strength) of a preference value."""
    if isinstance(value, str) and value in MULTIPREF_LABELS:
        return ("ab_labels", *MULTIPREF_LABELS[value])
    number = value
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value.strip()):
        number = float(value)  # a CSV cell holds the number as text
    if isinstance(number, bool) or not isinstance(number, numbers.Real):
        raise _error(where, label, "preference", f"{value!r} is neither a number (negative: A better, 0: a tie, "
                     f"positive: B better; its size the strength) nor one of {list(MULTIPREF_LABELS)}")
    if not math.isfinite(number) or number != int(number):
        raise _error(where, label, "preference", f"{value!r} is not a whole number; the strength is |preference|")
    whole = int(number)
    return ("ab_numeric", None if whole == 0 else ("a" if whole < 0 else "b"), abs(whole) or None)
