"""The judgment row: one annotator's preference between two responses to one prompt.

Every method in badpo reads its data through this module, so the checks live here once:
a row that would make a loss or an audit silently wrong (an empty response, a pair whose two
sides are identical, a NaN attribute, attribute vectors of different lengths, a strength on a
tie or on some wins only) is refused with a :class:`JudgmentError` that names the row and the field.

The label of a row is ``chosen`` over ``rejected``, a tie (``tie``: neither preferred, the two sides
in the file's order) or a graded win (``strength``: 1 the weakest). A consumer that reads plain wins
only calls :func:`plain_wins_only` first, so that no tie is ever read as a win.

Row indices in messages are 0-based (``dataset[i]``); JSONL line numbers are 1-based.
Only the standard library is imported here; ``datasets`` is imported inside
:func:`read_judgments` when a dataset is actually read. The format is documented in
``docs/data-format.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from badpo.core.rows import (
    JudgmentError,
    annotator_id,
    describe_row,
    jsonl_rows,
    parse_jsonl_line,
    say_normalised,
)

__all__ = [
    "DUPLICATES",
    "check_pair_texts",
    "check_duplicates_option",
    "duplicate_rows",
    "duplicates_line",
    "handle_duplicates",
    "iter_validated",
    "judgment_digest",
    "Judgment",
    "JudgmentError",
    "annotator_classes",
    "annotator_id",
    "describe_row",
    "jsonl_rows",
    "pair_key",
    "parse_jsonl_line",
    "plain_wins_only",
    "read_judgments",
    "validate_judgments",
    "write_judgments",
]


@dataclass(frozen=True)
class Judgment:
    """One disaggregated judgment: ``annotator`` preferred ``chosen`` to ``rejected`` (with
    ``strength`` when the preference is graded), or, with ``tie``, preferred neither.

    ``g_chosen``/``g_rejected`` are optional precomputed attribute values (name -> value),
    read by the ``given:NAME`` attribute spec. Treat them as read-only. They take no part
    in the hash, so judgments can be put in sets; ``tie`` and ``strength`` are part of the
    label and take part in the hash and in equality.
    """

    prompt: str
    chosen: str
    rejected: str
    annotator: str
    annotator_class: str | None = None
    prompt_id: str | None = None
    pair_id: str | None = None
    pair_type: str | None = None  # e.g. quality / swap / mixed
    g_chosen: Mapping[str, float] | None = field(default=None, hash=False)
    g_rejected: Mapping[str, float] | None = field(default=None, hash=False)
    tie: bool = False  # neither side preferred; chosen / rejected are then the sides A / B as read
    strength: int | None = None  # a graded win: 1 the weakest (None: a plain win, and always on a tie)
    weight: float | None = None  # the judgment's loss weight (confidence, curriculum): finite, >= 0; None: 1


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Judgment))
REQUIRED_TEXT: tuple[str, ...] = ("prompt", "chosen", "rejected", "annotator")
OPTIONAL_TEXT: tuple[str, ...] = ("annotator_class", "prompt_id", "pair_id", "pair_type")
ATTRIBUTE_FIELDS: tuple[str, ...] = ("g_chosen", "g_rejected")
TIE_FIELD = "tie"
STRENGTH_FIELD = "strength"
LABEL_FIELDS: tuple[str, ...] = (TIE_FIELD, STRENGTH_FIELD)  # written only when set (a plain win: neither)
WEIGHT_FIELD = "weight"  # written only when set; on every row or on none


def validate_judgments(rows: Iterable[Mapping[str, Any] | Judgment]) -> list[Judgment]:
    """Check every row and return them as :class:`Judgment` objects, in order.

    Rows are mappings with the fields of :class:`Judgment`; :class:`Judgment` objects are
    accepted too and checked the same way. The first invalid row raises :class:`JudgmentError`;
    nothing is dropped or coerced except ints in ``g_chosen``/``g_rejected``, which become floats.
    """
    return validate_labelled(((i, None, None), row) for i, row in enumerate(rows))


def validate_labelled(labelled: Iterable[tuple[tuple, Any]]) -> list[Judgment]:
    """:func:`validate_judgments` of rows labelled ``((index, line or None, source or None), row)``,
    so that an error names the file and its line (JSONL) or row (any other source)."""
    return list(iter_validated(labelled))


def iter_validated(labelled: Iterable[tuple[tuple, Any]], share_texts: bool = True,
                   warn: bool = True) -> Iterator[Judgment]:
    """:func:`validate_labelled` one judgment at a time. ``share_texts``: every judgment of a pair
    holds one copy of its texts (the first string read), at the cost of keeping every distinct text
    until the end; a reader that lets each judgment go (discover's stream) turns it off. ``warn``:
    say at the end when annotator ids were normalised."""
    shared: dict[str, str] = {} if share_texts else _NotShared()
    spellings: dict[str, set[str]] = {}  # normalised annotator id -> the spellings read
    rules = _AcrossRows()
    for (index, line, source), row in labelled:
        if isinstance(row, Judgment):
            row = {name: getattr(row, name) for name in FIELDS}
        where = describe_row(index, line, source, row)
        if not isinstance(row, Mapping):
            raise JudgmentError(f"{where}: expected a mapping of fields, got {type(row).__name__}",
                                row=index)
        judgment = _validate_row(row, where, index, shared)
        spellings.setdefault(judgment.annotator, set()).add(row["annotator"])
        rules.check(judgment, where, index)
        yield judgment
    if warn:
        say_normalised(spellings)


class _AcrossRows:
    """What a row must share with the rows before it: precomputed attributes on every row or on none,
    under the same names; and a strength on every non-tie row or on none (a graded and a plain win
    in one dataset would read as two scales, and no likelihood holds both)."""

    def __init__(self) -> None:
        self.attribute_keys: tuple[str, ...] | None = None  # keys of the first row that has them
        self.first_with: int | None = None  # index of that row
        self.first_without: int | None = None  # index of the first row without them
        self.first_win: tuple[int, bool] | None = None  # (index, graded) of the first non-tie row
        self.first_weight: tuple[int, bool] | None = None  # (index, weighted) of the first row

    def check(self, judgment: Judgment, where: str, index: int) -> None:
        def fail(name: str, problem: str) -> JudgmentError:
            return JudgmentError(f"{where}, field {name!r}: {problem}", row=index, field=name)

        self.first_weight = _on_all_or_none(self.first_weight, index, judgment.weight is not None, fail,
                                            WEIGHT_FIELD, "", "give a weight on every row or on none")
        if not judgment.tie:
            self.first_win = _on_all_or_none(self.first_win, index, judgment.strength is not None, fail,
                                             STRENGTH_FIELD, " (a non-tie)",
                                             "give a strength on every non-tie row or on none")
        if judgment.g_chosen is None:
            if self.first_with is not None:
                raise fail("g_chosen", f"missing, but row {self.first_with} gives attributes "
                           f"{list(self.attribute_keys)}; give them on every row or none")
            if self.first_without is None:
                self.first_without = index
            return
        keys = tuple(judgment.g_chosen)
        if self.first_without is not None:
            raise fail("g_chosen", f"given, but row {self.first_without} has no precomputed attributes; "
                       "give them on every row or none")
        if self.attribute_keys is None:
            self.attribute_keys, self.first_with = keys, index
        elif set(keys) != set(self.attribute_keys):
            raise fail("g_chosen", f"attribute names {list(keys)} differ from {list(self.attribute_keys)} "
                       f"given on row {self.first_with}")


def _on_all_or_none(first: tuple[int, bool] | None, index: int, has: bool, fail, name: str, which: str,
                    fix: str) -> tuple[int, bool]:
    """(the first row seen, whether it has field ``name``); a row that differs from it is refused."""
    if first is None:
        return (index, has)
    if first[1] != has:
        other = f"row {first[0]}{which} " + ("gives one" if first[1] else "has none")
        raise fail(name, f"{'given' if has else 'missing'}, but {other}; {fix}")
    return first


class _NotShared(dict):
    """A text table that keeps nothing: ``setdefault`` hands the text back."""

    def setdefault(self, key, default=None):
        return default


DUPLICATES = ("keep", "drop")  # what to do with exact duplicate judgments


def judgment_digest(judgment: Judgment) -> bytes:
    """16 bytes that two judgments share exactly when they are equal (every field, attributes
    included; an attribute's 1, 1.0 and -0.0 / 0.0 read as the equal numbers they are), so that a
    reader can find repeats without keeping the judgments (BLAKE2b: a collision is not a concern)."""
    def numbers_of(values):
        return sorted((name, float(value) + 0.0) for name, value in (values or {}).items())
    fields = [getattr(judgment, name) for name in FIELDS
              if not name.startswith("g_") and name not in LABEL_FIELDS and name != WEIGHT_FIELD]
    label = (judgment.tie, judgment.strength) if judgment.tie or judgment.strength is not None else ()
    label += ((WEIGHT_FIELD, float(judgment.weight)),) if judgment.weight is not None else ()
    key = repr((fields, numbers_of(judgment.g_chosen), judgment.g_chosen is None,
                numbers_of(judgment.g_rejected), judgment.g_rejected is None) + label)
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def duplicate_rows(judgments: Iterable[Judgment]) -> list[int]:
    """The rows that repeat an earlier row exactly (every field, attributes and label included); one pass,
    keeping a digest per distinct judgment, not the judgment."""
    seen: set[bytes] = set()
    rows = []
    for i, j in enumerate(judgments):
        digest = judgment_digest(j)
        if digest in seen:
            rows.append(i)
        seen.add(digest)
    return rows


def check_duplicates_option(duplicates: str) -> None:
    """``duplicates`` is keep or drop; checked before any data is read."""
    if duplicates not in DUPLICATES:
        raise ValueError(f"duplicates: {duplicates!r} is not one of {list(DUPLICATES)}")


def duplicates_line(rows: Sequence[int], duplicates: str, origin: str) -> str | None:
    """What ``duplicates`` (keep / drop) does with the repeated ``rows``, in one line; None for none."""
    check_duplicates_option(duplicates)
    if not rows:
        return None
    found = f"{len(rows)} exact duplicate judgment(s) in {origin} (first: row {rows[0]}, 0-based)"
    if duplicates == "drop":
        return f"{found}, dropped (--duplicates drop)"
    return (f"{found}, kept: each counts as a vote, so the standard errors treat them as "
            "independent votes (--duplicates drop drops them)")


def handle_duplicates(judgments: Sequence[Judgment], duplicates: str, origin: str) -> tuple[list[Judgment], str | None]:
    """``duplicates`` keep (each repeat counts as a vote) or drop (the first of each is kept):
    the judgments and the line that says what was done (None when there is no duplicate)."""
    check_duplicates_option(duplicates)
    rows = duplicate_rows(judgments)
    line = duplicates_line(rows, duplicates, origin)
    if duplicates == "drop" and rows:
        dropped = set(rows)
        return [j for i, j in enumerate(judgments) if i not in dropped], line
    return list(judgments), line


def _validate_row(row: Mapping[str, Any], where: str, index: int, shared: dict[str, str]) -> Judgment:
    """One row as a Judgment; its texts are taken from ``shared`` where an earlier row had the same
    (a pair judged four times would otherwise hold its two answers four times: on long answers that
    was most of the audit's memory)."""
    def fail(name: str, problem: str) -> JudgmentError:
        return JudgmentError(f"{where}, field {name!r}: {problem}", row=index, field=name)

    unknown = [k for k in row if k not in FIELDS]
    if unknown:
        raise fail(str(unknown[0]), f"unknown field; the fields are {list(FIELDS)}")
    values: dict[str, Any] = {}
    for name in REQUIRED_TEXT + OPTIONAL_TEXT:
        value = row.get(name)
        if value is None:
            if name in REQUIRED_TEXT:
                raise fail(name, "missing" if name not in row else "null")
            continue
        if not isinstance(value, str):
            raise fail(name, f"expected a string, got {type(value).__name__} {value!r}")
        if not value.strip():
            raise fail(name, "empty")
        text = annotator_id(value) if name == "annotator" else value
        values[name] = shared.setdefault(text, text)
    if values["chosen"] == values["rejected"]:
        raise fail("rejected", "identical to 'chosen'; a pair needs two different responses")
    values.update(_label(row, fail))
    values.update(_weight(row.get(WEIGHT_FIELD), fail))
    given = [name for name in ATTRIBUTE_FIELDS if row.get(name) is not None]
    if len(given) == 1:
        missing = "g_rejected" if given == ["g_chosen"] else "g_chosen"
        raise fail(missing, f"missing while {given[0]!r} is given; give both or neither")
    if given:
        values["g_chosen"] = _attribute_values(row["g_chosen"], "g_chosen", fail)
        values["g_rejected"] = _attribute_values(row["g_rejected"], "g_rejected", fail)
        if set(values["g_chosen"]) != set(values["g_rejected"]):
            raise fail("g_rejected", f"attribute names {list(values['g_rejected'])} differ from "
                       f"g_chosen's {list(values['g_chosen'])}")
    return Judgment(**values)


def _weight(weight: Any, fail) -> dict[str, float]:
    """``weight`` (a finite number >= 0; null: none) of a row, only when set."""
    if weight is None:
        return {}
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) or weight < 0:
        raise fail(WEIGHT_FIELD, f"expected a finite number >= 0, got {type(weight).__name__} {weight!r}")
    return {WEIGHT_FIELD: float(weight)}


def _label(row: Mapping[str, Any], fail) -> dict[str, Any]:
    """``tie`` (true/false; null: false) and ``strength`` (a positive integer; null: none) of a row,
    only those that are set. A tie has no strength: it prefers neither side."""
    tie, strength = row.get(TIE_FIELD), row.get(STRENGTH_FIELD)
    if tie is not None and not isinstance(tie, bool):
        raise fail(TIE_FIELD, f"expected true/false, got {type(tie).__name__} {tie!r}")
    if strength is None:
        return {TIE_FIELD: True} if tie else {}
    if isinstance(strength, bool) or not isinstance(strength, numbers.Integral):
        raise fail(STRENGTH_FIELD, f"expected a positive integer (1 the weakest), got {type(strength).__name__} "
                   f"{strength!r}")
    if strength < 1:
        raise fail(STRENGTH_FIELD, f"expected a positive integer (1 the weakest), got {strength!r}")
    if tie:
        raise fail(STRENGTH_FIELD, f"{strength!r} on a tie; a tie prefers neither side and has no strength")
    return {STRENGTH_FIELD: int(strength)}


def plain_wins_only(judgments: Iterable[Judgment], what: str, source: str | None = None) -> None:
    """Refuse ties and graded wins before ``what`` (a consumer that reads every judgment as a plain
    win of ``chosen``) reads them: a tie read as a win would be a preference nobody gave. The
    :class:`JudgmentError` names the first such row (0-based, in the order given; in ``source``)."""
    for index, j in enumerate(judgments):
        if j.tie or j.strength is not None:
            name, label = (TIE_FIELD, "a tie") if j.tie else (STRENGTH_FIELD, f"a win of strength {j.strength}")
            where = describe_row(index, None, source, {"pair_id": j.pair_id})
            raise JudgmentError(f"{where}, field {name!r}: {label}; {what} does not take ties or "
                                "strengths yet (give plain wins: chosen over rejected)", row=index, field=name)


def _attribute_values(value: Any, name: str, fail) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise fail(name, f"expected a mapping of attribute name -> number, got {type(value).__name__}")
    if not value:
        raise fail(name, "empty mapping; omit the field when there are no precomputed attributes")
    out: dict[str, float] = {}
    for key, number in value.items():
        if not isinstance(key, str) or not key:
            raise fail(name, f"attribute name {key!r} is not a non-empty string")
        if isinstance(number, bool) or not isinstance(number, numbers.Real):
            raise fail(f"{name}.{key}", f"expected a number (0/1 for a binary attribute), "
                       f"got {type(number).__name__} {number!r}")
        if not math.isfinite(number):
            raise fail(f"{name}.{key}", f"not finite: {number!r}")
        out[key] = float(number)
    return out


def annotator_classes(judgments: Sequence[Judgment], source: str | None = None) -> dict[str, str] | None:
    """annotator -> class when every row has one; None when none has. An annotator is in one
    class (a class offset reads each annotator's votes under one class), and a class given on
    some rows only is a hole in the data: either is a JudgmentError naming ``source``'s row.
    The audit and every training stage refuse such data by this one check."""
    if all(j.annotator_class is None for j in judgments):
        return None
    where = f"{source} row" if source else "row"
    classes: dict[str, str] = {}
    for i, j in enumerate(judgments):
        if j.annotator_class is None:
            raise JudgmentError(f"{where} {i}: annotator_class missing while other rows have one", row=i,
                                field="annotator_class")
        if classes.setdefault(j.annotator, j.annotator_class) != j.annotator_class:
            raise JudgmentError(f"{where} {i}: annotator {j.annotator!r} has class {j.annotator_class!r} "
                                f"here but {classes[j.annotator]!r} earlier; an annotator is in one class",
                                row=i, field="annotator_class")
    return classes


def pair_key(j: Judgment) -> str:
    """The id of the compared pair: ``pair_id`` when given, else a hash of its content.

    The hash covers the prompt and the unordered set {chosen, rejected}, so the judgments
    of two annotators who saw the same pair (either way round) share a key.
    """
    if j.pair_id is not None:
        return j.pair_id
    content = json.dumps([j.prompt, sorted((j.chosen, j.rejected))], ensure_ascii=False)
    return "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()[:20]


def check_pair_texts(judgments: Sequence[Judgment], source: str | None = None) -> None:
    """Every judgment of one pair (one :func:`pair_key`) compares the texts of its first row: a
    ``pair_id`` reused for other texts is a JudgmentError naming ``source``'s row. Training refused
    such a file while the audit read it (issue 76's re-trial): one check for both."""
    where = f"{source} row" if source else "row"
    first: dict[str, tuple[str, frozenset[str]]] = {}
    for i, j in enumerate(judgments):
        texts = (j.prompt, frozenset((j.chosen, j.rejected)))
        if first.setdefault(pair_key(j), texts) != texts:
            raise JudgmentError(f"{where} {i}: pair {pair_key(j)!r} compares other texts than its first row", row=i)


def _row_dict(j: Judgment) -> dict[str, Any]:
    """Fields in the dataclass order, None omitted (and ``tie`` when false: a plain win's line is as
    it was before ties existed), attribute names in their given order."""
    out: dict[str, Any] = {}
    for name in FIELDS:
        value = getattr(j, name)
        if value is not None and not (name == TIE_FIELD and value is False):
            out[name] = dict(value) if name in ATTRIBUTE_FIELDS else value
    return out


def write_judgments(path: str | os.PathLike, judgments: Iterable[Judgment]) -> None:
    """Write JSONL, one judgment per line; the same judgments give the same bytes.

    Keys follow the :class:`Judgment` field order, None fields (and a false ``tie``) are omitted, text is UTF-8
    (``ensure_ascii=False``) with ``\\n`` line ends. The judgments are validated first, so
    a file written here always reads back.
    """
    judgments = list(judgments)
    for i, j in enumerate(judgments):
        if not isinstance(j, Judgment):
            raise TypeError(f"row {i}: expected a Judgment, got {type(j).__name__}")
    validate_judgments(judgments)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for j in judgments:
            handle.write(json.dumps(_row_dict(j), ensure_ascii=False) + "\n")


def read_judgments(source: Any) -> list[Judgment]:
    """Read and validate judgments from a ``.jsonl`` file, a directory written by
    ``datasets.Dataset.save_to_disk``, or a ``datasets.Dataset``."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            import datasets  # heavy; only when a saved dataset is actually read

            return _from_dataset(datasets.load_from_disk(str(path)), str(path))
        if not path.exists():
            raise FileNotFoundError(f"no judgment file or dataset directory at {str(path)!r}")
        if path.suffix != ".jsonl":
            raise ValueError(f"{str(path)!r}: expected a .jsonl file or a saved dataset directory")
        return validate_labelled(jsonl_rows(path))
    if type(source).__module__.split(".")[0] == "datasets":
        return _from_dataset(source, type(source).__name__)
    raise TypeError(f"read_judgments: expected a .jsonl path, a saved dataset directory or a "
                    f"datasets.Dataset, got {type(source).__name__}; for rows in memory use "
                    "validate_judgments")


def _from_dataset(dataset: Any, origin: str) -> list[Judgment]:
    import datasets

    if isinstance(dataset, datasets.DatasetDict):
        raise ValueError(f"{origin}: a DatasetDict with splits {list(dataset)}; "
                         "pass one split, e.g. read_judgments(dataset_dict['train'])")
    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(f"{origin}: expected a datasets.Dataset, got {type(dataset).__name__}")
    return validate_judgments(dataset.to_list())


