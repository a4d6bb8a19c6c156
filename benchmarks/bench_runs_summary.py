"""Several runs of ``benchmarks/bench_vs_trl.py`` side by side: per run and configuration the
judgments per second over all timed blocks and the median block; the ratios against the same
run's TRL-precomputed on both readings; their median and range over the runs (JSON on stdout).

    python benchmarks/bench_runs_summary.py results/bench/gpu_smol_shape/new_r*.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

BASE = "trl/precomputed"


def one_run(path: Path) -> dict:
    report = json.loads(path.read_text())
    if len(report["sizes"]) != 1:
        raise SystemExit(f"{path}: {len(report['sizes'])} sizes; give reports of one size each")
    (size, entry), = report["sizes"].items()
    results = entry["results"]
    base_median = statistics.median(results[BASE]["block_s"])
    out = {}
    for config, result in results.items():
        median = statistics.median(result["block_s"])
        out[config] = {"judgments_per_s": result["judgments_per_s"], "median_block_s": median,
                       "over_trl_all_blocks": result["judgments_per_s"] / results[BASE]["judgments_per_s"],
                       "over_trl_median_block": base_median / median}
    return {"size": size, "configs": out}


def main(paths: list[str]) -> None:
    runs = {Path(p).stem: one_run(Path(p)) for p in paths}
    configs = sorted({c for run in runs.values() for c in run["configs"]} - {BASE})
    spread = {}
    for config in configs:
        for reading in ("over_trl_all_blocks", "over_trl_median_block"):
            values = [run["configs"][config][reading] for run in runs.values() if config in run["configs"]]
            spread[f"{config} {reading}"] = {"median": statistics.median(values), "min": min(values),
                                             "max": max(values), "runs": len(values)}
    print(json.dumps({"runs": runs, "over_runs": spread}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
