"""The files of :class:`badpo.integrations.trl.BADPOTrainer`: what it saves beside TRL's model
folder (``theta.json``, the run record ``badpo_run.json`` that ``badpo evaluate`` and ``badpo
compare`` read, ``training_args.json`` for Trainer's pickle), theta's state in each checkpoint
(``theta_state.json`` + ``theta_state.safetensors``: theta, theta's Adam, the loss weights' state
and the token count, without pickle) and the resume that restores it before TRL restores the rest.
A mixin: the trainer holds ``bias``, ``theta_optimizer``, ``weighting``, ``method_name`` and the rest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from transformers.trainer_utils import get_last_checkpoint

from badpo.core.config import to_dict
from badpo.core.jsonio import atomic_write_text
from badpo.engine.checkpoint import read_state_files, write_state_files
from badpo.engine.model_card import CardFacts, theta_summary, write_card
from badpo.engine.reporting import theta_convergence
from badpo.engine.runtime import config_positions
from badpo.engine.tokenize import DEFAULT_TOKENIZATION, TokenizationConfig
from badpo.run_folder.external import FORMAT, ExternalRun, write_external_run
from badpo.run_folder.layout import THETA_FILE
from badpo.theta.state import check_same_parts, theta_parts

__all__ = ["THETA_FORMAT", "THETA_STATE", "TrainerFiles"]

THETA_STATE = "theta_state"  # theta_state.json + theta_state.safetensors in each checkpoint folder
THETA_FORMAT = "badpo.trl-theta/1"


class TrainerFiles:
    """save_model, the run record, theta's checkpoint state and the resume of a BADPOTrainer."""

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """The model as TRL saves it, and beside it ``theta.json`` and the run record
        ``badpo_run.json`` (checkpoints included); ``training_args.json`` for Trainer's pickle."""
        super().save_model(output_dir, _internal_call)
        if not self.args.should_save:
            return
        folder = Path(output_dir if output_dir is not None else self.args.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        self.bias.save(folder / THETA_FILE)
        (folder / "training_args.bin").unlink(missing_ok=True)  # a pickle: loading it could run code
        atomic_write_text(folder / "training_args.json", self.args.to_json_string())
        record = self.run_record()
        write_external_run(folder, record)
        write_card(folder, self.card_facts(record))  # TRL's own card says neither the method nor theta

    def create_model_card(self, model_name: str | None = None, dataset_name: str | None = None,
                          tags: Any = None) -> None:
        """badpo's model card (:mod:`badpo.engine.model_card`: the method, the reference, the
        declared attributes, the annotators and theta) as ``README.md`` in ``args.output_dir``, where
        TRL writes its own at each checkpoint and before a push: TRL's card would name neither the
        method nor theta (``model_name``, ``dataset_name`` and ``tags`` are TRL's, unused)."""
        if self.is_world_process_zero():
            write_card(Path(self.args.output_dir), self.card_facts())

    def card_facts(self, record: ExternalRun | None = None) -> CardFacts:
        """The card's facts; ``record``: the run record already made (its theta convergence)."""
        unwrapped = self.accelerator.unwrap_model(self.model)
        base = self.reference_name or "unknown (a model built in memory)"
        judgments, pairs, annotators = self.data_counts
        convergence = (record or self.run_record()).theta_convergence if self.method.learns_theta else None
        return CardFacts(self.method_name, self.method.description, base, Path(base).exists(),
                         bool(getattr(unwrapped, "peft_config", None)),
                         list(self.attribute_specs or self.bias.attribute_names), judgments, pairs, annotators,
                         None, float(self.beta), int(self.state.global_step), int(self.args.seed),
                         theta_summary(self.bias) if self.method.learns_theta else {},
                         None if convergence is None else convergence["converged"])

    def run_record(self) -> ExternalRun:
        """What ``badpo evaluate`` and ``badpo compare`` need to read this run's folder."""
        from importlib.metadata import version

        unwrapped = self.accelerator.unwrap_model(self.model)
        length = self.args.max_length or config_positions(unwrapped.config) or DEFAULT_TOKENIZATION.max_length
        # text prompts, tokenized by TRL as the tokenizer does with its special tokens: badpo's "never"
        tokenization = TokenizationConfig(max_prompt_tokens=max(1, length - 1), max_length=max(2, length),
                                          chat_template="never")
        remote = bool((self.args.model_init_kwargs or {}).get("trust_remote_code")
                      or getattr(unwrapped.config, "auto_map", None))
        names = list(self.bias.attribute_names)
        logged = [{"step": r["step"], "theta_bar": {n: r[f"theta_bar/{n}"] for n in names}}
                  for r in self.state.log_history if "step" in r and all(f"theta_bar/{n}" in r for n in names)]
        return ExternalRun(
            format=FORMAT, trainer=f"{type(self).__module__}.{type(self).__name__}",
            method=self.method_name, variant=self.bias.variant, attribute_names=names,
            attributes=self.attribute_specs, annotators=list(self.bias.annotators), reference=self.reference_name,
            beta=float(self.beta), tokenization=tokenization, trust_remote_code=remote,
            method_params=to_dict(self.method_params), step=int(self.state.global_step),
            theta_convergence=(theta_convergence(logged, self.state.max_steps or self.state.global_step)
                               if self.theta_optimizer is not None else None),
            bias_level=self.bias_level,
            versions={name: version(name) for name in ("badpo", "trl", "transformers")})

    def theta_parts(self) -> dict[str, Any]:
        """theta's checkpointed parts, as the engine names them (:func:`badpo.theta.state.theta_parts`)."""
        return theta_parts(self.bias, self.theta_optimizer, self.cuts, self.weighting)

    def theta_state(self) -> dict[str, Any]:
        return {"format": THETA_FORMAT, "variant": self.bias.variant,
                "attribute_names": list(self.bias.attribute_names), "annotators": list(self.bias.annotators),
                **{name: part.state_dict() for name, part in self.theta_parts().items()},
                "tokens_seen": self.tokens_seen}

    def save_theta_state(self, folder: str | os.PathLike) -> None:
        """theta, theta's Adam and the token count into ``folder`` (a checkpoint), without pickle."""
        write_state_files(Path(folder), THETA_STATE, self.theta_state())

    def load_theta_state(self, folder: str | os.PathLike) -> None:
        """Restore what :meth:`save_theta_state` wrote; another run's state (other variant, attributes
        or annotators) or a checkpoint without one is a one-line error naming the file."""
        path = Path(folder) / f"{THETA_STATE}.json"
        if not path.is_file():
            raise FileNotFoundError(f"resume_from_checkpoint: {path} is missing: {folder} is not a checkpoint "
                                    "BADPOTrainer wrote, and theta and its Adam would start again")
        saved = read_state_files(Path(folder), THETA_STATE)
        mine = self.theta_state()
        if not isinstance(saved, dict) or saved.get("format") != THETA_FORMAT:
            raise ValueError(f"{path}: not a {THETA_FORMAT} state")
        for key in ("variant", "attribute_names", "annotators"):
            if saved.get(key) != mine[key]:
                raise ValueError(f"{path}: {key} {saved.get(key)!r} is not this trainer's {mine[key]!r}")
        parts = self.theta_parts()
        if "theta" not in parts:  # a frozen theta, as the trainer was given it; saved before the parts were named once
            saved.pop("theta", None)
        check_same_parts(saved, parts, str(path))
        try:
            for name, part in parts.items():
                part.load_state_dict(saved[name])
        except (KeyError, RuntimeError, ValueError) as error:
            raise ValueError(f"{path}: does not fit this trainer's theta ({str(error).splitlines()[0]})") from None
        self.tokens_seen = int(saved.get("tokens_seen", 0))

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """TRL's train; a resumed run restores theta and theta's Adam from the checkpoint first."""
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(f"resume_from_checkpoint: no checkpoint folder in {self.args.output_dir}")
        if resume_from_checkpoint:
            self.load_theta_state(resume_from_checkpoint)
        return super().train(resume_from_checkpoint or None, *args, **kwargs)
