"""Typed configuration of the three engine stages, ``badpo sft``, ``badpo train`` and ``badpo rm``.

What they share is one base, :class:`RunConfig` (the data, the model, how it trains, the folder),
extended by :class:`JudgmentRunConfig` for the two that train on judgments with a bias channel and
checkpoints; each stage's own keys follow the shared ones.

Defaults are the paper's recipe (Appendix "Models and training", Table "Hyperparameters"). A
learning rate left at ``null`` resolves by stage and by LoRA: SFT 1e-5 full / 1e-4 LoRA,
preference 5e-7 full / 5e-6 LoRA. ``badpo train --help`` lists every key with its default and meaning;
the YAML files under ``configs/`` hold what differs from the defaults. A field's allowed values are
declared beside it (``constraints``, checked by :func:`badpo.core.constraints.check_fields`).
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from badpo.core.config import ConfigError
from badpo.core.constraints import (
    AT_LEAST_ONE,
    FINITE,
    FINITE_NON_NEGATIVE,
    FLOAT32_STEP,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    EachItem,
    Range,
)
from badpo.core.notices import BadpoWarning
from badpo.data.sources import ColumnMap
from badpo.engine.tokenize import TokenizationConfig
from badpo.methods.arms import Arm, arm, split_arm_name
from badpo.theta.options import INIT_RULES, LEVEL_NAMES, THETA_LR

BETA = 0.1  # DPO's KL strength unless a run says otherwise: the one default every reader of a run falls back to

SFT_LR = {False: 1e-5, True: 1e-4}  # keyed by "LoRA?"
PREFERENCE_LR = {False: 5e-7, True: 5e-6}
CPU_LENGTH_GROUPS = 4  # runtime.length_groups left at null on a CPU (issue 50)
# ... and no more groups than one per this many sequences: at SmolLM2-135M on two cores a forward
# of 32 sequences in four groups was faster and leaner than one forward, one of 8 in four groups
# slower and heavier (results/bench/memory_smol_quiet/); between the two it is a rule of thumb
CPU_ROWS_PER_GROUP = 8
# The memory defaults of a CPU run (length groups, selective checkpointing) start at this size: below
# it a step is bound by per-operator overhead, which both add to (a tiny model's step 6x as long),
# above it by the arithmetic and the activations they save (SmolLM2-135M: half the peak memory)
LEAN_MIN_PARAMETERS = 50_000_000


def lean_by_default(device_type: str, sharded: bool, parameters: int) -> bool:
    """Whether the CPU memory defaults left at null apply: a CPU run of a model of at least
    :data:`LEAN_MIN_PARAMETERS`, not sharded by FSDP."""
    return device_type == "cpu" and not sharded and parameters >= LEAN_MIN_PARAMETERS
REWARD_LR = {False: 1e-5, True: 1e-4}  # a reward model's head and backbone learn like SFT


@dataclass(frozen=True)
class ModelConfig:
    """Which causal LM to load and how."""

    name_or_path: str = ""  # Hub id or local path (for `train`: the SFT reference)
    tokenizer: str | None = None  # Hub id or path of the tokenizer; null = name_or_path
    revision: str | None = None  # Hub revision (branch, tag or commit)
    trust_remote_code: bool = False  # allow custom modelling code from the Hub
    attn_implementation: str | None = None  # e.g. sdpa / flash_attention_2; null = default
    gradient_checkpointing: bool = False  # recompute activations in backward to save memory
    # keep for backward only the outputs of the matrix products and attention of each decoder
    # layer, and recompute the rest (norms, activation functions, rotary embeddings): about half
    # the saved activations for a few element-wise passes; null = on a CPU for a model of 50M
    # parameters or more, off on an accelerator
    selective_checkpointing: bool | None = None
    # torch.compile each decoder block: fused kernels where a step waits on the host's launches;
    # null = on one CUDA GPU (1.5x a step at SmolLM2-135M on an H100), off on a CPU, under FSDP
    # and with several processes
    compile: bool | None = None
    disable_dropout: bool = True  # zero every dropout so the policy is deterministic

    def __post_init__(self):
        if self.compile:
            import torch  # here, not at the top: reading a config loads no torch

            check_compile_torch(torch.__version__)
        if self.selective_checkpointing and (self.gradient_checkpointing or self.compile):
            other = "gradient_checkpointing (which recomputes everything)" if self.gradient_checkpointing else "compile"
            raise ConfigError(f"model.selective_checkpointing: not with model.{other}; set one of them to false")

    def selective_on(self, device_type: str, sharded: bool = False, parameters: int = 0) -> bool:
        """Whether a run of a model of ``parameters`` on a ``device_type`` device checkpoints
        selectively (null resolved: on a CPU from :data:`LEAN_MIN_PARAMETERS` up, unless the decoder
        recomputes everything, is compiled or is sharded by FSDP)."""
        if self.selective_checkpointing is not None:
            return self.selective_checkpointing
        return lean_by_default(device_type, sharded, parameters) and not (self.gradient_checkpointing or self.compile)

    def compile_on(self, device_type: str | None, sharded: bool = False, processes: int = 1) -> bool:
        """Whether the decoder blocks are compiled for a run on a ``device_type`` device (null
        resolved: on one CUDA GPU with torch >= 2.5; off under FSDP and with several processes,
        where a compiled step is not tested, and beside selective checkpointing asked for by name)."""
        if self.compile is not None:
            return self.compile
        if self.selective_checkpointing:  # asked for by name, and refused beside a compiled decoder
            return False
        import torch

        return device_type == "cuda" and not sharded and processes == 1 and compile_torch_ok(torch.__version__)


def compile_torch_ok(version: str) -> bool:
    """torch >= 2.5 (:func:`check_compile_torch`)."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2]) >= (2, 5)


def check_compile_torch(version: str) -> None:
    """``model.compile`` needs torch >= 2.5: one graph serves every decoder block only where compiled
    code no longer binds one module object (``inline_inbuilt_nn_modules``); before, each block
    compiles its own and the later ones fall back to eager at the recompile limit."""
    if not compile_torch_ok(version):
        raise ConfigError(f"model.compile: needs torch >= 2.5 (this is {version}); set model.compile: false")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA through peft; with LoRA the reference is the base with adapters disabled."""

    constraints: ClassVar[Mapping] = {"rank": POSITIVE, "alpha": POSITIVE, "dropout": FRACTION}
    enabled: bool = False  # train a LoRA adapter instead of every weight
    rank: int = 32  # adapter rank r
    alpha: float = 64.0  # scaling alpha (the update is scaled by alpha / r)
    dropout: float = 0.0  # dropout on the adapter input
    target_modules: str | list[str] = "all-linear"  # peft target modules


@dataclass(frozen=True)
class OptimConfig:
    """The policy's AdamW and its schedule (never applied to theta)."""

    constraints: ClassVar[Mapping] = {"lr": FLOAT32_STEP, "weight_decay": FINITE_NON_NEGATIVE,
                                      "adam_betas": EachItem(FRACTION), "adam_eps": POSITIVE,
                                      "warmup_ratio": FRACTION, "max_grad_norm": FINITE_NON_NEGATIVE}
    lr: float | None = None  # null: the stage's default, sft 1e-5 / train 5e-7 / rm 1e-5 (x10 under LoRA)
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    adam_betas: tuple[float, float] = (0.9, 0.999)  # AdamW betas
    adam_eps: float = 1e-8  # AdamW epsilon
    schedule: Literal["cosine", "constant"] = "cosine"  # the lr after the warmup: cosine to 0, or constant
    warmup_ratio: float = 0.1  # share of steps with a linear warmup
    max_grad_norm: float = 1.0  # clip the policy's gradient norm; 0 = no clipping


@dataclass(frozen=True)
class BiasSettings:
    """The bias channel: its variant, its own optimizer and options."""

    constraints: ClassVar[Mapping] = {"lr": THETA_LR, "fixed_offset": FINITE}

    RENAMED = {"warm_start": "use bias.init: offline for the old warm start (true), zero for "
                             "theta from 0 (false); the default is now init: reference"}

    # how theta_k is parameterised (badpo.core.bias): none (no theta: the method alone), pooled,
    # shared_mean (theta_bar + eps_k), per_annotator, class_offsets; null = the command's default
    # (train: none, rm: shared_mean). Any method that adds the bias logit takes any variant
    variant: Literal["none", "pooled", "shared_mean", "per_annotator", "class_offsets"] | None = None
    shuffled_ids: bool = False  # control: each judgment assigned a uniformly random annotator
    lr: float = 1e-2  # theta's Adam, constant, no weight decay
    # where theta starts (docs/theta.md, "Where theta starts"; badpo.theta.start): its shared
    # level (theta_bar, the pooled theta, every theta_k of the free variant; the deviations at 0)
    # at: conditional = the labels' fit with a per-pair random effect for quality, so quality does
    # not shrink it (needs pairs judged twice or more, else reference's with a warning);
    # reference = the arm's own loss minimised with the policy at the reference (u = 0): quality
    # left out, shrunk toward 0 where it is strong; offline = each attribute's corpus-level
    # log-odds on its own (the paper's warm arms); zero = the paper's theta = 0
    init: Literal[INIT_RULES] = "reference"
    declared: list[str] | None = None  # attributes with a trainable theta; null = all
    fixed_offset: list[float] | None = None  # non-trainable offset added to every theta_k
    # trusted annotators, theta_k fixed instead of learned: a list of ids (fixed at 0) or a mapping
    # id -> [one value per attribute]; pins the shared level (per_annotator, shared_mean, class_offsets)
    trusted: list[str] | dict[str, list[float]] | None = None
    # with trusted annotators, who sets the untrusted annotators' shared level (badpo.core.level_step):
    # final: the trusted judgments, once, on the trained policy's margins, before theta.json is
    # written (the policy trains as under gradient); every_step: the trusted judgments, after every
    # optimizer step (the policy is pulled to the trusted annotators' zero, their noise included);
    # gradient: theta's Adam alone (the level goes where the dynamics leave it). No effect without
    # bias.trusted
    trusted_level: Literal["final", "every_step", "gradient"] = "final"
    # what sets theta's shared level after the start (docs/theta.md, "What theta does after the
    # start"): adam = theta's own Adam (the paper's dynamics); tilt = reference anchoring held every
    # step: the policy's lean along the declared attributes (its margins regressed on the pairs'
    # attribute differences) moves into the level, so the policy keeps the reference's lean;
    # tilt_given_quality = the same, the lean read at fixed labelled quality (each pair's quality
    # as its labels tell it joins the regression), so quality that goes with or against an
    # attribute is not counted as lean; orthogonal = theta's Adam, and the policy's gradient on
    # every micro-batch has its component along the judgments' attribute differences removed, so
    # theta takes the attribute's whole share of the labels and the policy's own lean stays the
    # reference's (badpo.core.orthogonal). Not with bias.trusted (that anchors on the trusted annotators);
    # every rule but adam needs a theta, and is refused for a method that learns none
    level: Literal[LEVEL_NAMES] = "adam"

    def trusted_values(self, n_attributes: int) -> dict[str, list[float]]:
        """{id: [q] fixed theta}: the list form fixes every coordinate at 0."""
        if isinstance(self.trusted, dict):
            return dict(self.trusted)
        return {annotator: [0.0] * n_attributes for annotator in self.trusted or ()}


@dataclass(frozen=True)
class ReportConfig:
    """Where a run reports besides ``log.jsonl``."""

    constraints: ClassVar[Mapping] = {"log_every": AT_LEAST_ONE}
    report_to: list[str] = field(default_factory=list)  # accelerate trackers: tensorboard, wandb, mlflow, ...
    wandb_project: str = "badpo"  # project of the trackers that log to a server (wandb, mlflow, ...)
    progress_bar: bool = True  # a tqdm bar on the terminal (main process)
    log_every: int = 1  # write a log record every this many steps
    # send each annotator's theta_k to the trackers under its id (curves, a final table); false: their
    # histogram and spread only, for annotator ids that must not leave the machine
    annotator_ids: bool = True


@dataclass(frozen=True)
class RuntimeConfig:
    """Precision, speed and reproducibility knobs shared by both stages."""

    constraints: ClassVar[Mapping] = {"seed": Range(0, 2**32 - 1), "logprob_chunk_size": POSITIVE,
                                      "eval_batch_size": POSITIVE, "num_threads": POSITIVE,
                                      "length_groups": AT_LEAST_ONE}
    seed: int = 42  # data order, shuffled ids, and torch RNG
    # auto: bf16 autocast on a bf16 GPU; fp64: float64 weights, activations and the policy's
    # log-probs (theta and the reference's cached log-probs stay float32; 1.4x the tiny demo's time)
    precision: Literal["auto", "fp32", "bf16", "fp64"] = "auto"
    logprob_chunk_size: int = 1024  # response positions projected to the vocabulary at once
    eval_batch_size: int = 16  # sequences per forward when caching reference log-probs
    num_threads: int | None = None  # torch CPU threads; null = torch's default
    # a training batch forwarded in at most this many groups of similar length, each padded only to
    # its own longest (fewer padded tokens: less compute and fewer saved activations); null = 4 on a
    # CPU for a model of 50M parameters or more, at most one group per 8 sequences, else 1 (one
    # forward a micro-batch; on an accelerator more, smaller forwards cost launches)
    length_groups: int | None = None

    def groups_on(self, device_type: str, sharded: bool = False, parameters: int = 0) -> int:
        """``length_groups`` for a model of ``parameters`` on a device of ``device_type`` (``cpu``,
        ``cuda``…), null resolved; 1 for a ``sharded`` (FSDP) policy, whose every forward is a
        collective all processes must make."""
        if self.length_groups is not None:
            return self.length_groups
        return CPU_LENGTH_GROUPS if lean_by_default(device_type, sharded, parameters) else 1

    def rows_per_group(self) -> int:
        """At least this many sequences a group on average: :data:`CPU_ROWS_PER_GROUP` for the
        default (null), 1 where ``length_groups`` is set (the groups that pad least, as many as asked)."""
        return CPU_ROWS_PER_GROUP if self.length_groups is None else 1


@dataclass(frozen=True)
class RunConfig:
    """What a run of every stage (``sft``, ``train``, ``rm``) is configured by: its data, its model,
    how it trains and where it writes. Each stage's config extends it with its own keys, and a run
    folder's lifecycle (:mod:`badpo.engine.lifecycle`) reads only these."""

    command: ClassVar[str] = ""  # the command that runs this config, as its messages name it
    lr_defaults: ClassVar[Mapping[bool, float]] = {}  # optim.lr left at null, keyed by "LoRA?"
    constraints: ClassVar[Mapping] = {"batch_size": POSITIVE, "micro_batch_size": POSITIVE}

    data: str = ""  # judgments: .jsonl/.parquet/.csv/.json, a save_to_disk folder or a Hub id
    data_split: str | None = None  # split of a Hub dataset / saved DatasetDict; null = train / the only one
    columns: ColumnMap = field(default_factory=ColumnMap)  # field -> the data's column, e.g. annotator: worker_id
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraSettings = field(default_factory=LoraSettings)
    tokenization: TokenizationConfig = field(default_factory=TokenizationConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    batch_size: int = 32  # items per step = micro_batch_size x accumulation x processes
    micro_batch_size: int = 2  # items per forward on one process
    output_dir: str = ""  # the run's folder
    overwrite: bool = False  # replace a different run found in output_dir (it is deleted first)

    def resolved(self) -> RunConfig:
        """The config the run trains with and its folder records: ``optim.lr`` left at null is the
        stage's default."""
        lr = resolved_lr(self.optim, self.lora, self.lr_defaults)
        return dataclasses.replace(self, optim=dataclasses.replace(self.optim, lr=lr))


@dataclass(frozen=True)
class JudgmentRunConfig(RunConfig):
    """A run on judgments with a bias channel, checkpoints and resume: ``train`` and ``rm``. Its
    ``method`` (a key of TrainConfig, a name RMConfig makes of its variant) names it."""

    constraints: ClassVar[Mapping] = {"steps": POSITIVE, "save_every": NON_NEGATIVE, "keep_checkpoints": POSITIVE}

    output_dir: str = "runs/{method}-seed{seed}"  # {method} and {seed} are filled in
    attributes: list[str] = field(default_factory=list)  # attribute specs, one per coordinate
    bias: BiasSettings = field(default_factory=BiasSettings)
    steps: int = 1000  # optimizer steps
    batching: Literal["per_judgment", "pair_grouped"] = "per_judgment"  # what an item is
    save_every: int = 0  # checkpoint every this many steps; 0 = only at stop_after_steps
    keep_checkpoints: int = 2  # newest checkpoints kept
    resume_from: str | None = None  # a checkpoint folder, or "latest" in output_dir
    stop_after_steps: int | None = None  # stop (with a checkpoint) after this many steps
    drop_identical_pairs: bool = False  # drop judgments whose two sides tokenize alike; else an error
    duplicates: Literal["keep", "drop"] = "keep"  # exact duplicate judgments: each a vote, or the repeats
    # dropped (the first of each kept), as `badpo audit --duplicates`
    ties: Literal["keep", "drop"] = "keep"  # tied judgments: in the ordered logit, or dropped and counted
    # (the paper's setting: docs/crowd_labels.md)
    strength: Literal["keep", "ignore"] = "keep"  # a graded win's strength: in the ordered logit, or read
    # as a plain win

    def resolved(self) -> JudgmentRunConfig:
        """As :meth:`RunConfig.resolved`, with ``{method}`` and ``{seed}`` filled in output_dir."""
        output_dir = self.output_dir.format(method=self.run_name, seed=self.runtime.seed)  # type: ignore[attr-defined]
        return dataclasses.replace(super().resolved(), output_dir=output_dir)


@dataclass(frozen=True)
class TrainConfig(JudgmentRunConfig):
    """``badpo train``: a preference run of one method at one seed."""

    command: ClassVar[str] = "train"
    lr_defaults: ClassVar[Mapping[bool, float]] = PREFERENCE_LR
    constraints: ClassVar[Mapping] = {"beta": POSITIVE}  # beta < 0 would learn the reverse preference

    default_variant: ClassVar[str] = "none"  # bias.variant left at null

    method: str = "dpo"  # a loss, a key of badpo.methods.METHODS (its bias: bias.variant)
    method_params: dict[str, Any] = field(default_factory=dict)  # the method's own parameters
    beta: float = BETA  # KL strength of DPO
    cache_dir: str | None = "runs/reference_cache"  # reference log-prob cache; null = no cache
    save_policy: bool = True  # write the final policy (HF format) to output_dir/policy
    fsdp: bool = False  # shard the policy over 2+ CPU processes with FSDP2 (fully_shard) instead of DDP
    reliability: Literal["off", "weight"] = "off"  # weight each annotator's judgments by the audit's reliability
    # (badpo.auditing.reliability: s_k clipped to [0, 1], 0 for a flagged noise voter); docs/crowd_labels.md

    def __post_init__(self) -> None:
        """An arm's name given as ``method`` (the spelling before bias.variant) split into the two."""
        split = split_arm_name(self.method)
        if split is None:
            return
        method, variant, shuffled = split
        # an old name and a bias.variant that says otherwise: which came last (a file, an override)
        # cannot be told here, so neither wins
        if self.bias.variant not in (None, variant):
            raise ConfigError(f"method: {self.method!r} is method {method} with bias.variant {variant}, but "
                              f"bias.variant is {self.bias.variant}; give method: {method} and one bias.variant")
        warnings.warn(f"method: {self.method!r} is now method: {method} with bias.variant: {variant}"
                      + (" and bias.shuffled_ids: true" if shuffled else "") + "; the old name works until the "
                      "next release", ArmNameNotice, stacklevel=3)
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "bias", dataclasses.replace(self.bias, variant=variant,
                                                             shuffled_ids=shuffled or self.bias.shuffled_ids))

    @property
    def arm(self) -> Arm:
        """The method trained with its bias variant (unknown names: a one-line ConfigError)."""
        return arm(self.method, self.bias.variant or self.default_variant, self.bias.shuffled_ids)

    @property
    def run_name(self) -> str:
        """The arm's name (``ba_dpo_pooled``...): the run's name in logs, records and output_dir."""
        return self.arm.name


@dataclass(frozen=True)
class SFTConfig(RunConfig):
    """``badpo sft``: the reference, fine-tuned on one response per pair."""

    command: ClassVar[str] = "sft"
    lr_defaults: ClassVar[Mapping[bool, float]] = SFT_LR
    constraints: ClassVar[Mapping] = {"epochs": POSITIVE}

    data: str = ""  # sft rows (prompt, response) or judgments (see source); any format of train's data
    data_split: str | None = None  # as for train
    columns: ColumnMap = field(default_factory=ColumnMap)  # as for train (sft rows: prompt, response)
    batch_size: int = 32  # sequences per step = micro_batch_size x accumulation x processes
    micro_batch_size: int = 4  # sequences per forward on one process
    output_dir: str = "runs/sft"  # the reference in Hugging Face format
    overwrite: bool = False  # delete another run's reference in output_dir first (else refused)
    source: Literal["sft_rows", "judgments"] = "sft_rows"  # judgments: majority-chosen side
    tie_break: Literal["first_judgment", "skip"] = "first_judgment"  # pairs with tied votes
    epochs: float = 1.0  # passes over the rows (the last step is filled from the next shuffle)
    merge_lora: bool = True  # save base + adapter merged, so the reference is a plain model


@dataclass(frozen=True)
class RMConfig(JudgmentRunConfig):
    """``badpo rm``: a Bradley-Terry reward model (scalar head) with a bias variant, at one seed."""

    command: ClassVar[str] = "rm"
    lr_defaults: ClassVar[Mapping[bool, float]] = REWARD_LR

    model: ModelConfig = field(default_factory=ModelConfig)  # the backbone (a score head is added)
    lora: LoraSettings = field(default_factory=LoraSettings)  # merged into the saved model
    default_variant: ClassVar[str] = "shared_mean"  # bias.variant left at null

    output_dir: str = "runs/{method}-seed{seed}"  # {method} (rm_<variant>) and {seed} are filled in
    variant: str | None = None  # before bias.variant (one release): moved there with a notice

    def __post_init__(self) -> None:
        if self.variant is None:
            return
        if self.bias.variant not in (None, self.variant):
            raise ConfigError(f"variant: {self.variant!r} and bias.variant: {self.bias.variant!r}; give "
                              "bias.variant alone")
        warnings.warn(f"variant: {self.variant} is now bias.variant: {self.variant}; the old key works until "
                      "the next release", ArmNameNotice, stacklevel=3)
        object.__setattr__(self, "bias", dataclasses.replace(self.bias, variant=self.variant))
        object.__setattr__(self, "variant", None)

    @property
    def bias_variant(self) -> str:
        """The reward model's bias variant (bias.variant, null resolved); none = plain Bradley-Terry."""
        return self.bias.variant or self.default_variant

    @property
    def method(self) -> str:
        """The run's name in logs and output_dir (not a config key)."""
        return f"rm_{self.bias_variant}"

    @property
    def run_name(self) -> str:
        return self.method


def resolved_lr(optim: OptimConfig, lora: LoraSettings, defaults: dict[bool, float]) -> float:
    return optim.lr if optim.lr is not None else defaults[lora.enabled]


class ArmNameNotice(BadpoWarning):
    """A config spells an arm as one name (``method: ba_dpo_pooled``, rm's ``variant``): the form
    before the bias variant became ``bias.variant``."""


class PaperDefaultsNotice(BadpoWarning):
    """A stage runs without a config file, so the keys not given are the paper's 0.5B recipe."""


def _given(settings: Mapping[str, Any], dotted: str) -> bool:
    """Whether ``settings`` (nested, or with dotted keys) sets ``dotted``."""
    if dotted in settings:
        return True
    head, _, rest = dotted.partition(".")
    return bool(rest) and isinstance(settings.get(head), Mapping) and _given(settings[head], rest)


def warn_paper_defaults(stage: str, settings: Mapping[str, Any], config: Any) -> None:
    """Say that a stage run without a config file (no ``-c``; ``config=None`` from the API) trains
    with the paper's recipe on every key it was not given: the learning rate, the length of
    training and the batch (the lengths are fitted to the model on their own)."""
    length = "epochs" if stage == "sft" else "steps"
    named = {"optim.lr": f"{resolved_lr(config.optim, config.lora, config.lr_defaults):g}",
             length: f"{getattr(config, length):g}", "batch_size": str(config.batch_size)}
    left = [f"{key} {value}" for key, value in named.items() if not _given(settings, key)]
    if left:
        warnings.warn(f"no config file: {', '.join(left)} are the paper's settings (for its 0.5B to 8B models); "
                      f"for a small model set them or start from configs/{stage}_tiny.yaml (-c)",
                      PaperDefaultsNotice, stacklevel=2)


def accumulation_steps(batch_size: int, micro_batch_size: int, processes: int) -> int:
    """batch_size / (micro_batch_size x processes); an uneven split is a ConfigError."""
    per_pass = micro_batch_size * processes
    if micro_batch_size < 1 or batch_size % per_pass:
        raise ConfigError(
            f"batch_size: {batch_size} is not a multiple of micro_batch_size ({micro_batch_size}) "
            f"x processes ({processes})"
        )
    return batch_size // per_pass

