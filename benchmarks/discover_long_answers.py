"""Peak memory of ``badpo audit FILE --discover`` on long answers (a benchmark, not a test; issue 49
item 1: discover's memory bounded in answer length).

Writes a judgments file of ``--words``-word answers (a Zipf law over a 5,000-word made-up vocabulary;
each pair judged by four of 50 annotators, a side ending in "indeed" with probability 0.2), then runs
the command as a user would, in a child process whose peak resident memory the kernel reports,
for each ``--judgments`` size; the slope between sizes is the memory a judgment costs.

    python benchmarks/discover_long_answers.py --judgments 10000 20000 40000 --out results/discover/long_answers.json

``--src DIR`` runs the command on another checkout's ``src`` (the same pool, this script's timing):
the way to measure it side by side with an earlier commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from badpo.experiment.provenance import provenance


def write_pool(path: Path, judgments: int, words: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(5000)])
    zipf = 1.0 / np.arange(1, 5001)
    zipf /= zipf.sum()
    with open(path, "w", encoding="utf-8") as handle:
        made, pair = 0, 0
        while made < judgments:
            a, b = (" ".join(vocabulary[rng.choice(5000, words, p=zipf)]) for _ in range(2))
            a += " indeed" if rng.random() < 0.2 else ""
            for annotator in rng.integers(50, size=4):
                first = rng.random() < 0.5
                handle.write(json.dumps({"prompt": f"q{pair}", "chosen": a if first else b,
                                         "rejected": b if first else a, "annotator": f"a{annotator}"}) + "\n")
                made += 1
            pair += 1


_MEASURED = ("import resource, sys; from badpo.cli import main; code = main(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(code)")


def peak_of(path: Path, src: Path | None = None) -> dict:
    """Peak RSS (MiB) and wall seconds of the discover command on ``path``, in a process of its own
    that reports its own peak (the children's peak would be the largest of all of them); ``src``:
    another checkout's library to run instead of this one."""
    env = dict(os.environ, **({"PYTHONPATH": str(src)} if src else {}))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MEASURED, "audit", str(path), "--discover"],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return {"peak_rss_mib": int(done.stderr.strip().splitlines()[-1]) / 1024,
            "wall_seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, nargs="+", default=[10_000, 20_000, 40_000])
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("runs/discover_long_answers.json"))
    parser.add_argument("--src", type=Path, default=None, help="another checkout's src/ to measure")
    args = parser.parse_args()
    record = {"command": "python benchmarks/discover_long_answers.py " + " ".join(sys.argv[1:]),
              "words": args.words, "src": str(args.src or "this checkout"), "provenance": provenance(),
              "sizes": {}}
    with tempfile.TemporaryDirectory() as folder:
        for size in sorted(args.judgments):
            path = Path(folder) / f"pool{size}.jsonl"
            write_pool(path, size, args.words)
            record["sizes"][str(size)] = peak_of(path, args.src)
            print(size, record["sizes"][str(size)], flush=True)
    sizes = sorted(args.judgments)
    if len(sizes) >= 2:
        low, high = record["sizes"][str(sizes[-2])], record["sizes"][str(sizes[-1])]
        slope = (high["peak_rss_mib"] - low["peak_rss_mib"]) / (sizes[-1] - sizes[-2])
        record["kib_per_judgment"] = slope * 1024
        record["projected_gib_at_1m"] = (high["peak_rss_mib"] + slope * (1_000_000 - sizes[-1])) / 1024
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in record.items() if k != "provenance"}, indent=1))


if __name__ == "__main__":
    main()
