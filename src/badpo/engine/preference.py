"""The preference stage: DPO, BA-DPO and every baseline of the method table on the one loop.

``prepare_run`` reads the judgments, audits the labels an arm learns a theta on, builds the bias
channel, caches the reference log-probs and builds both optimizers; the outputs are ``policy/``
(HF format; the adapter under LoRA), ``theta.json`` and ``run.json``, committed as one unit.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from accelerate.utils import set_seed
from torch import Tensor

from badpo.auditing.estimates import Audit, audit
from badpo.auditing.reliability import reliability_weights
from badpo.core.attributes import AttributeSet, resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError
from badpo.core.label_counts import wins_for_estimates
from badpo.core.notices import BadpoWarning
from badpo.engine.batches import PreferenceData, Schedule, load_preference_data
from badpo.engine.cache import reference_logprobs, token_offsets
from badpo.engine.checkpoint import continue_from
from badpo.engine.config_checks import check_offset_length
from badpo.engine.lifecycle import commit_judgment_outputs
from badpo.engine.logprobs import LogprobModel
from badpo.engine.loop import JudgmentStage, Run
from badpo.engine.model_card import CardFacts, theta_summary, write_card
from badpo.engine.reporting import read_log, report_input, theta_convergence
from badpo.engine.runtime import (
    check_sharding,
    decoder_compiled,
    load_model,
    load_tokenizer,
    make_accelerator,
    parameter_count,
    policy_optimizer,
    shard_policy,
    whole_state_dict,
)
from badpo.engine.settings import PREFERENCE_LR, TrainConfig, accumulation_steps, resolved_lr
from badpo.engine.tokenize import settings_dict
from badpo.methods import Arm, Weighting, logit_at_start
from badpo.run_folder.layout import DATA_FILE, POLICY
from badpo.theta.graded import LabelCuts, fit_cuts
from badpo.theta.level import build_level_step, orthogonal_step
from badpo.theta.options import check_graded, check_level_has_theta, departures
from badpo.theta.start import initial_level
from badpo.theta.step import theta_adam


@dataclasses.dataclass(frozen=True)
class PreferenceStage(JudgmentStage):
    """The preference stage as the loop runs it. A caller that trains several policies (EM-DPO's
    parts) gives the ``weighting`` (in place of the method's), a ``judgment_mask`` (``[N]`` bool:
    train on those judgments only, indices unchanged), ``score(run)``, called once the last
    step is done, and ``start``: a checkpoint of another run whose policy weights and AdamW
    moments this run starts from (an EM-DPO type policy going on from its previous part; the
    reference stays the model's own, and a resumed run's checkpoint replaces both)."""

    weighting: Weighting | None = None
    judgment_mask: Tensor | None = None
    score: Callable[[Run], None] | None = None
    start: Path | None = None
    name: str = "train"

    def prepare(self, config: TrainConfig, accelerator) -> tuple[Run, dict, object]:
        prepared = prepare_run(config, accelerator, weighting=self.weighting, judgment_mask=self.judgment_mask)
        if self.start is not None:
            continue_from(accelerator, self.start, prepared[0].policy, prepared[0].optimizer)
        report_input(accelerator, prepared[0].data.input_report, self.name)
        return prepared

    def on_finished(self, run: Run) -> None:
        if self.score is not None:
            self.score(run)

    def write_outputs(self, run: Run, tokenizer, output: Path, cache_parts: dict, last: dict,
                      seconds: float) -> None:
        write_policy_outputs(run, tokenizer, output, cache_parts, last, seconds)


def build_bias(method: Arm, config: TrainConfig, data: PreferenceData, start_logits: Tensor | None = None):
    """The BiasChannel of the arm, or None when no attribute is declared (the bias logit is 0);
    ``start_logits`` ``[N]``: the method's logit at the start (None: 0), which theta's start counts."""
    check_level_has_theta(config.bias.level, method.learns_theta, f"method {method.name!r}")  # train's and rm's
    if data.grades is not None:
        link = method.level_link(method.parse_params(getattr(config, "method_params", {}))).name
        check_graded(link, config.bias.level, bool(config.bias.trusted), f"method {method.name!r}")
    if not data.attribute_names:
        if method.learns_theta or config.bias.fixed_offset is not None:
            raise ConfigError(
                f"attributes: method {method.name!r} / bias options need at least one")
        return None
    if not method.learns_theta:
        for key in ("declared", "trusted"):
            if getattr(config.bias, key) is not None:
                raise ConfigError(f"bias.{key}: method {method.name!r} learns no theta")
        if config.bias.init == "offline":
            raise ConfigError(f"bias.init: offline: method {method.name!r} learns no theta")
    declared = config.bias.declared or list(data.attribute_names)
    unknown = [n for n in declared if n not in data.attribute_names]
    if unknown:
        raise ConfigError(
            f"bias.declared: {unknown} not among the attributes {list(data.attribute_names)}")
    trusted = config.bias.trusted_values(len(data.attribute_names))
    if config.bias.fixed_offset is not None:
        check_offset_length(config.bias.fixed_offset, data.attribute_names)
    init_mean = start_level(method, config, data, declared, trusted, start_logits) if method.learns_theta else None
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
            raise ConfigError(f"bias.{error} (method {method.name!r})") from None
        raise


def start_level(method: Arm, config, data: PreferenceData, declared: list[str],
                trusted: dict[str, list[float]], start_logits: Tensor | None = None) -> list[float] | None:
    """theta's starting level (:func:`badpo.theta.start.initial_level`) under ``bias.init``, through
    the arm's link (a reward model's: Bradley-Terry), around the method's logit at the start."""
    link = method.level_link(method.parse_params(getattr(config, "method_params", {})))
    return initial_level(config.bias.init, data.theta_labels(), declared, link, trusted=list(trusted),
                         fixed_offset=config.bias.fixed_offset, start_logits=start_logits, grades=data.grades)


def start_logits(method: Arm, params, data: PreferenceData, reference: Tensor, beta: float) -> Tensor:
    """``[N]`` the method's logit of every judgment with the policy at the reference
    (:func:`badpo.methods.logit_at_start`), from the cached reference log-probs ``reference``."""
    summed, lengths = reference.detach().double().cpu(), data.store.response_lengths()
    return logit_at_start(method, params, summed[data.chosen_row], summed[data.rejected_row],
                          lengths[data.chosen_row], lengths[data.rejected_row], beta).double()


def check_trusted_ids(config: TrainConfig, annotators) -> None:
    """Every ``bias.trusted`` id must be an annotator of the training data."""
    known = set(annotators)
    for annotator in config.bias.trusted or ():
        if annotator not in known:
            raise ConfigError(f"bias.trusted: annotator {annotator!r} has no judgment in {config.data}")


def audit_labels(method: Arm, config: TrainConfig, judgments, attributes) -> Audit | None:
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
    # the audit's estimates read wins (a tie left out, counted in run.json's input; a graded win a win)
    result = audit(wins_for_estimates(judgments), learned, trusted=list(config.bias.trusted or ()))
    for coordinate in result.coordinates:
        if coordinate.overall.cross == 0:
            raise ConfigError(
                f"attributes: {coordinate.name!r} never differs between the two sides of a judgment "
                f"in {config.data}, so method {method.name!r} cannot learn its theta; drop it "
                "from bias.declared (or from attributes)")
    return result


def prepare_run(config: TrainConfig, accelerator=None, *, weighting=None,
                judgment_mask: Tensor | None = None) -> tuple[Run, dict, object]:
    """Load data and model, audit the labels, cache the reference, build optimizers; returns
    (run, cache key, tokenizer).

    ``weighting`` and ``judgment_mask``: see :class:`PreferenceStage`.
    """
    method = config.arm
    method_params = method.parse_params(config.method_params)
    if accelerator is None:
        accelerator = make_accelerator(config.runtime.precision, config.runtime.num_threads)
    if config.fsdp:
        check_sharding(accelerator)
    tokenizer, data, labels = read_and_audit(method, config, accelerator)
    if method.shuffle_annotators:
        data = data.with_shuffled_annotators(config.runtime.seed)
    bias = build_bias(method, config, data)
    say_departures(method, config, bias, accelerator)
    model = load_model(config.model, config.lora, accelerator.mixed_precision,
                       float64=config.runtime.precision == "fp64", device_type=accelerator.device.type,
                       sharded=config.fsdp, processes=accelerator.num_processes).to(accelerator.device)
    identity = reference_identity(config, tokenizer, accelerator.mixed_precision, next(model.parameters()).dtype,
                                  decoder_compiled(model))
    per_token = method.needs.token_logratios
    reference, reference_tokens, cache_parts = reference_logprobs(
        model, data.store, identity=identity, cache_dir=config.cache_dir,
        batch_size=config.runtime.eval_batch_size, chunk_size=config.runtime.logprob_chunk_size,
        accelerator=accelerator, per_token=per_token,
        progress=config.report.progress_bar and accelerator.is_main_process,
    )
    scorer = LogprobModel(model, config.runtime.logprob_chunk_size,
                          config.runtime.groups_on(accelerator.device.type, config.fsdp, parameter_count(model)),
                          config.runtime.rows_per_group())
    policy, optimizer, scheduler = prepare_policy(config, scorer, accelerator)
    bias, cuts = theta_at_start(method, method_params, config, data, bias, reference)
    theta_optimizer = theta_adam(bias, config.bias.lr, accelerator.device, cuts)
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
        level=build_level_step(config.bias, bias, method.level_link(method_params), data.theta_labels()),
        orthogonal=orthogonal_step(config.bias.level, bias, method, config.micro_batch_size), cuts=cuts,
    )
    return run, cache_parts, tokenizer


def say_departures(method: Arm, config, bias, accelerator) -> None:
    """A run whose config leaves a default that decides the result says so in one line each."""
    if bias is not None and method.learns_theta and accelerator.is_main_process:
        for line in departures(config.bias):
            warnings.warn(line, BadpoWarning, stacklevel=3)


def theta_at_start(method: Arm, params, config, data: PreferenceData, bias, reference: Tensor):
    """(the channel, the graded labels' cut points) once the reference log-probs are known: theta's
    start fitted around the method's logit at the start where it is not 0, the cut points fitted
    with theta at its start (None for plain wins)."""
    fitted = bias is not None and method.learns_theta and config.bias.init != "zero"
    logits = (start_logits(method, params, data, reference, config.beta)  # only where a start reads them
              if fitted or data.grades is not None else torch.zeros(len(data), dtype=torch.float64))
    if fitted and bool(logits.abs().max() > 0):  # fitted again: the first fit, before the model loaded,
        bias = build_bias(method, config, data, logits)  # gave its refusals early; this one counts the logits
    return bias, label_cuts(data, bias, logits)


def label_cuts(data: PreferenceData, bias, logits: Tensor) -> LabelCuts | None:
    """The cut points of the data's ties and strengths (None: plain wins), fitted at the start: each
    judgment's logit then is the method's logit at the start plus its bias logit at theta's start."""
    if data.grades is None:
        return None
    if bias is not None:
        with torch.no_grad():
            logits = logits + bias(data.annotator_index, data.attr_diff).double()
    return fit_cuts(None, logits, data.grades)[1]


def reference_identity(config: TrainConfig, tokenizer, precision: str, dtype, compiled: bool) -> dict:
    """What the reference cache is keyed by beside the weights and tokens: the model, its
    tokenization and arithmetic. A ``compiled`` decoder counts only when on (other kernels, other
    last bits), so every cache written before it keeps its name."""
    return {"model": config.model.name_or_path, "revision": config.model.revision,
            "tokenization": settings_dict(tokenizer, config.tokenization), "precision": precision,
            "dtype": str(dtype), **({"compile": True} if compiled else {})}


def prepare_policy(config: TrainConfig, policy, accelerator):
    """(policy, AdamW, schedule), the policy wrapped by accelerate (DDP, its FSDP / DeepSpeed) or,
    with ``fsdp``, sharded by badpo (after the reference pass, which each process runs whole on its
    share of the rows) before the optimizer is built over its shards."""
    if config.fsdp:
        policy = shard_policy(policy)
    optimizer, scheduler = policy_optimizer(policy, config.optim, preference_lr(config), config.steps,
                                            accelerator.device)
    if config.fsdp:
        return policy, accelerator.prepare(optimizer), scheduler
    policy, optimizer = accelerator.prepare(policy, optimizer)
    return policy, optimizer, scheduler


def read_and_audit(method: Arm, config, accelerator) -> tuple[object, PreferenceData, Audit | None]:
    """What every stage on judgments does first, in order: check the batch split, seed, load the
    tokenizer, read the judgments once and audit the labels the arm learns a theta on."""
    accumulation_steps(config.batch_size, config.micro_batch_size, accelerator.num_processes)
    set_seed(config.runtime.seed)
    tokenizer = load_tokenizer(config.model)
    attributes = resolve_attributes(config.attributes) if config.attributes else None
    judgments, data = load_preference_data(config, tokenizer, attributes)
    labels = audit_labels(method, config, judgments, attributes)
    if getattr(config, "reliability", "off") == "weight":
        data = with_reliability_weights(config, judgments, attributes, data)
    return tokenizer, data, labels


def with_reliability_weights(config, judgments, attributes, data: PreferenceData) -> PreferenceData:
    """``reliability: weight``: each judgment weighted by its annotator's reliability
    (:func:`badpo.auditing.reliability.reliability_weights` of the audit's pooled fit on the declared
    attributes: 0 for a flagged noise voter, s_k clipped to [0, 1] otherwise, 1 where not estimated);
    the weights and the flagged annotators go into run.json's ``input``."""
    if attributes is None:
        raise ConfigError("reliability: weight reads each rater against the pooled fit of the declared attributes; "
                          "declare at least one (attributes=[...])")
    result = audit(wins_for_estimates(judgments), attributes, trusted=list(config.bias.trusted or ()), start=True)
    weights = reliability_weights(result.reliability)
    if result.reliability.note is not None:  # nobody estimated: every weight 1, which would say nothing
        warnings.warn(f"reliability: weight: no rater's reliability was estimated ({result.reliability.note}); "
                      "every judgment keeps its weight", BadpoWarning, stacklevel=2)
    per_annotator = torch.tensor([weights.get(a, 1.0) for a in data.annotators], dtype=torch.float64)
    report = {**data.input_report, "reliability_weights": {a: weights.get(a, 1.0) for a in data.annotators},
              "unreliable": list(result.reliability.flagged)}
    weight = per_annotator[data.annotator_index]  # times the judgments' own weights, where given
    return dataclasses.replace(data, weight=weight if data.weight is None else weight * data.weight,
                               input_report=report)


def preference_lr(config: TrainConfig) -> float:
    return resolved_lr(config.optim, config.lora, PREFERENCE_LR)


def write_policy_outputs(run: Run, tokenizer, output: Path, cache_parts: dict, last: dict,
                         seconds: float) -> None:
    """policy/, theta.json and run.json, committed as one unit; main process only for the files."""
    accelerator = run.accelerator
    # Called on every process: gathers FSDP / DeepSpeed shards.
    gather = whole_state_dict if run.config.fsdp else accelerator.get_state_dict
    state = gather(run.policy) if run.config.save_policy else None
    if not accelerator.is_main_process:
        return

    def write_policy(staging: Path) -> None:
        if run.config.save_policy:
            model = accelerator.unwrap_model(run.policy).model
            weights = {k.removeprefix("model."): v for k, v in state.items()}
            model.save_pretrained(staging / POLICY, state_dict=weights, safe_serialization=True)
            tokenizer.save_pretrained(staging / POLICY)
            write_card(staging / POLICY, card_facts(run, output))

    commit_judgment_outputs(
        run, output, last, seconds, head={"method": run.config.arm.name}, write_model=write_policy,
        tail={"reference_cache": {k: v for k, v in cache_parts.items() if k != "tokenization"}})


def card_facts(run: Run, output: Path) -> CardFacts:
    """The model card's facts (badpo.engine.model_card) from the run's settings, data and theta."""
    config, bias = run.config, run.bias
    data_file = output / DATA_FILE
    fingerprint = json.loads(data_file.read_text(encoding="utf-8")) if data_file.is_file() else {}
    theta = theta_summary(bias) if run.method.learns_theta else {}
    convergence = theta_convergence(read_log(output), config.steps) if theta else None
    name = config.model.name_or_path
    return CardFacts(config.arm.name, run.method.description, name, Path(name).expanduser().exists(),
                     config.lora.enabled, list(config.attributes), len(run.data), int(run.data.pair_rows.shape[0]),
                     len(run.data.annotators), fingerprint.get("sha256"), config.beta, config.steps,
                     config.runtime.seed, theta, None if convergence is None else convergence["converged"])


__all__ = ["PreferenceStage", "prepare_run", "read_and_audit", "build_bias", "check_trusted_ids", "audit_labels",
           "start_level", "preference_lr", "write_policy_outputs",
           "card_facts"]
