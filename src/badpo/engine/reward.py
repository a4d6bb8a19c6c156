"""``badpo rm``: a Bradley-Terry reward model with the bias channel, trained on the preference loop.

    loss = -log sigmoid( r(x, y_w) - r(x, y_l) + theta_k . (g(y_w) - g(y_l)) )      (losses.bt_loss)

The bias term is additive to the reward, so the bias shared by the annotators is explained by theta
instead of being scored as quality. The reward model is any ``AutoModelForSequenceClassification``
with one output (a causal LM checkpoint gets a fresh score head); LoRA is optional and merged into
the saved model, so that ``reward_model/`` loads with ``from_pretrained`` alone.

Everything but two pieces is the preference stage's (:mod:`badpo.engine.preference`): the data (judgments,
pairs, both batching modes, the identical-sides check), the label audit, the bias channel and its
options, theta's own Adam, the loop (accumulation, clipping of the model only, checkpoints, resume,
logging) and the run folder (lock, identity, atomic commit). This stage's own pieces are how a
micro-batch is scored (:func:`reward_losses`, the loop's ``Run.losses``) and what is saved.

Where the reward is read: transformers' sequence-classification models pool the last token that is
not padding. Sequences are encoded as for a policy (:mod:`badpo.engine.tokenize`) but without the
closing EOS, so the reward sits on the response's last token: exactly what ``badpo evaluate``'s judge
(:func:`badpo.readouts.model.judge_scores`) feeds a tokenizer without a chat template. With a chat
template the judge renders the answer as an assistant turn, whose closing tokens the training
encoding does not have (docs/reward_models.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch import Tensor, nn

from badpo.core.config import ConfigError
from badpo.core.losses import bt_loss
from badpo.engine.batches import Schedule
from badpo.engine.config_checks import check_rm
from badpo.engine.lifecycle import Lifecycle, commit_judgment_outputs
from badpo.engine.logprobs import at_least_float32
from badpo.engine.loop import JudgmentStage, Run, bias_logits, orthogonal_sides, run_stage
from badpo.engine.preference import build_bias, read_and_audit
from badpo.engine.reporting import report_input
from badpo.engine.runtime import load_model, policy_optimizer
from badpo.engine.settings import RMConfig
from badpo.engine.tokenize import TokenStore
from badpo.methods import Arm, LossTerms
from badpo.run_folder.layout import REWARD_MODEL
from badpo.theta.level import build_level_step, orthogonal_step
from badpo.theta.step import theta_adam


class RewardScorer(nn.Module):
    """``forward(input_ids, attention_mask) -> [B]`` float32 rewards, as a module accelerate wraps."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self._no_split_modules = getattr(model, "_no_split_modules", None)  # for FSDP auto-wrap

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        return at_least_float32(self.model(input_ids=input_ids, attention_mask=attention_mask).logits[:, 0])


def without_final_eos(store: TokenStore) -> TokenStore:
    """The store with each sequence's closing EOS padded over (a response cut by max_length has
    none), so that the head reads the reward on the response's last token (module docstring)."""
    ends = ~store.response_cut if store.response_cut is not None else torch.ones(len(store), dtype=torch.bool)
    lengths = store.lengths - ends.long()
    ids = store.ids.clone()
    rows = ends.nonzero().flatten()
    ids[rows, lengths[rows]] = store.pad_id
    return dataclasses.replace(store, ids=ids, lengths=lengths)


def reward_losses(run: Run, micro, step: int, statistic=None) -> LossTerms:
    """Bradley-Terry terms of one micro-batch: each sequence scored once, ``[J]`` losses and rewards."""
    device = run.accelerator.device
    batch = run.data.store.batch(micro.sequence_rows, device)
    rewards = run.policy(batch["input_ids"], batch["attention_mask"])
    chosen, rejected = orthogonal_sides(run, micro.judgments, rewards[micro.chosen_slot.to(device)],
                                        rewards[micro.rejected_slot.to(device)])
    bias = bias_logits(run, micro.judgments.to(device))
    losses = bt_loss(chosen, rejected, bias)
    return LossTerms(losses, chosen.detach(), rejected.detach(), (chosen - rejected + bias).detach())


def reward_method(config: RMConfig) -> Arm:
    """The arm as the engine's bias and audit code read it: the variant; the loss is reward_losses."""
    return Arm("Bradley-Terry reward model", name=config.method, method="bradley_terry",
               bias_variant=config.bias_variant)


def prepare_reward_run(config: RMConfig, accelerator) -> tuple[Run, dict, object]:
    """Data, label audit, bias channel, reward model and optimizers: (run, {}, tokenizer)."""
    method = reward_method(config)
    tokenizer, data, labels = read_and_audit(method, config, accelerator)
    data = dataclasses.replace(data, store=without_final_eos(data.store))
    if data.grades is not None:
        raise ConfigError(f"{config.data}: the reward model reads plain wins, and the data holds ties or strengths "
                          "(badpo train takes them); set ties: drop and strength: ignore")
    bias = build_bias(method, config, data)
    model = load_model(config.model, config.lora, accelerator.mixed_precision, task="SEQ_CLS",
                       float64=config.runtime.precision == "fp64", num_labels=1, pad_token_id=tokenizer.pad_token_id,
                       device_type=accelerator.device.type, processes=accelerator.num_processes)
    scorer = RewardScorer(model.to(accelerator.device))
    optimizer, scheduler = policy_optimizer(scorer, config.optim, config.optim.lr, config.steps,
                                            accelerator.device)
    scorer, optimizer = accelerator.prepare(scorer, optimizer)
    items = data.items(config.batching)
    run = Run(
        config=config, method=method, accelerator=accelerator, policy=scorer, bias=bias,
        optimizer=optimizer, scheduler=scheduler,
        theta_optimizer=theta_adam(bias, config.bias.lr, accelerator.device), data=data, items=items,
        schedule=Schedule(len(items), config.batch_size, config.runtime.seed), reference=None,
        annotator_index=data.annotator_index.to(accelerator.device),
        attr_diff=data.attr_diff.to(accelerator.device), labels=labels, losses=reward_losses,
        level=build_level_step(config.bias, bias, method.level_link(None), data.theta_labels()),
        orthogonal=orthogonal_step(config.bias.level, bias, method, config.micro_batch_size),
    )
    return run, {}, tokenizer


def write_reward_outputs(run: Run, tokenizer, output: Path, cache_parts: dict, last: dict,
                         seconds: float) -> None:
    """reward_model/ (HF format, LoRA merged, tokenizer with its pad token), theta.json and run.json,
    committed as one unit."""
    accelerator = run.accelerator
    state = accelerator.get_state_dict(run.policy)  # on every process: gathers FSDP / DeepSpeed shards
    if not accelerator.is_main_process:
        return
    config = run.config

    def write_reward_model(staging: Path) -> None:
        model = accelerator.unwrap_model(run.policy).model
        model.load_state_dict({k.removeprefix("model."): v for k, v in state.items()})
        if config.lora.enabled:
            model = model.merge_and_unload()
        model.config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(staging / REWARD_MODEL, safe_serialization=True)
        tokenizer.save_pretrained(staging / REWARD_MODEL)

    commit_judgment_outputs(run, output, last, seconds, head={"method": config.method, "variant": config.bias_variant},
                            tail={}, write_model=write_reward_model)


@dataclasses.dataclass(frozen=True)
class RewardStage(JudgmentStage):
    """The reward model as the loop runs it: its own scoring (``Run.losses``) and outputs."""

    name: str = "rm"

    def prepare(self, config: RMConfig, accelerator) -> tuple[Run, dict, object]:
        prepared = prepare_reward_run(config, accelerator)
        report_input(accelerator, prepared[0].data.input_report, self.name)
        return prepared

    def on_finished(self, run: Run) -> None:
        """Nothing to score once trained: the readouts are ``badpo evaluate``'s."""

    def write_outputs(self, run: Run, tokenizer, output: Path, cache_parts: dict, last: dict,
                      seconds: float) -> None:
        write_reward_outputs(run, tokenizer, output, cache_parts, last, seconds)


REWARD_RUN = Lifecycle(check_rm)


def _train_in(config: RMConfig, output: Path, accelerator, resume: Path | None) -> Path:
    return run_stage(RewardStage(), config, output, accelerator, resume)


def train_reward_model(config: RMConfig) -> Path:
    """Train (or resume) one reward model; returns its folder: ``reward_model/``, ``theta.json``,
    ``config.yaml``, ``log.jsonl``, ``audit.json``, ``run.json``, ``checkpoints/``. A folder holding
    another run is refused (``overwrite: true`` replaces it); a finished run is left as it is."""
    return REWARD_RUN.run(config, _train_in)


__all__ = ["train_reward_model", "REWARD_RUN", "RewardStage", "prepare_reward_run", "reward_losses", "RewardScorer",
           "without_final_eos"]
