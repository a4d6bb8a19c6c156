"""Wall time of ``badpo audit FILE -a ... --report DIR`` on a synthetic pool (a benchmark, not a test).

The use case is a pool still being labelled: the audit is re-run on a growing JSONL file, so the
whole command (process start, reading and validating every row, the attributes from the texts,
the audit, the per-annotator estimates, CSV, JSON and one forest plot per attribute) should take
seconds at 100,000 judgments.

The synthetic pool: ``--annotators`` annotators in three classes with planted theta_k (class means
-0.5, 0.5, 1.5, spread 0.5), pairs of ~40-word answers whose second side may end in a sign-off line
``-- cheers`` / ``-- thanks`` / ``-- best`` and may be markedly longer, each pair judged by four
annotators, votes drawn from sigmoid(quality + theta_k . (g_w - g_l)). No ``pair_id``, so the audit
hashes every pair's texts (the slower path a user's file takes). The attributes audited are
``signoff=regex:-- (cheers|thanks|best)$`` and ``length``.

    python benchmarks/bench_audit.py [--judgments 100000] [--repeats 3] [--out runs/bench_audit.json]
    python benchmarks/bench_audit.py --form ab --judgments 1000000 --repeats 1 --out ...
    python benchmarks/bench_audit.py --judgments 7200 --regex-attributes 200 --repeats 1 --out ...

``--regex-attributes N`` declares N more attributes, ``w<i>=regex:\b<word>\b`` over the answers'
vocabulary (cycled, so most match some answers): what many declared attributes cost (issue 76 item 2
found 200 of them on 7,200 judgments taking 325 s and 7.0 GB on its pool; this pool took 238 s and
3.2 GB on a loaded machine before the pair fit's attribute cap).

``--form ab`` writes the A/B form with ties instead (``response_a``, ``response_b``, a signed
``preference``: -1 A better, 0 a tie, +1 B better), the votes drawn from Davidson's model at nu = 1
(a tie a third of the time at logit 0): the crowd's own labels as they come (issue 72).

Each repeat runs the command in a fresh process (``python -m badpo.cli``) and reports its wall
time and its CPU time (user + system; on a machine shared with other work the wall time grows
with the load, reported beside it); the figures are medians. ``--pseudonymise`` adds the
keyed-hash pass to the timed command.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from badpo.experiment.provenance import provenance

SIGNOFF = "signoff=regex:-- (cheers|thanks|best)$"
WORDS = ("the answer depends on how you measure it and what you need from the result so first "
         "check the inputs then compare the options and pick the simplest one that works").split()


def _answer(rng: random.Random, words: int, signoff: str | None) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."
    return text + (f"\n-- {signoff}" if signoff else "")


def _vote(rng: random.Random, logit: float, ties: bool) -> int:
    """+1 the second side wins, -1 the first, 0 a tie (Davidson's model at nu = 1 when ``ties``)."""
    if not ties:
        return 1 if rng.random() < 1 / (1 + math.exp(-logit)) else -1
    a, b = math.exp(-logit / 2), math.exp(logit / 2)
    u = rng.random() * (a + b + 1.0)
    return -1 if u < a else 1 if u < a + b else 0


def _row(prompt: str, first: str, second: str, vote: int, annotator: str, klass: str, ab: bool) -> dict:
    if ab:
        return {"prompt": prompt, "response_a": first, "response_b": second, "preference": vote,
                "annotator": annotator, "annotator_class": klass}
    chosen, rejected = (second, first) if vote > 0 else (first, second)
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected, "annotator": annotator,
            "annotator_class": klass}


def write_pool(path: Path, judgments: int, annotators: int, seed: int = 0, ab: bool = False) -> None:
    """The synthetic JSONL described in the module docstring (``ab``: the A/B form with ties)."""
    rng = random.Random(seed)
    ids = [f"worker-{i:05d}" for i in range(annotators)]
    classes = {a: ("A", "B", "C")[i % 3] for i, a in enumerate(ids)}
    means = {"A": -0.5, "B": 0.5, "C": 1.5}
    theta = {a: (rng.gauss(means[classes[a]], 0.5), 0.3) for a in ids}  # (signoff, length)
    written = 0
    with open(path, "w", encoding="utf-8") as handle:
        for pair in range((judgments + 3) // 4):
            prompt = f"Question {pair}: how should I choose?"
            signed = rng.random() < 0.5
            first = _answer(rng, rng.randint(25, 45), None)
            second = _answer(rng, rng.randint(25, 70), rng.choice(("cheers", "thanks", "best")) if signed else None)
            g_first = (0.0, 0.0)
            g_second = (1.0 if signed else 0.0, 1.0 if len(second.split()) >= 1.5 * len(first.split()) else 0.0)
            quality = rng.gauss(0.0, 1.0)
            for annotator in rng.sample(ids, 4)[:judgments - written]:
                t = theta[annotator]
                logit = quality + t[0] * (g_second[0] - g_first[0]) + t[1] * (g_second[1] - g_first[1])
                vote = _vote(rng, logit, ab)
                handle.write(json.dumps(_row(prompt, first, second, vote, annotator, classes[annotator], ab)) + "\n")
                written += 1


def regex_attributes(count: int) -> list[str]:
    """``count`` regex specs over :data:`WORDS`, each named apart (``w7=regex:\\bthe\\b``)."""
    return [f"w{i}=regex:\\b{WORDS[i % len(WORDS)]}\\b" for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judgments", type=int, default=100_000)
    parser.add_argument("--annotators", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pseudonymise", action="store_true")
    parser.add_argument("--out", default="runs/bench_audit.json")
    parser.add_argument("--form", choices=("pairs", "ab"), default="pairs")
    parser.add_argument("--regex-attributes", type=int, default=0, help="N more declared regex attributes")
    parser.add_argument("--src", default=None, help="another checkout's src/ to measure (side by side)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "pool.jsonl"
        started = time.perf_counter()
        write_pool(data, args.judgments, args.annotators, ab=args.form == "ab")
        built = time.perf_counter() - started
        extra = [arg for spec in regex_attributes(args.regex_attributes) for arg in ("-a", spec)]
        command = [sys.executable, "-m", "badpo.cli", "audit", str(data), "-a", SIGNOFF, "-a", "length", *extra,
                   "--report", str(Path(tmp) / "report"), "--overwrite"]  # each repeat replaces the last
        env = dict(os.environ, **({"PYTHONPATH": args.src} if args.src else {}))
        if args.pseudonymise:
            command.append("--pseudonymise")
            env["BADPO_PSEUDONYM_KEY"] = "benchmark-key"
        times, cpu = [], []
        for _ in range(args.repeats):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            times.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if done.returncode:
                raise SystemExit(f"badpo audit failed:\n{done.stderr}")
        lines = sum(1 for _ in open(data, encoding="utf-8"))
        result = {
            "command": "python -m badpo.cli audit POOL.jsonl -a '" + SIGNOFF
                       + "' -a length --report DIR" + (" --pseudonymise" if args.pseudonymise else "")
                       + (f" and {args.regex_attributes} more -a w<i>=regex:..." if args.regex_attributes else ""),
            "regex_attributes": args.regex_attributes, "src": args.src or "this checkout",
            "judgments": lines, "annotators": args.annotators, "file_mib": data.stat().st_size / 2**20,
            "seconds": times, "median_seconds": statistics.median(times),
            "cpu_seconds": cpu, "median_cpu_seconds": statistics.median(cpu), "build_seconds": built,
            "form": args.form, "peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "load_average_1min": os.getloadavg()[0],
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "report_tail": done.stdout.strip().splitlines()[-3:], "provenance": provenance(),
        }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
