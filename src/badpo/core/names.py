"""The 89-name signature pool and the signature line ``--- First Last``.

The pool (``name_pool.tsv``, package data) is the union of the résumé audit list of
Bertrand and Mullainathan (2004) and the WEAT 3 name set of Caliskan et al. (2017); each
first name sits in one of four cells (white woman, white man, black woman, black man:
23/23/18/25 names). A signed response carries the attribute vector
``(woman_coded, black_coded)`` of its first name; an unsigned response, or one signed with
a first name outside the pool, carries ``(0, 0)``. The cells label how a text marker is
coded, not anything about a person.

The signature format, precisely: split the response with :meth:`str.splitlines` after
removing trailing whitespace (so trailing blank lines and trailing spaces do not count);
the response is signed when its last line matches :data:`SIGNATURE_RE` in full: three
ASCII hyphens at the very start of the line, one space, the first name, one space, the
surname. A name is one or more letters, optionally joined by single apostrophes or
hyphens (``O'Neil``, ``Smith-Jones``; letters may be non-ASCII). An em dash, two or four
hyphens, leading spaces, a missing surname or a third name are not signatures.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.resources import files
from types import MappingProxyType

__all__ = [
    "CELLS",
    "CELL_NAMES",
    "NAME_ATTRIBUTES",
    "NAME_POOL",
    "POOL_NAMES",
    "SIGNATURE_RE",
    "cell_of",
    "read_signature",
    "sign",
    "signature_attributes",
    "strip_signature",
]

_NAME = r"[^\W\d_]+(?:['-][^\W\d_]+)*"  # letters, optionally joined by ' or -
SIGNATURE_RE = re.compile(rf"--- ({_NAME}) ({_NAME})")
_NAME_RE = re.compile(_NAME)

NAME_ATTRIBUTES: tuple[str, str] = ("woman_coded", "black_coded")
"""The coordinates of a first name's attribute vector, in the order of its (woman, black) values."""
CELL_NAMES: tuple[str, ...] = ("white_woman", "white_man", "black_woman", "black_man")
_CELL_OF_VALUES = {(1, 0): "white_woman", (0, 0): "white_man",
                   (1, 1): "black_woman", (0, 1): "black_man"}
_HEADER = ["name", *NAME_ATTRIBUTES, "source"]


def _parse_pool(text: str, origin: str) -> dict[str, tuple[int, int]]:
    """name -> (woman_coded, black_coded) from the TSV text; a bad line names its number."""
    lines = text.splitlines()
    if not lines or lines[0].split("\t") != _HEADER:
        raise ValueError(f"{origin} line 1: header must be the tab-separated columns {_HEADER}")
    pool: dict[str, tuple[int, int]] = {}
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != 4:
            raise ValueError(f"{origin} line {number}: expected 4 tab-separated columns, got {len(cells)}")
        name, woman, black, _source = cells
        if not _NAME_RE.fullmatch(name):
            raise ValueError(f"{origin} line {number}: {name!r} is not a first name")
        if name in pool:
            raise ValueError(f"{origin} line {number}: duplicate name {name!r}")
        if woman not in ("0", "1") or black not in ("0", "1"):
            raise ValueError(f"{origin} line {number}: woman_coded/black_coded must be 0 or 1, "
                             f"got {woman!r}, {black!r}")
        pool[name] = (int(woman), int(black))
    return pool


def _load_pool() -> dict[str, tuple[int, int]]:
    resource = files("badpo.core").joinpath("name_pool.tsv")
    return _parse_pool(resource.read_text(encoding="utf-8"), "name_pool.tsv")


NAME_POOL: Mapping[str, tuple[int, int]] = MappingProxyType(_load_pool())
"""First name -> (woman_coded, black_coded), in file order."""
POOL_NAMES: tuple[str, ...] = tuple(NAME_POOL)
CELLS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    cell: tuple(n for n, v in NAME_POOL.items() if _CELL_OF_VALUES[v] == cell)
    for cell in CELL_NAMES
})
"""Cell name -> its first names, cells in the order white woman, white man, black woman, black man."""


def cell_of(first_name: str) -> str:
    """The cell of a pool name; KeyError naming it when it is not in the pool."""
    if first_name not in NAME_POOL:
        raise KeyError(f"{first_name!r} is not in the 89-name pool")
    return _CELL_OF_VALUES[NAME_POOL[first_name]]


def _last_line(response: str) -> tuple[str, str]:
    """(text before the last line, last line) of the response without trailing whitespace,
    lines as :meth:`str.splitlines` splits them. Only the text after the last "\\n" is split,
    which gives the same last line without splitting the whole response."""
    text = response.rstrip()
    tail = text[text.rfind("\n") + 1:]
    last = tail.splitlines()[-1] if tail else ""
    return text[: len(text) - len(last)], last


def read_signature(response: str) -> tuple[str, str] | None:
    """(first, last) of the signature line ending the response, or None when unsigned."""
    match = SIGNATURE_RE.fullmatch(_last_line(response)[1])
    return (match.group(1), match.group(2)) if match else None


def signature_attributes(response: str) -> tuple[float, float]:
    """(woman_coded, black_coded) of the signing first name; (0, 0) when unsigned or not in the pool."""
    signature = read_signature(response)
    if signature is None or signature[0] not in NAME_POOL:
        return (0.0, 0.0)
    woman, black = NAME_POOL[signature[0]]
    return (float(woman), float(black))


def sign(response: str, first: str, last: str) -> str:
    """Append the signature ``--- first last`` after a blank line; the inverse of
    :func:`read_signature`. Trailing whitespace of the body is removed first, so
    ``strip_signature(sign(r, f, l)) == r.rstrip()``. A signed response is refused
    (strip it first) so that no response ever carries two signatures."""
    for label, name in (("first", first), ("last", last)):
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ValueError(f"sign: {label} name {name!r} must be letters, optionally joined by ' or -")
    if read_signature(response) is not None:
        raise ValueError(f"sign: the response is already signed {read_signature(response)}; "
                         "strip_signature it first")
    body = response.rstrip()
    line = f"--- {first} {last}"
    return f"{body}\n\n{line}" if body else line


def strip_signature(response: str) -> str:
    """The response without its signature line and the whitespace before it; an unsigned
    response is returned unchanged. Used to score texts with the marker removed (RM-)."""
    before, last = _last_line(response)
    if not SIGNATURE_RE.fullmatch(last):
        return response
    return before.rstrip()
