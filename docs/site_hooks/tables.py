"""An mkdocs hook for the docs site: the API pages' method and readout tables are rendered from
``badpo.methods.table.METHODS`` and ``badpo.readouts.table.READOUTS`` at build time, so the pages
cannot drift from the rows the code runs. A page asks for one with ``<!-- table: methods -->``."""

from __future__ import annotations

from typing import Any


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def methods_table() -> str:
    from badpo.methods.table import METHODS

    lines = ["| method= | bias.variant | Description |", "|:--|:--|:--|"]
    for name, method in METHODS.items():
        variants = "any (none: no θ)" if method.takes_bias else "none"
        lines.append(f"| `{name}` | {variants} | {_cell(method.description)} |")
    return "\n".join(lines)


def readouts_table() -> str:
    from badpo.readouts.table import READOUTS

    lines = ["| Readout | Writes | Reads a policy | Reads a reward model |", "|:--|:--|:--|:--|"]
    for row in READOUTS:
        writes = ", ".join(f"`{head}`" for head in row.writes) or "—"
        lines.append(f"| {row.name} | {writes} | {'yes' if row.read else '—'} | "
                     f"{'yes' if row.read_reward_model else '—'} |")
    return "\n".join(lines)


TABLES = {"methods": methods_table, "readouts": readouts_table}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for name, render in TABLES.items():
        marker = f"<!-- table: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown
