"""experiments/scripts/stage_times.py: a timed experiment call's log and records as one record, by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "scripts" / "stage_times.py"


def _module():
    spec = importlib.util.spec_from_file_location("stage_times", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stages_of_a_stamped_log_by_hand(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "dpo-seed1-ab.json").write_text(json.dumps({"schema": 1, "key": "dpo-seed1-ab",
                                                          "provenance": {"source": {"commit": "c0"}}}))
    log = tmp_path / "log"
    log.write_text("23:59:50 [x 0.0s] corpus: reusing OUT/corpus (smol-signed)\n"
                   "23:59:51 [x 1.0s] [0/1] reference (reference-aa): logged, skipped\n"
                   "00:10:10 [x 620.0s] [1/1] DPO seed 1 (dpo-seed1-ab): done in 619.5 s\n"
                   "00:10:11 \tElapsed (wall clock) time (h:mm:ss or m:ss): 10:21.50\n"
                   "00:10:11 \tMaximum resident set size (kbytes): 2097152\n")
    record = _module().stage_times(log, runs)
    assert record["stamped_wall_s"] == 621  # across midnight
    assert record["corpus"] == "reused" and record["wall_s"] == 621.5 and record["peak_rss_mib"] == 2048
    assert record["runs"] == [
        {"label": "reference", "key": "reference-aa", "wall_s": 0.0, "logged_before": True},
        {"label": "DPO seed 1", "key": "dpo-seed1-ab", "wall_s": 619.5, "provenance": {"source": {"commit": "c0"}}}]
