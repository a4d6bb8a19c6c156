"""``badpo sft``: the SFT reference, one epoch on one response per pair, saved in HF format.

One reference per model and corpus is shared by every method and seed (Appendix "Models and
training"), so implicit rewards are comparable across arms. The rows are the corpus builder's
``sft.jsonl`` (``prompt``, ``response``) or, with ``source: judgments``, the majority-chosen
response of each pair (a pair with an equal count takes the response its first judgment chose,
or is skipped with ``tie_break: skip``; the number of ties is written to ``sft.json``). The
loss is the mean negative log-likelihood per response token over the step (prompt tokens are not
trained), the same value for any micro-batch split.

The output folder is the reference itself (Hugging Face format, loadable by its path), so it
holds one run: another SFT run there is refused unless ``overwrite`` (which deletes what that run
wrote, its model files included), the same run finished is kept, and ``sft.json`` is written last,
after the model, so its presence means the reference is complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shutil
import time
from pathlib import Path

import torch

from badpo.core.config import ConfigError
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.data.sources import read_judgment_source, read_sft_source
from badpo.engine.batches import Schedule, majority_chosen
from badpo.engine.config_checks import check_sft
from badpo.engine.finite import check_loss_and_gradients, check_weights, optimizer_step
from badpo.engine.lifecycle import Lifecycle
from badpo.engine.logprobs import LogprobModel
from badpo.engine.loop import LoopSettings, run_stage
from badpo.engine.reporting import report_coverage
from badpo.engine.runtime import load_model, load_tokenizer, parameter_count, policy_optimizer
from badpo.engine.settings import SFTConfig, accumulation_steps
from badpo.engine.tokenize import build_token_store, token_coverage
from badpo.run_folder.final_commit import sync_tree
from badpo.run_folder.layout import (
    SFT_MODEL_FILES,
    SFT_RECORD,
    SFT_RUN_FILES,
    SFT_TEMPORARY,
)

FINISHED = SFT_RECORD  # written last: the reference in the folder is complete


def listed_model_files(folder: Path) -> list[str]:
    """The names in ``folder/.model-files``; each must be a plain file name of the folder, since
    ``overwrite`` deletes them."""
    listing = folder / SFT_MODEL_FILES
    if not listing.exists():
        return []
    names = listing.read_text(encoding="utf-8").splitlines()
    for name in names:
        if not name or Path(name).name != name or name in (".", ".."):
            raise ConfigError(f"output_dir: {listing} lists {name!r}, which is not a file name of the "
                              "folder; the folder was not written by badpo sft, so it is not touched")
    return names


def sft_run_files(folder: Path) -> tuple[str, ...]:
    """What an SFT run wrote into ``folder``: its own files and the model files it listed."""
    return (*SFT_RUN_FILES, *listed_model_files(folder))


def _check_output_folder(config: SFTConfig, output: Path, accelerator) -> None:
    """Before the folder is locked: the batch split on these processes; refuse the base model's
    own folder, and an ``overwrite`` of a model whose files no run listed (a model badpo did not
    write, or a reference of a badpo before the listing): deleting only some of its files would
    leave a mix of two models."""
    accumulation_steps(config.batch_size, config.micro_batch_size, accelerator.num_processes)
    if os.path.realpath(output) == os.path.realpath(config.model.name_or_path):
        raise ConfigError(f"output_dir: {output} is the folder of the model being fine-tuned "
                          "(model.name_or_path); choose another output_dir")
    unlisted = not (output / SFT_MODEL_FILES).exists() and any(
        (output / name).exists() for name in ("config.json", FINISHED))
    if config.overwrite and unlisted:
        raise ConfigError(f"output_dir: {output} holds a model whose files no badpo sft run listed in "
                          f"{SFT_MODEL_FILES}, so overwrite cannot tell which to delete; delete the folder "
                          "yourself or choose another output_dir")


def sft_rows(config: SFTConfig, tokenizer) -> tuple[list[tuple[str, str]], list[str], bool]:
    """(prompt, response) rows, the pair keys skipped for want of a majority, and whether the
    prompts were rendered from chat messages (badpo.data.sources)."""
    if config.source == "sft_rows":
        loaded = read_sft_source(config.data, config.data_split, config.columns, tokenizer)
        return loaded.rows, [], loaded.rendered_prompts
    loaded = read_judgment_source(config.data, config.data_split, config.columns, tokenizer)
    rows, ties = majority_chosen(loaded.rows, config.tie_break)
    if not rows:
        raise ValueError(f"data: no pair of {config.data!r} has a majority-chosen response")
    return rows, ties, loaded.rendered_prompts


def _never(config: SFTConfig) -> bool:
    return False


SFT_RUN = Lifecycle(check_sft, finished=FINISHED, kept="holds this reference, finished; it is kept",
                    run_files=sft_run_files, resumes=_never, check_folder=_check_output_folder)


def _train_in(config: SFTConfig, output: Path, accelerator, resume: None) -> Path:
    return run_stage(SFTStage(), config, output, accelerator, None)


def sft(config: SFTConfig) -> Path:
    """Fine-tune ``config.model`` on the rows and save it (merged, under LoRA) to output_dir."""
    return SFT_RUN.run(config, _train_in)


@dataclasses.dataclass
class SFTRun:
    """What the loop touches for SFT: the model, its optimizer, the rows as tokens, the order.
    An SFT run learns no theta and has no weighting or label audit."""

    config: SFTConfig
    accelerator: object
    policy: torch.nn.Module  # LogprobModel, prepared by accelerate
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    store: object  # TokenStore of the (prompt, response) rows
    schedule: Schedule
    steps: int
    rows: int
    ties: int
    coverage: dict | None
    bias: None = None
    theta_optimizer: None = None
    weighting: None = None
    labels: None = None


@dataclasses.dataclass(frozen=True)
class SFTStage:
    """SFT on the one loop (:func:`badpo.engine.loop.run_stage`): per-token NLL of the responses,
    ``ceil(rows x epochs / batch_size)`` steps, no checkpoints."""

    name: str = "sft"

    def prepare(self, config: SFTConfig, accelerator) -> tuple[SFTRun, dict, object]:
        from accelerate.utils import set_seed

        set_seed(config.runtime.seed)
        tokenizer = load_tokenizer(config.model)
        rows, ties, rendered_prompts = sft_rows(config, tokenizer)
        store = build_token_store(tokenizer, rows, config.tokenization, rendered_prompts)
        every = torch.arange(len(store))
        coverage = token_coverage(tokenizer, store, {"responses": every, "prompts": every}, str(config.data))
        if accelerator.is_main_process:
            report_coverage(coverage, self.name)
        model = load_model(config.model, config.lora, accelerator.mixed_precision,
                           float64=config.runtime.precision == "fp64",
                           device_type=accelerator.device.type,
                           processes=accelerator.num_processes)
        policy = LogprobModel(model, config.runtime.logprob_chunk_size,
                              config.runtime.groups_on(accelerator.device.type, parameters=parameter_count(model)),
                              config.runtime.rows_per_group())
        steps = math.ceil(len(rows) * config.epochs / config.batch_size)
        optimizer, scheduler = policy_optimizer(policy, config.optim, config.optim.lr, steps, accelerator.device)
        policy, optimizer = accelerator.prepare(policy, optimizer)
        run = SFTRun(config, accelerator, policy, optimizer, scheduler, store,
                     Schedule(len(store), config.batch_size, config.runtime.seed), steps, len(rows), len(ties),
                     coverage)
        return run, {}, tokenizer

    def settings(self, config: SFTConfig, run: SFTRun) -> LoopSettings:
        return LoopSettings(run.steps, description=self.name)

    def step(self, run: SFTRun, step: int) -> tuple[torch.Tensor, dict]:
        return _sft_step(run.accelerator, run.policy, run.optimizer, run.scheduler, run.store, run.schedule,
                         step, run.config)

    def record(self, run: SFTRun, step: int, nll: torch.Tensor, norms: dict, lr: float, started: float) -> dict:
        step_tokens = int(run.store.response_lengths()[run.schedule.step_items(step)].sum())
        loss = float(run.accelerator.reduce(nll, reduction="sum")) / step_tokens
        return {"loss": loss, "lr": lr, **norms, "tokens": step_tokens,
                "elapsed_s": round(time.perf_counter() - started, 3)}

    def on_finished(self, run: SFTRun) -> None:
        """Nothing to score: the reference is read by the stages that start from it."""

    def write_outputs(self, run: SFTRun, tokenizer, output: Path, cache_parts: dict, last: dict,
                      seconds: float) -> None:
        """The model in HF format, then ``sft.json``, written last: the reference is complete."""
        _save_reference(run.accelerator, run.policy, tokenizer, output, run.config)
        if run.accelerator.is_main_process:
            summary = {"rows": run.rows, "pairs_with_tied_votes": run.ties, "steps": run.steps,
                       "truncated_prompts": run.store.truncated_prompts,
                       "truncated_responses": run.store.truncated_responses, "unknown_tokens": run.coverage,
                       "wall_s": round(seconds, 2)}
            atomic_write_text(output / FINISHED, dumps(summary, indent=1) + "\n")


def _sft_step(accelerator, policy, optimizer, scheduler, store, schedule: Schedule, step: int,
              config: SFTConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """One step: sum(NLL) / (response tokens of the global step / processes) per micro-batch, so
    the gradient is the per-token mean over the step. Returns (this process's NLL sum, norms)."""
    step_tokens = int(store.response_lengths()[schedule.step_items(step)].sum())
    micros = schedule.micro_batches(step, accelerator.process_index, accelerator.num_processes,
                                    config.micro_batch_size)
    total = torch.zeros((), device=accelerator.device)
    for index, rows in enumerate(micros):
        last = index == len(micros) - 1
        with contextlib.nullcontext() if last else accelerator.no_sync(policy):
            batch = store.batch(rows, accelerator.device)
            nll = -policy(batch["input_ids"], batch["attention_mask"], batch["response_mask"]).sum()
            accelerator.backward(nll / (step_tokens / accelerator.num_processes))
        total += nll.detach()
    norms = {}
    check_loss_and_gradients(accelerator, step, total, policy)  # the weights stay the last good
    if config.optim.max_grad_norm > 0:
        norms["grad_norm"] = float(accelerator.clip_grad_norm_(policy.parameters(),
                                                               config.optim.max_grad_norm))
    optimizer_step(optimizer, step, "the policy")
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    check_weights(accelerator, step, policy)
    return total, norms


def _save_reference(accelerator, policy, tokenizer, output: Path, config: SFTConfig) -> None:
    """The trained model and tokenizer in HF format in ``output`` (each file replaced atomically)."""
    state = accelerator.get_state_dict(policy)
    if not accelerator.is_main_process:
        return
    model = accelerator.unwrap_model(policy).model
    model.load_state_dict({k.removeprefix("model."): v for k, v in state.items()})
    if config.lora.enabled and config.merge_lora:
        model = model.merge_and_unload()
    temporary = output / SFT_TEMPORARY
    shutil.rmtree(temporary, ignore_errors=True)
    model.save_pretrained(temporary, safe_serialization=True)
    tokenizer.save_pretrained(temporary)
    sync_tree(temporary)  # on disk before sft.json can say the reference is complete
    names = sorted(item.name for item in temporary.iterdir())
    (output / SFT_MODEL_FILES).write_text("".join(f"{name}\n" for name in names), encoding="utf-8")
    for name in names:  # listed first, so an overwrite after a kill here still finds them all
        os.replace(temporary / name, output / name)
    temporary.rmdir()
