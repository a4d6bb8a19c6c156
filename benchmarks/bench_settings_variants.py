"""One badpo configuration under several settings at once: step time and peak RSS of each (a
benchmark, not a test).

Where ``bench_vs_trl.py`` compares trainers, this compares settings of one trainer: each variant
(``NAME=KEY=VALUE,KEY=VALUE``, or ``NAME=`` for the defaults) runs in a worker process of its own,
all up at once, their blocks of steps asked in a rotating order so that load hits them alike.
It takes ``bench_vs_trl.py``'s options (model size, world, batch) and reports, per variant, the
seconds of each step (block time over block steps), their median and the worker's peak RSS.

    python benchmarks/bench_settings_variants.py --config badpo/pair_grouped \\
        --variant before=runtime.length_groups=1,model.selective_checkpointing=false \\
        --variant checkpointing_only=runtime.length_groups=1 --variant defaults= \\
        --out runs/variants.json -- --sizes smollm2-135m-shape --world W --shape-source S \\
        --attributes length markdown --judgments 512 --judgments-per-step 16 --max-length 160 \\
        --warmup 1 --rounds 4 --block 2 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import bench_vs_trl as bench  # benchmarks/ is on sys.path when this file runs as a script

from badpo.experiment.provenance import provenance


def _variant(text: str) -> tuple[str, list[str]]:
    name, _, sets = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"--variant {text!r}: NAME=KEY=VALUE,... (NAME= for the defaults)")
    return name, [s for s in sets.split(",") if s]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=["badpo/per_judgment", "badpo/pair_grouped"], required=True)
    parser.add_argument("--variant", type=_variant, action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="-- then bench_vs_trl.py's options")
    return parser


def measure(args, bench_args) -> dict:
    """Every variant's worker up at once, blocks in a rotating order (``bench_vs_trl._interleaved``):
    per variant its step times, median and memory."""
    world = bench.pick_world(bench_args.world)
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        data, per_pair = bench.subset(world, bench_args.judgments, bench_args.repeat, scratch / "train.jsonl")
        bench_args.micro_batch = bench_args.micro_batch or bench_args.judgments_per_step
        bench_args.pairs_per_step = int(bench_args.judgments_per_step // per_pair)
        bench_args.micro_pairs = min(bench_args.pairs_per_step, bench_args.micro_batch)
        size = bench_args.sizes[0]
        setups, steps = {}, {name: [] for name, _ in args.variant}
        for name, sets in args.variant:
            bench_args.badpo_set = sets
            setups[name] = (args.config, *bench._worker_settings(bench_args, world, data, size, scratch))

        def timed(name: str, worker) -> None:
            steps[name].append(worker.ask(do="block", steps=bench_args.block)["seconds"] / bench_args.block)

        ready, memory = bench._interleaved(bench_args, setups, timed)
        return {name: {"badpo_set": sets, "seconds_per_step": steps[name],
                       "median_step_s": statistics.median(steps[name]), **memory[name], "ready": ready[name]}
                for name, sets in args.variant}


def main() -> None:
    args = _parser().parse_args()
    bench_args = bench._parser().parse_args([a for a in args.bench if a != "--"])
    variants = measure(args, bench_args)
    result = {"config": args.config, "bench_options": [a for a in args.bench if a != "--"],
              "variants": variants, "load_average_at_end": os.getloadavg(), "provenance": provenance()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, v in variants.items():
        each = ", ".join(f"{s:.2f}" for s in v["seconds_per_step"])
        print(f"{name:20s} median {v['median_step_s']:.2f} s a step ({each})  peak {v['peak_rss_mib']:,.0f} MiB")


if __name__ == "__main__":
    main()
