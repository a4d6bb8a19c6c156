"""The stage times of one `badpo experiment` call as a record (issue 50 item 2's timed runs).

Reads what the call left: the runner's log (its lines, each prefixed with the wall clock, as
`... 2>&1 | ts`-like stamping writes them, and `/usr/bin/time -v`'s lines at the end) and the run
records it wrote; writes one JSON with the total wall time and peak memory of the call, the
corpus step, and each run's own wall time, key and provenance.

    /usr/bin/time -v badpo experiment CONFIG ... 2>&1 | <stamp each line> > LOG
    python experiments/scripts/stage_times.py LOG RUNS_DIR OUT.json [--target-min 35] [--note "..."]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from badpo.experiment.records import read_records

_DONE = re.compile(r"\[\d+/\d+\] (?P<label>.+?) \((?P<key>[\w.-]+)\): done in (?P<seconds>[\d.]+) s")
_SKIPPED = re.compile(r"\[\d+/\d+\] (?P<label>.+?) \((?P<key>[\w.-]+)\): logged, skipped")
_CORPUS = re.compile(r"corpus: (?P<what>built in (?P<seconds>[\d.]+) s|reusing .*)")


def _clock(line: str) -> int | None:
    """Seconds since midnight of a line's stamp (HH:MM:SS at its start), or None."""
    match = re.match(r"(\d\d):(\d\d):(\d\d) ", line)
    return None if match is None else int(match[1]) * 3600 + int(match[2]) * 60 + int(match[3])


def stage_times(log: Path, runs: Path) -> dict:
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    stamps = [s for s in map(_clock, lines) if s is not None]
    record: dict = {"stamped_wall_s": (stamps[-1] - stamps[0]) % 86400 if stamps else None, "runs": []}
    records = read_records(runs) if runs.is_dir() else {}
    for line in lines:
        if (done := _DONE.search(line)) is not None:
            run = records.get(done["key"], {})
            record["runs"].append({"label": done["label"], "key": done["key"], "wall_s": float(done["seconds"]),
                                   "provenance": run.get("provenance")})
        elif (skipped := _SKIPPED.search(line)) is not None:
            record["runs"].append({"label": skipped["label"], "key": skipped["key"], "wall_s": 0.0,
                                   "logged_before": True})
        elif (corpus := _CORPUS.search(line)) is not None:
            record["corpus"] = (float(corpus["seconds"]) if corpus["seconds"] else "reused")
        elif "Elapsed (wall clock) time" in line:
            parts = [float(p) for p in line.rsplit(" ", 1)[-1].split(":")]
            record["wall_s"] = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
        elif "Maximum resident set size" in line:
            record["peak_rss_mib"] = int(line.rsplit(" ", 1)[-1]) / 1024
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("runs", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--target-min", type=float, default=None)
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    record = stage_times(args.log, args.runs)
    if args.target_min is not None and record.get("wall_s") is not None:
        record["target_min"] = args.target_min
        record["met"] = record["wall_s"] <= 60 * args.target_min
    record["note"] = args.note
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in record.items() if k != "runs"}, indent=1))
    for run in record["runs"]:
        print(f"  {run['label']}: {run['wall_s'] / 60:.1f} min")


if __name__ == "__main__":
    main()
