"""Where the memory of a training step of SmolLM2-135M goes (a benchmark, not a test; issue 50
item 3): resident memory after each phase (imports, the run prepared, each step) and the torch
profiler's allocations by operator over one step, for the bench's settings (full fine-tuning, fp32,
16 judgments a step of up to 160 tokens, BA-DPO θ̄+ε_k on the names attributes).

    python benchmarks/memory_phases_smol.py OUT --data runs/smol/corpus/train.jsonl --batching per_judgment --micro 16

OUT/phases_<batching>_<micro>.json holds the phases in MiB, the weights' and AdamW's sizes and the
provenance; OUT/alloc_<batching>_<micro>.txt the profiler's table (allocations summed over the
step, not a peak: it says which operators allocate, the phases say how much is held).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def resident_mib(key: str = "VmRSS") -> float | None:
    """The process's resident memory now (VmRSS) or at its peak so far (VmHWM), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return None


def prepared(args, out: Path):
    from badpo.core.config import apply_overrides, from_dict
    from badpo.data.gguf import gguf_folder
    from badpo.engine.preference import prepare_run
    from badpo.engine.settings import TrainConfig

    rows = Path(args.data).read_text(encoding="utf-8").splitlines()[: args.judgments]
    data = out / f"train{args.judgments}.jsonl"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    per_judgment = args.batching == "per_judgment"
    config = from_dict(TrainConfig, apply_overrides({
        "method": "ba_dpo_shared_mean", "batching": args.batching, "data": str(data), "attributes": args.attributes,
        "model": {"name_or_path": gguf_folder("smollm2-135m-instruct")}, "steps": 10,
        "batch_size": 16 if per_judgment else 4, "micro_batch_size": args.micro,
        "optim": {"lr": 1e-5, "warmup_ratio": 0.1},
        "tokenization": {"max_prompt_tokens": 80, "max_length": 160},
        "runtime": {"num_threads": args.threads, "precision": "auto", "logprob_chunk_size": args.chunk,
                    "length_groups": args.length_groups},
        "report": {"progress_bar": False}, "output_dir": str(out / "unused"),
        "cache_dir": str(out / "cache")}, args.set))
    return prepare_run(config)[0]


def _suffix(args) -> str:
    """What tells this run's files apart: ``--name``, else the settings it changed."""
    if args.name:
        return f"_{args.name}"
    return ("" if args.length_groups is None else f"_groups{args.length_groups}") + (
        "" if args.chunk == 1024 else f"_chunk{args.chunk}")


def measure(args) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    phases = {"start": resident_mib()}
    import torch
    from torch.profiler import ProfilerActivity, profile

    from badpo.engine.loop import train_step
    from badpo.experiment.provenance import provenance

    phases["after_imports"] = resident_mib()
    begin = time.perf_counter()
    run = prepared(args, out)
    phases["after_prepare_run"], phases["peak_after_prepare_run"] = resident_mib(), resident_mib("VmHWM")
    step_seconds = []
    for step in (0, 1):
        began = time.perf_counter()
        train_step(run, step)
        step_seconds.append(time.perf_counter() - began)
        phases[f"after_step_{step + 1}"], phases[f"peak_after_step_{step + 1}"] = resident_mib(), resident_mib("VmHWM")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_step(run, 2)
    phases["peak_after_step_3"] = resident_mib("VmHWM")
    name = f"{args.batching}_{args.micro}{_suffix(args)}"
    (out / f"alloc_{name}.txt").write_text(prof.key_averages().table(
        sort_by="self_cpu_memory_usage", row_limit=25, max_name_column_width=50), encoding="utf-8")
    moments = sum(v.numel() * v.element_size() for state in run.optimizer.state.values()
                  for v in state.values() if torch.is_tensor(v))
    groups = ("" if args.length_groups is None else f" --length-groups {args.length_groups}") + (
        "" if args.chunk == 1024 else f" --chunk {args.chunk}") + (
        f" --set {' '.join(args.set)}" if args.set else "") + (f" --name {args.name}" if args.name else "")
    return {"command": f"python benchmarks/memory_phases_smol.py {args.out} --data {args.data} "
                       f"--batching {args.batching} --micro {args.micro} --attributes {' '.join(args.attributes)}"
                       f"{groups}",
            "batching": args.batching, "micro_batch_size": args.micro, "attributes": args.attributes,
            "logprob_chunk_size": args.chunk, "overrides": args.set,
            "selective_checkpointing": run.config.model.selective_on(
                run.accelerator.device.type, parameters=sum(p.numel() for p in run.policy.parameters())),
            "length_groups": getattr(run.policy, "groups", None), "step_seconds": step_seconds,
            "parameters": sum(p.numel() for p in run.policy.parameters()),
            "weights_mib": sum(p.numel() * p.element_size() for p in run.policy.parameters()) / 2**20,
            "adamw_moments_mib": moments / 2**20, "phases_mib": phases,
            "mean_sequence_tokens": float(run.data.store.lengths.float().mean()),
            "seconds": time.perf_counter() - begin, "provenance": provenance()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--data", required=True,
                        help="judgments with the declared attributes (a smol-signed train.jsonl)")
    parser.add_argument("--attributes", nargs="+", default=["names"], help="the declared attributes (default: names)")
    parser.add_argument("--length-groups", type=int, default=None,
                        help="runtime.length_groups (default: null, the device's default)")
    parser.add_argument("--batching", default="per_judgment", choices=["per_judgment", "pair_grouped"])
    parser.add_argument("--micro", type=int, default=16, help="micro-batch (judgments, or pairs when pair-grouped)")
    parser.add_argument("--judgments", type=int, default=512)
    parser.add_argument("--chunk", type=int, default=1024, help="runtime.logprob_chunk_size")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="other overrides of badpo's settings (model.selective_checkpointing=false)")
    parser.add_argument("--name", default="", help="a suffix of the output files' names")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    result = measure(args)
    path = Path(args.out) / f"phases_{args.batching}_{args.micro}{_suffix(args)}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["phases_mib"], indent=1))


if __name__ == "__main__":
    main()
