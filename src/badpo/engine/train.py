"""``badpo train``: the preference stage, one readable loop on accelerate (+ peft for LoRA).

Per step: the step's items are cut into micro-batches; each micro-batch scores its sequences with
the policy, reads the cached reference log-probs, adds the bias logit of each judgment, and
back-propagates sum(losses) / (judgments in the global step / processes), so the update is the
gradient of the mean loss over the step's judgments whatever the micro-batch size, the number of
accumulation passes or of processes. Then theta's gradient is averaged over processes (theta is
not inside the DDP model), the policy's gradient alone is clipped, AdamW (policy, scheduled) and
Adam (theta, constant lr) step, and both gradients are cleared.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from accelerate.utils import set_seed
from torch import Tensor

from badpo.core.attributes import AttributeSet, resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError, dump_yaml, to_dict
from badpo.data.sources import read_judgment_source
from badpo.audit.estimates import Audit, audit
from badpo.engine.cache import reference_logprobs, token_offsets
from badpo.engine.checkpoint import (
    TrainingState, install_policy_hooks, list_checkpoints, resolve_resume, save_checkpoint,
)
from badpo.engine.settings import (
    PREFERENCE_LR, TrainConfig, accumulation_steps, check_train, format_output_dir, resolved_lr, stage_name,
)
from badpo.engine.batches import (
    ItemTable, PreferenceData, Schedule, build_preference_data, offline_estimate,
)
from badpo.engine.logprobs import LogprobModel
from badpo.engine.mixture import train_type_policies
from badpo.engine.reporting import RunLog, report_input
from badpo.engine.run_folder import CONFIG_FILE, check_checkpoint, commit_final, is_finished, own_folder
from badpo.engine.runtime import load_model, load_tokenizer, make_accelerator, policy_optimizer
from badpo.engine.tokenize import settings_dict
from badpo.core.jsonio import dumps
from badpo.methods import GroupWeights, JudgmentBatch, LossTerms, Method, get_method, sample_seeds

STATS = ("loss", "reward_margin", "reward_accuracy", "chosen_reward", "rejected_reward")


def build_bias(method: Method, config: TrainConfig, data: PreferenceData):
    """The BiasChannel of the arm, or None when no attribute is declared (the bias logit is 0)."""
    if not data.attribute_names:
        if method.learns_theta or config.bias.fixed_offset is not None:
            raise ConfigError(
                f"attributes: method {config.method!r} / bias options need at least one")
        return None
    if not method.learns_theta:
        for key in ("warm_start", "declared", "trusted"):
            if getattr(config.bias, key) not in (False, None):
                raise ConfigError(f"bias.{key}: method {config.method!r} learns no theta")
    declared = config.bias.declared or list(data.attribute_names)
    unknown = [n for n in declared if n not in data.attribute_names]
    if unknown:
        raise ConfigError(
            f"bias.declared: {unknown} not among the attributes {list(data.attribute_names)}")
    init_mean = None
    if config.bias.warm_start:  # the offline log-odds of the declared attributes; the rest stay 0
        columns = [data.attribute_names.index(n) for n in declared]
        estimate = dict(zip(declared, offline_estimate(data.attr_diff[:, columns], declared)))
        init_mean = [estimate.get(n, 0.0) for n in data.attribute_names]
    trusted = config.bias.trusted_values(len(data.attribute_names))
    check_trusted_ids(config, data.annotators)
    for annotator, values in trusted.items():
        if len(values) != len(data.attribute_names):
            raise ConfigError(f"bias.trusted.{annotator}: expected {len(data.attribute_names)} values, "
                              f"one per attribute {list(data.attribute_names)}, got {len(values)}")
    try:
        return BiasChannel(
            method.bias_variant, data.attribute_names, data.annotators, data.annotator_classes,
            declared=config.bias.declared, init_mean=init_mean, fixed_offset=config.bias.fixed_offset,
            trusted=trusted or None,
        )
    except ValueError as error:  # a trusted value the variant cannot hold: name the config key
        if str(error).startswith("trusted"):
            raise ConfigError(f"bias.{error} (method {config.method!r})") from None
        raise


def check_trusted_ids(config: TrainConfig, annotators) -> None:
    """Every ``bias.trusted`` id must be an annotator of the training data."""
    known = set(annotators)
    for annotator in config.bias.trusted or ():
        if annotator not in known:
            raise ConfigError(f"bias.trusted: annotator {annotator!r} has no judgment in {config.data}")


@dataclasses.dataclass
class Run:
    """Everything the loop touches, on the training device."""

    config: TrainConfig
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
    weighting: GroupWeights | None = None  # the loss weights with state, if any (GroupWeights' protocol)
    reference_tokens: Tensor | None = None  # [tokens] per-token reference log-probs (ragged)
    token_offsets: Tensor | None = None  # [S + 1] where each store row's tokens start
    labels: Audit | None = None  # the label audit of the learned attributes
    # (run, micro-batch, step) -> LossTerms [J]; None: judgment_losses (the method on policy
    # log-probs). badpo.engine.reward gives a reward model's Bradley-Terry terms here.
    losses: Callable[..., LossTerms] | None = None


def judgment_losses(run: Run, micro, step: int) -> LossTerms:
    """The method's per-judgment loss terms of one micro-batch, each ``[J]``."""
    device = run.accelerator.device
    batch = run.data.store.batch(micro.sequence_rows, device)
    needs = run.method.needs
    if "token_logratios" in needs:
        logps, policy_tokens = run.policy(batch["input_ids"], batch["attention_mask"],
                                          batch["response_mask"], per_token=True)
    else:
        logps = run.policy(batch["input_ids"], batch["attention_mask"], batch["response_mask"])
    reference = run.reference[micro.sequence_rows.to(device)]
    chosen, rejected = micro.chosen_slot.to(device), micro.rejected_slot.to(device)
    bias_logit = bias_logits(run, micro.judgments.to(device))
    views = {}
    if "lengths" in needs:
        lengths = run.data.store.response_lengths()[micro.sequence_rows].to(device)
        views.update(chosen_lengths=lengths[chosen], rejected_lengths=lengths[rejected])
    if "token_logratios" in needs:
        ratios = _token_logratios(run, micro.sequence_rows, policy_tokens)
        views.update(chosen_token_logratios=tuple(ratios[i] for i in micro.chosen_slot.tolist()),
                     rejected_token_logratios=tuple(ratios[i] for i in micro.rejected_slot.tolist()))
    if "sample_seeds" in needs:
        views["sample_seeds"] = sample_seeds(run.config.runtime.seed, step, micro.judgments)
    view = JudgmentBatch(
        policy_chosen=logps[chosen], policy_rejected=logps[rejected], reference_chosen=reference[chosen],
        reference_rejected=reference[rejected], bias_logit=bias_logit, beta=run.config.beta, **views)
    return run.method.loss(view, run.params)


def bias_logits(run: Run, judgments: Tensor) -> Tensor:
    """b = theta_k . (g_w - g_l) of each of the ``[J]`` judgments (zeros without a bias channel)."""
    if run.bias is None:
        return torch.zeros(len(judgments), device=judgments.device)
    return run.bias(run.annotator_index[judgments], run.attr_diff[judgments])


def _token_logratios(run: Run, rows: Tensor, policy_tokens: Tensor) -> list[Tensor]:
    """log pi - log pi_ref per response token of each of the micro-batch's sequences."""
    spans = [(int(run.token_offsets[r]), int(run.token_offsets[r + 1])) for r in rows.tolist()]
    pieces = policy_tokens.split([end - start for start, end in spans])
    return [piece - run.reference_tokens[start:end] for piece, (start, end) in zip(pieces, spans)]


def train_step(run: Run, step: int) -> tuple[Tensor, dict]:
    """One optimizer step (0-based ``step``); returns (summed stats [5] of this process, the
    gradient norms before clipping — ``grad_norm`` of the policy, ``theta_grad_norm`` — and what
    the method's weighting logs)."""
    config, accelerator = run.config, run.accelerator
    micros = run.schedule.micro_batches(step, accelerator.process_index,
                                        accelerator.num_processes, config.micro_batch_size)
    step_judgments = run.items.judgments_of(run.schedule.step_items(step))
    if run.weighting is None:
        total = float(len(step_judgments))
    else:  # the step's weights sum to the loss's normaliser
        total = float(run.weighting.weights(step_judgments, step_judgments).sum())
    normaliser = total / accelerator.num_processes  # DDP averages over processes
    stats = torch.zeros(len(STATS), device=accelerator.device)
    for index, items in enumerate(micros):
        micro = run.items.micro_batch(items)
        last = index == len(micros) - 1
        with contextlib.nullcontext() if last else accelerator.no_sync(run.policy):
            terms = (run.losses or judgment_losses)(run, micro, step)
            losses = terms.losses
            if run.weighting is not None:
                run.weighting.observe(micro.judgments, losses)
                losses = losses * run.weighting.weights(micro.judgments, step_judgments)
            accelerator.backward(losses.sum() / normaliser)
        margin = terms.chosen_rewards - terms.rejected_rewards
        stats += torch.stack([terms.losses.detach().sum(), margin.sum(), (margin > 0).float().sum(),
                              terms.chosen_rewards.sum(), terms.rejected_rewards.sum()])
    norms = {}
    if run.theta_optimizer is not None:
        grads = []
        for param in run.bias.parameters():
            grad = param.grad if param.grad is not None else torch.zeros_like(param)
            if accelerator.num_processes > 1:  # theta is outside DDP: average like DDP does
                grad = accelerator.reduce(grad, reduction="mean")
            param.grad = grad
            grads.append(grad.reshape(-1))
        norms["theta_grad_norm"] = torch.linalg.vector_norm(torch.cat(grads))
    if config.optim.max_grad_norm > 0:  # the policy only: theta is never clipped
        norms["grad_norm"] = accelerator.clip_grad_norm_(run.policy.parameters(),
                                                         config.optim.max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    if run.theta_optimizer is not None:
        run.theta_optimizer.step()
        run.theta_optimizer.zero_grad(set_to_none=True)
    if run.weighting is not None:
        norms.update(run.weighting.update(_summed_over_processes(accelerator)))
    return stats, norms


def _summed_over_processes(accelerator):
    def reduce(values: Tensor) -> Tensor:
        if accelerator.num_processes == 1:
            return values
        return accelerator.reduce(values.to(accelerator.device), reduction="sum").cpu()

    return reduce


def _record(run: Run, step: int, stats: Tensor, norms: dict, lr: float, started: float) -> dict:
    """The log record of 0-based ``step``: means over the step's judgments, theta_bar, lrs."""
    stats = run.accelerator.reduce(stats, reduction="sum").tolist()
    judgments = int(run.items.judgment_counts(run.schedule.step_items(step)).sum())
    record = {name: value / judgments for name, value in zip(STATS, stats)}
    if run.bias is not None:
        record["theta_bar"] = dict(zip(run.data.attribute_names, run.bias.mean().tolist()))
    record["lr"] = lr
    if run.theta_optimizer is not None:
        record["theta_lr"] = run.theta_optimizer.param_groups[0]["lr"]
    record.update({name: float(value) if isinstance(value, Tensor) else value
                   for name, value in norms.items()})
    record.update(judgments=judgments, elapsed_s=round(time.perf_counter() - started, 3))
    return record


def audit_labels(method: Method, config: TrainConfig, judgments, attributes) -> Audit | None:
    """The label audit (as ``badpo audit``) of the attributes this arm learns a theta on.

    An attribute that is never cross-group within a pair leaves theta unidentified: training would
    report the 0 it started from as a result, so that is an error. Unidentified or divergent
    annotators and a split annotator graph are warnings (``BiasIdentifiabilityWarning``).
    """
    if not method.learns_theta or attributes is None:
        return None
    declared = set(config.bias.declared or attributes.names)
    learned = AttributeSet(tuple(a for a in attributes.attributes if a.name in declared))
    check_trusted_ids(config, {j.annotator for j in judgments})
    result = audit(judgments, learned, trusted=list(config.bias.trusted or ()), source=config.data)
    for coordinate in result.coordinates:
        if coordinate.overall.cross == 0:
            raise ConfigError(
                f"attributes: {coordinate.name!r} never differs between the two sides of a judgment "
                f"in {config.data}, so method {config.method!r} cannot learn its theta; drop it "
                "from bias.declared (or from attributes)")
    return result


def prepare_run(config: TrainConfig, accelerator=None, *, weighting=None,
                judgment_mask: Tensor | None = None) -> tuple[Run, dict, object]:
    """Load data and model, audit the labels, cache the reference, build optimizers; returns
    (run, cache key, tokenizer).

    A caller that trains several policies (``badpo.engine.mixture``) may give the ``weighting``
    (in place of the method's) and a ``judgment_mask`` (``[N]`` bool): the run then trains on
    those judgments only, indices unchanged.
    """
    method = get_method(config.method)
    method_params = method.parse_params(config.method_params)
    if accelerator is None:
        accelerator = make_accelerator(config.runtime.precision, config.runtime.num_threads)
    accumulation_steps(config.batch_size, config.micro_batch_size, accelerator.num_processes)
    set_seed(config.runtime.seed)
    tokenizer = load_tokenizer(config.model)
    attributes = resolve_attributes(config.attributes) if config.attributes else None
    loaded = read_judgment_source(config.data, config.data_split, config.columns, tokenizer)
    judgments = loaded.rows
    labels = audit_labels(method, config, judgments, attributes)
    data = build_preference_data(judgments, attributes, tokenizer, config.tokenization,
                                 drop_identical_pairs=config.drop_identical_pairs, source=config.data,
                                 rendered_prompts=loaded.rendered_prompts)
    if method.shuffle_annotators:
        data = data.with_shuffled_annotators(config.runtime.seed)
    bias = build_bias(method, config, data)
    model = load_model(config.model, config.lora, accelerator.mixed_precision).to(accelerator.device)
    identity = {"model": config.model.name_or_path, "revision": config.model.revision,
                "tokenization": settings_dict(tokenizer, config.tokenization),
                "precision": accelerator.mixed_precision, "dtype": str(next(model.parameters()).dtype)}
    per_token = "token_logratios" in method.needs
    reference, reference_tokens, cache_parts = reference_logprobs(
        model, data.store, identity=identity, cache_dir=config.cache_dir,
        batch_size=config.runtime.eval_batch_size, chunk_size=config.runtime.logprob_chunk_size,
        accelerator=accelerator, per_token=per_token,
    )
    policy = LogprobModel(model, config.runtime.logprob_chunk_size)
    optimizer, scheduler = policy_optimizer(policy, config.optim, _lr(config), config.steps)
    policy, optimizer = accelerator.prepare(policy, optimizer)
    theta_optimizer = theta_adam(bias, config.bias.lr, accelerator.device)
    items = data.items(config.batching)
    if judgment_mask is not None:
        items = items.restrict(judgment_mask)
    if weighting is None and method.weighting is not None:
        weighting = method.weighting(method_params, data.annotator_index, data.annotators,
                                     data.annotator_classes)
    run = Run(
        config=config, method=method, accelerator=accelerator, policy=policy, bias=bias,
        optimizer=optimizer, scheduler=scheduler, theta_optimizer=theta_optimizer, data=data,
        items=items, schedule=Schedule(len(items), config.batch_size, config.runtime.seed),
        reference=reference.to(accelerator.device),
        annotator_index=data.annotator_index.to(accelerator.device),
        attr_diff=data.attr_diff.to(accelerator.device), params=method_params, labels=labels,
        weighting=weighting,
        reference_tokens=reference_tokens.to(accelerator.device) if per_token else None,
        token_offsets=token_offsets(data.store) if per_token else None,
    )
    return run, cache_parts, tokenizer


def theta_adam(bias: BiasChannel | None, lr: float, device) -> torch.optim.Optimizer | None:
    """theta's own Adam: constant lr, no weight decay, never scheduled or clipped (None when the
    channel has nothing to learn). Moves the channel to ``device``."""
    if bias is None:
        return None
    bias.to(device)
    params = [p for p in bias.parameters() if p.requires_grad]
    return torch.optim.Adam(params, lr=lr, weight_decay=0.0) if params else None


def _lr(config: TrainConfig) -> float:
    return resolved_lr(config.optim, config.lora, PREFERENCE_LR)


def _notice(accelerator, message: str) -> None:
    if accelerator.is_main_process:
        print(f"badpo train: {message}", file=sys.stderr)


def train(config: TrainConfig) -> Path:
    """Run (or resume) one preference run; returns its output folder.

    The folder holds ``policy/`` (HF format; the adapter under LoRA), ``theta.json``,
    ``config.yaml`` (resolved), ``log.jsonl``, ``audit.json``, ``run.json`` and ``checkpoints/``.
    A folder holding another run is refused (``overwrite: true`` replaces it); a finished run is
    left as it is.
    """
    config = format_output_dir(config)
    config = dataclasses.replace(config, optim=dataclasses.replace(config.optim, lr=_lr(config)))
    check_train(config)
    output = Path(config.output_dir)
    accelerator = make_accelerator(config.runtime.precision, config.runtime.num_threads)
    with own_folder(output, config, accelerator):
        if is_finished(output):
            _notice(accelerator, f"{output} holds this run, finished; its results are kept "
                                 "(overwrite=true trains it again)")
            return output
        if get_method(config.method).type_policies:  # several policies, each trained by the loop below
            return train_type_policies(config, output, accelerator, _train_in_folder)
        return _train_in_folder(config, output, accelerator, resume_point(config, output))


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


def _train_in_folder(config: TrainConfig, output: Path, accelerator, resume: Path | None, *,
                     weighting=None, judgment_mask: Tensor | None = None, on_finished=None,
                     prepare=None, write_outputs=None) -> Path:
    """Train (or resume) one policy in ``output``. ``weighting`` and ``judgment_mask`` go to
    :func:`prepare_run`; ``on_finished(run)``, if given, is called once the last step is done,
    before the final outputs are committed. Another stage on the same loop (a reward model,
    badpo.engine.reward) gives its own ``prepare(config, accelerator) -> (run, cache parts,
    tokenizer)`` and ``write_outputs`` (the signature of :func:`_write_outputs`)."""
    prepare = prepare or functools.partial(prepare_run, weighting=weighting, judgment_mask=judgment_mask)
    run, cache_parts, tokenizer = prepare(config, accelerator)
    report_input(accelerator, run.data.input_report, stage_name(config))
    state = TrainingState()
    install_policy_hooks(accelerator)
    objects = [run.scheduler, state]
    if run.theta_optimizer is not None:
        objects += [run.bias, run.theta_optimizer]
    if run.weighting is not None:
        objects.append(run.weighting)
    accelerator.register_for_checkpointing(*objects)
    if resume is not None:
        accelerator.load_state(str(resume))
    if accelerator.is_main_process:
        dump_yaml(config, output / CONFIG_FILE)
        if run.labels is not None:
            (output / "audit.json").write_text(run.labels.to_json(), encoding="utf-8")
    stop = config.stop_after_steps or config.steps
    log = RunLog(output, config.report, config.steps, state.step, accelerator.is_main_process,
                 to_dict(config), description=config.method)
    started = time.perf_counter()
    last_record: dict = {}
    try:
        for step in range(state.step, stop):
            lr = run.scheduler.get_last_lr()[0]
            stats, norms = train_step(run, step)
            state.step = step + 1
            if log.wants(state.step):
                last_record = _record(run, step, stats, norms, lr, started)
                log.log(state.step, last_record)
            log.advance()
            if (config.save_every and state.step % config.save_every == 0) or (
                state.step == stop < config.steps
            ):
                save_checkpoint(accelerator, output, state.step, config.keep_checkpoints, config)
    finally:
        log.close()
    if state.step == config.steps:
        if on_finished is not None:
            on_finished(run)
        (write_outputs or _write_outputs)(run, tokenizer, output, cache_parts, last_record,
                                          time.perf_counter() - started)
    return output


def _write_outputs(run: Run, tokenizer, output: Path, cache_parts: dict, last: dict,
                   seconds: float) -> None:
    """policy/, theta.json and run.json, committed as one unit; main process only for the files."""
    accelerator = run.accelerator
    # Called on every process: gathers FSDP / DeepSpeed shards.
    state = accelerator.get_state_dict(run.policy) if run.config.save_policy else None
    if not accelerator.is_main_process:
        return
    summary = {"method": run.config.method, "seed": run.config.runtime.seed,
               "steps": run.config.steps, "batching": run.config.batching,
               "judgments": len(run.data), "pairs": int(run.data.pair_rows.shape[0]),
               "input": run.data.input_report,
               "audit_warnings": list(run.labels.warnings) if run.labels is not None else [],
               "wall_s": round(seconds, 2), "final": last,
               "reference_cache": {k: v for k, v in cache_parts.items() if k != "tokenization"}}

    def write(staging: Path) -> None:
        if run.config.save_policy:
            model = accelerator.unwrap_model(run.policy).model
            weights = {k.removeprefix("model."): v for k, v in state.items()}
            model.save_pretrained(staging / "policy", state_dict=weights, safe_serialization=True)
            tokenizer.save_pretrained(staging / "policy")
        if run.bias is not None:
            run.bias.save(staging / "theta.json")
        (staging / "run.json").write_text(dumps(summary, indent=1) + "\n", encoding="utf-8")

    commit_final(output, write)


__all__ = ["train", "prepare_run", "train_step", "judgment_losses", "bias_logits", "build_bias",
           "resume_point", "theta_adam", "Run", "STATS"]
