"""Engine throughput on the tiny world, side by side in one run (a benchmark, not a test).

Measures, with the tiny-world training settings (configs/train_tiny.yaml: 64 items per step,
one forward per step):

* BA-DPO (theta_bar + eps_k) step time / DPO step time, same batching (goal <= 1.02): the bias
  channel adds q (m + 1) parameters, a gather and an Adam step on them;
* judgments per second, pair-grouped / per-judgment, same items per step (goal >= 3x with 4
  judgments per pair): a pair-grouped item scores its two sequences once for all its judgments;
* peak memory of each configuration's training steps, each in a fresh subprocess: on Linux the
  process's peak RSS is reset after setup (``/proc/self/clear_refs``), so it is the peak while
  stepping, next to the RSS after setup; on CUDA also the peak allocated by torch.

Step times are interleaved (blocks of ``--block`` steps, configurations in turn) so that load on
a shared machine hits every configuration alike; the BA-DPO / DPO ratio is the median over rounds
of the ratio of their blocks. What BA-DPO adds (bias logits, their backward, theta's Adam step) is
also timed alone and reported as a share of the DPO step.

    python benchmarks/bench_engine.py [--world DIR] [--model DIR] [--out runs/bench_engine.json]

Use the tiny SFT reference as ``--model`` when there is one (configs/sft_tiny.yaml); the world's
random-init model gives the same timings.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = {  # name -> (method, batching)
    "dpo/per_judgment": ("dpo", "per_judgment"),
    "ba_dpo/per_judgment": ("ba_dpo_shared_mean", "per_judgment"),
    "ba_dpo/pair_grouped": ("ba_dpo_shared_mean", "pair_grouped"),
}


def ensure_world(world: Path) -> Path:
    if not (world / "train.jsonl").exists():
        from badpo.corpora.tiny import TinyWorldConfig, build_tiny_world

        build_tiny_world(TinyWorldConfig(), world)
    return world


def make_config(world: Path, model: str, method: str, batching: str, items: int, threads: int | None,
                cache: str):
    from badpo.core.config import from_dict
    from badpo.engine.settings import TrainConfig

    return from_dict(TrainConfig, {
        "method": method, "batching": batching, "data": str(world / "train.jsonl"),
        "attributes": ["names"], "model": {"name_or_path": model}, "steps": 1000,
        "batch_size": items, "micro_batch_size": items,
        "optim": {"lr": 2e-4, "warmup_ratio": 0.15},
        "tokenization": {"max_prompt_tokens": 32, "max_length": 64},
        "runtime": {"num_threads": threads, "precision": "auto"},
        "report": {"progress_bar": False}, "output_dir": "unused", "cache_dir": cache,
    })


def timed_block(run, first_step: int, steps: int) -> tuple[float, int]:
    """Seconds per step over ``steps`` steps, and the judgments they held."""
    import torch

    from badpo.engine.loop import train_step

    judgments = 0
    started = time.perf_counter()
    for step in range(first_step, first_step + steps):
        train_step(run, step)
        judgments += int(run.items.judgment_counts(run.schedule.step_items(step)).sum())
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / steps, judgments


def interleaved(args, model: str, cache: str) -> dict:
    from badpo.engine.preference import prepare_run

    runs = {name: prepare_run(make_config(args.world, model, method, batching, args.items,
                                          args.threads, cache))[0]
            for name, (method, batching) in CONFIGS.items()}
    for run in runs.values():  # warm-up: allocator, caches, lazy init
        timed_block(run, 0, args.warmup)
    per_step = {name: [] for name in runs}
    judgments = {name: 0 for name in runs}
    seconds = {name: 0.0 for name in runs}
    for round_index in range(args.rounds):
        first = args.warmup + round_index * args.block
        for name, run in runs.items():
            step_time, held = timed_block(run, first, args.block)
            per_step[name].append(step_time)
            judgments[name] += held
            seconds[name] += step_time * args.block
    result = {name: {"median_step_s": statistics.median(times), "block_step_s": times,
                     "judgments_per_s": judgments[name] / seconds[name],
                     "judgments_per_step": judgments[name] / (args.rounds * args.block)}
              for name, times in per_step.items()}
    paired = [ba / dpo for ba, dpo in zip(per_step["ba_dpo/per_judgment"], per_step["dpo/per_judgment"])]
    result["ratios"] = {
        "ba_dpo_over_dpo_step_time": statistics.median(paired),  # median over rounds of the ratio
        "ba_dpo_over_dpo_step_time_by_round": paired,
        "bias_channel_overhead_over_dpo_step_time": bias_channel_seconds(runs["ba_dpo/per_judgment"])
        / result["dpo/per_judgment"]["median_step_s"],
        "pair_grouped_over_per_judgment_judgments_per_s":
            result["ba_dpo/pair_grouped"]["judgments_per_s"]
            / result["ba_dpo/per_judgment"]["judgments_per_s"],
    }
    return result


def status_mib(field: str) -> float | None:
    """A Vm* line of /proc/self/status in MiB (None off Linux)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    return next(int(line.split()[1]) / 1024 for line in lines if line.startswith(field + ":"))


def bias_channel_seconds(run, repeats: int = 200) -> float:
    """Seconds per step of what BA-DPO adds to DPO, timed alone: the bias logits of a step's
    judgments, their backward, theta's Adam step and zero_grad."""
    import torch

    micro = run.items.micro_batch(run.schedule.step_items(0))
    judgments = micro.judgments.to(run.accelerator.device)
    index, diff = run.annotator_index[judgments], run.attr_diff[judgments]
    started = time.perf_counter()
    for _ in range(repeats):
        run.bias(index, diff).sum().backward()
        run.theta_optimizer.step()
        run.theta_optimizer.zero_grad(set_to_none=True)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / repeats


def memory_child(args) -> None:
    """In a fresh process: prepare one configuration, then report the peak memory of its steps."""
    import torch

    from badpo.engine.preference import prepare_run

    method, batching = CONFIGS[args.child]
    run = prepare_run(make_config(args.world, args.model, method, batching, args.items, args.threads,
                                  args.cache))[0]
    peak = {"rss_after_setup_mib": status_mib("VmRSS")}
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to now
        reset = True
    except OSError:
        reset = False
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    timed_block(run, 0, args.warmup)
    peak["peak_rss_while_stepping_mib"] = status_mib("VmHWM") if reset else None
    peak["peak_rss_process_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if torch.cuda.is_available():
        peak["cuda_peak_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(peak))


def peak_memory(args, model: str, cache: str) -> dict:
    out = {}
    for name in CONFIGS:
        command = [sys.executable, __file__, "--child", name, "--world", str(args.world),
                   "--model", model, "--cache", cache, "--items", str(args.items),
                   "--warmup", str(args.warmup)]
        if args.threads is not None:
            command += ["--threads", str(args.threads)]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        out[name] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=Path, default=Path("runs/tiny/world"),
                        help="tiny world folder (built there if missing)")
    parser.add_argument("--model", default=None, help="policy start (default: WORLD/model)")
    parser.add_argument("--items", type=int, default=64, help="items per step (= per forward)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=10, help="steps per timed block")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_engine.json"))
    parser.add_argument("--child", choices=list(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return memory_child(args)
    import torch

    ensure_world(args.world)
    model = args.model or str(args.world / "model")
    with tempfile.TemporaryDirectory() as cache:
        result = {
            "settings": {"world": str(args.world), "model": model, "items_per_step": args.items,
                         "rounds": args.rounds, "block": args.block, "threads": torch.get_num_threads(),
                         "device": "cuda" if torch.cuda.is_available() else "cpu",
                         "torch": torch.__version__, "machine": platform.processor() or platform.machine()},
            "timing": interleaved(args, model, cache),
            "memory": peak_memory(args, model, cache),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    ratios = {k: v for k, v in result["timing"]["ratios"].items() if not k.endswith("by_round")}
    print(json.dumps({"ratios": ratios, "memory": result["memory"]}, indent=1))


if __name__ == "__main__":
    main()
