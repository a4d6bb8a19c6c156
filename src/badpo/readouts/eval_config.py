"""The readout settings of ``badpo evaluate`` (and of an experiment's ``evaluation:`` section).

Apart from the readouts, so that ``badpo evaluate --help`` lists these keys from the class
itself (each field's trailing comment is its help line) without loading the models' code. Which
readout a setting turns on or off is said by the rows of :data:`badpo.readouts.table.READOUTS`
(:func:`badpo.readouts.table.readout_unavailable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from badpo.core.constraints import AT_LEAST_ONE, POSITIVE, Range, check_fields

__all__ = ["SETTINGS_RECORDED", "EvalConfig"]


@dataclass(frozen=True)
class EvalConfig:
    """What to read and how (paper defaults; the tiny configs shorten the generations)."""

    # a count: 0 reads nothing, and a negative one would slice from the end
    constraints: ClassVar[Mapping] = {
        **dict.fromkeys(("max_prompts", "whole_signature_prompts", "surnames", "max_new_tokens", "judge_max_tokens",
                         "batch_size"), AT_LEAST_ONE),
        "temperature": POSITIVE, "top_p": Range(0, 1, low_open=True)}

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
        check_fields(self)


# the settings that change what a readout reads (not how fast): recorded under inputs.settings of
# readouts.json, so that `badpo compare` refuses runs read with different ones
SETTINGS_RECORDED = ("body", "whole_signature", "whole_signature_prompts", "surnames", "generations", "temperature",
                     "top_p", "seed", "judge", "judge_max_tokens")
