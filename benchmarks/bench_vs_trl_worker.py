"""The worker processes of ``bench_vs_trl.py``: one training configuration each (TRL's DPOTrainer
or badpo's engine), driven by JSON lines on stdin and answering on stdout, so that each has its
own peak RSS. Commands: ``{"do": "block", "steps": n}`` (time n steps), ``{"do": "memory"}``
(peak RSS), ``{"do": "profile", "steps": n, "path": file}`` (n steps under torch.profiler, the
operator table into ``file``; TRL's steps are profiled inside its own ``Trainer.train`` loop)."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from bench_engine import status_mib  # benchmarks/ is on sys.path when this file runs as a script

METHOD = "ba_dpo_shared_mean"
LR = 2e-4

SETUP_PEAK = {"mib": None}  # VmHWM at the end of setup, counted from the worker's start


def _reset_peak_rss() -> bool:
    import torch

    SETUP_PEAK["mib"] = status_mib("VmHWM")
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        return True
    except OSError:
        return False


def _say(payload: dict) -> None:
    print(json.dumps({"bench": payload}), flush=True)


def _commands():
    for line in sys.stdin:
        yield json.loads(line)


def _memory(reset: bool) -> dict:
    """Peak RSS of the worker's life (setup or stepping) and while stepping. ru_maxrss is not
    used: a process inherits its parent's peak through fork and exec."""
    import torch

    stepping = status_mib("VmHWM") if reset else None
    whole = (max(SETUP_PEAK["mib"], stepping) if reset and SETUP_PEAK["mib"] is not None
             else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    out = {"peak_rss_mib": whole, "peak_rss_stepping_mib": stepping}
    if torch.cuda.is_available():
        out["cuda_peak_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def badpo_worker(s: dict, started: float) -> None:
    import torch

    from badpo.core.config import apply_overrides, from_dict
    from badpo.engine.loop import train_step
    from badpo.engine.preference import prepare_run
    from badpo.engine.settings import TrainConfig

    batching, _, compiled = s["config"].split("/")[1].partition("+")
    per_judgment = batching == "per_judgment"
    items = s["judgments_per_step"] if per_judgment else s["pairs_per_step"]
    micro = s["micro_judgments"] if per_judgment else s["micro_pairs"]
    config = from_dict(TrainConfig, apply_overrides({
        "method": METHOD, "batching": batching, "data": s["data"], "attributes": s["attributes"],
        "model": {"name_or_path": s["model"], "tokenizer": s["tokenizer"],
                  "gradient_checkpointing": s["gradient_checkpointing"],
                  "compile": True if compiled == "compile" else None},  # None: the library's default
        "steps": s["max_steps"],
        "batch_size": items,
        "micro_batch_size": micro, "optim": {"lr": LR, "warmup_ratio": 0.1},
        "tokenization": {"max_prompt_tokens": s["max_length"] // 2, "max_length": s["max_length"]},
        "runtime": {"num_threads": s["threads"], "precision": "auto",
                    "logprob_chunk_size": s["logprob_chunk_size"]},
        "report": {"progress_bar": False}, "output_dir": "unused", "cache_dir": s["cache"]}, s["badpo_set"]))
    run = prepare_run(config)[0]
    parameters = sum(p.numel() for p in run.policy.parameters())
    _say({"setup_s": time.perf_counter() - started, "parameters": parameters,
          "threads": torch.get_num_threads(), "rss_after_setup_mib": status_mib("VmRSS"),
          "mean_sequence_tokens": float(run.data.store.lengths.float().mean()),
          "length_groups": getattr(run.policy, "groups", None),
          "selective_checkpointing": config.model.selective_on(run.accelerator.device.type, config.fsdp, parameters)})
    reset = _reset_peak_rss()
    step = 0
    for command in _commands():
        if command["do"] == "memory":
            _say(_memory(reset))
            continue
        if command["do"] == "profile":
            _say(_profile(run, step, command["steps"], Path(command["path"])))
            step += command["steps"]
            continue
        held, begin = 0, time.perf_counter()
        for _ in range(command["steps"]):
            train_step(run, step)
            held += int(run.items.judgment_counts(run.schedule.step_items(step)).sum())
            step += 1
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        _say({"seconds": time.perf_counter() - begin, "judgments": held})


def _trl_data(s: dict):
    """The judgments as a TRL user loads them (from the file, memory-mapped; TRL reads prompt/chosen/
    rejected only), and the tokenizer."""
    import datasets
    from transformers import AutoTokenizer

    data = datasets.Dataset.from_json(s["data"]).select_columns(["prompt", "chosen", "rejected"])
    tokenizer = AutoTokenizer.from_pretrained(s["tokenizer"])
    if tokenizer.chat_template:  # badpo renders a prompt with the model's template (chat_template: auto);
        data = data.map(_as_messages)  # TRL does so for messages only: both then train the same tokens
    return data, tokenizer


def _trl_config(s: dict, cuda: bool):
    import torch
    from trl import DPOConfig

    return DPOConfig(
        output_dir=s["scratch"], per_device_train_batch_size=s["micro_judgments"],
        gradient_accumulation_steps=s["judgments_per_step"] // s["micro_judgments"], max_steps=s["max_steps"],
        learning_rate=LR, warmup_steps=0.1, lr_scheduler_type="cosine", weight_decay=0.0, max_grad_norm=1.0,
        beta=0.1, max_length=s["max_length"], bf16=cuda and torch.cuda.is_bf16_supported(), use_cpu=not cuda,
        gradient_checkpointing=s["gradient_checkpointing"], torch_compile=s["config"].endswith("+compile"),
        precompute_ref_log_probs=s["config"].startswith("trl/precomputed"),
        precompute_ref_batch_size=16, logging_steps=10**9, save_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_num_workers=0, dataloader_drop_last=True, seed=42)


def trl_worker(s: dict, started: float) -> None:
    """TRL's own training loop, paused by a callback at the end of each block of steps."""
    import torch
    from transformers import TrainerCallback
    from trl import DPOTrainer

    torch.set_num_threads(s["threads"])
    data, tokenizer = _trl_data(s)
    cuda = torch.cuda.is_available()
    args = _trl_config(s, cuda)

    class Gate(TrainerCallback):
        """Between blocks: answer the parent's commands; a block ends after its last step."""

        def __init__(self):
            self.left, self.held, self.begin, self.reset, self.profiling = 0, 0, 0.0, False, None

        def wait(self, control):
            for command in _commands():
                if command["do"] == "memory":
                    _say(_memory(self.reset))
                    continue
                if command["do"] == "profile":  # the next block's steps under torch.profiler
                    self.profiling = (_profiler(), Path(command["path"]))
                    self.profiling[0].__enter__()
                self.left, self.held, self.begin = command["steps"], 0, time.perf_counter()
                return
            control.should_training_stop = True  # the parent closed stdin

        def on_train_begin(self, args, state, control, **kwargs):
            torch.set_num_threads(s["threads"])
            _say({"setup_s": time.perf_counter() - started, "parameters": parameters,
                  "threads": torch.get_num_threads(), "rss_after_setup_mib": status_mib("VmRSS"),
                  "mean_sequence_tokens": mean_tokens})  # before max_length cuts (badpo: after)
            self.reset = _reset_peak_rss()
            self.wait(control)

        def on_step_end(self, args, state, control, **kwargs):
            self.held += s["judgments_per_step"]
            self.left -= 1
            if self.left == 0:
                if cuda:
                    torch.cuda.synchronize()
                seconds, steps = time.perf_counter() - self.begin, self.held // s["judgments_per_step"]
                if self.profiling:
                    (prof, path), self.profiling = self.profiling, None
                    prof.__exit__(None, None, None)
                    _say(_profile_table(prof, path, state.global_step - steps, steps, seconds))
                else:
                    _say({"seconds": seconds, "judgments": self.held})
                self.wait(control)

    trainer = DPOTrainer(s["model"], args=args, train_dataset=data, processing_class=tokenizer,
                         callbacks=[Gate()])
    parameters = sum(p.numel() for p in trainer.model.parameters())
    rows = trainer.train_dataset
    mean_tokens = (2 * sum(map(len, rows["prompt_ids"])) + sum(map(len, rows["chosen_ids"]))
                   + sum(map(len, rows["rejected_ids"]))) / (2 * len(rows))
    trainer.train()


def _as_messages(row: dict) -> dict:
    """A prompt / chosen / rejected row of strings as TRL's conversational format."""
    return {"prompt": [{"role": "user", "content": row["prompt"]}],
            "chosen": [{"role": "assistant", "content": row["chosen"]}],
            "rejected": [{"role": "assistant", "content": row["rejected"]}]}


def worker(settings: str) -> None:
    started = time.perf_counter()
    try:  # forget the peak inherited from the parent: count from here
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    s = json.loads(settings)
    (badpo_worker if s["config"].startswith("badpo/") else trl_worker)(s, started)


def _profiler():
    """torch.profiler over the CPU (and CUDA when there is one)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    return profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []))


def _profile_table(prof, path: Path, first_step: int, steps: int, wall: float) -> dict:
    """The operators of a profiled block by their own device time (or CPU time without a GPU)
    into ``path``, and the block's wall time beside the time the device was busy, which says
    whether a step waits on the device or on the host."""
    import torch

    cuda = torch.cuda.is_available()
    averages = prof.key_averages()
    sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    busy = sum(getattr(e, "self_device_time_total", 0.0) for e in averages) / 1e6 if cuda else None
    path.write_text(f"{steps} steps from step {first_step}, wall {wall:.3f} s, device busy {busy} s\n"
                    + averages.table(sort_by=sort, row_limit=40, max_name_column_width=60))
    return {"profile": str(path), "wall_s": wall, "device_busy_s": busy}


def _profile(run, first_step: int, steps: int, path: Path) -> dict:
    """``steps`` of the engine's training steps under torch.profiler (:func:`_profile_table`)."""
    import torch

    from badpo.engine.loop import train_step

    begin = time.perf_counter()
    with _profiler() as prof:
        for step in range(first_step, first_step + steps):
            train_step(run, step)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    return _profile_table(prof, path, first_step, steps, time.perf_counter() - begin)


if __name__ == "__main__":
    worker(sys.argv[1])
