"""The one training loop: a stage prepares a :class:`Run`, the loop steps it, logs, checkpoints and
resumes it, and the stage writes what it trained.

Per step: the step's items are cut into micro-batches; each micro-batch scores its sequences with
the policy, reads the cached reference log-probs, adds the bias logit of each judgment, and
back-propagates sum(losses) / (judgments in the global step / processes), so the update is the
gradient of the mean loss over the step's judgments whatever the micro-batch size, the number of
accumulation passes or of processes. Then theta's gradient is averaged over processes (theta is
not inside the DDP model), the policy's gradient alone is clipped, AdamW (policy, scheduled) and
Adam (theta, constant lr) step, and both gradients are cleared. With trusted annotators the level
step sets theta's shared level (``bias.trusted_level``, :mod:`badpo.theta.level`): after every
step (``every_step``) or once the last is done (``final``).

The stages that plug in: the preference stage (:mod:`badpo.engine.preference`), the reward model
(:mod:`badpo.engine.reward`), and EM-DPO's type policies (:mod:`badpo.engine.mixture`), which runs
the preference stage once per part.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor

from badpo.auditing.estimates import Audit
from badpo.core.config import ConfigError, dump_yaml, to_dict
from badpo.core.orthogonal import orthogonal_to
from badpo.engine.batches import ItemTable, PreferenceData, Schedule
from badpo.engine.checkpoint import (
    TrainingState,
    check_checkpointing,
    checkpoint_contents,
    list_checkpoints,
    load_checkpoint,
    resolve_resume,
    save_checkpoint,
)
from badpo.engine.finite import (
    TrainingDiverged,
    check_loss_and_gradients,
    check_weights,
    optimizer_step,
    stop_message,
)
from badpo.engine.reporting import RunLog, annotator_theta
from badpo.engine.runtime import gradient_sync_off
from badpo.methods import JudgmentBatch, LossTerms, Method, StepView, Weighting, sample_seeds
from badpo.run_folder.layout import AUDIT_FILE, CONFIG_FILE
from badpo.run_folder.ownership import check_checkpoint
from badpo.theta.level import LevelStep
from badpo.theta.step import reduce_theta_gradients, step_theta

STATS = ("loss", "reward_margin", "reward_accuracy", "chosen_reward", "rejected_reward")


@dataclasses.dataclass
class Run:
    """Everything the loop touches, on the training device."""

    config: Any  # the stage's config (TrainConfig, RMConfig)
    method: Method
    accelerator: object
    policy: torch.nn.Module  # LogprobModel, prepared by accelerate
    bias: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    theta_optimizer: torch.optim.Optimizer | None
    data: PreferenceData
    items: ItemTable
    schedule: Schedule
    reference: Tensor | None  # [S] reference log-probs, on the device (None: a reward model)
    annotator_index: Tensor  # [N], on the device
    attr_diff: Tensor  # [N, q], on the device
    params: object = None  # the method's typed parameters (method_params)
    weighting: Weighting | None = None  # the loss weights with state, if any
    reference_tokens: Tensor | None = None  # [tokens] per-token reference log-probs (ragged)
    token_offsets: Tensor | None = None  # [S + 1] where each store row's tokens start
    labels: Audit | None = None  # the label audit of the learned attributes
    # (run, micro-batch, step, step statistic) -> LossTerms [J]; None: judgment_losses (the method on policy
    # log-probs). badpo.engine.reward gives a reward model's Bradley-Terry terms here.
    losses: Callable[..., LossTerms] | None = None
    level: LevelStep | None = None  # bias.trusted_level with trusted annotators (badpo.theta.level)
    orthogonal: bool = False  # bias.level: orthogonal, the policy's step orthogonal to the attributes
    cuts: torch.nn.Module | None = None  # ties and strengths: the ordered logit's cut points (badpo.theta.graded)


def judgment_losses(run: Run, micro, step: int, statistic=None) -> LossTerms:
    """The method's per-judgment loss terms of one micro-batch, each ``[J]``; ``statistic`` is what
    the method's ``step_statistic`` computed over the step (None without one)."""
    device = run.accelerator.device
    batch = run.data.store.batch(micro.sequence_rows, device)
    needs = run.method.needs
    if needs.token_logratios:
        logps, policy_tokens = run.policy(batch["input_ids"], batch["attention_mask"],
                                          batch["response_mask"], per_token=True)
    else:
        logps = run.policy(batch["input_ids"], batch["attention_mask"], batch["response_mask"])
    reference = run.reference[micro.sequence_rows.to(device)]
    chosen, rejected = micro.chosen_slot.to(device), micro.rejected_slot.to(device)
    bias_logit = bias_logits(run, micro.judgments.to(device))
    policy_chosen, policy_rejected = orthogonal_sides(run, micro.judgments, logps[chosen], logps[rejected])
    views = {}
    if needs.lengths:
        lengths = run.data.store.response_lengths()[micro.sequence_rows].to(device)
        views.update(chosen_lengths=lengths[chosen], rejected_lengths=lengths[rejected])
    if needs.token_logratios:
        ratios = _token_logratios(run, micro.sequence_rows, policy_tokens)
        views.update(chosen_token_logratios=tuple(ratios[i] for i in micro.chosen_slot.tolist()),
                     rejected_token_logratios=tuple(ratios[i] for i in micro.rejected_slot.tolist()))
    if needs.sample_seeds:
        views["sample_seeds"] = sample_seeds(run.config.runtime.seed, step, micro.judgments)
    view = JudgmentBatch(
        policy_chosen=policy_chosen, policy_rejected=policy_rejected, reference_chosen=reference[chosen],
        reference_rejected=reference[rejected], bias_logit=bias_logit, beta=run.config.beta,
        step_statistic=statistic, **views)
    terms = run.method.loss(view, run.params)
    if run.cuts is None:
        return terms
    # ties and strengths: the ordered logit on the loss's own logit (prepare_run checked it is logistic)
    return dataclasses.replace(terms, losses=run.cuts.loss(terms.logits, run.data.grades.grade[micro.judgments]))


def step_view(run: Run, step_judgments: Tensor) -> StepView:
    """The whole step as a method's ``step_statistic`` sees it; the policy's log-probs of the
    step's sequences are a no-grad forward, run only if the hook asks for them."""
    device = run.accelerator.device
    judgments = step_judgments.to(device)
    chosen_rows, rejected_rows = run.data.chosen_row[step_judgments], run.data.rejected_row[step_judgments]

    def policy_logprobs() -> tuple[Tensor, Tensor]:
        rows = torch.cat([chosen_rows, rejected_rows])
        with torch.no_grad():
            logps = torch.cat([_summed_logprobs(run, part) for part in rows.split(run.config.micro_batch_size)])
        return logps[: len(chosen_rows)], logps[len(chosen_rows):]

    return StepView(judgments=judgments, reference_chosen=run.reference[chosen_rows.to(device)],
                    reference_rejected=run.reference[rejected_rows.to(device)],
                    bias_logit=bias_logits(run, judgments).detach(), beta=run.config.beta,
                    policy_logprobs=policy_logprobs)


def _summed_logprobs(run: Run, rows: Tensor) -> Tensor:
    batch = run.data.store.batch(rows, run.accelerator.device)
    return run.policy(batch["input_ids"], batch["attention_mask"], batch["response_mask"])


def orthogonal_sides(run: Run, judgments: Tensor, chosen: Tensor, rejected: Tensor) -> tuple[Tensor, Tensor]:
    """The micro-batch's ``[J]`` chosen and rejected scores, under ``bias.level: orthogonal`` with
    their gradient kept orthogonal to the judgments' declared attribute differences
    (:mod:`badpo.core.orthogonal`); as they are otherwise."""
    if not run.orthogonal:
        return chosen, rejected
    rows = judgments.to(run.attr_diff.device)
    directions = run.attr_diff[rows][:, run.bias.declared_index]
    return orthogonal_to(chosen, directions), orthogonal_to(rejected, directions)


def bias_logits(run: Run, judgments: Tensor) -> Tensor:
    """b = theta_k . (g_w - g_l) of each of the ``[J]`` judgments (zeros without a bias channel)."""
    if run.bias is None:
        return torch.zeros(len(judgments), device=judgments.device)
    return run.bias(run.annotator_index[judgments], run.attr_diff[judgments])


@torch.no_grad()
def largest_bias_logit(run: Run) -> Tensor:
    """max over the training judgments of |theta_k . (g_w - g_l)| (0 without any)."""
    logits = bias_logits(run, torch.arange(len(run.annotator_index), device=run.annotator_index.device))
    return logits.abs().max() if len(logits) else torch.tensor(0.0)


def largest_difference(run) -> str | None:
    """Where the training judgments' largest |g(y_w) - g(y_l)| is, in words (None without g)."""
    diff = getattr(run, "attr_diff", None)
    if diff is None or diff.numel() == 0:
        return None
    flat = int(diff.abs().argmax())
    row, column = divmod(flat, diff.shape[1])
    return (f"the largest |g(y_w) - g(y_l)| in the data is {float(diff[row, column].abs()):.4g} "
            f"(attribute {run.data.attribute_names[column]!r}, row {row} of the training judgments)")


def _token_logratios(run: Run, rows: Tensor, policy_tokens: Tensor) -> list[Tensor]:
    """log pi - log pi_ref per response token of each of the micro-batch's sequences."""
    spans = [(int(run.token_offsets[r]), int(run.token_offsets[r + 1])) for r in rows.tolist()]
    pieces = policy_tokens.split([end - start for start, end in spans])
    return [piece - run.reference_tokens[start:end] for piece, (start, end) in zip(pieces, spans)]


def train_step(run: Run, step: int) -> tuple[Tensor, dict]:
    """One optimizer step (0-based ``step``); returns (summed stats [5] of this process, the
    gradient norms before clipping — ``grad_norm`` of the policy, ``theta_grad_norm`` — and what
    the method's weighting logs)."""
    accelerator = run.accelerator
    micros = run.schedule.micro_batches(step, accelerator.process_index, accelerator.num_processes,
                                        run.config.micro_batch_size)
    step_judgments = run.items.judgments_of(run.schedule.step_items(step))
    normaliser = _step_weight(run, step_judgments) / accelerator.num_processes  # DDP averages over processes
    statistic = _step_statistic(run, step_judgments)
    stats = torch.zeros(len(STATS), device=accelerator.device)
    for index, items in enumerate(micros):
        micro = run.items.micro_batch(items)
        last = index == len(micros) - 1
        with contextlib.nullcontext() if last else gradient_sync_off(accelerator, run.policy):
            terms = (run.losses or judgment_losses)(run, micro, step, statistic)
            accelerator.backward(_weighted(run, micro, step_judgments, terms.losses).sum() / normaliser)
        _observe_level(run, micro, terms)
        stats += _micro_stats(terms)
    norms = _reduce_theta_gradients(run)
    theta = run.bias if run.theta_optimizer is not None else None
    check_loss_and_gradients(accelerator, step, stats[0], run.policy, theta)  # the weights stay the last good
    norms |= _update_policy(run, step)
    norms |= _update_theta(run, step)
    check_weights(accelerator, step, run.policy, theta, lambda: largest_bias_logit(run))  # before any checkpoint
    return stats, norms


def _step_weight(run: Run, step_judgments: Tensor) -> float:
    """The loss's normaliser: the step's judgments, or the sum of their weights under a weighting
    and the judgments' own weights (1 where the step's weights are all 0: its loss is 0 then)."""
    if run.weighting is None and run.data.weight is None:
        return float(len(step_judgments))
    weights = torch.ones(len(step_judgments), dtype=torch.float64)
    if run.weighting is not None:
        weights = weights * run.weighting.weights(step_judgments, step_judgments).double().cpu()
    if run.data.weight is not None:
        weights = weights * run.data.weight[step_judgments.cpu()].double()
    return float(weights.sum()) or 1.0


def _step_statistic(run: Run, step_judgments: Tensor):
    """The method's statistic over the whole step (None without one); every process sees the
    whole step, so every process computes the same value."""
    if run.method.step_statistic is None:
        return None
    return run.method.step_statistic(step_view(run, step_judgments), run.params)


def _weighted(run: Run, micro, step_judgments: Tensor, losses: Tensor) -> Tensor:
    """The micro-batch's losses times the method's weights (observed first) and the judgments' own
    weights (``PreferenceData.weight``), as they are without."""
    weighted = losses if run.data.weight is None else losses * run.data.weight[micro.judgments.cpu()].to(losses)
    if run.weighting is None:
        return weighted
    run.weighting.observe(micro.judgments, losses)  # a group's loss as it is, not as reliability weighs it
    return weighted * run.weighting.weights(micro.judgments, step_judgments).to(losses.device)


def _observe_level(run: Run, micro, terms) -> None:
    """This micro-batch's margins, for the level step after the optimizer step (every_step rules)."""
    if run.level is not None and run.level.every_step:
        device = run.accelerator.device
        run.level.observe(micro.judgments, terms.logits, bias_logits(run, micro.judgments.to(device)))


def _micro_stats(terms) -> Tensor:
    """[STATS]: summed loss, margin, margin > 0, chosen and rejected rewards."""
    margin = terms.chosen_rewards - terms.rejected_rewards
    return torch.stack([terms.losses.detach().sum(), margin.sum(), (margin > 0).float().sum(),
                        terms.chosen_rewards.sum(), terms.rejected_rewards.sum()])


def _reduce_theta_gradients(run: Run) -> dict:
    """theta is outside DDP: its gradients averaged over processes (:mod:`badpo.theta.step`)."""
    return {} if run.theta_optimizer is None else reduce_theta_gradients(run.bias, run.accelerator, run.cuts)


def _update_policy(run: Run, step: int) -> dict:
    """Clip (the policy only: theta is never clipped), step, schedule, zero."""
    norms = {}
    if run.config.optim.max_grad_norm > 0:
        norms["grad_norm"] = run.accelerator.clip_grad_norm_(run.policy.parameters(), run.config.optim.max_grad_norm)
    optimizer_step(run.optimizer, step, "the policy")
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    return norms


def _update_theta(run: Run, step: int) -> dict:
    """theta's own Adam, then the level step (after it: the trusted set the level), then the
    method's weights; what they log."""
    norms = {}
    if run.theta_optimizer is not None:
        step_theta(run.theta_optimizer, lambda optimizer: optimizer_step(optimizer, step, "theta"))
    if run.level is not None and run.level.every_step:
        norms.update(run.level.apply(run.bias, run.annotator_index, run.attr_diff,
                                     _summed_over_processes(run.accelerator)))
    if run.weighting is not None:
        norms.update(run.weighting.update(_summed_over_processes(run.accelerator)))
    return norms


@torch.no_grad()
def final_level(run: Run) -> dict:
    """``bias.trusted_level: final``: every judgment's logits under the trained model (one no-grad
    pass in eval mode, so no LoRA dropout, the mode restored after; the items split over
    processes), then the level step once (:mod:`badpo.theta.level`). Every process runs the same
    number of forwards, as FSDP's gathers inside a forward need: one with fewer items pads with
    forwards of item 0 whose margins it does not record."""
    accelerator, size = run.accelerator, run.config.micro_batch_size
    chunks = torch.arange(len(run.items))[accelerator.process_index::accelerator.num_processes].split(size)
    forwards = math.ceil(math.ceil(len(run.items) / accelerator.num_processes) / size)  # process 0's
    was_training = run.policy.training
    run.policy.eval()
    try:
        for index in range(forwards):
            padding = index >= len(chunks)
            micro = run.items.micro_batch(torch.zeros(1, dtype=torch.long) if padding else chunks[index])
            terms = (run.losses or judgment_losses)(run, micro, run.config.steps)
            if not padding:
                judgments = micro.judgments.to(accelerator.device)
                run.level.observe(micro.judgments, terms.logits, bias_logits(run, judgments))
    finally:
        run.policy.train(was_training)
    run.level.trained = copy.deepcopy(run.bias)  # the theta the policy was fitted with, saved beside
    return run.level.apply(run.bias, run.annotator_index, run.attr_diff, _summed_over_processes(accelerator))


def _summed_over_processes(accelerator):
    def reduce(values: Tensor) -> Tensor:
        if accelerator.num_processes == 1:
            return values
        return accelerator.reduce(values.to(accelerator.device), reduction="sum").cpu()

    return reduce


def step_record(run: Run, step: int, stats: Tensor, norms: dict, lr: float, started: float) -> dict:
    """The log record of 0-based ``step``: means over the step's judgments, theta_bar, lrs."""
    stats = run.accelerator.reduce(stats, reduction="sum").tolist()
    judgments = int(run.items.judgment_counts(run.schedule.step_items(step)).sum())
    record = {name: value / judgments for name, value in zip(STATS, stats)}
    if run.bias is not None:
        record["theta_bar"] = dict(zip(run.data.attribute_names, run.bias.mean().tolist()))
    if run.cuts is not None:
        record["label_cuts"] = run.cuts.record()
    record["lr"] = lr
    if run.theta_optimizer is not None:
        record["theta_lr"] = run.theta_optimizer.param_groups[0]["lr"]
    record.update({name: float(value) if isinstance(value, Tensor) else value
                   for name, value in norms.items()})
    record.update(judgments=judgments, elapsed_s=round(time.perf_counter() - started, 3))
    return record


@dataclasses.dataclass(frozen=True)
class LoopSettings:
    """How the loop runs one stage: its steps, where it stops, how often it checkpoints (the
    attribute names of a TrainConfig, so the checkpoint checks read either)."""

    steps: int
    stop_after_steps: int | None = None
    save_every: int = 0
    keep_checkpoints: int = 1
    description: str = ""  # the progress bar's label

    @classmethod
    def of(cls, config) -> LoopSettings:
        """A TrainConfig's or an RMConfig's own settings."""
        return cls(config.steps, config.stop_after_steps, config.save_every, config.keep_checkpoints,
                   config.run_name)


class Stage(Protocol):
    """What plugs into the loop. ``name`` is the command, and names the stage in every message."""

    name: str

    def prepare(self, config, accelerator) -> tuple[Any, dict, Any]:
        """Data, model, reference and optimizers: (run, reference-cache facts, tokenizer). The run
        has ``accelerator``, ``policy``, ``optimizer``, ``scheduler``, ``bias``, ``theta_optimizer``,
        ``weighting`` and ``labels`` (None where the stage has none): what a checkpoint holds."""

    def settings(self, config, run) -> LoopSettings:
        """The loop's steps and checkpoints for this run."""

    def step(self, run, step: int) -> tuple[Tensor, dict]:
        """One optimizer step: (this process's summed statistics, what to log beside them)."""

    def record(self, run, step: int, stats: Tensor, norms: dict, lr: float, started: float) -> dict:
        """The log record of 0-based ``step`` (called on every process: it may reduce)."""

    def on_finished(self, run) -> None:
        """Called once the last step is done, before the outputs are committed."""

    def write_outputs(self, run, tokenizer, output: Path, cache_parts: dict, last: dict,
                      seconds: float) -> None:
        """Commit what the stage trained (called on every process: FSDP gathers its shards)."""


class JudgmentStage:
    """The loop's part of a stage that trains on judgments (preference, reward model): its
    config's steps and checkpoints, :func:`train_step` and :func:`step_record`."""

    def settings(self, config, run: Run) -> LoopSettings:
        return LoopSettings.of(config)

    def step(self, run: Run, step: int) -> tuple[Tensor, dict]:
        return train_step(run, step)

    def record(self, run: Run, step: int, stats: Tensor, norms: dict, lr: float, started: float) -> dict:
        return step_record(run, step, stats, norms, lr, started)


def notice(stage: str, accelerator, message: str) -> None:
    if accelerator.is_main_process:
        print(f"badpo {stage}: {message}", file=sys.stderr)


def resume_point(config, output: Path) -> Path | None:
    """The checkpoint this run resumes from (``resume_from``), checked to be this run's; None to
    start afresh. An unfinished run's checkpoints without ``resume_from`` are an error."""
    resume = resolve_resume(config.resume_from, output)
    if resume is None and list_checkpoints(output):
        raise ConfigError(
            f"output_dir: {output} holds an unfinished run of this config (checkpoints up to "
            f"{list_checkpoints(output)[-1].name}); set resume_from=latest to continue it, or "
            "overwrite=true to start again")
    if resume is not None:
        check_checkpoint(resume, config)
    return resume


def run_stage(stage: Stage, config, output: Path, accelerator, resume: Path | None) -> Path:
    """Train (or resume from ``resume``) one run of ``stage`` in ``output``; returns ``output``."""
    run, cache_parts, tokenizer = stage.prepare(config, accelerator)
    settings = stage.settings(config, run)
    check_checkpointing(accelerator, settings, resume)
    state = TrainingState()
    contents = checkpoint_contents(run, state)  # what a checkpoint holds: tensors and JSON only
    if resume is not None:
        load_checkpoint(accelerator, resume, contents)
    if accelerator.is_main_process:
        dump_yaml(config, output / CONFIG_FILE)
        if run.labels is not None:
            (output / AUDIT_FILE).write_text(run.labels.to_json(), encoding="utf-8")
    started = time.perf_counter()
    last_record = _loop(stage, run, config, settings, output, state, contents, started)
    if state.step == settings.steps:
        if getattr(run, "level", None) is not None and not run.level.every_step:
            final_level(run)
        stage.on_finished(run)
        stage.write_outputs(run, tokenizer, output, cache_parts, last_record, time.perf_counter() - started)
    return output


def _loop(stage: Stage, run, config, settings: LoopSettings, output: Path, state: TrainingState, contents,
          started: float) -> dict:
    """Steps from ``state.step`` to the stop, logging and checkpointing; the last log record."""
    accelerator = run.accelerator
    stop = settings.stop_after_steps or settings.steps
    log = RunLog(output, config.report, settings.steps, state.step, accelerator.is_main_process,
                 to_dict(config), description=settings.description)
    last_record: dict = {}
    try:
        for step in range(state.step, stop):
            lr = run.scheduler.get_last_lr()[0]
            stats, norms = stage.step(run, step)
            state.step = step + 1
            if log.wants(state.step):
                last_record = stage.record(run, step, stats, norms, lr, started)
                log.log(state.step, last_record, annotator_theta(run.bias) if log.trackers else None)
            log.advance()
            if (settings.save_every and state.step % settings.save_every == 0) or (
                state.step == stop < settings.steps
            ):
                save_checkpoint(accelerator, output, state.step, settings.keep_checkpoints, config, contents)
    except TrainingDiverged as error:  # the folder keeps the log and checkpoints of the good steps
        raise TrainingDiverged(error.step, error.what, stop_message(
            error, output, list_checkpoints(output), largest_difference(run))) from None
    finally:
        log.close()
    return last_record


__all__ = ["Run", "Stage", "JudgmentStage", "LoopSettings", "STATS", "run_stage", "train_step", "judgment_losses",
           "bias_logits", "orthogonal_sides", "step_view", "step_record", "final_level", "resume_point", "notice"]
