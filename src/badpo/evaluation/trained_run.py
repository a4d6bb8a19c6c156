"""``badpo evaluate RUN_DIR``: a finished run's readouts on the evaluation data its user names.

The run folder gives what training fixed: the reference (``model.name_or_path``), the tokenizer
and tokenization, beta, the column mapping of its data and its declared attributes (its resolved
``config.yaml``), the policy (``policy/``, or the type policies of ``mixture.json``) and the bias
(``theta.json``). The caller gives the readout settings (:class:`badpo.readouts.eval_config.EvalConfig`
keys; ``attributes``, when given, replace the run's) and the data (:class:`EvalData`):

- held-out judgments: any file or dataset ``badpo train`` reads, through the run's column mapping;
- evaluation prompts: rows with a ``prompt`` (:func:`badpo.data.sources.read_prompt_source`);
  without them, the held-out judgments' distinct prompts;
- or a corpus folder as ``badpo build`` writes it (``eval_prompts.jsonl``, ``heldout.jsonl``,
  ``planted.json``, in badpo's own field names); by default the folder of the run's training
  data, when it holds them (read through the run's column mapping, as the training data was).

A readout whose input is missing is left out and named under ``skipped`` with the reason, so
that a run trained on the user's own data reads without a corpus. ``max_new_tokens`` is lowered,
with a :class:`GenerationCapNotice`, to what the model's context leaves after the longest prompt.
The record says what it read (``inputs``); :func:`summary` gives its few readable lines.

A folder that ``BADPOTrainer.save_model`` (TRL) wrote is read the same way: its record
(``badpo_run.json``, :mod:`badpo.run_folder.external`) stands for ``config.yaml``, and the policy
(full weights or a LoRA adapter) and its tokenizer are the folder itself. It names no training
data, so the evaluation data is given.

A run folder may come from someone else, so nothing in it decides what code runs: model code from
the Hub runs only with the caller's ``trust_remote_code`` (a run trained with it is refused
without it), and a ``module:function`` attribute of the run is refused unless the caller declares
the attributes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from badpo.core.attributes import imports_user_code, resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError, from_dict, load_config
from badpo.core.notices import BadpoWarning
from badpo.core.outputs import check_not_input, check_output_file, check_writable_folder
from badpo.data.gguf import gguf_folder
from badpo.data.sources import ColumnMap
from badpo.engine.runtime import from_pretrained, load_tokenizer
from badpo.engine.settings import BETA, ModelConfig, RMConfig, TrainConfig
from badpo.engine.tokenize import TokenizationConfig, encode_prompts
from badpo.evaluation.eval_data import CORPUS_FILES, NO_HELDOUT, EvalData, data_folder, load_data
from badpo.readouts.eval_config import SETTINGS_RECORDED
from badpo.readouts.evaluate_policy import EvalConfig, evaluate_policy, evaluate_reward_model
from badpo.readouts.mixture_reading import Mixture, evaluate_mixture
from badpo.readouts.model import context_length, generate, load_judge
from badpo.readouts.names_scoring import signature_tokens
from badpo.readouts.reading import Corpus, declares_names
from badpo.readouts.table import summary_lines
from badpo.run_folder.external import read_external_run
from badpo.run_folder.final_commit import interrupted_commit
from badpo.run_folder.identity import identity
from badpo.run_folder.layout import (
    CONFIG_FILE,
    EXTERNAL_RECORD,
    MIXTURE_FILE,
    POLICY,
    READOUTS_FILE,
    REWARD_MODEL,
    THETA_FILE,
    TRAINED_THETA_FILE,
    is_external_run,
    is_run_folder,
)
from badpo.run_folder.paths import made_from, moved_reference, refuse_pickles, resolved_from
from badpo.run_folder.saved import SavedRun

__all__ = ["EvalData", "GenerationCapNotice", "TrainedRun", "evaluate_run_dir", "load_causal_lm", "prompts_digest",
           "evaluation_inputs", "readouts_path", "summary", "trained_theta"]



class GenerationCapNotice(BadpoWarning):
    """``max_new_tokens`` was lowered so that prompt and answer fit the model's context."""


def evaluation_inputs(run_dir: str | Path, data: EvalData) -> list[tuple[str, Any]]:
    """The files an evaluation of ``run_dir`` on ``data`` reads, named as the command line names
    them: the files given, a corpus folder's, and the run's training data with the corpus files
    beside it (read when no data is given). A run that does not open names none here; evaluating
    it says why."""
    inputs: list[tuple[str, Any]] = [("--heldout", data.heldout), ("--prompts", data.prompts)]
    folders = [("--corpus", data.corpus)] if isinstance(data.corpus, (str, os.PathLike)) else []
    try:
        trained = TrainedRun.open(run_dir)
    except (OSError, ValueError):
        trained = None
    if trained is not None and trained.config is not None:
        inputs.append(("the run's training data", resolved_from(made_from(Path(run_dir), trained.config.output_dir),
                                                                trained.config.data)))
    if trained is not None and trained.data_folder is not None:
        folders.append(("the corpus beside the run's training data", trained.data_folder))
    inputs += [(name, Path(folder) / file) for name, folder in folders for file in CORPUS_FILES.values()]
    return inputs


def readouts_path(run_dir: str | Path, out: str | Path | None = None, overwrite: bool = False,
                  data: EvalData | None = None) -> Path:
    """Where ``badpo evaluate`` writes, checked before any model is loaded: ``RUN_DIR/readouts.json``
    by default (evaluate's own file), or ``out``. Inside a run folder (``run_dir`` or another)
    evaluate writes nothing but that file, so that its readouts never replace a run's theta, policy
    or config; nor is it a file the evaluation reads (``data``, :func:`evaluation_inputs`). An
    existing file, the run's own or ``out``, is replaced only with ``overwrite``: an evaluation of a
    real model can cost hours, and a quick one must not replace it silently."""
    own = Path(run_dir) / READOUTS_FILE
    inputs = evaluation_inputs(run_dir, data) if data is not None else []
    check_not_input(own if out is None else out, "--out", inputs)
    if out is None or Path(out).absolute().resolve() == own.absolute().resolve():
        check_writable_folder(own.parent, "--out", own)
        if own.exists() and not overwrite:
            raise ConfigError(f"{own}: this run has been evaluated already; --overwrite replaces that "
                              "evaluation, --out FILE writes this one elsewhere")
        return own
    target = Path(out).expanduser().absolute().resolve()
    for folder in target.parents:
        if folder == Path(run_dir).absolute().resolve() or is_run_folder(folder):
            raise ConfigError(f"--out {out}: inside the run folder {folder}, where evaluate writes nothing but "
                              f"its {READOUTS_FILE}; give a path outside it (or leave --out out)")
    return check_output_file(out, "--out", overwrite)


def load_causal_lm(path: str | Path, model_settings: dict, base: str | Path | None = None) -> nn.Module:
    """A saved policy (full weights, or a LoRA adapter on ``base``) in eval mode, fp32, on the GPU
    when there is one."""
    from transformers import AutoModelForCausalLM

    path = Path(gguf_folder(str(path)))  # the reference may be a GGUF: its converted folder
    base = gguf_folder(str(base)) if base is not None else None
    kwargs = {"trust_remote_code": model_settings.get("trust_remote_code", False), "dtype": torch.float32}
    if (path / "adapter_config.json").exists():
        from peft import PeftModel

        if base is None:
            raise ValueError(f"{path} is a LoRA adapter; its base model is needed")
        model = PeftModel.from_pretrained(from_pretrained(AutoModelForCausalLM, str(base), "model.name_or_path",
                                                          **kwargs), path)
    else:
        model = from_pretrained(AutoModelForCausalLM, str(path), "model", complete=True, **kwargs)
    return model.to("cuda" if torch.cuda.is_available() else "cpu").eval()


def eval_config(settings: Mapping[str, Any], run_specs: Sequence[str], source: Path) -> EvalConfig:
    """The readout settings, the run's declared attributes (read from ``source``, its config.yaml
    or record) standing in when ``settings`` has none; a run's spec that would import a module is
    refused (module docstring)."""
    if "attributes" in settings:
        return from_dict(EvalConfig, settings)
    for spec in run_specs:
        if imports_user_code(spec):
            raise ConfigError(f"{source}: attribute {spec!r} runs a module's code, and a run "
                              "folder does not decide what code runs; if you trust it, declare the "
                              "attributes yourself (-a SPEC per attribute, or attributes=[...])")
    if not run_specs:
        raise ConfigError(f"{source} declares no attribute spec; give them (-a SPEC per "
                          "attribute, or attributes=[...])")
    return from_dict(EvalConfig, {**settings, "attributes": list(run_specs)})


MODEL_KEYS_FIXED = ("name_or_path", "tokenizer", "revision")  # a run's model settings that name what it loads


def _moved(run_dir: Path, origin: Path | None, model: str) -> tuple[str | None, bool]:
    """(why the relative ``model`` may not load, whether for sure): sure when the run's run.json
    says its model named a local folder when the run was made (``model_was_folder``)."""
    was_folder = (SavedRun(run_dir).summary() or {}).get("model_was_folder") is True
    moved = moved_reference(run_dir, origin, model, was_folder)
    return moved, moved is not None and was_folder


@dataclass(frozen=True)
class TrainedRun:
    """A trained policy and what training fixed that its readouts need, whoever trained it: the one
    way to open a run for reading (:meth:`open` a folder; :meth:`of_settings` a run whose settings
    the caller holds, as an experiment does) and to load its models and theta.

    ``kind``: ``badpo`` (a ``badpo train`` folder: its config.yaml), ``reward_model`` (a ``badpo
    rm`` folder: ``policy`` is its reward model, beta None), ``trl`` (a folder BADPOTrainer saved:
    its record) or ``settings``. ``policy`` is None for EM-DPO's type policies (:meth:`read`
    reads them). ``model_settings`` is what loading a model takes (trust_remote_code and the
    rest of the run's ``model:`` settings, less :data:`MODEL_KEYS_FIXED`)."""

    kind: str
    folder: Path  # the run folder (mixture.json, theta.json)
    source: Path | None  # the file that says what training fixed: config.yaml, or the record of a TRL folder
    attributes: Sequence[str]  # the declared attribute specs
    reference: str  # the reference model (the base of a LoRA policy)
    tokenizer: str | None  # None: the reference's
    trust_remote_code: bool  # the run was trained with it
    data_folder: Path | None  # where the evaluation data is looked for when none is given
    columns: ColumnMap
    tokenization: TokenizationConfig
    beta: float | None
    policy: Path | None
    theta_file: Path | None
    model_settings: Mapping[str, Any]
    config: TrainConfig | RMConfig | None = None  # the resolved config of a badpo run folder
    moved: str | None = None  # why a relative reference may not load: said with a failure to load it
    moved_for_sure: bool = False  # run.json says the reference was a local folder: say ``moved`` before loading

    @classmethod
    def open(cls, run_dir: str | Path) -> TrainedRun:
        """A finished ``badpo train`` folder (policy/ or mixture.json), a ``badpo rm`` folder or a
        folder BADPOTrainer saved."""
        run_dir = Path(run_dir)
        if (run_dir / REWARD_MODEL).is_dir() and (run_dir / CONFIG_FILE).exists():
            return cls._reward_model(run_dir)
        if is_external_run(run_dir):
            return cls._trl(run_dir)
        if (run_dir / CONFIG_FILE).exists() and (Mixture.load(run_dir) is not None or (run_dir / POLICY).exists()):
            return cls._badpo(run_dir)
        raise FileNotFoundError(f"{run_dir}: not a finished run (config.yaml and policy/ or {MIXTURE_FILE} are "
                                f"needed; or the {EXTERNAL_RECORD} that BADPOTrainer.save_model writes)")

    @classmethod
    def _badpo(cls, run_dir: Path) -> TrainedRun:
        """What a ``badpo train`` folder's config.yaml fixed; the policy is ``policy/``. Relative paths
        in it (the reference, the tokenizer, the data) are resolved against where the run was made."""
        config = load_config(TrainConfig, run_dir / CONFIG_FILE)
        origin = made_from(run_dir, config.output_dir)
        model, tokenizer = (resolved_from(origin, config.model.name_or_path),
                            resolved_from(origin, config.model.tokenizer))
        policy = None if Mixture.load(run_dir) is not None else run_dir / POLICY
        return cls("badpo", run_dir, run_dir / CONFIG_FILE, config.attributes, model, tokenizer,
                   config.model.trust_remote_code, data_folder(resolved_from(origin, config.data)), config.columns,
                   config.tokenization, config.beta, policy, run_dir / THETA_FILE,
                   {"trust_remote_code": config.model.trust_remote_code}, config,
                   *_moved(run_dir, origin, model))

    @classmethod
    def _reward_model(cls, run_dir: Path) -> TrainedRun:
        """What a ``badpo rm`` folder's config.yaml fixed; the trained model (``policy``) is its
        reward model, ``reference`` the backbone it started from, and it has no beta."""
        config = load_config(RMConfig, run_dir / CONFIG_FILE)
        return cls("reward_model", run_dir, run_dir / CONFIG_FILE, config.attributes, config.model.name_or_path,
                   config.model.tokenizer, config.model.trust_remote_code, data_folder(config.data), config.columns,
                   config.tokenization, None, run_dir / REWARD_MODEL, run_dir / THETA_FILE,
                   {"trust_remote_code": config.model.trust_remote_code}, config)

    @classmethod
    def _trl(cls, run_dir: Path) -> TrainedRun:
        """What BADPOTrainer's record fixed; the policy and its tokenizer are the folder itself."""
        record, source = read_external_run(run_dir), run_dir / EXTERNAL_RECORD
        if record.reference is None:
            raise ConfigError(f"{source}: reference is null (the trainer could not tell which model the policy was "
                              "trained against); write the reference's Hub id or path there")
        if not any((run_dir / name).is_file() for name in ("config.json", "adapter_config.json")):
            raise FileNotFoundError(f"{run_dir}: holds {EXTERNAL_RECORD} but no model (config.json or "
                                    "adapter_config.json); BADPOTrainer.save_model writes both")
        tokenizer = str(run_dir) if (run_dir / "tokenizer_config.json").is_file() else None
        return cls("trl", run_dir, source, record.attributes or [], record.reference, tokenizer,
                   record.trust_remote_code, None, ColumnMap(), record.tokenization, record.beta, run_dir,
                   run_dir / THETA_FILE, {"trust_remote_code": record.trust_remote_code})

    @classmethod
    def of_settings(cls, settings: Mapping[str, Any], policy: Path, reference: Path,
                    theta_file: Path | None = None) -> TrainedRun:
        """A run whose resolved settings (``TrainConfig`` or ``SFTConfig`` keys) the caller holds, with
        its policy (a mixture's: ``policy.parent`` holds mixture.json) and reference folders."""
        model = {k: v for k, v in settings.get("model", {}).items() if k not in MODEL_KEYS_FIXED}
        return cls("settings", Path(policy).parent, None, settings.get("attributes", ()), str(reference), None,
                   bool(model.get("trust_remote_code", False)), None, ColumnMap(),
                   from_dict(TokenizationConfig, settings.get("tokenization", {}), "tokenization"),
                   settings.get("beta", BETA), Path(policy), theta_file, model)

    def trusting(self, trust_remote_code: bool) -> TrainedRun:
        """The run loaded with the caller's ``trust_remote_code`` (a run folder does not decide what code runs)."""
        return dataclasses.replace(self, model_settings={"trust_remote_code": trust_remote_code})

    def read(self, reference: nn.Module, tokenizer, corpus: Corpus, config: EvalConfig,
             tokenization: TokenizationConfig, **shared) -> dict:
        """Every readout of the run, the one door for every method: of its policy, or of the type
        policies it saved (EM-DPO, :func:`badpo.readouts.mixture_reading.evaluate_mixture`). ``shared``: what
        the reference gives every policy read against it (``bodies``, ``reference_samples``,
        ``reference_readouts``, ``cache_dir``: :func:`badpo.readouts.evaluate_policy.evaluate_policy`)."""
        types = Mixture.load(self.folder) if self.kind in ("badpo", "settings") else None
        if types is not None:
            return evaluate_mixture(self.load_policy, types, reference, tokenizer, corpus, config, beta=self.beta,
                                    tokenization=tokenization, **shared)
        return evaluate_policy(self.load_policy(), reference, tokenizer, corpus, config, bias=self.bias(),
                               beta=self.beta, tokenization=tokenization, vote_bias=self.vote_bias(), **shared)

    def load_tokenizer(self):
        with self._saying_if_moved():
            return load_tokenizer(from_dict(ModelConfig, {**self.model_settings, "name_or_path": self.reference,
                                                          "tokenizer": self.tokenizer}))

    def load_reference(self) -> nn.Module:
        with self._saying_if_moved():
            return load_causal_lm(self.reference, self.model_settings)

    @contextlib.contextmanager
    def _saying_if_moved(self):
        """A reference that fails to load, with why when it is a relative path that names no folder."""
        if self.moved_for_sure:  # no load: a bare name would be tried on the Hub first, retrying offline
            raise ConfigError(self.moved)
        try:
            yield
        except (ConfigError, OSError) as error:
            if self.moved is None:
                raise
            raise ConfigError(f"{str(error).rstrip('.')}; {self.moved}") from None

    def load_policy(self, path: Path | None = None) -> nn.Module:
        """The policy (or one of EM-DPO's type policies at ``path``), on the reference when a LoRA
        adapter; a pickle in its folder is refused before anything loads."""
        folder = Path(path if path is not None else self.policy)
        refuse_pickles(folder)
        return load_causal_lm(folder, self.model_settings, base=self.reference)

    def saved(self) -> SavedRun:
        """What the run folder saved beside its models (method, summary, theta, audit, data
        fingerprint), read as files: :class:`badpo.run_folder.saved.SavedRun`."""
        return SavedRun(self.folder)

    def identity(self) -> dict | None:
        """What keys a badpo run folder (:func:`badpo.run_folder.identity.identity` of its config)."""
        return identity(self.config) if self.config is not None else None

    def bias(self) -> BiasChannel | None:
        """The run's saved theta, when it has one."""
        return BiasChannel.load(self.theta_file) if self.theta_file is not None and self.theta_file.exists() else None

    def vote_bias(self) -> BiasChannel | None:
        """The theta the policy was trained against, when saved apart (:func:`trained_theta`)."""
        return trained_theta(self.theta_file) if self.theta_file is not None else None


def generates(config: EvalConfig) -> bool:
    """Whether the readouts under ``config`` sample answers: the generation readouts, or the
    greedy answer bodies (the reference's, or the policy's own) the names are read after."""
    return config.generations or (config.body in ("reference", "own")
                                  and declares_names(resolve_attributes(config.attributes)))


def cap_new_tokens(config: EvalConfig, model: nn.Module, tokenizer, prompts: Sequence[str],
                   tokenization: TokenizationConfig, surnames: Sequence[str] | None = None) -> EvalConfig:
    """``config`` with ``max_new_tokens`` lowered to what the context leaves after the longest
    prompt (kept to its last ``max_prompt_tokens`` tokens, as the readouts keep it) and after
    what a readout appends to a generated answer (the names readout's signature after the
    reference's body; ``surnames``: the whole-signature candidates), with a
    :class:`GenerationCapNotice`; a prompt that fills the context is an error. Left as it is
    when nothing is generated."""
    limit = context_length(model, tokenizer)
    if limit is None or not prompts or not generates(config):
        return config
    longest = max(min(len(ids), tokenization.max_prompt_tokens)
                  for ids in encode_prompts(tokenizer, prompts, tokenization))
    appended, why = 0, ""
    if config.body in ("reference", "own") and declares_names(resolve_attributes(config.attributes)):
        appended = signature_tokens(tokenizer, surnames if config.whole_signature else None)
        why = f" and the {appended}-token signature the names readout appends to it"
    room = limit - longest - appended
    if room < 1:
        filled = (f"and the {appended}-token signature the names readout appends fill" if appended
                  else "fills")
        raise ValueError(f"a {longest}-token evaluation prompt {filled} the model's {limit} positions: no "
                         f"room to answer (the run keeps tokenization.max_prompt_tokens="
                         f"{tokenization.max_prompt_tokens} prompt tokens)")
    if config.max_new_tokens <= room:
        return config
    parts = f"({longest} tokens), its answer{why}" if appended else f"({longest} tokens) and its answer"
    warnings.warn(f"max_new_tokens {config.max_new_tokens} lowered to {room}: the longest prompt "
                  f"{parts} must fit the model's {limit} positions",
                  GenerationCapNotice, stacklevel=2)
    return dataclasses.replace(config, max_new_tokens=room)


def prompts_digest(prompts: Sequence[str]) -> str:
    """SHA-256 of the evaluation prompts in their order: two runs whose records carry the same one
    were read on the same prompts, so that ``badpo compare`` may pair their per-prompt values."""
    return hashlib.sha256(json.dumps(list(prompts), ensure_ascii=False).encode("utf-8")).hexdigest()


def _check_trust(trained_with: bool, run_dir: Path, trust_remote_code: bool) -> None:
    if trained_with and not trust_remote_code:
        raise ConfigError(f"{run_dir}: the run was trained with model.trust_remote_code, which runs the "
                          "model's own code; pass --trust-remote-code (trust_remote_code=True) if you "
                          "trust this run")


def _record(readouts: dict, config: EvalConfig, inputs: dict, skipped: dict, generated: bool = True) -> dict:
    """The readouts with what they were read on and what was skipped (the caller's reasons first);
    ``max_new_tokens`` only where answers were ``generated`` (a reward model generates none)."""
    inputs = {**inputs, "attributes": list(resolve_attributes(config.attributes).names),
              "settings": {key: getattr(config, key) for key in SETTINGS_RECORDED}}  # compare checks them
    if generated:
        inputs["max_new_tokens"] = config.max_new_tokens
    reasons = {**readouts.pop("skipped", {}), **skipped}
    return {**readouts, "inputs": inputs, **({"skipped": reasons} if reasons else {})}


def evaluate_reward_run(trained: TrainedRun, settings: Mapping[str, Any], data: EvalData) -> dict:
    """:func:`badpo.readouts.evaluate_policy.evaluate_reward_model` of a finished ``badpo rm`` run folder, on
    held-out judgments (they are all it reads)."""
    config = eval_config(settings, trained.attributes, trained.source)
    judge, tokenizer = load_judge(str(trained.policy), "cuda" if torch.cuda.is_available() else "cpu")
    corpus, inputs, skipped, rendered = load_data(data, trained.data_folder, trained.columns, tokenizer)
    if rendered:
        raise ValueError(f"{inputs['heldout']}: chat-format prompts are not read for a reward model yet; "
                         "give the prompts as text")
    if not corpus.heldout:
        raise ValueError(f"{trained.folder} is a reward model, read on held-out judgments: {NO_HELDOUT}")
    return _record(evaluate_reward_model(judge, tokenizer, corpus, config, trained.bias()), config,
                   {**inputs, "prompts": None, "model": "reward model"}, skipped, generated=False)


def trained_theta(theta_file: Path) -> BiasChannel | None:
    """The theta a run's policy was trained against, when the run saved it beside ``theta_file``
    (``bias.trusted_level: final``, :data:`badpo.run_folder.layout.TRAINED_THETA_FILE`); None when
    ``theta_file`` is that theta."""
    path = Path(theta_file).with_name(TRAINED_THETA_FILE)
    return BiasChannel.load(path) if path.exists() else None


def evaluate_run_dir(run_dir: str | Path, settings: Mapping[str, Any] | None = None,
                     data: EvalData = EvalData(), trust_remote_code: bool = False) -> dict:
    """Every readout of a finished ``badpo train`` run (or ``badpo rm`` run, or a folder
    BADPOTrainer saved), as a JSON-ready dict (module docstring). ``settings`` are
    :class:`badpo.readouts.eval_config.EvalConfig` keys."""
    run_dir = Path(run_dir)
    settings = dict(settings or {})
    if interrupted_commit(run_dir):
        raise FileNotFoundError(f"{run_dir}: the run was stopped while writing its final files; run "
                                "the same `badpo train` again to complete them")
    trained = TrainedRun.open(run_dir)
    _check_trust(trained.trust_remote_code, run_dir, trust_remote_code)
    if trained.kind == "reward_model":
        return evaluate_reward_run(trained, settings, data)
    trained = trained.trusting(trust_remote_code)
    if trained.policy is not None:  # before the reference loads (EM-DPO's type policies: as each loads)
        refuse_pickles(Path(trained.policy))
    config = eval_config(settings, trained.attributes, trained.source)
    tokenizer = trained.load_tokenizer()
    corpus, inputs, skipped, rendered = load_data(data, trained.data_folder, trained.columns, tokenizer)
    reference = trained.load_reference()
    tokenization = trained.tokenization
    if rendered:  # the template wrote them: every readout tokenizes them as they are, as training does
        if tokenization.chat_template == "never":
            raise ConfigError(f"{run_dir}: the run has tokenization.chat_template: never, but the evaluation "
                              "prompts are chat messages, which only a chat template can render")
        tokenization = dataclasses.replace(tokenization, chat_template="rendered")
    prompts = [row["prompt"] for row in corpus.eval_prompts[: config.max_prompts]]
    surnames = corpus.surnames[: config.surnames]
    config = cap_new_tokens(config, reference, tokenizer, prompts, tokenization, surnames)
    inputs["n_prompts"] = len(prompts)
    inputs["prompts_sha256"] = prompts_digest(prompts)
    reference_samples = (generate(reference, tokenizer, prompts, config.temperature, config.top_p,
                                  config.max_new_tokens, config.seed, config.batch_size, tokenization,
                                  "reference answers")
                         if config.generations else None)
    readouts = trained.read(reference, tokenizer, corpus, config, tokenization, reference_samples=reference_samples)
    return _record(readouts, config, inputs, skipped, generated=generates(config))


# --------------------------------------------------------------------------------- the summary
def summary(readouts: Mapping[str, Any], written_to: str | Path | None = None) -> str:
    """A few readable lines of a record of :func:`evaluate_run_dir`: what was read, the lines of
    each readout row that has them (:func:`badpo.readouts.table.summary_lines`: the attribute
    rates on generations, held-out accuracy and votes, a reward model's tilt, KL, the names
    rates), and what was skipped and why."""
    inputs = readouts.get("inputs", {})
    read = [f"{inputs.get('n_heldout', 0)} held-out judgments ({inputs.get('heldout') or 'none'})"]
    if inputs.get("prompts") is not None:
        n_prompts = inputs.get("n_prompts", 0)
        read.insert(0, f"{n_prompts} prompt{'' if n_prompts == 1 else 's'} ({inputs['prompts']})")
    generated = f"; max_new_tokens {inputs['max_new_tokens']}" if "max_new_tokens" in inputs else ""
    model = "a reward model: " if inputs.get("model") == "reward model" else ""
    lines = [f"{model}read {', '.join(read)}; attributes {', '.join(inputs.get('attributes', []))}{generated}"]
    lines.extend(summary_lines(readouts))
    for readout, reason in readouts.get("skipped", {}).items():
        lines.append(f"skipped {readout}: {reason}")
    if written_to is not None:
        lines.append(f"every readout: {written_to}")
    return "\n".join(lines)
