"""Time and memory of the ``badpo audit --discover`` screen on a synthetic pool (a benchmark, not a
test).

The pool: ``--judgments`` judgments on pairs of 15-45 word answers (words drawn from a Zipf law
over a vocabulary of ``--vocabulary`` made-up words, so the data screen meets many distinct
n-grams), each pair judged by four of ``--annotators`` annotators; a side is a markdown list with
probability 0.2 and ends with the word "indeed" with probability 0.2; votes follow
``sigmoid(quality + theta_k . (g_a - g_b))`` with theta_k ~ N(0.8, 0.4^2) on both. The judgments
are generated lazily and fed to :func:`badpo.auditing.discover.discover` (the screen; reading a file
is timed by benchmarks/bench_audit.py), which prints its progress; the figures are the wall time,
the CPU time of this process and its peak resident memory.

    OMP_NUM_THREADS=1 python benchmarks/bench_discover.py [--judgments 1000000] [--out runs/bench_discover.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

from badpo.auditing.discover import discover
from badpo.core.judgments import Judgment
from badpo.experiment.provenance import provenance


def pool(judgments: int, annotators: int, vocabulary: int, seed: int = 0):
    """The synthetic judgments of the module docstring, one at a time."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(vocabulary)])
    zipf = 1.0 / np.arange(1, vocabulary + 1)
    zipf /= zipf.sum()
    theta = 0.8 + 0.4 * rng.standard_normal((annotators, 2))
    made = 0
    pair = 0
    while made < judgments:
        block = 1000
        lengths = rng.integers(15, 46, size=(block, 2))
        drawn = rng.choice(vocabulary, size=int(lengths.sum()), p=zipf)
        markdown, ending = rng.random((block, 2)) < 0.2, rng.random((block, 2)) < 0.2
        quality = rng.standard_normal(block)
        who = rng.integers(annotators, size=(block, 4))
        votes = rng.random((block, 4))
        cut = np.cumsum(lengths.ravel())
        texts = [" ".join(words[part]) for part in np.split(drawn, cut[:-1])]
        for i in range(block):
            sides = [("- " if markdown[i, s] else "") + texts[2 * i + s] + (" indeed" if ending[i, s] else "")
                     for s in (0, 1)]
            g = np.array([markdown[i, 0] ^ 0, ending[i, 0] ^ 0]) - np.array([markdown[i, 1] ^ 0, ending[i, 1] ^ 0])
            for k, u in zip(who[i], votes[i]):
                first = u < 1.0 / (1.0 + np.exp(-(quality[i] + theta[k] @ g)))
                yield Judgment(f"question {pair}", sides[0 if first else 1], sides[1 if first else 0], f"a{k}")
                made += 1
                if made == judgments:
                    return
            pair += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judgments", type=int, default=1_000_000)
    parser.add_argument("--annotators", type=int, default=500)
    parser.add_argument("--vocabulary", type=int, default=3000)
    parser.add_argument("--out", default="runs/bench_discover.json")
    args = parser.parse_args()
    started, cpu = time.perf_counter(), time.process_time()
    progress = lambda line: print(f"[{time.perf_counter() - started:6.1f} s] {line}", file=sys.stderr, flush=True)  # noqa: E731
    result = discover(pool(args.judgments, args.annotators, args.vocabulary), progress=progress)
    out = {
        "command": f"OMP_NUM_THREADS=1 python benchmarks/bench_discover.py --judgments {args.judgments}",
        "judgments": result.n_judgments, "pairs": result.n_pairs, "annotators": result.n_annotators,
        "candidates": {"library": result.n_library, "data": result.n_data, "tested": len(result.tested)},
        "found": result.attributes(), "wall_seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": os.environ.get("OMP_NUM_THREADS"), "python": platform.python_version(),
        "note": "wall and CPU include generating the synthetic judgments",
        "provenance": provenance(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
