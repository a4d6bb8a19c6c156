"""Step time of every method, and of this code against another checkout, side by side in one run.

Each code version runs in a worker process of its own (``PYTHONPATH`` points it at a ``src``
folder), which prepares one run per configuration and then times blocks of steps on request.
The parent asks every (version, configuration) in turn for a block, round after round, so load on
a shared machine hits all of them alike; a ratio is the median over rounds of the ratio of two
blocks. Reported:

* BA-DPO (theta_bar + eps_k) / DPO step time with this code (goal <= 1.02);
* this code's DPO and BA-DPO per-judgment step time / the baseline checkout's (goal 1 +- 0.03):
  what the method interface costs the methods that existed before it;
* R-DPO, SamPO (per-token log-ratios of policy and reference), Group-DRO DPO and IPO / DPO.

    git worktree add /tmp/badpo-before <commit>        # the code to compare against
    python benchmarks/bench_methods.py --baseline-src /tmp/badpo-before/src --out runs/bench_methods.json

Settings are those of configs/train_tiny.yaml (64 judgments per step, one forward per step) on the
tiny world (built under --world if missing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

THIS_SRC = Path(__file__).resolve().parents[1] / "src"
CONFIGS = {  # name -> method; all per-judgment
    "dpo": "dpo", "ba_dpo": "ba_dpo_shared_mean", "r_dpo": "r_dpo", "sampo": "sampo",
    "group_dro_dpo": "group_dro_dpo", "ipo": "ipo",
}
BASELINE_CONFIGS = ("dpo", "ba_dpo")  # the methods the baseline checkout has

WORKER = r'''
import json, sys, time
from badpo.core.config import from_dict
from badpo.engine.settings import TrainConfig
from badpo.engine.loop import train_step
from badpo.engine.preference import prepare_run
runs = {}
for line in sys.stdin:
    command = json.loads(line)
    if command["do"] == "prepare":
        runs[command["name"]] = prepare_run(from_dict(TrainConfig, command["config"]))[0]
        print(json.dumps({"ok": True}), flush=True)
    elif command["do"] == "block":
        run = runs[command["name"]]
        started = time.perf_counter()
        for step in range(command["first"], command["first"] + command["steps"]):
            train_step(run, step)
        print(json.dumps({"seconds": (time.perf_counter() - started) / command["steps"]}), flush=True)
'''


class Worker:
    """A process running one checkout's engine, driven by JSON lines."""

    def __init__(self, src: Path, threads: int | None):
        env = {**os.environ, "PYTHONPATH": str(src)}
        if threads is not None:
            env["OMP_NUM_THREADS"] = str(threads)
        self.process = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, **command) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker died on {command}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def train_config(world: Path, method: str, cache: str, threads: int | None) -> dict:
    return {"method": method, "batching": "per_judgment", "data": str(world / "train.jsonl"),
            "attributes": ["names"], "model": {"name_or_path": str(world / "model")}, "steps": 1000,
            "batch_size": 64, "micro_batch_size": 64, "optim": {"lr": 2e-4, "warmup_ratio": 0.15},
            "tokenization": {"max_prompt_tokens": 32, "max_length": 64},
            "runtime": {"num_threads": threads}, "report": {"progress_bar": False},
            "output_dir": "unused", "cache_dir": cache}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=Path, default=Path("runs/tiny/world"))
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="src folder of the checkout to compare with (omit: this code only)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--block", type=int, default=8, help="steps per timed block")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache", default="runs/bench_methods_cache")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_methods.json"))
    args = parser.parse_args()
    if not (args.world / "train.jsonl").exists():
        sys.path.insert(0, str(THIS_SRC))
        from badpo.corpora.tiny import TinyWorldConfig, build_tiny_world

        build_tiny_world(TinyWorldConfig(), args.world)
    versions = {"this": (THIS_SRC, CONFIGS)}
    if args.baseline_src is not None:
        versions["baseline"] = (args.baseline_src, {n: CONFIGS[n] for n in BASELINE_CONFIGS})
    workers, timed = {}, []
    for version, (src, configs) in versions.items():
        workers[version] = Worker(src, args.threads)
        for name, method in configs.items():
            workers[version].ask(do="prepare", name=name,
                                 config=train_config(args.world, method, f"{args.cache}-{version}", args.threads))
            workers[version].ask(do="block", name=name, first=0, steps=args.warmup)
            timed.append((version, name))
    times = {key: [] for key in timed}
    for round_index in range(args.rounds):
        first = args.warmup + round_index * args.block
        shift = round_index % len(timed)  # each configuration takes every place in the order
        for version, name in timed[shift:] + timed[:shift]:
            times[(version, name)].append(
                workers[version].ask(do="block", name=name, first=first, steps=args.block)["seconds"])
    for worker in workers.values():
        worker.close()

    def ratio(a: tuple[str, str], b: tuple[str, str]) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    ratios = {f"{name}_over_dpo": ratio(("this", name), ("this", "dpo")) for name in CONFIGS if name != "dpo"}
    if args.baseline_src is not None:
        ratios.update({f"{name}_this_over_baseline": ratio(("this", name), ("baseline", name))
                       for name in BASELINE_CONFIGS})
    result = {"settings": vars(args) | {"world": str(args.world), "out": str(args.out),
                                        "baseline_src": str(args.baseline_src)},
              "median_step_s": {f"{v}/{n}": statistics.median(t) for (v, n), t in times.items()},
              "block_step_s": {f"{v}/{n}": t for (v, n), t in times.items()}, "ratios": ratios}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"median_step_s": result["median_step_s"], "ratios": ratios}, indent=1))


if __name__ == "__main__":
    main()
