"""Training data as users hold it: a file, a saved dataset, a Hub id or a ``datasets.Dataset``.

``data`` (with ``data_split``) is read here, in this order:

* a name registered by :func:`in_memory` (a ``datasets.Dataset`` or a list of dict rows given to
  the Python API);
* a ``.jsonl`` file: read line by line by :func:`badpo.core.judgments.jsonl_rows`, so that an
  error names the file's line and a key that is missing stays distinct from a null;
* a ``.parquet``, ``.csv`` or ``.json`` file: ``datasets.load_dataset(<format>, data_files=...)``
  (CSV cells are read as text: an id column of digits stays an id);
* a folder written by ``save_to_disk``: ``datasets.load_from_disk``;
* anything else that does not look like a path: a Hub dataset id,
  ``datasets.load_dataset(data, split=data_split or "train")``.

A ``DatasetDict`` (a saved folder with splits) gives the split ``data_split``, or its only split.
An error in a row names the file's line (JSONL) or the 0-based row of the dataset (anything else).

Each row then goes through the column mapping (:class:`ColumnMap`), loses the columns badpo does
not read (named once in an :class:`IgnoredColumnsWarning`; no row is dropped), is turned from the
A/B form into the chosen/rejected one when it comes so (:mod:`badpo.data.label_forms`, which counts
the rows of each form), and has its chat-format fields rendered (:mod:`badpo.data.chat`) before the
core validator sees it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError
from badpo.core.judgments import (
    FIELDS,
    REQUIRED_TEXT,
    describe_row,
    iter_validated,
    jsonl_rows,
)
from badpo.core.notices import BadpoWarning
from badpo.data.chat import ChatRows
from badpo.data.column_checks import check_mapped_columns, check_required_columns
from badpo.data.label_forms import AB_FIELDS, LabelForms, plan_columns
from badpo.data.local_names import did_you_mean, looks_local

__all__ = ["IN_MEMORY_PREFIX", "IN_MEMORY_PREFIXES", "ColumnMap", "IgnoredColumnsWarning", "Loaded", "RowTable",
           "judgments_as_read", "jsonl_file", "warn_ignored",
           "in_memory", "read_judgment_source", "check_columns", "read_prompt_source", "read_sft_source",
           "source_dataset"]

JUDGMENT_FIELDS = (*FIELDS, *AB_FIELDS)  # the A/B form's fields become chosen / rejected and the label
SFT_FIELDS = ("prompt", "response")
PROMPT_FIELDS = ("prompt", "prompt_id", "body", "candidates")  # evaluation prompts
DATASET_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json"}
LOCAL_SUFFIXES = (".jsonl", *DATASET_FORMATS)  # a name ending so is a local file, never a Hub id


@dataclass(frozen=True)
class ColumnMap:
    """The column that holds each field, when it is not the field's own name (``columns.annotator:
    worker_id``). A column mapped here and a field named there are the same field; any other
    column is ignored with a warning."""

    prompt: str | None = None  # the column of the prompt (null: the column named prompt, as for every field)
    chosen: str | None = None  # the column of the preferred response
    rejected: str | None = None  # the column of the other response
    response: str | None = None  # the column of the response (sft rows only)
    annotator: str | None = None  # the column of the annotator id
    annotator_class: str | None = None  # the column of the annotator's class (optional)
    prompt_id: str | None = None  # the column of the prompt id (optional)
    pair_id: str | None = None  # the column of the pair id (optional)
    pair_type: str | None = None  # the column of the pair type (optional)
    g_chosen: str | None = None  # the column of the chosen side's precomputed attributes (given:NAME)
    g_rejected: str | None = None  # the column of the rejected side's precomputed attributes
    tie: str | None = None  # the column marking a tie: true / false (optional)
    strength: str | None = None  # the column of a graded win's strength, 1 the weakest (optional)
    weight: str | None = None  # the column of a judgment's loss weight (optional)
    response_a: str | None = None  # the A/B form: the column of the first response
    response_b: str | None = None  # the A/B form: the column of the second response
    preference: str | None = None  # the A/B form: a number (< 0: A better, 0: tie) or one of MultiPref's labels
    g_a: str | None = None  # the A/B form: the first response's precomputed attributes
    g_b: str | None = None  # the A/B form: the second response's precomputed attributes

    def renames(self, fields: tuple[str, ...], what: str) -> dict[str, str]:
        """{column: field} of the mapped fields; a field the reader does not use is a ConfigError."""
        out: dict[str, str] = {}
        for item in dataclasses.fields(self):
            column = getattr(self, item.name)
            if column is None:
                continue
            if item.name not in fields:
                raise ConfigError(f"columns.{item.name}: not a field of {what} (the fields are "
                                  f"{list(fields)})")
            if column in out:
                raise ConfigError(f"columns.{item.name}: column {column!r} is already mapped to "
                                  f"{out[column]!r}")
            out[column] = item.name
        return out


class IgnoredColumnsWarning(BadpoWarning):
    """The data has columns that badpo does not read; they are named once, and no row is dropped."""


@dataclass(frozen=True)
class Loaded:
    """Validated rows, and whether their prompts were rendered with a chat template (so that the
    tokenizer must not wrap them again, nor add its special tokens); for judgments, the rows read in
    each form (:mod:`badpo.data.label_forms`)."""

    rows: list
    rendered_prompts: bool
    origin: str
    forms: Mapping[str, int] = dataclasses.field(default_factory=dict)


_IN_MEMORY: dict[str, Any] = {}
_IN_MEMORY_PREFIX = IN_MEMORY_PREFIX = "datasets.Dataset:"  # + datasets' fingerprint of the Dataset
ROWS_PREFIX = "rows:"  # + the fingerprint of a list of rows (RowTable)
IN_MEMORY_PREFIXES = (IN_MEMORY_PREFIX, ROWS_PREFIX)


@dataclass(frozen=True)
class RowTable:
    """A list of dict rows given to the Python API, read as they are (as the lines of a JSONL
    file, not through Arrow, which would fill every row's missing keys with nulls)."""

    rows: tuple
    _fingerprint: str  # sha256 of the rows' JSON text (first 16 hex digits), as datasets names its own

    @classmethod
    def of(cls, rows: Any) -> RowTable:
        rows = tuple(rows)
        bad = next((i for i, row in enumerate(rows) if not isinstance(row, Mapping)), None)
        if bad is not None:
            raise ValueError(f"rows: row {bad} is a {type(rows[bad]).__name__}, not a dict of column -> value")
        text = json.dumps(list(rows), sort_keys=True, ensure_ascii=False, default=repr)
        return cls(rows, hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])

    @property
    def column_names(self) -> list[str]:
        return list(dict.fromkeys(key for row in self.rows for key in row))

    def to_list(self) -> list:
        return [dict(row) for row in self.rows]


@contextlib.contextmanager
def in_memory(dataset: Any) -> Iterator[str]:
    """Make a ``datasets.Dataset``, or a list of dict rows, readable under a name that a config's
    ``data`` key can hold (written to ``config.yaml``; it names the data's fingerprint) for the block."""
    import datasets

    if isinstance(dataset, (list, tuple)):
        table = RowTable.of(dataset)
        name = f"{ROWS_PREFIX}{table._fingerprint}"
    elif isinstance(dataset, datasets.Dataset):
        table, name = dataset, f"{_IN_MEMORY_PREFIX}{dataset._fingerprint}"
    else:
        raise TypeError(f"data: expected a datasets.Dataset or a list of dict rows, got {type(dataset).__name__}"
                        + ("; pass one split" if isinstance(dataset, datasets.DatasetDict) else ""))
    _IN_MEMORY[name] = table
    try:
        yield name
    finally:
        _IN_MEMORY.pop(name, None)


def read_judgment_source(data: Any, split: str | None = None, columns: ColumnMap = ColumnMap(),
                         tokenizer=None) -> Loaded:
    """Judgments from any source (module docstring). Chat-format prompts are rendered with the
    tokenizer's chat template; with no tokenizer (the label audit) a conversation is kept as its
    JSON text, which only has to tell prompts apart."""
    read, origin, chat, ignored, forms = judgments_as_read(data, split, columns, tokenizer)
    judgments = list(read)
    if not judgments:
        raise ValueError(f"{origin}: no judgments (the source holds no row)")
    warn_ignored(ignored, origin)
    return Loaded(judgments, chat.rendered, origin, dict(forms.counts))


def judgments_as_read(data: Any, split: str | None = None, columns: ColumnMap = ColumnMap(), tokenizer=None,
                      share_texts: bool = True, warn: bool = True
                      ) -> tuple[Iterator, str, ChatRows, dict[str, None], LabelForms]:
    """(the validated judgments, one at a time as the source is read; its origin; the chat renderer;
    the columns no field reads and the rows of each form, both filled as the rows go by).
    ``share_texts``: every judgment of a pair holds one string per text (kept until the end);
    ``warn``: say once at the end when annotator ids were normalised (a second pass over the same
    file says nothing new)."""
    renames = columns.renames(JUDGMENT_FIELDS, "a judgment")
    labelled, origin, chat, renames, fields = _open_rows(data, split, renames, tokenizer, required=REQUIRED_TEXT,
                                                         forms=True)
    ignored: dict[str, None] = {}
    shared: dict[str, str] = {}
    forms = LabelForms()
    rows = ((label, chat.render(label, forms.convert(label, _mapped(row, renames, fields, ignored))))
            for label, row in labelled)
    if share_texts:
        rows = ((label, _share_texts(row, shared)) for label, row in rows)
    return iter_validated(rows, share_texts, warn), origin, chat, ignored, forms


def jsonl_file(data: Any) -> Path | None:
    """The path of ``data`` when the readers here would read it as a local JSONL file, else None
    (decided without opening any dataset)."""
    if not isinstance(data, (str, os.PathLike)) or str(data) in _IN_MEMORY:
        return None
    path = _local(str(data))
    return path if path.suffix == ".jsonl" and path.is_file() else None


def _share_texts(row: Any, shared: dict[str, str]) -> Any:
    """The row with its prompt and responses replaced by the first equal string read: a pair judged
    by four annotators holds its two answers once, not four times (300-word answers took ~19 KB a
    judgment in the screen of issue 49's retry)."""
    if isinstance(row, dict):
        for name in ("prompt", "chosen", "rejected"):
            text = row.get(name)
            if isinstance(text, str):
                row[name] = shared.setdefault(text, text)
    return row


def read_sft_source(data: Any, split: str | None = None, columns: ColumnMap = ColumnMap(),
                    tokenizer=None) -> Loaded:
    """(prompt, response) rows with non-empty string fields ``prompt`` and ``response`` (either
    may be chat messages, as for judgments)."""
    renames = columns.renames(SFT_FIELDS, "an sft row")
    labelled, origin, chat, *_ = _open_rows(data, split, renames, tokenizer)
    ignored: dict[str, None] = {}
    rows = []
    for label, raw in labelled:
        index, line, source = label
        where = f"{source} line {line}" if line is not None else f"{source}: row {index}"
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}: expected a JSON object with 'prompt' and 'response', got "
                             f"{type(raw).__name__}")
        row = chat.render(label, _mapped(raw, renames, SFT_FIELDS, ignored))
        for name in SFT_FIELDS:
            if name not in row:
                judged = name == "response" and {"chosen", "rejected"} <= set(raw)
                hint = (" (the rows are judgments: badpo sft source=judgments trains on the majority-chosen "
                        "response of each pair)" if judged else "")
                raise ValueError(f"{where}: {name!r} is missing{hint}")
            if not isinstance(row[name], str) or not row[name]:
                raise ValueError(f"{where}: {name!r} must be a non-empty string, got {row[name]!r}")
        rows.append((row["prompt"], row["response"]))
    if not rows:
        raise ValueError(f"{origin}: no sft rows")
    warn_ignored(ignored, origin)
    return Loaded(rows, chat.rendered, origin)


def read_prompt_source(data: Any, split: str | None = None, columns: ColumnMap = ColumnMap(),
                       tokenizer=None) -> Loaded:
    """Evaluation prompts from any source: rows with a non-empty ``prompt`` (text or chat
    messages, as for judgments) and optionally ``body`` (the answer body the names readout reads
    after under ``body: given``), ``candidates`` (whole answers the format readout scores) and
    ``prompt_id``; a null is an absent field (an empty CSV cell). Of a column mapping only
    ``columns.prompt`` applies: the prompts of a judgments file sit in the same column."""
    renames = ColumnMap(prompt=columns.prompt).renames(PROMPT_FIELDS, "an evaluation prompt")
    labelled, origin, chat, *_ = _open_rows(data, split, renames, tokenizer)
    ignored: dict[str, None] = {}
    rows = []
    for label, raw in labelled:
        where = describe_row(*label, raw)
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}: expected an object with a 'prompt', got {type(raw).__name__}")
        row = {name: value for name, value in chat.render(label, _mapped(raw, renames, PROMPT_FIELDS,
                                                                         ignored)).items() if value is not None}
        if not isinstance(row.get("prompt"), str) or not row["prompt"]:
            raise ValueError(f"{where}: 'prompt' must be a non-empty string, got {row.get('prompt')!r}")
        if not isinstance(row.get("body", ""), str):
            raise ValueError(f"{where}: 'body' must be a string, got {row['body']!r}")
        candidates = row.get("candidates", [""])
        if not isinstance(candidates, list) or not candidates or not all(isinstance(c, str) for c in candidates):
            raise ValueError(f"{where}: 'candidates' must be a non-empty list of strings, got {candidates!r}")
        rows.append(row)
    if not rows:
        raise ValueError(f"{origin}: no evaluation prompts")
    warn_ignored(ignored, origin)
    return Loaded(rows, chat.rendered, origin)


# ------------------------------------------------------------------------------ loading
def source_dataset(data: Any, split: str | None = None):
    """(the ``datasets.Dataset`` behind ``data``, or None for a JSONL file; the origin an error
    names): for what needs the table without its rows validated (a fingerprint, the columns)."""
    return _open(data, split)


def check_columns(data: Any, split: str | None = None, columns: ColumnMap = ColumnMap(),
                  rows: str = "judgment") -> None:
    """Every column that ``columns`` maps is one of ``data``'s (``rows``: ``judgment`` or ``sft``
    fields): for a caller that plans runs before any reads its data (``badpo experiment``)."""
    fields, what = (SFT_FIELDS, "an sft row") if rows == "sft" else (JUDGMENT_FIELDS, "a judgment")
    renames = columns.renames(fields, what)
    if renames:
        dataset, origin = _open(data, split)
        present = list(dataset.column_names) if dataset is not None else _jsonl_columns(_local(origin))
        check_mapped_columns(renames, present, origin)


def _open_rows(data: Any, split: str | None, renames: dict, tokenizer, required: tuple[str, ...] = (),
               forms: bool = False) -> tuple[Iterable, str, ChatRows, dict, tuple[str, ...]]:
    """The labelled rows of a source, its origin, the chat renderer, the column renames and (for
    judgments) the fields read; the mapped columns, and a column for each ``required`` field, are
    checked against the source's columns first (a JSONL file's: the keys of its rows). ``forms``:
    judgments, which may come in the A/B form (:func:`badpo.data.label_forms.plan_columns`)."""
    labelled, origin, present = _labelled_rows(data, split)
    if present is None and (renames or required):
        present = _jsonl_columns(_local(origin))
    check_mapped_columns(renames, present, origin)
    fields = JUDGMENT_FIELDS
    if forms:
        renames, required, fields = plan_columns(renames, present, origin, required, fields)
    check_required_columns(renames, required, present, origin)
    return labelled, origin, ChatRows(tokenizer), renames, fields


def _local(origin: str) -> Path:
    """A JSONL file's path as the file system reads it: ``~`` expanded (origin keeps it as written)."""
    return Path(os.path.expanduser(origin))


def _jsonl_columns(path: Path) -> list[str]:
    """The keys of a JSONL file's rows, in the order first seen (one pass, kept per file state)."""
    stat = path.stat()
    return list(_jsonl_keys(str(path.absolute()), stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _jsonl_keys(path: str, size: int, mtime_ns: int) -> tuple[str, ...]:
    keys: dict[str, None] = {}
    for _, row in jsonl_rows(Path(path)):
        if isinstance(row, Mapping):
            keys.update(dict.fromkeys(row))
    return tuple(keys)


def _labelled_rows(data: Any, split: str | None) -> tuple[Iterable[tuple[tuple, Any]], str, list | None]:
    """(rows labelled for :func:`validate_labelled`, the origin an error names, the column names
    when the source has a schema)."""
    dataset, origin = _open(data, split)
    if dataset is None:  # JSONL: read here, line by line
        return jsonl_rows(_local(origin)), origin, None
    return ([((i, None, origin), row) for i, row in enumerate(dataset.to_list())], origin,
            list(dataset.column_names))


def _open(data: Any, split: str | None):
    """(a datasets.Dataset, its origin), or (None, path) for a JSONL file."""
    if type(data).__module__.split(".")[0] == "datasets":
        return _one_split(data, split, type(data).__name__), type(data).__name__
    if not isinstance(data, (str, os.PathLike)) or not str(data).strip():
        raise ConfigError(f"data: expected a path, a Hub dataset id or a datasets.Dataset, got {data!r}")
    data = str(data)
    if data in _IN_MEMORY:
        _no_split(split, data)
        return _IN_MEMORY[data], data
    if data.startswith(IN_MEMORY_PREFIXES):
        what = "a datasets.Dataset" if data.startswith(IN_MEMORY_PREFIX) else "a list of rows"
        raise ConfigError(f"data: {data!r} was {what} given to the Python API; give the "
                          "same data again (badpo.train(..., data=dataset)) to read it")
    path = Path(os.path.expanduser(data))
    if path.is_dir():
        import datasets

        if not ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
            raise FileNotFoundError(f"data: {data!r} is a folder but not one written by "
                                    "datasets' save_to_disk")
        return _one_split(datasets.load_from_disk(str(path)), split, data), data
    if path.is_file():
        _no_split(split, data)
        if path.suffix == ".jsonl":
            return None, data
        if path.suffix not in DATASET_FORMATS:
            raise ValueError(f"data: {data!r} has an unknown suffix; use .jsonl, "
                             f"{', '.join(DATASET_FORMATS)}, a save_to_disk folder or a Hub id")
        return _load_file(path, data), data
    if looks_local(data, LOCAL_SUFFIXES):  # not a Hub id: at once, naming what it nearly is
        raise FileNotFoundError(f"data: no file or folder at {data!r}{did_you_mean(path, LOCAL_SUFFIXES)}")
    return _from_hub(data, split or "train", path), f"{data} (split {split or 'train'})"


def _load_file(path: Path, data: str):
    """A local .parquet/.csv/.json file through ``datasets.load_dataset``; a file it cannot read is
    an error naming the file (datasets' own message names neither the file nor the problem, e.g.
    'Instruction "train" corresponds to no data!'), and datasets logs nothing on stderr."""
    import datasets

    # CSV cells are text: only an empty cell is null (pandas would read NA, None, null, N/A, ... as null too)
    # a spreadsheet's UTF-8 byte-order mark is not part of the first column's name (utf-8-sig drops it)
    options = ({"features": _text_features(path), "keep_default_na": False, "na_values": [""],
                "encoding": "utf-8-sig"} if path.suffix == ".csv" else {})
    shown, level = datasets.is_progress_bar_enabled(), datasets.logging.get_verbosity()
    datasets.disable_progress_bars()  # a local file: "Generating train split" is noise on stderr
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its errors are ours to say, once
    try:
        return datasets.load_dataset(DATASET_FORMATS[path.suffix], data_files=str(path), split="train",
                                     **options)
    except Exception as error:  # noqa: BLE001 - anything datasets or arrow raise on a bad file
        root = error  # datasets wraps the reader's own error, which names the line or position
        while root.__cause__ is not None or root.__context__ is not None:
            root = root.__cause__ or root.__context__
        reason = str(root).strip().splitlines()[0] if str(root).strip() else type(root).__name__
        raise ValueError(f"data: {data!r} is not a readable {DATASET_FORMATS[path.suffix]} file "
                         f"({type(root).__name__}: {reason})") from error
    finally:
        datasets.logging.set_verbosity(level)
        if shown:
            datasets.enable_progress_bars()


def _text_features(path: Path):
    """Every column of a CSV file as text (an empty cell is null), its names from the header; a
    file without a header, or with a header and no row, is an error naming it."""
    import csv

    import datasets

    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        first = next((row for row in reader if row), None)
    if not header:
        raise ValueError(f"data: {str(path)!r} is an empty CSV file")
    if first is None:
        raise ValueError(f"data: {str(path)!r} has a header ({', '.join(header)}) and no row")
    return datasets.Features({name: datasets.Value("string") for name in header})


def _from_hub(name: str, split: str, path: Path):
    import datasets

    try:
        return datasets.load_dataset(name, split=split)
    except (OSError, ConnectionError, ValueError) as error:  # not found, offline, no such split
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise FileNotFoundError(f"data: cannot load Hub dataset {name!r} split {split!r} ({reason}); no local "
                                f"file or folder has that name{did_you_mean(path, LOCAL_SUFFIXES)}") from None


def _one_split(dataset: Any, split: str | None, origin: str):
    import datasets

    if isinstance(dataset, datasets.DatasetDict):
        if split is None and len(dataset) == 1:
            return next(iter(dataset.values()))
        if split not in dataset:
            raise ConfigError(f"data_split: {origin!r} has the splits {list(dataset)}; "
                              + ("name one" if split is None else f"not {split!r}"))
        return dataset[split]
    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(f"data: expected a datasets.Dataset, got {type(dataset).__name__}")
    if split is not None and dataset.split is not None and str(dataset.split) != split:
        raise ConfigError(f"data_split: {origin!r} holds the split {str(dataset.split)!r}, not {split!r}")
    return dataset


def _no_split(split: str | None, data: str) -> None:
    if split is not None:
        raise ConfigError(f"data_split: {split!r} given, but {data!r} is one table; data_split picks "
                          "a split of a Hub dataset or of a saved DatasetDict")


# ------------------------------------------------------------------------------ columns
def _mapped(row: Any, renames: dict[str, str], fields: tuple[str, ...],
            ignored: dict[str, None]) -> Any:
    """The row under badpo's field names, without the columns no field reads (collected)."""
    if not isinstance(row, Mapping):
        return row  # the validator names it
    out = {}
    mapped_fields = set(renames.values())
    for column, value in row.items():
        name = renames.get(column, column)
        if column in renames or (name in fields and name not in mapped_fields):
            out[name] = value
        else:
            ignored.setdefault(str(column))
    return out


def warn_ignored(ignored: dict[str, None], origin: str) -> None:
    """One warning naming the columns no field reads (collected by :func:`judgments_as_read`)."""
    if ignored:
        warnings.warn(f"{origin}: ignoring column(s) {list(ignored)}, which badpo does not read "
                      "(map one to a field with columns.FIELD=COLUMN)", IgnoredColumnsWarning,
                      stacklevel=3)
