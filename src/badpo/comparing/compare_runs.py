"""``badpo compare RUN... [--reference REF] [--baseline RUN] [--out DIR]``: evaluated runs side by side.

Each RUN is a run folder that ``badpo evaluate`` has read (its ``readouts.json``), or a readouts
file written with ``evaluate --out``. Beside the readouts, a run folder gives the run's method
(``run.json``, else ``config.yaml``), its theta (``theta.json``), the audit of its labels
(``audit.json``: the offline estimates) and whether theta had settled (``run.json``); a folder
that BADPOTrainer (TRL) saved gives the method and the settling from its record instead
(``badpo_run.json``, :mod:`badpo.run_folder.external`); all of them are read through
:class:`badpo.run_folder.saved.SavedRun`, and a folder is a run folder as the engine says
(:func:`badpo.run_folder.layout.is_run_folder`). The
baseline is the run whose method is ``dpo`` (or ``--baseline``); the reference is the reference
side of the baseline's evaluation (or ``--reference REF``, a run whose policy stands for it). The
statistics are :mod:`badpo.comparing.comparison`; this module reads the files, prints a table per
readout compared (the rates on generated answers and, when every run read the names, the rates
from first-name probabilities) and the verdicts, and writes ``compare.json``, ``compare.md``,
``compare.png`` (and ``theta.png`` when a run learned theta_k per annotator) into ``--out DIR``.
Nothing is written into a run folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from badpo.comparing.comparison import RunRecord, compare_records, method_label
from badpo.comparing.intervals import DRAWS, LEVEL, SEED
from badpo.comparing.plots import plot_rates, plot_theta
from badpo.comparing.refusals import DATA_FILE, reasons_not_comparable, refuse_same_run
from badpo.core.html_page import html_image, html_page, html_pre, markdown_html
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.core.outputs import check_writable_folder
from badpo.engine.model_card import CARD_FILE, with_evaluation
from badpo.readouts.table import beside_readouts, compared_heads
from badpo.run_folder.layout import POLICY, READOUTS_FILE
from badpo.run_folder.saved import SavedRun, read_json_object

__all__ = ["COMPARE_FILES", "Comparison", "compare_runs", "format_comparison", "format_markdown", "load_run"]

COMPARE_FILES = ("compare.json", "compare.md", "compare.png", "theta.png", "report.html")


@dataclass(frozen=True)
class Comparison:
    """What ``compare`` found: the JSON-ready comparison, its printed text, the files written."""

    comparison: dict
    text: str
    files: tuple[Path, ...] = ()

    def __str__(self) -> str:
        return self.text


def _beside(folder: Path | None, method: str | None) -> tuple[dict, list[str]]:
    """theta.json, audit.json, run.json's theta_convergence and the data fingerprint of a run
    folder (:class:`badpo.run_folder.saved.SavedRun`), with a note per file that is missing where
    the reader would look for it."""
    found: dict = {"theta": None, "offline": None, "convergence": None, "data": None}
    if folder is None:
        return found, ["a readouts file outside its run folder: no method, theta or audit beside it"]
    saved = SavedRun(folder)
    found["data"] = saved.data()
    notes = [] if found["data"] is not None else [
        f"no {DATA_FILE} in {folder}: its training data cannot be checked against the other runs'"]
    if not saved.external and saved.summary() is None:
        source = ("its method is read from config.yaml" if saved.has_config() else
                  "nor config.yaml: its method is not known, and it is named by its folder")
        notes.append(f"no run.json in {folder} (an unfinished run, or a copy without it): {source}, and whether "
                     "theta settled is not known")
    found["theta"] = saved.theta()
    if found["theta"] is None and (method or "").startswith("ba_"):
        notes.append(f"no theta.json in {folder}: method {method} learns theta, but its theta columns are empty")
    found["offline"] = saved.audit()
    if found["offline"] is None and found["theta"] is not None and found["theta"].get("variant") != "none":
        notes.append(f"no audit.json in {folder}: theta_bar is shown without the offline estimate")
    found["convergence"] = saved.convergence()
    return found, notes


def load_run(path: str | os.PathLike) -> RunRecord:
    """One evaluated run: a run folder holding readouts.json, or a readouts file. A missing or
    unreadable file is a one-line error naming it."""
    given = Path(path)
    if given.is_dir():
        folder, source = given, given / READOUTS_FILE
        if not source.is_file():
            raise FileNotFoundError(f"{path}: no {READOUTS_FILE}; run `badpo evaluate {path}` first")
    elif given.is_file():
        source = given
        folder = given.parent if given.name == READOUTS_FILE and SavedRun(given.parent).is_run() else None
    else:
        raise FileNotFoundError(f"{path}: no such run folder or readouts file")
    readouts = read_json_object(source, "the run's readouts")
    read, objects = compared_heads()
    for key in ("inputs", *sorted(objects)):
        if key in readouts and not isinstance(readouts[key], dict):
            raise ValueError(f"{source}: {key} is not an object")
    if not read & {key.partition("/")[0] for key in readouts}:
        raise ValueError(f"{source}: holds none of the readouts badpo compare reads ({', '.join(sorted(read))}); "
                         "is it `badpo evaluate`'s?")
    method = SavedRun(folder).method() if folder is not None else None
    beside, notes = _beside(folder, method)
    name = folder.name if folder is not None else source.stem
    return RunRecord(label=method_label(method) or name, path=str(path), method=method, readouts=readouts,
                     source=str(source), notes=tuple(notes), **beside)


def _unique_labels(records: list[RunRecord]) -> list[RunRecord]:
    """Two runs of one method are told apart by their folder (then by their path)."""
    labels = [r.label for r in records]
    out = []
    for record in records:
        if labels.count(record.label) > 1:
            record = replace(record, label=f"{record.label} [{Path(record.path).name}]")
        out.append(record)
    if len({r.label for r in out}) < len(out):
        out = [replace(r, label=f"{r.label} [{r.path}]") if [o.label for o in out].count(r.label) > 1 else r
               for r in out]
    return out


def _baseline(records: list[RunRecord], baseline: str | os.PathLike | None) -> tuple[list[RunRecord], int | None]:
    """The runs (a --baseline not among them comes first) and the baseline's index: --baseline,
    else the one DPO run; None when there is no DPO run, an error when there are several."""
    if baseline is not None:  # a run already given, under any spelling, is that run
        named = load_run(baseline)
        for i, record in enumerate(records):
            if Path(record.source).resolve() == Path(named.source).resolve():
                return records, i
        return [named, *records], 0
    dpo = [i for i, record in enumerate(records) if record.method == "dpo"]
    if len(dpo) > 1:
        raise ValueError(f"{records[dpo[0]].path} and {records[dpo[1]].path} are both DPO runs; name the one whose "
                         "shift the others remove: --baseline RUN")
    return records, (dpo[0] if dpo else None)


def check_out(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """``--out DIR``, checked before anything is read: outside every run folder (compare writes
    into none), and its compare files are replaced only with ``overwrite``."""
    folder = Path(out).expanduser().absolute()
    for parent in (folder, *folder.parents):
        if SavedRun(parent).is_run():
            raise ValueError(f"--out {out}: inside the run folder {parent}; give a folder outside every run")
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"--out {out}: is a file; give a folder")
    existing = [name for name in COMPARE_FILES if (folder / name).exists()]
    if existing and not overwrite:
        raise FileExistsError(f"--out {out}: holds {', '.join(existing)} already; give --overwrite to replace "
                              "them, or another folder")
    check_writable_folder(folder, "--out", out)
    return folder


def compare_runs(runs: Sequence[str | os.PathLike], reference: str | os.PathLike | None = None,
                 baseline: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
                 overwrite: bool = False, level: float = LEVEL, draws: int = DRAWS, seed: int = SEED,
                 force: bool = False) -> Comparison:
    """Read the runs, refuse what is not comparable (:mod:`badpo.comparing.refusals`; with
    ``force`` compare anyway, saying so at the top), compare them
    (:func:`badpo.comparing.comparison.compare_records`) and, with ``out``, write compare.json,
    compare.md, compare.png (and theta.png) there."""
    if not runs:
        raise ValueError("give at least one evaluated run folder")
    folder = check_out(out, overwrite) if out is not None else None
    given = [load_run(run) for run in runs]
    refuse_same_run(given)
    records, index = _baseline(given, baseline)
    reference_record = load_run(reference) if reference is not None else None
    refuse_same_run([*records, *([reference_record] if reference_record is not None else [])])
    reasons = reasons_not_comparable(records, reference_record)
    if reasons and not force:
        raise ValueError(f"{reasons[0]}; --force compares them anyway (the verdict then says so at its top)")
    if reference_record is not None:
        reference_record = replace(reference_record, label=f"reference ({Path(reference_record.path).name})")
    result = {"forced": reasons, **compare_records(_unique_labels(records), index, reference_record, level, draws,
                                                   seed)}
    files: list[Path] = []
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        for name in COMPARE_FILES:
            (folder / name).unlink(missing_ok=True)  # checked above: only with overwrite
        atomic_write_text(folder / "compare.json", dumps(result, indent=1) + "\n")
        markdown = format_markdown(result)
        atomic_write_text(folder / "compare.md", markdown)
        plot_rates(result, folder / "compare.png")
        files = [folder / "compare.json", folder / "compare.md", folder / "compare.png"]
        if plot_theta(result, folder / "theta.png"):
            files.append(folder / "theta.png")
        report = folder / "report.html"  # the page quotes what compare prints, its own file listed
        atomic_write_text(report, compare_html(result, markdown, format_comparison(result, [*files, report]), files))
        files.append(report)
    cards, unwritable = update_model_cards(result)
    text = format_comparison(result, files) + (f"model cards updated: {', '.join(map(str, cards))}\n" if cards else "")
    text += "".join(f"model card not updated (the comparison stands): {note}\n" for note in unwritable)
    return Comparison(result, text, tuple(files))


def compare_html(comparison: Mapping, markdown: str, printed: str, plots: Sequence[Path]) -> str:
    """compare's ``report.html``: ``markdown`` (compare.md: the tables, verdicts and notes, its title
    left out), the plots, and the printed comparison, in one self-contained page
    (:mod:`badpo.core.html_page`)."""
    sections = [markdown_html(markdown.split("\n", 1)[1]),
                *(html_image(path, path.stem) for path in plots if path.suffix == ".png"),
                "<h2>What <code>badpo compare</code> printed</h2>", html_pre(printed)]
    return html_page("Did BA-DPO remove the bias?", sections, f"badpo compare: {comparison['reference']['source']}")


def update_model_cards(comparison: Mapping) -> tuple[list[Path], list[str]]:
    """Each compared run's model card (``policy/README.md``, written by ``badpo train``) gets the
    run's verdict lines in its evaluation section (:mod:`badpo.engine.model_card`); none under
    ``--force`` (the runs differ in more than their method), and a README that is not badpo's card
    is left alone. Returns the cards updated and, for each card that could not be written (a
    read-only run), a note naming it and why: the card is optional, the comparison is written."""
    if comparison["forced"] or comparison["baseline"] is None:
        return [], []
    updated, unwritable = [], []
    for row in comparison["runs"]:
        card = Path(row["path"]) / POLICY / CARD_FILE
        if row["baseline"] or not card.is_file():
            continue
        lines = [f"`badpo compare` against {comparison['baseline']}, intervals at {comparison['level']:.0%} over "
                 f"prompts ({comparison['reference']['source']}):", "",
                 *(f"- {line}" for line in row["verdict"].splitlines())]
        text = with_evaluation(card.read_text(encoding="utf-8"), lines)
        if text is None:
            continue
        try:
            atomic_write_text(card, text)
        except OSError as error:
            unwritable.append(f"{card} ({error.strerror or type(error).__name__})")
            continue
        updated.append(card)
    return updated, unwritable


# ------------------------------------------------------------------------------------ the text
def _cell(entry: Mapping | None, unit: str, signed: bool = False) -> str:
    if entry is None or entry.get("value") is None:
        return "-"
    digits = 1 if unit == "tokens" else 3
    fmt = f"{'+' if signed else ''}.{digits}f"
    if entry.get("low") is None:
        return f"{entry['value']:{fmt}}"
    return f"{entry['value']:{fmt}} [{entry['low']:{fmt}}, {entry['high']:{fmt}}]"


def _removed(entry: Mapping) -> str:
    removal = entry.get("removal")
    if removal is None:
        return ""
    if removal.get("measurable") is False:
        return "not measurable"
    if removal.get("value") is None:
        return "undefined"
    if removal.get("low") is None:
        return f"{100 * removal['value']:.0f}% (no interval)"
    return f"{100 * removal['value']:.0f}% [{100 * removal['low']:.0f}, {100 * removal['high']:.0f}]"


def _rate_rows(comparison: Mapping, key: str) -> list[tuple[str, list[str], list[str]]]:
    """(label, a rate cell per attribute, a removal cell per attribute) for the reference and each
    run, on the readout ``key`` of the comparison (``attributes``: on generated answers)."""
    attributes = comparison[key]
    rows = [(comparison["reference"]["label"], [_cell(a["reference"], a["unit"]) for a in attributes.values()],
             [""] * len(attributes))]
    for run in comparison["runs"]:
        rows.append((run["label"], [_cell(run[key][n].get("rate"), a["unit"]) for n, a in attributes.items()],
                     [_removed(run[key][n]) for n in attributes]))
    return rows


def _training_table(comparison: Mapping) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(headers, (label, cells) per run): the training effects every readout row shows beside the
    rates (:func:`badpo.readouts.table.beside_readouts`: KL, held-out accuracy, theta_bar)."""
    runs = comparison["runs"]
    columns = [column for beside in beside_readouts() for column in beside.columns([run[beside.key] for run in runs])]
    return [header for header, _ in columns], [(run["label"], [cells[i] for _, cells in columns])
                                               for i, run in enumerate(runs)]


def _notes(comparison: Mapping) -> list[str]:
    return [*comparison["notes"], *(f"{run['label']}: {note}" for run in comparison["runs"] for note in run["notes"])]


def _widths(headers: Sequence[str], *cells: Sequence[str]) -> list[int]:
    """Each column's width: its longest header or cell, and three spaces."""
    return [max(len(header), *(len(row[j]) for row in cells)) + 3 for j, header in enumerate(headers)]


def _table(title: str, headers: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]], first: int,
           widths: Sequence[int]) -> list[str]:
    def line(start: str, cells: Sequence[str]) -> str:
        return start + "".join(f"{c:>{w}}" for c, w in zip(cells, widths))

    return [line(f"{title:<{first}}", headers), *(line(f"  {label:<{first - 2}}", cells) for label, cells in rows)]


def _heading(comparison: Mapping) -> str:
    references = [a["reference"] for r in comparison["readouts"] for a in comparison[r["key"]].values()]
    n = next((reference["n"] for reference in references if (reference or {}).get("n")), None)
    baseline = f"removal of {comparison['baseline']}'s shift" if comparison["baseline"] else "no baseline"
    minimum = comparison.get("min_prompts", 1)
    intervals = (f"no intervals: {n} prompt{' is' if n == 1 else 's are'} too few to bootstrap (at least {minimum})"
                 if n is not None and n < minimum else
                 f"{comparison['level']:.0%} intervals by bootstrap over the {n or '?'} prompts ({comparison['draws']} "
                 f"resamples, seed {comparison['seed']})")
    return f"{intervals}; {baseline}; reference: {comparison['reference']['source']}"


def _forced(comparison: Mapping) -> list[str]:
    """The lines at the top of a comparison made with --force of runs that are not comparable."""
    if not comparison.get("forced"):
        return []
    return ["NOT COMPARABLE, compared with --force: " + "; ".join(comparison["forced"]),
            "every verdict below compares runs that differ in more than their method: do not read them as "
            "the removal of a bias"]


def _verdict_lines(comparison: Mapping) -> list[str]:
    """The verdict lines of every run: one per readout compared."""
    return [line for run in comparison["runs"] for line in run["verdict"].splitlines()]


def format_comparison(comparison: Mapping, files: Sequence[Path] = ()) -> str:
    """The printed comparison: per readout compared (the rates on generated answers; from
    first-name probabilities when every run read them) the rates with intervals and the removals;
    KL / held-out / theta, the verdict lines, notes, and the files written."""
    removal_title = f"removed of {comparison['baseline']}'s shift"
    tables = [(readout["title"], list(comparison[readout["key"]]), _rate_rows(comparison, readout["key"]))
              for readout in comparison["readouts"]]
    first = max([len(removal_title) if comparison["baseline"] else 0, *(len(title) for title, _, _ in tables),
                 *(len(label) + 2 for _, _, rows in tables for label, _, _ in rows)]) + 2
    lines = [*_forced(comparison), _heading(comparison)]
    for title, names, rows in tables:
        if not names:
            continue
        widths = _widths(names, *(rates for _, rates, _ in rows), *(removed for _, _, removed in rows))
        lines += _table(title, names, [(label, rates) for label, rates, _ in rows], first, widths)
        removals = [(label, removed) for label, _, removed in rows if any(removed)]
        if removals:
            lines += _table(removal_title, names, removals, first, widths)
    headers, training = _training_table(comparison)
    lines += _table("training effects", headers, training, first, _widths(headers, *(c for _, c in training)))
    lines += ["verdict", *(f"  {line}" for line in _verdict_lines(comparison))]
    notes = _notes(comparison)
    if notes:
        lines += ["notes", *(f"  {note}" for note in notes)]
    lines.append(f"files: {', '.join(str(f) for f in files)}" if files else
                 "files: none written (--out DIR writes compare.json, compare.md and compare.png)")
    return "\n".join(lines) + "\n"


def format_markdown(comparison: Mapping) -> str:
    """compare.md: per readout compared, the rates and removals as one table; KL / held-out /
    theta as another; the verdicts and the notes."""
    lines = ["# Comparison", "", *(f"**{line}**\n" for line in _forced(comparison)), _heading(comparison) + "."]
    for readout in comparison["readouts"]:  # every block a row opened, even with nothing read
        names = list(comparison[readout["key"]])
        header = ["run"] + [part for n in names for part in (n, "removed")]
        lines += ["", f"{readout['title'][0].upper()}{readout['title'][1:]} (`{readout['source']}`):", "",
                  "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for label, rates, removed in _rate_rows(comparison, readout["key"]):
            lines.append("| " + " | ".join([label, *(c for pair in zip(rates, removed) for c in pair)]) + " |")
    headers, training = _training_table(comparison)
    lines += ["", "| run | " + " | ".join(headers) + " |", "|" + "---|" * (len(headers) + 1)]
    lines += ["| " + " | ".join([label, *cells]) + " |" for label, cells in training]
    meanings = "; ".join(beside.meaning for beside in beside_readouts())
    lines += ["", meanings[0].upper() + meanings[1:] + "."]
    lines += ["", "## Verdict", ""] + [f"- {line}" for line in _verdict_lines(comparison)]
    notes = _notes(comparison)
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"
