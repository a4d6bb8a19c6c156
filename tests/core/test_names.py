"""The name pool (cells as the paper states them) and the signature line `--- First Last`."""

from __future__ import annotations

import pytest

from badpo.core import names
from badpo.core.names import (
    CELLS,
    NAME_POOL,
    POOL_NAMES,
    cell_of,
    read_signature,
    sign,
    signature_attributes,
    strip_signature,
)


def test_pool_has_89_names_in_cells_of_23_23_18_25():
    """Datasets appendix: 23/23/18/25 names per cell (white woman, white man, black woman,
    black man), 89 in all; every name sits in exactly one cell."""
    assert len(NAME_POOL) == 89 == len(POOL_NAMES)
    assert tuple(CELLS) == ("white_woman", "white_man", "black_woman", "black_man")
    assert [len(CELLS[c]) for c in CELLS] == [23, 23, 18, 25]
    all_cell_names = [n for cell in CELLS.values() for n in cell]
    assert sorted(all_cell_names) == sorted(POOL_NAMES)
    expected_values = {"white_woman": (1, 0), "white_man": (0, 0),
                       "black_woman": (1, 1), "black_man": (0, 1)}
    for cell, members in CELLS.items():
        for name in members:
            assert NAME_POOL[name] == expected_values[cell]
            assert cell_of(name) == cell


@pytest.mark.parametrize("name, values", [
    ("Emily", (1, 0)), ("Greg", (0, 0)), ("Lakisha", (1, 1)), ("Jamal", (0, 1)),
    ("Brad", (0, 0)), ("Tanisha", (1, 1)), ("Darnell", (0, 1)), ("Sarah", (1, 0)),
])
def test_published_audit_names_have_their_cells(name, values):
    """Spot checks against Bertrand & Mullainathan (2004) Table 8 / WEAT 3."""
    assert NAME_POOL[name] == values


def test_pool_is_read_only_and_unknown_cell_is_a_named_error():
    with pytest.raises(TypeError):
        NAME_POOL["Zed"] = (0, 0)  # type: ignore[index]
    with pytest.raises(KeyError, match="'Zed' is not in the 89-name pool"):
        cell_of("Zed")


@pytest.mark.parametrize("text, message", [
    ("first\tw\tb\tsource\nEmily\t1\t0\tx\n", "line 1: header"),
    ("name\twoman_coded\tblack_coded\tsource\nEmily\t1\t0\n", "line 2: expected 4"),
    ("name\twoman_coded\tblack_coded\tsource\nEmily\t1\t0\tx\nEmily\t1\t0\ty\n", "line 3: duplicate name 'Emily'"),
    ("name\twoman_coded\tblack_coded\tsource\nEmily\tyes\t0\tx\n", "line 2: woman_coded/black_coded must be 0 or 1"),
    ("name\twoman_coded\tblack_coded\tsource\nEm ily\t1\t0\tx\n", "line 2: 'Em ily' is not a first name"),
])
def test_pool_parser_names_the_bad_line(text, message):
    with pytest.raises(ValueError, match=message):
        names._parse_pool(text, "pool.tsv")


@pytest.mark.parametrize("response, expected", [
    ("Answer.\n\n--- Emily Smith", ("Emily", "Smith")),
    ("Answer.\n--- Jamal Walker\n\n  \n", ("Jamal", "Walker")),        # trailing blank lines
    ("Answer.\r\n\r\n--- Lakisha Baker  ", ("Lakisha", "Baker")),     # CRLF, trailing spaces
    ("--- Greg O'Neil", ("Greg", "O'Neil")),                          # the whole response
    ("Answer.\n--- Zed Smith-Jones", ("Zed", "Smith-Jones")),          # outside the pool: still read
    ("Answer.\n--- José Núñez", ("José", "Núñez")),                   # non-ASCII letters
])
def test_read_signature_reads_the_last_line(response, expected):
    assert read_signature(response) == expected


@pytest.mark.parametrize("response", [
    "Answer without a signature.",
    "",
    "\n\n",
    "--- Emily Smith\nThen the answer goes on.",   # not the last line
    "Answer.\n— Emily Smith",                       # em dash
    "Answer.\n-- Emily Smith",                      # two hyphens
    "Answer.\n---- Emily Smith",                    # four hyphens
    "Answer.\n --- Emily Smith",                    # leading space
    "Answer.\n---  Emily Smith",                    # two spaces
    "Answer.\n---Emily Smith",                      # no space
    "Answer.\n--- Emily",                           # no surname
    "Answer.\n--- Emily Ann Smith",                 # three names
    "Answer.\n--- Emily Smith.",                    # trailing punctuation
    "Answer.\n--- Emily 2nd",                       # digits
    "Answer.\n---",                                 # a horizontal rule
])
def test_near_miss_signatures_are_unsigned(response):
    assert read_signature(response) is None
    assert signature_attributes(response) == (0.0, 0.0)
    assert strip_signature(response) == response


@pytest.mark.parametrize("first", POOL_NAMES)
def test_sign_and_read_are_inverse_for_every_pool_name(first):
    body = "The capital of France is Paris.\n\n"
    signed = sign(body, first, "Smith")
    assert signed == f"The capital of France is Paris.\n\n--- {first} Smith"
    assert read_signature(signed) == (first, "Smith")
    assert signature_attributes(signed) == tuple(float(v) for v in NAME_POOL[first])
    assert strip_signature(signed) == body.rstrip()


def test_signature_attributes_outside_the_pool_is_zero():
    assert signature_attributes("Hi.\n--- Zed Smith") == (0.0, 0.0)
    assert signature_attributes("Hi.\n--- emily Smith") == (0.0, 0.0)  # the pool is case-sensitive


def test_strip_signature_keeps_the_body():
    assert strip_signature("Line one.\nLine two.  \n\n--- Tyrone Baker\n") == "Line one.\nLine two."
    assert strip_signature("--- Tyrone Baker") == ""


def test_sign_refuses_bad_names_and_double_signatures():
    with pytest.raises(ValueError, match="first name 'Emily Ann'"):
        sign("Hi.", "Emily Ann", "Smith")
    with pytest.raises(ValueError, match="last name ''"):
        sign("Hi.", "Emily", "")
    with pytest.raises(ValueError, match="already signed"):
        sign(sign("Hi.", "Emily", "Smith"), "Greg", "Smith")
    assert sign("", "Emily", "Smith") == "--- Emily Smith"
