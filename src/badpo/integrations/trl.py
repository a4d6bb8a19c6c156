"""BA-DPO inside TRL: :class:`BADPOTrainer` is TRL's ``DPOTrainer`` with a learned bias logit.

A TRL user changes three lines (README, "Using badpo with TRL"): the import, the class name, and
the declared ``attributes`` (plus the bias variant). The data gains an ``annotator`` column
(optional ``annotator_class``, ``g_chosen``/``g_rejected`` for ``given:`` attributes; the other
judgment fields of ``docs/data-format.md`` are read too).

How the annotator reaches the loss. TRL tokenizes ``prompt``/``chosen``/``rejected`` and its
trainer drops every column the model does not take. Before TRL sees the data, each judgment's
attribute difference g(y_w) - g(y_l) (computed on the raw texts, before TRL appends EOS) and its
annotator's row in the bias channel are added as two columns; ``remove_unused_columns`` is set to
False so that they survive, and the collator is wrapped to turn them into tensors beside TRL's.

The loss is a row of badpo's method table (``method``, :data:`badpo.methods.METHODS`), the same
function the engine's loop calls, on the summed completion log-probs that TRL's fused LM head
returns (the same forward as ``DPOTrainer``'s), TRL's reference log-probs (live, or precomputed
with ``precompute_ref_log_probs``), the bias logit and, for a row that asks for them, the
completion lengths; averaged over the batch. By default the row is BA-DPO of the bias variant
(``dpo`` for ``none``): ``-log sigmoid(u + b_k)``, which with b = 0 is TRL's ``sigmoid`` loss.
The shuffled-ids control draws its random annotator rows from ``args.seed`` as ``badpo train``
draws them from ``runtime.seed`` (the same rows when the dataset is the engine's data, no row
dropped; ``eval_dataset`` keeps the true annotators). Loss weights with state (Group-DRO, Crowd-PrefRL) weigh each
judgment within the optimizer step, move after every step (logged as ``group_weight*``) and are
checkpointed; the step is one batch only without gradient accumulation and on one process, and
otherwise they are refused. SamPO reads the reference's log-prob of every completion token from a
forward of its own (the reference model, or the PEFT policy as TRL's reference reads it) and a seed
per judgment from ``args.seed``, the step and the judgment's row, as the engine draws it; TRL's
precompute, which keeps sums only, is refused for it. A row that needs what TRL's batch does not
hold is refused by name (:data:`TRL_LACKS`: several policies, a statistic over the whole step).
``ld_alpha`` trains ``ld_dpo`` with that alpha (:func:`badpo.integrations.trl_rows.ld_method`). TRL's
``loss_type`` (a list, with ``loss_weights``) is honoured for every loss that is a function of the
DPO margin, the bias added where the margin enters, and ``f_divergence_type`` scores each log-ratio
before it, with ``method="dpo"`` (:mod:`badpo.integrations.trl_losses`); the other loss types are
refused by name. ``use_weighting`` (WPO) weighs each judgment's loss, and a MoE's load-balancing loss
(``router_aux_loss_coef``) is added beside, as TRL does both.

theta trains on its own ``torch.optim.Adam`` (constant lr, 1e-2 by default, no weight decay),
stepped after each optimizer step of the policy through a ``TrainerCallback``: TRL's scheduler,
clipping and weight decay never touch it.

Logs. Every log holds TRL's own metrics (``rewards/*``, ``logps/*``, ``logits/*``, ``entropy``,
``mean_token_accuracy``, ``num_tokens``; computed here from the same fused forward, since the loss
is not TRL's), ``bias_logit`` (its batch mean), ``theta_bar/<attribute>``, ``theta_k_sd/<attribute>``
(the spread of the theta_k) and, with at most 32 annotators, ``theta_k/<attribute>/<annotator>``
(the engine's names, :func:`badpo.engine.reporting.theta_k_scalars`).

Files. ``save_model`` writes TRL's folder (the policy, or its LoRA adapter, and the tokenizer) with
``theta.json`` (:meth:`BiasChannel.save`, the engine's format) and the run record ``badpo_run.json``
(:mod:`badpo.run_folder.external`: method, attributes, annotators, reference, beta, tokenization),
so that ``badpo evaluate`` and ``badpo compare`` read the folder; Trainer's pickled
``training_args.bin`` is replaced by ``training_args.json``. Each checkpoint also gets
``theta_state.json`` + ``theta_state.safetensors`` (theta, theta's Adam and the token count, split
by :mod:`badpo.core.state_io`), which ``train(resume_from_checkpoint=...)`` loads before TRL
restores the rest, so that a resumed run goes on as the uninterrupted one would.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from badpo.core.attributes import AttributeSet, resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.core.judgments import Judgment, annotator_classes, pair_key
from badpo.core.orthogonal import orthogonal_to
from badpo.engine.reporting import annotator_theta, theta_k_scalars
from badpo.integrations.trl_data import (
    BADPO_COLUMNS,
    DIFF_COLUMN,
    GRADE_COLUMN,
    INDEX_COLUMN,
    JUDGMENT_COLUMN,
    WEIGHT_COLUMN,
    BiasColumnsCollator,
    dataset_judgments,
    with_bias_columns,
)
from badpo.integrations.trl_files import TrainerFiles
from badpo.integrations.trl_losses import margin_losses, pair_margins, start_link, weighted_loss, wpo_weights
from badpo.integrations.trl_rows import (
    TRL_LACKS,
    bias_level_of,
    ld_method,
    method_row,
    orthogonal_of,
    theta_options,
    trl_refusal,
)
from badpo.methods import JudgmentBatch, logit_is_zero_at_start, sample_seeds
from badpo.methods.baselines import ba_dpo_terms
from badpo.run_folder.external import local_path
from badpo.theta.graded import fit_cuts, grades_like, grades_of
from badpo.theta.labels import labels_of_judgments
from badpo.theta.options import TRL, check_graded
from badpo.theta.start import initial_level
from badpo.theta.step import reduce_theta_gradients, step_theta, theta_adam

try:
    from accelerate import PartialState
    from accelerate.utils import is_peft_model
    from trl import DPOConfig, DPOTrainer
    from trl.models.utils import disable_gradient_checkpointing
    from trl.trainer.utils import use_adapter
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("badpo.integrations.trl needs TRL: pip install -e '.[trl]' in badpo's clone") from error

__all__ = ["BADPOTrainer", "INDEX_COLUMN", "DIFF_COLUMN", "JUDGMENT_COLUMN", "TRL_LACKS", "trl_refusal",
           "with_bias_columns"]

_NOT_MODEL_INPUTS = ("completion_mask", "ref_chosen_logps", "ref_rejected_logps", *BADPO_COLUMNS)


def _short_last_batch(rows: int, args) -> int:
    """The judgments of each epoch's short last batch on one process (0: every batch is full, the
    last one dropped, or several processes, whose split accelerate evens out)."""
    if args.dataloader_drop_last or PartialState().num_processes != 1:
        return 0
    return rows % args.per_device_train_batch_size


class _ThetaStep(TrainerCallback):
    """After each optimizer step of the policy: average theta's gradient over processes (theta
    is outside DDP), step theta's own Adam, clear its gradient; move the method's loss weights by
    the step's losses. After each checkpoint: theta's state beside TRL's."""

    def __init__(self, trainer: BADPOTrainer) -> None:
        self.trainer = trainer

    def on_optimizer_step(self, args, state, control, **kwargs):
        trainer = self.trainer
        if trainer.weighting is not None:  # one process (checked when built): nothing to sum
            trainer.weighting_log = _flat(trainer.weighting.update(lambda values: values))
        if trainer.theta_optimizer is None:
            return
        reduce_theta_gradients(trainer.bias, trainer.accelerator, trainer.cuts)  # the engine's reduction and step
        step_theta(trainer.theta_optimizer)

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if args.should_save and folder.is_dir():  # the checkpoint Trainer has just written
            self.trainer.save_theta_state(folder)


def _flat(log: Mapping[str, Any]) -> dict[str, float]:
    """A weighting's log as TRL logs scalars: ``{"group_weight": {"A": 0.5}}`` -> ``group_weight/A``."""
    flat = {}
    for key, value in log.items():
        if isinstance(value, Mapping):
            flat.update({f"{key}/{name}": float(v) for name, v in value.items()})
        else:
            flat[key] = float(value)
    return flat


class BADPOTrainer(TrainerFiles, DPOTrainer):
    """TRL's ``DPOTrainer`` with the BA-DPO bias logit b_k = theta_k . (g(y_w) - g(y_l)), and its loss
    from a row of badpo's method table.

    ``attributes``: badpo attribute specs (``["names"]``, ``["signoff=regex:..."]``, ...) or an
    :class:`AttributeSet`. ``method``: a loss of :data:`badpo.methods.METHODS` whose view TRL's batch
    gives (``dpo``, ``ipo``, ``r_dpo``, ``ld_dpo``, ...; another is refused, naming what it needs),
    with its ``method_params``; DPO by default. ``bias``: the bias variant it trains with, one of
    :data:`badpo.core.bias.VARIANTS` (``none`` when a method is given without one, ``shared_mean``
    when neither is: BA-DPO; badpo train's ``bias.variant``; the channel is built on the
    training annotators, sorted as the engine sorts them, with their classes) or a ready
    :class:`BiasChannel` of the method's variant (warm start, fixed offset, trusted annotators;
    parameters with ``requires_grad=False`` stay frozen). ``theta_lr``: theta's constant Adam
    learning rate. ``theta_init``: where a variant's theta starts, ``reference`` (the fit of the
    labels at the reference through the method's link), ``conditional`` (that fit with a per-pair
    random effect for quality, which quality does not shrink; docs/theta.md) or ``zero``; a
    ready channel is taken as is. ``bias_level``: what theta does after its start (``bias.level``
    of ``badpo train``): ``adam`` (its own Adam) or ``orthogonal`` (also the policy's gradient kept
    orthogonal to the declared attributes on every batch); the tilt rules are refused by name.
    Every other argument is ``DPOTrainer``'s.
    """

    def __init__(self, model, ref_model=None, args: DPOConfig | None = None, data_collator=None,
                 train_dataset=None, eval_dataset=None, *, attributes: Sequence[str] | AttributeSet,
                 bias: str | BiasChannel | None = None, method: str | None = None,
                 method_params: Mapping[str, Any] | None = None, theta_lr: float = 1e-2,
                 theta_init: str = "reference", bias_level: str = "adam", **kwargs) -> None:
        self.theta_init = theta_options(theta_lr, theta_init)
        args = args if args is not None else DPOConfig()
        method, method_params, bias = ld_method(args.ld_alpha, method, method_params, bias)  # TRL's ld_alpha
        self.method_name, self.method = method_row(method, bias)
        self.bias_level = bias_level_of(bias_level, self.method_name, self.method)
        self.method_params = self.method.parse_params(dict(method_params or {}))
        self.attributes = attributes if isinstance(attributes, AttributeSet) else resolve_attributes(attributes)
        # the specs as given, for the run record (an AttributeSet keeps no specs)
        self.attribute_specs = None if isinstance(attributes, AttributeSet) else [str(a) for a in attributes]
        judgments = dataset_judgments(train_dataset, "train_dataset")
        self.grades = grades_of(judgments)  # ties and strengths: the ordered likelihood, as badpo train's
        self.classes = annotator_classes(judgments, "train_dataset")
        self.data_counts = (len(judgments), len({pair_key(j) for j in judgments}),
                            len({j.annotator for j in judgments}))  # the model card's
        own_loss = self.method.loss is not ba_dpo_terms or self.method.weighting is not None
        self.margin_terms = margin_losses(args, self.method_name, own_loss)
        self.bias = self._channel(bias, judgments, args.beta)
        self.cuts = self._label_cuts(judgments)
        self.orthogonal = orthogonal_of(self.bias_level, self.bias, self.method, args.per_device_train_batch_size,
                                        _short_last_batch(len(judgments), args))
        shuffle_seed = args.seed if self.method.shuffle_annotators else None  # as badpo train's runtime.seed
        train_dataset = with_bias_columns(train_dataset, judgments, self.attributes, self.bias,
                                          "train_dataset", shuffle_seed, self.grades)
        if isinstance(eval_dataset, Mapping):
            eval_dataset = {key: self._with_columns(value, f"eval_dataset[{key!r}]")
                            for key, value in eval_dataset.items()}
        elif eval_dataset is not None:
            eval_dataset = self._with_columns(eval_dataset, "eval_dataset")
        self._refuse_options(args, judgments)
        args.remove_unused_columns = False  # the bias columns must reach the collator
        super().__init__(model, ref_model, args, data_collator, train_dataset, eval_dataset, **kwargs)
        # Wrapped after TRL's own setup, so its reference precompute sees its plain collator.
        self.data_collator = BiasColumnsCollator(self.data_collator)
        # theta's Adam (and the graded labels' cut points): TRL's scheduler never sees it
        self.theta_optimizer = theta_adam(self.bias, theta_lr, self.accelerator.device, self.cuts)
        self.theta_parameters = [p for p in self.bias.parameters() if p.requires_grad]
        self.weighting, self.weighting_log = self._weighting(train_dataset), {}
        self.add_callback(_ThetaStep(self))
        self._step_metrics: dict[str, dict[str, list[float]]] = {"train": {}, "eval": {}}
        self.tokens_seen = 0  # attention-mask tokens of the training batches so far (TRL's num_tokens)
        self.reference_name = self._reference_name(model, ref_model)

    def _refuse_options(self, args, judgments: Sequence[Judgment]) -> None:
        """What this trainer cannot honour, refused before TRL loads and tokenizes anything."""
        weighted = any(j.weight is not None for j in judgments)  # the data's weight column
        if self.method.weighting is not None or weighted:  # before TRL loads and tokenizes anything
            processes, accumulation = PartialState().num_processes, args.gradient_accumulation_steps
            if processes != 1 or accumulation != 1:
                owner = "train_dataset's weight column" if weighted else f"method {self.method_name!r}"
                raise ValueError(f"{owner} weights each judgment within the whole optimizer "
                                 "step, which BADPOTrainer sees only with gradient_accumulation_steps=1 on one "
                                 f"process (got {accumulation} on {processes}); train it with badpo train")
        if self.method.needs.token_logratios and args.precompute_ref_log_probs:
            raise ValueError(f"args.precompute_ref_log_probs: method {self.method_name!r} needs the reference's "
                             "log-prob of every token, of which TRL's precompute keeps the sums; set it to False")

    def _channel(self, bias: str | BiasChannel | None, judgments: Sequence[Judgment], beta: float) -> BiasChannel:
        names = tuple(self.attributes.names)
        if isinstance(bias, BiasChannel):
            if tuple(bias.attribute_names) != names:
                raise ValueError(f"bias: the channel's attributes {list(bias.attribute_names)} are not "
                                 f"the declared attributes {list(names)}")
            return bias
        annotators = sorted({j.annotator for j in judgments})
        start = None
        if self.theta_init != "zero" and self.method.learns_theta:
            if not logit_is_zero_at_start(self.method, self.method_params):  # before any reference pass
                raise ValueError(f"theta_init={self.theta_init!r}: method {self.method_name!r}'s logit at the start "
                                 "is not 0 (R-DPO's length term, SimPO's margin without a reference), which "
                                 "BADPOTrainer does not compute before training; pass theta_init='zero', or train "
                                 "it with badpo train")
            start = self._reference_start(names, judgments, beta)
        return BiasChannel(self.method.bias_variant, names, annotators, self.classes, init_mean=start)

    def _reference_start(self, names: tuple[str, ...], judgments: Sequence[Judgment], beta: float) -> list[float]:
        """The engine's start (:func:`badpo.theta.start.initial_level`) through the loss's link."""
        diffs = torch.tensor([self.attributes.judgment_differences(j).tolist() for j in judgments],
                             dtype=torch.float64).reshape(len(judgments), len(names))
        link = self.method.level_link(self.method_params) if self.margin_terms is None else start_link(
            self.margin_terms, beta)
        labels = labels_of_judgments(judgments, diffs, sorted({j.annotator for j in judgments}), names)
        return initial_level(self.theta_init, labels, names, link, grades=self.grades, front=TRL)

    def _label_cuts(self, judgments: Sequence[Judgment]):
        """The graded labels' cut points (:mod:`badpo.theta.graded`), fitted with theta at its start;
        None for plain wins. What cannot take them is refused as in badpo train."""
        if self.grades is None:
            return None
        logistic = self.margin_terms is None and self.method.level_link(self.method_params).name == "logistic"
        check_graded("logistic" if logistic else "other", self.bias_level, bool(self.bias.trusted),
                     f"method {self.method_name!r}", TRL)
        if not logit_is_zero_at_start(self.method, self.method_params):
            raise ValueError(f"method {self.method_name!r}'s logit at the start is not 0, which BADPOTrainer does "
                             "not compute before training; train its ties and strengths with badpo train")
        index = self.bias.annotator_index([j.annotator for j in judgments])
        diffs = torch.tensor([self.attributes.judgment_differences(j).tolist() for j in judgments],
                             dtype=torch.float32).reshape(len(judgments), len(self.attributes.names))
        with torch.no_grad():
            offsets = self.bias(index, diffs).double()
        return fit_cuts(None, offsets, self.grades)[1]

    def _weighting(self, dataset):
        """The method's loss weights with state (Group-DRO, Crowd-PrefRL), on the training judgments'
        annotator rows; None for a method without. Its weights are relative to the whole optimizer
        step, which inside TRL is one batch only without accumulation and on one process."""
        if self.method.weighting is None:
            return None
        index = torch.tensor(dataset[INDEX_COLUMN], dtype=torch.long)
        return self.method.weighting(self.method_params, index, tuple(self.bias.annotators), self.classes)

    def _with_columns(self, dataset, name: str):
        judgments = dataset_judgments(dataset, name)
        return with_bias_columns(dataset, judgments, self.attributes, self.bias, name,
                                 grades=grades_like(judgments, self.grades, name))

    def _reference_name(self, model, ref_model) -> str | None:
        """The Hub id or local path of the model the policy is compared with (the LoRA base when the
        adapter is switched off); None when no path says it (a model built in memory, or a LoRA run
        whose reference is a copy of the adapter it started from)."""
        peft_config = getattr(self.accelerator.unwrap_model(self.model), "peft_config", None)
        if ref_model is not None:
            source = ref_model if isinstance(ref_model, str) else getattr(ref_model, "name_or_path", None)
        elif peft_config:
            source = None if "ref" in peft_config else next(iter(peft_config.values())).base_model_name_or_path
        else:  # TRL's reference is the policy as it was loaded
            source = model if isinstance(model, str) else getattr(model, "name_or_path", None)
        return local_path(source) if source else None

    def compute_ref_log_probs(self, model, inputs):
        """TRL's reference log-probs, without the bias columns (they are not model inputs)."""
        return super().compute_ref_log_probs(model, {k: v for k, v in inputs.items() if k not in BADPO_COLUMNS})

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """Mean over the batch of the method's loss (BA-DPO: -log sigmoid(u + b_k)); the batch is
        [chosen; rejected] rows."""
        device = self.accelerator.device
        model_inputs = {k: v for k, v in inputs.items() if k not in _NOT_MODEL_INPUTS}
        completion_mask = inputs["completion_mask"]
        labels = inputs["input_ids"].masked_fill(completion_mask == 0, -100)
        router = {"output_router_logits": True} if self.aux_loss_enabled else {}  # a MoE returns its aux_loss
        outputs = model(**model_inputs, labels=labels, use_cache=False, fused_lm_head=True, **router)
        positions = completion_mask.shape[1] - 1  # log-probs of tokens 1.. (each predicted by the one before)
        policy_chosen, policy_rejected = outputs.log_probs[:, -positions:].sum(dim=1).chunk(2)
        if self.orthogonal:  # bias_level 'orthogonal': the gradient reaching them has no share along g
            directions = inputs[DIFF_COLUMN].to(device)[:, self.bias.declared_index.to(device)]
            policy_chosen, policy_rejected = (orthogonal_to(policy_chosen, directions),
                                              orthogonal_to(policy_rejected, directions))
        if self.precompute_ref_logps:
            reference_chosen, reference_rejected = inputs["ref_chosen_logps"], inputs["ref_rejected_logps"]
        else:  # the PEFT base (adapter off) when there is no separate reference model
            reference = self.ref_model if self.ref_model is not None else self.model
            reference_chosen, reference_rejected = self.compute_ref_log_probs(reference, inputs)
        bias_logit = self.bias(inputs[INDEX_COLUMN].to(device), inputs[DIFF_COLUMN].to(device))
        views = self._views(inputs, outputs.log_probs[:, -positions:])
        view = JudgmentBatch(policy_chosen, policy_rejected, reference_chosen.to(device),
                             reference_rejected.to(device), bias_logit, self.beta, **views)
        terms = self.method.loss(view, self.method_params)
        if self.margin_terms is not None:  # TRL's loss types, the bias where the margin enters
            margins = pair_margins(policy_chosen - view.reference_chosen, policy_rejected - view.reference_rejected,
                                   completion_mask, bias_logit, self.args)
            terms = dataclasses.replace(terms, losses=weighted_loss(self.margin_terms, margins))
        with torch.no_grad():
            self._remember(self._forward_metrics(outputs, inputs, positions) | self._pair_metrics(
                policy_chosen, policy_rejected, terms.chosen_rewards, terms.rejected_rewards, bias_logit))
        if self.cuts is not None:  # ties and strengths: the ordered likelihood on the loss's own logit
            terms = dataclasses.replace(terms, losses=self.cuts.loss(terms.logits, inputs[GRADE_COLUMN].to(device)))
        if self.args.use_weighting:  # WPO: each judgment's loss weighed by its completions' probability
            wpo = wpo_weights(outputs.log_probs[:, -positions:], outputs.log_sum_sq_probs[:, -positions:],
                              completion_mask)
            terms = dataclasses.replace(terms, losses=terms.losses * wpo)
        weights = inputs[WEIGHT_COLUMN].to(terms.losses)  # the data's weights: 1 each without a weight column
        if self.weighting is not None and self.model.training:  # as the engine's step: observe, then weigh
            judgments = inputs[JUDGMENT_COLUMN]
            self.weighting.observe(judgments, terms.losses)
            weights = weights * self.weighting.weights(judgments, judgments).to(terms.losses.device)
        # the weighted mean, as the engine's step (the plain mean when every weight is 1)
        if bool((weights == 1).all()):
            loss = terms.losses.mean()
        else:
            loss = (terms.losses * weights).sum() / weights.sum().clamp_min(1e-12)
        if self.aux_loss_enabled:  # a MoE's load balancing: beside the preference loss, as TRL adds it
            loss = loss + self.router_aux_loss_coef * outputs.aux_loss
            self._remember({"aux_loss": float(self.accelerator.gather_for_metrics(outputs.aux_loss.detach()).mean())})
        if not return_outputs:
            return loss
        with torch.no_grad():  # Trainer.prediction_step reads logits: score them apart
            return loss, model(**model_inputs)

    def _views(self, inputs, policy_tokens: torch.Tensor) -> dict[str, Any]:
        """The extra views the method's row asks for, from TRL's batch: the completion lengths in
        tokens (EOS included, as the engine counts a response); each completion's per-token log
        pi - log pi_ref (``policy_tokens`` [2B, T-1] from the policy's forward, the reference's
        from its own); a seed per judgment from ``args.seed``, the step and the judgment's row,
        as the engine draws it from ``runtime.seed``."""
        needs, views = self.method.needs, {}
        if needs.lengths:
            views["chosen_lengths"], views["rejected_lengths"] = inputs["completion_mask"].sum(dim=1).chunk(2)
        if needs.token_logratios:
            mask = inputs["completion_mask"][:, 1:].bool()  # position t predicts token t + 1
            ratios = policy_tokens - self._reference_token_logps(inputs, policy_tokens.shape[1])
            per_row = [ratios[i][mask[i, -ratios.shape[1]:]] for i in range(len(ratios))]
            half = len(per_row) // 2
            views["chosen_token_logratios"], views["rejected_token_logratios"] = tuple(per_row[:half]), tuple(
                per_row[half:])
        if needs.sample_seeds:
            views["sample_seeds"] = sample_seeds(self.args.seed, self.state.global_step, inputs[JUDGMENT_COLUMN])
        return views

    def _reference_token_logps(self, inputs, positions: int) -> torch.Tensor:
        """The reference's log-prob of every token [2B, positions], without gradient: the reference
        model, or the PEFT policy with its adapter switched off (TRL's ``ref`` adapter when it has one)."""
        reference = self.ref_model if self.ref_model is not None else self.model
        adapter = contextlib.nullcontext()
        if self.ref_model is None and is_peft_model(self.model):
            unwrapped = self.accelerator.unwrap_model(self.model)
            adapter = use_adapter(unwrapped, adapter_name="ref" if "ref" in unwrapped.peft_config else None)
        model_inputs = {k: v for k, v in inputs.items() if k not in _NOT_MODEL_INPUTS}
        labels = inputs["input_ids"].masked_fill(inputs["completion_mask"] == 0, -100)
        with (torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs),
              adapter, self.accelerator.autocast()):
            outputs = reference(**model_inputs, labels=labels, use_cache=False, fused_lm_head=True)
        return outputs.log_probs[:, -positions:]

    def _forward_metrics(self, outputs, inputs, positions: int) -> dict[str, float]:
        """TRL's metrics of the policy's forward, over completion tokens of every process: entropy,
        the mean logit of each side, the chosen side's next-token accuracy, tokens seen."""
        mask = inputs["completion_mask"][:, 1:].bool()  # position t predicts token t + 1
        chosen, rejected = mask.chunk(2)
        entropy, logits, top1 = (outputs.entropy[:, -positions:], outputs.mean_logits[:, -positions:],
                                  outputs.is_top1[:, -positions:])
        metrics = {"entropy": self._token_mean(entropy, mask),
                   "logits/chosen": self._token_mean(logits.chunk(2)[0], chosen),
                   "logits/rejected": self._token_mean(logits.chunk(2)[1], rejected),
                   "mean_token_accuracy": self._token_mean(top1.chunk(2)[0], chosen)}
        if self.model.training:
            self.tokens_seen += int(self.accelerator.gather(inputs["attention_mask"].sum().reshape(1)).sum())
        return metrics | {"num_tokens": float(self.tokens_seen)}

    def _token_mean(self, values: torch.Tensor, mask: torch.Tensor) -> float:
        """Mean of ``values`` where ``mask`` holds, pooled over processes (0 with no token)."""
        total = torch.where(mask, values.float(), 0.0).sum().reshape(1)
        count = mask.sum().reshape(1).float()
        total, count = self.accelerator.gather(total).sum(), self.accelerator.gather(count).sum()
        return float(total / count) if count > 0 else 0.0

    def _pair_metrics(self, policy_chosen, policy_rejected, chosen_rewards, rejected_rewards,
                      bias_logit) -> dict[str, float]:
        """Batch means over every process: the implicit rewards (TRL's names), the policy's summed
        log-probs, and the bias logit b_k."""
        margin = chosen_rewards - rejected_rewards
        values = {"rewards/chosen": chosen_rewards, "rewards/rejected": rejected_rewards,
                  "rewards/margins": margin, "rewards/accuracies": (margin > 0).float(),
                  "logps/chosen": policy_chosen, "logps/rejected": policy_rejected, "bias_logit": bias_logit}
        gather = self.accelerator.gather_for_metrics
        return {key: gather(value.detach()).float().mean().item() for key, value in values.items()}

    def _remember(self, metrics: Mapping[str, float]) -> None:
        store = self._step_metrics["train" if self.model.training else "eval"]
        for key, value in metrics.items():
            if key == "num_tokens":  # a running count: the latest value, not a mean
                store[key] = [value]
            else:
                store.setdefault(key, []).append(value)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """TRL's metrics of the batches since the last log (means), and theta: theta_bar per
        attribute, the spread of the theta_k and, with few annotators, each one."""
        mode = "train" if self.model.training else "eval"
        prefix = "" if mode == "train" else "eval_"
        logs.update({prefix + k: sum(v) / len(v) for k, v in self._step_metrics[mode].items() if v})
        self._step_metrics[mode] = {}
        logs.update({f"theta_bar/{name}": value
                     for name, value in zip(self.bias.attribute_names, self.bias.mean().tolist())})
        theta_k = annotator_theta(self.bias)
        logs.update(theta_k_scalars(theta_k) if theta_k is not None else {})
        logs.update(self.weighting_log if mode == "train" else {})  # the weights after the last step
        super().log(logs, start_time)
