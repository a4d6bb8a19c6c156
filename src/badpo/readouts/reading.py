"""What a readout is: a row of :data:`badpo.readouts.table.READOUTS`, and what it reads from.

A :class:`Readout` names the paths it writes in a record (``writes``: the first part of each
path), what it needs (:class:`Need`: a held-out set, generations, a names attribute, a judge...),
how it reads one run (``read``: a :class:`Reading` -> the entries it adds to the record), how
its lines look in the summary of ``badpo evaluate`` and how ``badpo compare`` puts two runs side
by side on it (``compared``). A :class:`Need` is checked twice: on the
loaded run (``present``: the row is read only when all its needs are there) and on the readout
settings alone (``planned``), so that an experiment refuses a table column that no run would
fill before anything trains (:func:`badpo.readouts.table.readout_unavailable`).

A :class:`Reading` is one run being read: the models, the evaluation data, the settings and what
the rows share (the policy's generations, sampled once when a row first asks for them; the
reference's when a row needs them; the held-out margins; the reference's own readouts).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from torch import nn

from badpo.core.attributes import AttributeSet, resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.core.judgments import Judgment, read_judgments
from badpo.core.label_counts import decisive_votes
from badpo.core.names import NAME_ATTRIBUTES, read_signature
from badpo.engine.settings import BETA
from badpo.engine.tokenize import TokenizationConfig
from badpo.readouts.compared import Beside, Compared
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.model import Generations, generate, judge_scores

__all__ = ["Corpus", "Need", "Readout", "Reading", "declares_names", "generations_from_json",
           "generations_to_json", "sampled_answers", "sampling_settings", "shown"]


@dataclass(frozen=True)
class Corpus:
    """The files of a built corpus folder that evaluation reads."""

    eval_prompts: list[dict]
    heldout: list[Judgment]
    planted: dict | None  # annotator -> (class, theta), for scoring only

    @classmethod
    def load(cls, folder: str | Path) -> Corpus:
        folder = Path(folder)
        prompts = []
        path = folder / "eval_prompts.jsonl"
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"]:
                    raise ValueError(f"{path}:{number}: an evaluation prompt needs a non-empty 'prompt'")
                prompts.append(row)
        planted_path = folder / "planted.json"
        planted = json.loads(planted_path.read_text()) if planted_path.exists() else None
        heldout = decisive_votes(read_judgments(folder / "heldout.jsonl"), "the held-out readouts",
                                 str(folder / "heldout.jsonl"))  # a tie has no chosen side to predict
        return cls(prompts, heldout, planted)

    @property
    def surnames(self) -> list[str]:
        """The surnames the corpus signs with (read from its held-out signatures), for the
        whole-signature marginal."""
        found = {signature[1] for j in self.heldout for text in (j.chosen, j.rejected)
                 if (signature := read_signature(text)) is not None}
        return sorted(found)


def declares_names(attributes: AttributeSet) -> bool:
    """Whether a names coordinate is declared (by what it is, whatever it is called): the names
    readouts exist only then."""
    return any(kind in NAME_ATTRIBUTES for kind in attributes.kinds)


@dataclass
class Reading:
    """One run being read (module docstring); the arguments of
    :func:`badpo.readouts.evaluate_policy.evaluate_policy`, and what the rows share. ``kind`` is what was
    trained: a ``policy`` (read against ``reference``), or a ``reward_model`` (``badpo rm``:
    ``policy`` holds it, there is no reference, and a row reads it with ``read_reward_model``)."""

    policy: nn.Module
    reference: nn.Module | None
    tokenizer: object
    corpus: Corpus
    config: EvalConfig
    bias: BiasChannel | None = None  # the run's saved theta
    beta: float = BETA
    tokenization: TokenizationConfig = TokenizationConfig()
    bodies: Sequence[str] | None = None
    reference_samples: Generations | None = None
    margins: torch.Tensor | None = None
    reference_readouts: Mapping | None = None
    vote_bias: BiasChannel | None = None  # the theta the policy was trained against (default: bias)
    # where the reference's side of a readout is kept once per evaluation set (None: computed here)
    cache_dir: str | Path | None = None
    kind: str = "policy"  # or "reward_model"
    skipped: dict = field(default_factory=dict)  # {readout: why it is not read}
    result: dict = field(default_factory=dict)  # what the rows read so far
    _samples: Generations | None = None

    @property
    def rows(self) -> list[dict]:
        return self.corpus.eval_prompts[: self.config.max_prompts]

    @property
    def prompts(self) -> list[str]:
        return [row["prompt"] for row in self.rows]

    @cached_property
    def attributes(self) -> AttributeSet:
        return resolve_attributes(self.config.attributes)

    @property
    def samples(self) -> Generations:
        """The policy's generations, sampled once; the reference's too when the policy is it (and
        the given reference samples when the policy is the reference)."""
        if self._samples is None:
            if self.policy is self.reference and self.reference_samples is not None:
                self._samples = self.reference_samples
            else:
                self._samples = sampled_answers(self.policy, self.tokenizer, self.prompts, self.config,
                                                self.tokenization, "policy answers")
            if self.reference_samples is None and self.policy is self.reference:
                self.reference_samples = self._samples
        return self._samples

    def scores(self, prompts: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """A reward model's scores of the answers ``texts`` to ``prompts`` [N], as ``badpo evaluate``'s
        judge scores them (:func:`badpo.readouts.model.judge_scores`)."""
        return np.array(judge_scores(self.policy, prompts, texts, tokenizer=self.tokenizer,
                                     batch_size=self.config.batch_size, max_tokens=self.config.judge_max_tokens))

    def reference_generations(self) -> Generations:
        """The reference's generations (same prompts, decoder and seed), sampled when not given."""
        if self.reference_samples is None:
            self.reference_samples = sampled_answers(self.reference, self.tokenizer, self.prompts, self.config,
                                                     self.tokenization, "reference answers")
        return self.reference_samples


def sampled_answers(model: nn.Module, tokenizer, prompts: Sequence[str], config: EvalConfig,
                    tokenization: TokenizationConfig, what: str) -> Generations:
    """One answer per prompt under the readout settings' decoder and seed (every model read alike)."""
    return generate(model, tokenizer, prompts, config.temperature, config.top_p, config.max_new_tokens,
                    config.seed, config.batch_size, tokenization, what)


def sampling_settings(prompts: Sequence[str], config: EvalConfig, tokenization: TokenizationConfig) -> dict:
    """What fixes :func:`sampled_answers`' output for one model: saved samples are reused only under
    the same."""
    return {"prompts": list(prompts), "temperature": config.temperature, "top_p": config.top_p,
            "max_new_tokens": config.max_new_tokens, "seed": config.seed, "batch_size": config.batch_size,
            "tokenization": dataclasses.asdict(tokenization)}


def generations_to_json(samples: Generations, settings: Mapping) -> dict:
    """Samples and the settings that drew them, as plain JSON (no code can ride in it)."""
    return {"sampling": dict(settings), "prompts": list(samples.prompts), "texts": list(samples.texts),
            "prompt_ids": [list(ids) for ids in samples.prompt_ids],
            "completion_ids": [list(ids) for ids in samples.completion_ids],
            "token_counts": list(samples.token_counts)}


def generations_from_json(saved: Mapping, settings: Mapping, source: str) -> Generations | None:
    """The samples :func:`generations_to_json` wrote when drawn under ``settings``; None when they
    were drawn under others. A file of the wrong shape is an error naming ``source``."""
    if saved.get("sampling") != json.loads(json.dumps(dict(settings))):
        return None
    try:
        texts, counts = [str(t) for t in saved["texts"]], [int(c) for c in saved["token_counts"]]
        ids = {key: tuple(tuple(int(i) for i in row) for row in saved[key]) for key in ("prompt_ids", "completion_ids")}
        prompts = tuple(str(p) for p in saved["prompts"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{source}: not a samples file ({error})") from None
    if not len(prompts) == len(texts) == len(counts) == len(ids["prompt_ids"]) == len(ids["completion_ids"]):
        raise ValueError(f"{source}: not a samples file (its lists differ in length)")
    return Generations(prompts, tuple(texts), ids["prompt_ids"], ids["completion_ids"], tuple(counts))


@dataclass(frozen=True)
class Need:
    """Something a readout needs, checked on a loaded run (``present``) and on the settings
    alone (``planned``: None when the settings cannot tell, as for held-out judgments, which
    come with the data). ``missing`` says what to set, formatted with the readout's ``head``;
    ``skip`` (when set) is recorded under ``skipped`` for each of the row's ``skipped_as`` when it is
    absent."""

    name: str
    present: Callable[[Reading], bool]
    planned: Callable[[EvalConfig, AttributeSet], bool] | None = None
    missing: str = ""
    skip: str | None = None


@dataclass(frozen=True)
class Readout:
    """One row of the readout table (module docstring).

    ``writes``: the first part of every path the row writes (``votes/<attribute>`` is ``votes``);
    ``per_attribute``: those of them keyed by a declared attribute (the planner checks the
    attribute). ``read`` reads a policy, ``read_reward_model`` a reward model (a :class:`Reading`
    of kind ``reward_model``: :func:`badpo.readouts.evaluate_policy.evaluate_reward_model`); None where the
    row is not read of that kind (:meth:`reader`).
    ``check(config, attributes, head, rest)`` says why a path is not written under settings the
    needs pass (None: it is). ``summary(record)`` gives the row's lines for
    ``badpo evaluate``; ``compared`` says how ``badpo compare`` puts two runs side by side on it
    (:class:`badpo.readouts.compared.Compared`: intervals, shift, removal, verdict) and
    ``beside`` what it shows in the table of training effects (:class:`~badpo.readouts.compared.Beside`);
    ``shown_order`` places both (the generated rates come first).
    """

    name: str
    writes: tuple[str, ...]
    needs: tuple[Need, ...]
    read: Callable[[Reading], dict] | None
    read_reward_model: Callable[[Reading], dict] | None = None
    per_attribute: tuple[str, ...] = ()
    skipped_as: tuple[str, ...] = ()  # recorded under ``skipped`` when a need with a ``skip`` reason is absent
    # the heads it writes that measure the policy against the reference (KL 0, every margin 0 when
    # the policy is the reference: an experiment leaves them out of the reference's record)
    relative_to_reference: tuple[str, ...] = ()
    check: Callable[[EvalConfig, AttributeSet, str, str], str | None] | None = None
    summary: Callable[[Mapping], list[str]] | None = None
    compared: Compared | None = None
    beside: Beside | None = None
    shown_order: int = 0

    def reader(self, kind: str) -> Callable[[Reading], dict] | None:
        """How the row reads a run of ``kind`` (:attr:`Reading.kind`); None: it does not."""
        return self.read_reward_model if kind == "reward_model" else self.read


def shown(value, digits: int = 3) -> str:
    """A readout for the eye: ``n/a`` where it is undefined (null or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text  # no "-0.0000"
