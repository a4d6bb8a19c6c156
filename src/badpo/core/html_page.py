"""One self-contained HTML page for a report a practitioner sends on (``report.html`` of ``badpo
audit --report``, ``--discover`` and ``badpo compare --out``): the plots embedded as data URIs, the
style inline, no script and nothing fetched from elsewhere, readable on a phone (the tables scroll
sideways) and printable. Every text is escaped; the Markdown the reports already write is rendered
by :func:`markdown_html`, which knows the subset they use (headings, paragraphs, lists, pipe tables,
fenced code, inline code and bold).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["html_image", "html_page", "html_pre", "html_table", "markdown_html"]

_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1a1a1a; margin: 0 auto;
       max-width: 60rem; padding: 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ccc; }
.scroll { overflow-x: auto; } table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } th { background: #f2f2f2; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; }
code { background: #f2f2f2; padding: 0 0.2rem; } img { max-width: 100%; height: auto; }
.meta { color: #555; font-size: 0.85rem; }
@media print { body { max-width: none; font-size: 11pt; } pre, .scroll { overflow: visible; white-space: pre-wrap; }
               h2, table, img { break-inside: avoid; } }
"""
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?%?$")


def html_page(title: str, sections: Sequence[str], meta: str = "") -> str:
    """The page: ``sections`` are HTML fragments from the functions below, in order."""
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>")
    top = f"<h1>{html.escape(title)}</h1>" + (f'<p class="meta">{html.escape(meta)}</p>' if meta else "")
    return "\n".join([head, top, *sections, "</body></html>"]) + "\n"


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    numeric = bool(_NUMBER.match(text))
    return f'<td class="num">{html.escape(text)}</td>' if numeric else f"<td>{html.escape(text)}</td>"


def html_table(headers: Sequence[str], rows: Sequence[Sequence[object]], table_id: str = "") -> str:
    """A table whose cells are shown as given (format numbers before); numbers align right."""
    ident = f' id="{html.escape(table_id)}"' if table_id else ""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def html_image(png: Path, alt: str) -> str:
    """A PNG embedded as a data URI (the page needs no file beside it)."""
    data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def html_pre(text: str) -> str:
    return f"<pre>{html.escape(text.rstrip())}</pre>"


def _inline(text: str) -> str:
    """Escaped text with `code` and **bold**."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
        else:
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(part)))
    return "".join(out)


def _table_rows(lines: Sequence[str]) -> list[list[str]]:
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    return [row for row in rows if not all(re.fullmatch(r":?-+:?", cell) for cell in row)]


def _block(kind: str, lines: list[str]) -> str:
    if kind == "code":
        return html_pre("\n".join(lines))
    if kind == "list":
        return "<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in lines) + "</ul>"
    if kind == "table":
        rows = _table_rows(lines)
        head = "".join(f"<th>{_inline(c)}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows[1:])
        return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    return f"<p>{_inline(' '.join(lines))}</p>"


def markdown_html(text: str, shift: int = 1) -> str:
    """The reports' Markdown as HTML; headings move down ``shift`` levels (the page has its h1)."""
    out: list[str] = []
    kind, lines = "", []

    def flush() -> None:
        nonlocal kind, lines
        if lines or kind == "code":
            out.append(_block(kind, lines))
        kind, lines = "", []

    for line in text.splitlines():
        if kind == "code":
            if line.startswith("```"):
                flush()
            else:
                lines.append(line)
            continue
        heading = re.match(r"^(#{1,5}) (.*)$", line)
        if line.startswith("```"):
            flush()
            kind = "code"
        elif heading:
            flush()
            level = min(len(heading.group(1)) + shift, 6)
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif not line.strip():
            flush()
        else:
            now = "list" if line.startswith("- ") else "table" if line.startswith("|") else "text"
            if now == "text" and kind == "list" and line.startswith("  "):
                lines[-1] += " " + line.strip()  # a list item's continued line
                continue
            if now != kind:
                flush()
                kind = now
            lines.append(line[2:] if now == "list" else line)
    flush()
    return "\n".join(out)
