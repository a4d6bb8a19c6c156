"""experiments/scripts/paper_tables.py: the paper's LaTeX tables as the Markdown that `python -m experiments
reproduce` sets beside each rebuilt table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "scripts" / "paper_tables.py"
spec = importlib.util.spec_from_file_location("paper_tables", SCRIPT)
paper_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paper_tables)

TABLE = r"""
\begin{table}[t]
\caption{Two arms, \emph{mean} over seeds; see Table~\ref{tab:votes}.}
\label{tab:names_v3}
\begin{tabular}{@{}lcc@{}}
\toprule
\textbf{Method} & $p(\text{woman})$ & \textbf{Removed} \\ % a comment & not a cell
\midrule
\multicolumn{3}{@{}l}{\emph{Qwen2.5-0.5B}} \\
\method{} ($\bar\theta+\varepsilon_k$) & $0.542 \pm 0.011$ & $91 \pm {<}1\%$ \\
DPO & 0.964 & --- \\
\bottomrule
\end{tabular}
\end{table}
"""


def test_a_latex_table_becomes_its_caption_and_a_markdown_table():
    """Every construct the paper's tables use: bold headers, math, the method macro, an escaped
    percent sign next to a comment, a group row spanning the columns, an em dash."""
    markdown = paper_tables.paper_tables(TABLE, labels=("names_v3",))["names_v3"]
    assert markdown.splitlines() == [
        "Two arms, mean over seeds; see Table votes. (paper, Table 1)",  # its number, as the source
        "",
        "| Method | p(woman) | Removed |",
        "|---|---|---|",
        "| **Qwen2.5-0.5B** |  |  |",
        "| BA-DPO (θ̄+ε_k) | 0.542 ± 0.011 | 91 ± <1% |",
        "| DPO | 0.964 | — |",
    ]


def test_a_table_is_numbered_as_latex_numbers_it():
    """table and table* share one counter, in source order: the caption cites the paper's number."""
    unlabelled = TABLE.replace(r"\label{tab:names_v3}", "").replace("{table}", "{table*}")
    commented = "% \\begin{table} a table left out \\end{table}\n"
    markdown = paper_tables.paper_tables(commented + unlabelled + TABLE, labels=("names_v3",))["names_v3"]
    assert markdown.splitlines()[0].endswith("(paper, Table 2)")


def test_a_table_missing_from_the_paper_is_named():
    with pytest.raises(ValueError, match=r"not found in the paper: \['votes'\]"):
        paper_tables.paper_tables(TABLE, labels=("names_v3", "votes"))


def test_the_shipped_file_has_a_section_for_every_result_table():
    """docs/paper_tables.md is the script's output: one `## label` section per result table,
    each with a Markdown table (read back with the reproduce report's own parser)."""
    from experiments.reproduce import paper_sections

    sections = paper_sections(Path(__file__).resolve().parents[2] / "docs" / "paper_tables.md")
    assert list(sections) == list(paper_tables.RESULT_TABLES)
    assert all("\n|---|" in text for text in sections.values())
