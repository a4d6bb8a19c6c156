"""docs/internals.md's two tables, its spine, are true to the code: the method table names every
row of ``METHODS``, in order, with its loss and whether it takes a bias variant; the readout table names every row of
``READOUTS``, in record order, with the module that defines it and every path head it writes."""

from __future__ import annotations

import re
from pathlib import Path

from badpo.methods import METHODS
from badpo.readouts.reading import Readout
from badpo.readouts.rows import candidates, generated, heldout, judge, names
from badpo.readouts.table import READOUTS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "internals.md"


def table_after(heading: str) -> list[list[str]]:
    """The cells of the Markdown table that follows the line starting with ``heading``, header and
    rule left out."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def quoted(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_method_table_is_every_row_of_methods_in_order():
    rows = table_after("The table, in `METHODS` order")
    assert [quoted(row[0])[0] for row in rows] == list(METHODS)
    for row in rows:
        method = METHODS[quoted(row[0])[0]]
        assert quoted(row[1]) == [method.loss.__name__], row
        assert (row[4] == "yes") == method.takes_bias, row


def test_the_readout_table_is_every_row_of_readouts_in_record_order_with_its_module():
    defined = {id(value): (name, module.__name__.rpartition(".")[2])
               for module in (candidates, generated, heldout, judge, names)
               for name, value in vars(module).items() if isinstance(value, Readout)}
    assert all(id(row) in defined for row in READOUTS)
    rows = table_after("The table, in record order")
    documented = [(name, row) for row in rows for name in quoted(row[0])]
    assert [name for name, _ in documented] == [defined[id(row)][0] for row in READOUTS]
    for (name, cells), row in zip(documented, READOUTS):
        assert quoted(cells[3]) == [f"rows/{defined[id(row)][1]}.py"], name
        heads = {path.partition("/")[0].partition(".")[0] for path in quoted(cells[1])}
        assert set(row.writes) <= heads, (name, row.writes)
