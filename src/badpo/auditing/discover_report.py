"""What ``badpo audit DATA --discover`` prints and writes: the ranked table of what was found, the
``attributes=[...]`` line for ``badpo train``, "nothing found" with the smallest effect the data
could have shown, what cannot be tested, and with ``--report DIR`` the files ``discover.json``,
``discover.csv`` (every tested candidate), ``discover-forest.png`` and ``discover.md``.

The statistics are :mod:`badpo.auditing.discover`'s; this module reads a data source
(:mod:`badpo.data.sources`) and formats. The plot is drawn on an Agg canvas without pyplot.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from badpo.auditing.discover import POWER, Discovery, DiscoverySettings, Finding, discover
from badpo.auditing.forest import labels_as_text, plot_label
from badpo.auditing.report_html import discover_html
from badpo.core.file_sets import commit_files, folder_lock, recover_files
from badpo.core.judgments import check_duplicates_option, duplicates_line, handle_duplicates
from badpo.core.label_counts import LabelTally, estimates_line
from badpo.core.outputs import Inputs, check_not_input, check_writable_folder, spreadsheet_safe
from badpo.data.judgment_stream import judgment_stream
from badpo.data.sources import ColumnMap, read_judgment_source

__all__ = ["REPORT_FILES", "add_discover_option", "discover_command", "discover_source", "format_discovery",
           "plot_discovery", "write_discovery"]

REPORT_FILES = ("discover.json", "discover.csv", "discover-forest.png", "discover.md", "report.html")
_SHOWN_ROWS = 12  # candidates in the forest plot when nothing is found


def _signed(value: float) -> str:
    return f"{value:+.2f}"


def _interval(triple: tuple[float, float, float] | None) -> str:
    if triple is None:
        return "-"
    estimate, low, high = triple
    return f"{_signed(estimate)} [{_signed(low)}, {_signed(high)}]"


def _spread(finding: Finding) -> str:
    if finding.spread is None:
        return "-"
    tau, low, high = finding.spread
    return f"{tau:.2f} [{low:.2f}, {high:.2f}]"


def _matched(finding: Finding) -> str:
    if finding.pairs_matched is None:
        return "- (no edit)"
    if finding.matched is None:
        return "- (0 pairs)"
    return f"{_interval(finding.matched)} ({finding.pairs_matched})"


def _members(members: tuple[str, ...], shown: int = 5) -> str:
    more = f" and {len(members) - shown} more" if len(members) > shown else ""
    return ", ".join(members[:shown]) + more if members else "-"


def _table(findings: tuple[Finding, ...]) -> list[str]:
    header = ["rank", "attribute", "effect [95% CI]", "held-out", "joint", "matched (pairs)", "spread tau [95% CI]",
              "level", "pairs", "annotators", "also"]
    rows = [[str(i), f.name, _interval(f.effect), _signed(f.heldout[0]), _signed(f.joint[0]), _matched(f), _spread(f),
             "-" if f.level is None else _signed(f.level), str(f.pairs), str(f.annotators),
             _members(f.members)] for i, f in enumerate(findings, start=1)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return [lines[0], "-" * len(lines[0]), *lines[1:]]


def _untestable(result: Discovery) -> list[str]:
    absent = [name for name, reason in result.untestable if reason.startswith("0 pairs")]
    few = [(name, reason) for name, reason in result.untestable if not reason.startswith("0 pairs")]
    lines = []
    if few:
        lines += ["", "cannot be tested (too few pairs whose sides differ in it):"]
        lines += [f"  - {name}: {reason}" for name, reason in few]
    if absent:
        lines += ["", f"never differs between the two sides of a pair here: {', '.join(absent)}"]
    return lines


def _nothing(result: Discovery) -> list[str]:
    power = result.power()
    settings = result.settings
    if power is None:
        return ["nothing can be tested: no candidate differs between the two sides of at least "
                f"{settings.min_pairs} pairs in each half of the prompts ({result.n_pairs} pairs in all); "
                "this is not evidence that the annotators are unbiased"]
    untested = (f"; the {len(result.untestable)} candidate(s) below that could not be tested or never differ"
                if result.untestable else "")
    screened = " and the data's words and two-word phrases" if settings.screen else ""
    return [f"nothing found: no candidate's effect was found on the discovery half and confirmed on the "
            f"held-out half (false discovery rate {settings.alpha:g} on each).",
            f"the smallest effect these data could have shown, on the {len(result.tested)} tested candidates only "
            f"(power {POWER:.0%} on both halves): |log-odds| >= {power['best_mde']:.2f} on {power['best']} "
            f"({power['best_pairs']} pairs); median over them {power['median_mde']:.2f}.",
            f"not covered: a bias on an attribute no candidate carries (only the library's attributes{screened} "
            f"were tested){untested}; and a smaller bias. Nothing found is not evidence that the annotators are "
            "unbiased."]


def format_discovery(result: Discovery) -> str:
    """The text ``badpo audit --discover`` prints."""
    settings = result.settings
    found = sum(t.discovered for t in result.tested)
    confirmed = sum(t.confirmed for t in result.tested)
    lines = [
        f"badpo audit --discover: {result.n_judgments:,} judgments, {result.n_pairs:,} pairs, "
        f"{result.n_prompts:,} prompts, {result.n_annotators:,} annotators",
        f"candidates: {result.n_library} from the library, {result.n_data:,} from the data screen (n-grams "
        f"differing on >= {2 * settings.min_pairs} pairs); {len(result.tested):,} tested (>= {settings.min_pairs} "
        "differing pairs in each half of the prompts)",
        f"discovery half: {found} found (Benjamini-Hochberg, FDR {settings.alpha:g}); held-out half: "
        f"{confirmed} confirmed; {len(result.findings)} cluster(s) reported",
        "",
    ]
    if result.findings:
        lines += [f"found {len(result.findings)} attribute(s) the annotators are biased on:",
                  *_table(result.findings), ""]
        lines += [f"caution, {f.name}: {f.caution}" for f in result.findings if f.caution]
        lines += ["" if any(f.caution for f in result.findings) else None,
                  "effect: log-odds that the side carrying it wins, over all pairs whose sides differ in it "
                  "(pairs as clusters);", "  a quality difference that goes with the attribute is in it too; "
                  "matched: on pairs identical but for it (quality held);",
                  "  spread: sd of the annotators' joint estimates beyond their noise; "
                  "level: where bias.init: conditional starts theta",
                  "", "declare them (badpo train -c CONFIG '...' or badpo.train(..., attributes=[...])):",
                  f"  {result.attributes_line()}"]
        lines = [line for line in lines if line is not None]
    else:
        lines += _nothing(result)
    lines += _untestable(result) + [f"note: {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


@labels_as_text
def plot_discovery(result: Discovery, path: Path) -> None:
    """The findings (or, when there are none, the best candidates) with their 95% intervals: all
    data (black), held-out half (blue square), matched pairs (hollow), level +- spread (grey band)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if result.findings:
        rows = [(f.name, f.effect, f.heldout, f.matched, f.level, f.spread) for f in result.findings]
        title = f"{len(rows)} attribute(s) found and confirmed on the held-out half"
    else:
        best = sorted(result.tested, key=lambda t: t.p_discovery)[:_SHOWN_ROWS]
        rows = [(t.name, (t.effect, t.effect - t.mde, t.effect + t.mde), None, None, None, None) for t in best]
        title = "nothing found: the best-supported candidates"
    figure = Figure(figsize=(7.5, 1.6 + 0.4 * max(len(rows), 1)), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    axes.axvline(0.0, color="0.5", linewidth=0.8, linestyle=":")
    for y, (_name, effect, heldout, matched, level, spread) in enumerate(reversed(rows)):
        if level is not None and spread is not None:
            axes.fill_betweenx([y - 0.3, y + 0.3], level - spread[0], level + spread[0], color="0.85", zorder=1)
        axes.hlines(y, effect[1], effect[2], color="black", linewidth=1.2, zorder=2)
        axes.plot(effect[0], y, "o", color="black", markersize=4, zorder=3)
        if heldout is not None:
            axes.hlines(y - 0.15, heldout[1], heldout[2], color="C0", linewidth=1, zorder=2)
            axes.plot(heldout[0], y - 0.15, "s", color="C0", markersize=3, zorder=3)
        if matched is not None:
            axes.hlines(y + 0.15, matched[1], matched[2], color="C3", linewidth=0.8, zorder=2)
            axes.plot(matched[0], y + 0.15, "o", mfc="white", color="C3", markersize=4, zorder=3)
    axes.set_yticks(range(len(rows)))
    axes.set_yticklabels([plot_label(r[0]) for r in reversed(rows)], fontsize=7)
    axes.set_ylim(-1, max(len(rows), 1))
    axes.set_xlabel("log-odds that the side carrying the attribute wins")
    legend = ("black: all data, 95% interval; blue: held-out half; red circle: matched pairs; grey: level +- "
              "spread across annotators" if result.findings else
              "each: the effect on all data +- the smallest effect the data could have shown (80% power; "
              "these candidates only)")
    axes.set_title(f"badpo audit --discover: {title}\n{legend}", fontsize=8)
    figure.tight_layout()
    figure.savefig(path)


def check_report_folder(directory: str | Path, overwrite: bool, inputs: Inputs = ()) -> Path:
    """The report folder, once known to take this report: a file there is refused, and so is a
    previous report's file unless ``overwrite``, and a report file that is one of ``inputs``."""
    out = Path(directory)
    for name in REPORT_FILES:
        check_not_input(out / name, "--report", inputs)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--report {directory}: is a file, not a folder")
    check_writable_folder(out, "--report", directory)
    present = [name for name in REPORT_FILES if (out / name).exists()]
    if present and not overwrite:
        raise FileExistsError(f"--report {directory}: holds {', '.join(present)}; give --overwrite to "
                              "replace them, or choose another folder")
    return out


def write_discovery(result: Discovery, directory: str | Path, overwrite: bool = False,
                    source: str | None = None) -> list[Path]:
    """Write :data:`REPORT_FILES` into ``directory`` (created) as one set
    (:func:`badpo.core.file_sets.commit_files`: a kill leaves the old set or the new one, never a
    mix); returns their paths. Call it under :func:`badpo.core.file_sets.folder_lock`, as
    :func:`discover_source` does, so that a second discover into the folder is refused."""
    out = check_report_folder(directory, overwrite)
    out.mkdir(parents=True, exist_ok=True)

    def write(staging: Path) -> None:
        document = {"format": "badpo-discover/1", "source": source, **result.to_dict()}
        (staging / "discover.json").write_text(json.dumps(document, indent=2, sort_keys=True, allow_nan=False)
                                               + "\n", encoding="utf-8")
        columns = [f.name for f in dataclasses.fields(result.tested[0])] if result.tested else ["name"]
        with open(staging / "discover.csv", "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(columns)
            for row in sorted(result.tested, key=lambda t: t.p_discovery):
                writer.writerow(["" if v is None else spreadsheet_safe(v) for v in dataclasses.astuple(row)])
        plot_discovery(result, staging / "discover-forest.png")
        printed = format_discovery(result)
        (staging / "discover.md").write_text(f"# badpo audit --discover\n\n```\n{printed}```\n\n"
                                             "Files: discover.json (everything: every cluster's members in full), "
                                             "discover.csv (every tested candidate, best first), "
                                             "discover-forest.png (the plot), report.html (all of it in one "
                                             "page).\n", encoding="utf-8")
        (staging / "report.html").write_text(discover_html(result, printed, staging / "discover-forest.png", source),
                                             encoding="utf-8")

    commit_files(out, "discover", write)
    return [out / name for name in REPORT_FILES]


def _stderr_progress() -> Callable[[str], None]:
    start = time.monotonic()
    return lambda line: print(f"discover [{time.monotonic() - start:5.0f} s] {line}", file=sys.stderr, flush=True)


def discover_source(source: Any, report_dir: str | Path | None = None, *, data_split: str | None = None,
                    columns: ColumnMap = ColumnMap(), overwrite: bool = False,
                    settings: DiscoverySettings | None = None, progress: bool = True,
                    duplicates: str = "keep") -> tuple[Discovery, str]:
    """``badpo audit DATA --discover``: read any source of :mod:`badpo.data.sources`, keep or drop
    its exact duplicate judgments (``duplicates``, as the declared audit; said in a line when there
    are any), screen it, write the report when ``report_dir`` is given; returns (result, printed text)."""
    if report_dir is None:
        return _discovered(source, data_split, columns, settings, progress, duplicates)[:2]
    check_report_folder(report_dir, overwrite, [("DATA", source)])  # before the data is read
    with folder_lock(report_dir, "--report"):  # a second discover into the folder is refused
        recover_files(report_dir, "discover")  # a set a killed discover had committed
        check_report_folder(report_dir, overwrite)
        result, text, origin = _discovered(source, data_split, columns, settings, progress, duplicates)
        write_discovery(result, report_dir, overwrite, origin)
    return result, text + f"\nreport: {', '.join(REPORT_FILES)} in {report_dir}\n"


def _discovered(source: Any, data_split: str | None, columns: ColumnMap, settings: DiscoverySettings | None,
                progress: bool, duplicates: str) -> tuple[Discovery, str, str]:
    """(result, printed text, the data's origin) of the screen of ``source``. A JSONL file is read
    twice and never held (:mod:`badpo.data.judgment_stream`); any other source is read whole and its
    rows let go as the screen takes them."""
    check_duplicates_option(duplicates)  # before anything is read
    stream = judgment_stream(source, columns, data_split)
    if stream is None:
        loaded = read_judgment_source(source, data_split, columns)
        origin, forms = loaded.origin, loaded.forms
        rows, repeated = handle_duplicates(loaded.rows, duplicates, origin)
        del loaded  # its rows are the screen's to let go (below)
        judgments = _handed_over(rows)
    else:
        again = stream.check()
        origin, repeated, forms = stream.origin, duplicates_line(again, duplicates, stream.origin), stream.forms
        judgments = stream.judgments(frozenset(again) if duplicates == "drop" else frozenset())
    seen = LabelTally()  # the labels of every judgment handed over, ties included
    result = discover(_wins(judgments, seen), settings or DiscoverySettings(),
                      _stderr_progress() if progress else None)
    result = dataclasses.replace(result, labels=seen.counts(forms).to_dict())  # --json: ties and labels
    labels = estimates_line(seen.counts(), "the screen")
    return result, "".join(f"{line}\n" for line in (repeated, labels) if line) + format_discovery(result), origin


def _wins(judgments: Iterator, seen: LabelTally) -> Iterator:
    """The judgments without the ties, which the screen cannot read yet (a tie prefers neither side);
    every label is counted in ``seen`` so that the printed text says what was left out."""
    for judgment in judgments:
        seen.add(judgment)
        if not judgment.tie:
            yield judgment


def _handed_over(rows: list) -> Iterator:
    """``rows`` one by one, each dropped from the list as it is handed over: the screen keeps the
    answers it reads (compressed, :class:`badpo.auditing.packed_texts.PackedTexts`), so the
    judgments read from the file need not stay in memory beside them."""
    for index in range(len(rows)):
        row, rows[index] = rows[index], None
        yield row


def add_discover_option(parser: Any) -> None:
    """``--discover`` on ``badpo audit``'s parser."""
    parser.add_argument("--discover", action="store_true",
                        help="find which attributes the annotators are biased on (a library of candidates and "
                             "the data's n-grams; --report DIR: table, plot) instead of auditing declared ones "
                             "(docs/discover.md)")


def discover_command(args: Any, columns: ColumnMap) -> int:
    """``badpo audit DATA --discover`` from the parsed command line (``badpo.cli``'s audit parser):
    the options that apply to declared attributes are refused, one line naming them."""
    from badpo.core.config import ConfigError
    from badpo.core.outputs import check_output_file

    others = [flag for flag, given in (("--attribute", args.attribute), ("--example", args.example),
                                       ("--stream", args.stream), ("--run", args.run_dir),
                                       ("--tokenizer", args.tokenizer), ("--pseudonymise", args.pseudonymise),
                                       ("--alpha", args.alpha is not None), ("--pool-size", args.pool_size is not None),
                                       ("--follow", args.follow is not None)) if given]
    if others:
        raise ConfigError(f"--discover proposes the attributes itself and names no annotator; {', '.join(others)} "
                          "apply to the audit of declared attributes")
    if not args.data:
        raise ConfigError("--discover needs DATA (judgments: a file, a folder or a Hub dataset id)")
    if args.json:
        check_output_file(args.json, "--json", args.overwrite, [("DATA", args.data)])
    result, text = discover_source(args.data, args.report, data_split=args.split, columns=columns,
                                   overwrite=args.overwrite, settings=DiscoverySettings(seed=args.seed),
                                   duplicates=args.duplicates)
    print(text, end="")
    if args.json:
        from badpo.core.jsonio import atomic_write_text

        atomic_write_text(args.json, result.to_json())
    return 0
