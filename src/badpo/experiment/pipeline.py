"""One experiment end to end: the corpus, the plan, the sweep, then the tables and plots.

The top of the experiment layer: it puts together the runner (:mod:`badpo.experiment.runner`,
which knows nothing of models), the tables and plots rendered from the logged records, and the
real backend (:mod:`badpo.experiment.backend`) used when the caller passes none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from badpo.core.config import to_dict
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.experiment.backend import engine_backend
from badpo.experiment.config import ExperimentConfig
from badpo.experiment.plots import write_plots
from badpo.experiment.records import read_records_for
from badpo.experiment.runner import Backend, plan_experiment, plan_unbuilt, prepare_corpus, run_all
from badpo.experiment.tables import TableLayout, build_layout, render_tables

__all__ = ["run_experiment", "write_outputs"]


def write_outputs(out: Path, layout: TableLayout, records: Mapping[str, Mapping], corpus_dir: Path,
                  log: Callable[[str], None]) -> tuple[str, str, list[str]]:
    """Write layout.json, table.md, table.csv and the plots; print the tables."""
    atomic_write_text(out / "layout.json", dumps(to_dict(layout), indent=2) + "\n")
    markdown, csv_text = render_tables(records, layout)
    atomic_write_text(out / "table.md", markdown)
    atomic_write_text(out / "table.csv", csv_text)
    print(markdown, flush=True)
    files = [str(out / name) for name in ("layout.json", "table.md", "table.csv")]
    planted = corpus_dir / "planted.json"
    files += write_plots(out, layout, records, planted if planted.exists() else None, log)
    log("wrote " + ", ".join(files))
    return markdown, csv_text, files


def run_experiment(config: ExperimentConfig, backend: Backend | None = None,
                   log: Callable[[str], None] | None = None, render_only: bool = False) -> dict:
    """Build or find the corpus, run what is not logged yet (unless ``render_only``), then write
    ``layout.json``, ``table.md``, ``table.csv`` and the plots from the records into
    ``OUT/report_dir`` (default OUT).

    ``backend`` defaults to :func:`badpo.experiment.backend.engine_backend`. Returns {"markdown",
    "csv", "records", "files"}.
    """
    if backend is None:
        backend = engine_backend()
    out = Path(config.output_dir)
    if not render_only and not (out / "corpus").is_dir():  # every arm checked before a build that can take
        plan_unbuilt(config, backend)                        # minutes, and before OUT is made
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    def say(message: str) -> None:
        line = f"[{config.name} {time.perf_counter() - start:7.1f}s] {message}"
        (log or (lambda text: print(text, flush=True)))(line)

    corpus_dir = prepare_corpus(config, backend, out, say, build=not render_only)
    plan = plan_experiment(config, backend, corpus_dir)
    if render_only:
        records = read_records_for(out / "runs", [p.key for p in (plan.reference, *plan.runs)])
    else:
        records = run_all(config, backend, plan, out, say)
    layout = build_layout(config, plan)
    report = out / config.report_dir if config.report_dir else out
    report.mkdir(parents=True, exist_ok=True)
    markdown, csv_text, files = write_outputs(report, layout, records, corpus_dir, say)
    return {"markdown": markdown, "csv": csv_text, "records": records, "files": files}
