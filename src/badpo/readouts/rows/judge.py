"""The judge's row: a reward model's mean score RM of the policy's generations and, when a
declared attribute can be stripped from a text, RM⁻ on the stripped texts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from badpo.core.attributes import attribute_stripper
from badpo.readouts.model import judge_scores, load_judge
from badpo.readouts.reading import Need, Reading, Readout
from badpo.readouts.rows.generated import GENERATIONS

__all__ = ["JUDGE", "judge_readouts"]

JUDGE_GIVEN = Need("a judge", lambda r: r.config.judge is not None, lambda config, attributes: config.judge is not None,
                   "{head} is the judge's score: set evaluation.judge")


def judge_readouts(judge_name: str, prompts: Sequence[str], texts: Sequence[str], names: Sequence[str],
                   max_tokens: int = 2048, device: torch.device | None = None) -> dict:
    """Mean judge score RM and, when a declared attribute (``names``, as in AttributeSet.names)
    has a stripper, RM⁻ on the texts with it removed; under length (none has) RM⁻ is left out,
    as in the paper."""
    judge, judge_tokenizer = load_judge(judge_name, device)

    def mean_score(strip) -> float:
        return float(np.mean(judge_scores(judge, prompts, texts, strip=strip, tokenizer=judge_tokenizer,
                                          max_tokens=max_tokens)))

    result = {"rm": mean_score(None)}
    strip = attribute_stripper(names)
    if strip is not None:
        result["rm_minus"] = mean_score(strip)
    return result


def _read_judge(reading: Reading) -> dict:
    config = reading.config
    return judge_readouts(config.judge, reading.prompts, list(reading.samples.texts), reading.attributes.names,
                          config.judge_max_tokens, next(reading.policy.parameters()).device)


JUDGE = Readout("judge", ("rm", "rm_minus"), (GENERATIONS, JUDGE_GIVEN), _read_judge)
