"""The readout settings of ``badpo evaluate`` (and of an experiment's ``evaluation:`` section).

Apart from the readouts, so that ``badpo evaluate --help`` lists these keys from the class
itself (each field's trailing comment is its help line) without loading the models' code, and so
that an experiment can say when it is planned that a table column will have no readout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from badpo.core.attributes import resolve_attributes
from badpo.core.config import ConfigError
from badpo.core.names import NAME_ATTRIBUTES

__all__ = ["GENERATED", "PER_ATTRIBUTE", "SETTINGS_RECORDED", "EvalConfig", "readout_unavailable"]


@dataclass(frozen=True)
class EvalConfig:
    """What to read and how (paper defaults; the tiny configs shorten the generations)."""

    attributes: tuple[str, ...] = ("names",)  # declared attribute specs, as in training (default: the run's own)
    max_prompts: int | None = 300  # evaluation prompts read (null = all in the corpus)
    # the answer body the names are read after: the reference's greedy answer, the read model's own
    # greedy answer (own), or the prompts' `body` field (given)
    body: Literal["given", "reference", "own"] = "reference"
    whole_signature: bool = True  # also read whole signatures, marginalised over surnames
    whole_signature_prompts: int | None = None  # prompts it is read on (null = all read prompts)
    surnames: int | None = None  # surnames of the marginal: the corpus's first ones (null = all)
    generations: bool = True  # sample answers for KL, the attribute rates and the sampled signature rate
    temperature: float = 0.7  # sampling temperature of the generations
    top_p: float = 0.9  # nucleus sampling: the smallest set of tokens holding this much probability
    max_new_tokens: int = 512  # tokens per generated answer at most (lowered to fit the model's context)
    seed: int = 0  # sampling seed (same for every arm)
    judge: str | None = None  # reward model id or path for RM / RM- (null: no judge)
    judge_max_tokens: int = 2048  # the judge reads the first this many tokens of prompt + answer
    batch_size: int = 16  # sequences per forward pass (generation, scoring)

    def __post_init__(self) -> None:
        if self.judge_max_tokens < 1:
            raise ConfigError(f"judge_max_tokens: must be >= 1, got {self.judge_max_tokens}")


# the settings that change what a readout reads (not how fast): recorded under inputs.settings of
# readouts.json, so that `badpo compare` refuses runs read with different ones
SETTINGS_RECORDED = ("body", "whole_signature", "whole_signature_prompts", "surnames", "generations", "temperature",
                     "top_p", "seed", "judge", "judge_max_tokens")

# Readouts that exist only under some settings: the first part of a readout's path -> what
# evaluate_policy needs to write it, and the setting that turns it on.
GENERATED = ("kl", "sampled", "sampled_text", "checked", "tokens", "markdown", "attribute_rates", "rm",
             "rm_minus")
PER_ATTRIBUTE = ("heldout", "votes", "votes_ceiling")


def readout_unavailable(config: EvalConfig, metric: str) -> str | None:
    """Why ``evaluate_policy`` under ``config`` writes no readout at ``metric`` (a dotted path
    such as ``names.whole_signature.black_coded`` or ``votes/black_coded.accuracy``), or None when
    it may: an experiment refuses such a table column when it is planned, not after training."""
    head, _, rest = metric.partition(".")
    head, _, attribute = head.partition("/")
    attributes = resolve_attributes(config.attributes)
    if head in GENERATED and not config.generations:
        return f"{head} is read on the policy's generations: set evaluation.generations: true"
    if head in ("rm", "rm_minus") and config.judge is None:
        return f"{head} is the judge's score: set evaluation.judge"
    if head == "markdown" and "markdown" not in attributes.kinds:
        return "markdown is read when markdown is declared: add it to evaluation.attributes"
    if head in ("names", "sampled"):
        if not any(kind == "names" or kind in NAME_ATTRIBUTES for kind in attributes.kinds):
            return "names readouts need a names attribute in evaluation.attributes"
        # names.whole_signature, and the whole signature's per_name, cells and null
        parts = rest.split(".")
        readout = parts[1] if parts[0] in ("per_name", "cells", "null") and len(parts) > 1 else parts[0]
        if readout == "whole_signature" and not config.whole_signature:
            return "set evaluation.whole_signature: true"
        if head == "names" and readout == "sampled" and not config.generations:
            return "names.null.sampled is read on the policy's generations: set evaluation.generations: true"
    if head in PER_ATTRIBUTE or head == "attribute_rates":
        name = attribute or rest.partition(".")[0]
        if name not in attributes.names:
            return f"{name!r} is not a declared attribute ({list(attributes.names)}) of evaluation.attributes"
        if head == "attribute_rates" and attributes.attributes[list(attributes.names).index(name)].level == "given":
            return f"{name!r} is a given: attribute, read from the data's values; a generated answer has none"
    return None
