"""Write the paper's result tables as Markdown, one ``## <label>`` section each, for the report of
``python -m experiments reproduce`` (its ``paper_tables`` key) and for reading beside ``docs/results.md``.

    python experiments/scripts/paper_tables.py ../shared/paper/ba-dpo-paper.tex docs/paper_tables.md

Only the LaTeX these tables use is translated (math, bold and italic text, ``\\multicolumn``
group rows, ``\\pm``, ``{<}``, the ``\\method`` macro); the numbers are copied as printed.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

# The tables of results (tab:datasets and tab:hyperparams describe the setup, not results).
RESULT_TABLES = ("names_v3", "multipref", "formatting", "offset", "attributes", "abl_names_v3",
                 "abl_multipref", "names_samples", "lora", "mistral", "votes")

SYMBOLS = [  # LaTeX -> text, applied in order
    (r"\method{}", "BA-DPO"), (r"\method", "BA-DPO"), (r"\bar\theta", "θ̄"), (r"\hat\theta", "θ̂"),
    (r"\theta", "θ"), (r"\varepsilon", "ε"), (r"\delta", "δ"), (r"\alpha", "α"), (r"\eta", "η"),
    (r"\sigma", "σ"), (r"\tau", "τ"), (r"\pm", "±"), (r"\times", "×"), (r"\approx", "≈"),
    (r"\le", "≤"), (r"\ge", "≥"), (r"\%", "%"), (r"\&", "&"), ("{<}", "<"), ("{>}", ">"),
    ("^-", "⁻"), ("^+", "⁺"), ("---", "—"), ("--", "–"), ("~", " "),
]


def latex_cell(text: str) -> str:
    """One tabular cell as plain text."""
    text = re.sub(r"\\(?:textbf|emph|textit|texttt|text|mathrm|textsc|mathbf)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\ref\{(?:[a-z]+:)?([^{}]*)\}", r"\1", text)  # Table~\ref{tab:x} -> Table x
    text = re.sub(r"\\(?:cite|citep|citet)\{[^{}]*\}", "", text)
    for latex, plain in SYMBOLS:
        text = text.replace(latex, plain)
    text = text.replace("$", "")
    text = re.sub(r"\\[,;:! ]", " ", text)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)  # any macro left: its name
    text = text.replace("{", "").replace("}", "")
    return re.sub(r"\s+", " ", text).strip()


def _rows(tabular: str) -> list[str]:
    body = re.sub(r"(?m)(?<!\\)%.*$", "", tabular)  # comments, not \%
    return [row.strip() for row in body.split(r"\\") if row.strip()]


def _tabular_markdown(tabular: str) -> list[str]:
    rows, width = [], 0
    for row in _rows(tabular):
        row = re.sub(r"\\(?:toprule|midrule|bottomrule|hline|cmidrule\{[^}]*\}(?:\([^)]*\))?)", "", row).strip()
        if not row:
            continue
        group = re.fullmatch(r"\\multicolumn\{(\d+)\}\{(?:[^{}]|\{[^{}]*\})*\}\{(.*)\}", row, re.S)
        if group:  # a group heading spanning the table: a bold first cell, the rest empty
            cells = [f"**{latex_cell(group.group(2))}**"] + [""] * (int(group.group(1)) - 1)
        else:
            cells = [latex_cell(cell) for cell in re.split(r"(?<!\\)&", row)]
        width = max(width, len(cells))
        rows.append(cells)
    out = []
    for i, cells in enumerate(rows):
        cells = cells + [""] * (width - len(cells))
        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        if i == 0:
            out.append("|" + "---|" * width)
    return out


def table_markdown(environment: str, number: int | None = None) -> str:
    """A LaTeX ``table`` environment as its caption and one Markdown table per tabular; ``number``,
    the table's number in the paper, ends the caption as its source, ``(paper, Table N)``."""
    caption = re.search(r"\\caption\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}", environment, re.S)
    tabulars = re.findall(r"\\begin\{tabular\}\{[^\n]*?\}\s*\n(.*?)\\end\{tabular\}", environment, re.S)
    if not tabulars:
        raise ValueError("no tabular environment in the table")
    out = [latex_cell(caption.group(1)) if caption else ""]
    if number is not None:
        out[0] = f"{out[0]} (paper, Table {number})".strip()
    for tabular in tabulars:
        out += [""] + _tabular_markdown(tabular)
    return "\n".join(out).strip()


def paper_tables(tex: str, labels=RESULT_TABLES) -> dict[str, str]:
    """label (without ``tab:``) -> its Markdown, for each result table found in the paper."""
    found = {}
    # LaTeX numbers table and table* environments together, in the order of the source (a table in a
    # comment is none)
    tex = re.sub(r"(?m)(?<!\\)%.*$", "", tex)
    environments = re.findall(r"\\begin\{table\*?\}.*?\\end\{table\*?\}", tex, re.S)
    for number, environment in enumerate(environments, start=1):
        label = re.search(r"\\label\{tab:([^}]+)\}", environment)
        if label and label.group(1) in labels:
            found[label.group(1)] = table_markdown(environment, number)
    missing = [label for label in labels if label not in found]
    if missing:
        raise ValueError(f"tables not found in the paper: {missing}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paper", help="the paper's LaTeX source")
    parser.add_argument("out", help="the Markdown file to write")
    args = parser.parse_args()
    tables = paper_tables(Path(args.paper).read_text(encoding="utf-8"))
    text = ["# The paper's result tables", "",
            f"Generated by `experiments/scripts/paper_tables.py` from `{Path(args.paper).name}`; the numbers are "
            "the paper's, copied as printed. `python -m experiments reproduce` sets each one beside its tiny-scale "
            "rebuild.", ""]
    for label in RESULT_TABLES:
        text += [f"## {label}", "", tables[label], ""]
    Path(args.out).write_text("\n".join(text), encoding="utf-8")


if __name__ == "__main__":
    main()
