"""Whether a tokenizer can read the data: the share of its unknown token per side of the data.

A tokenizer maps text it has no piece for to one unknown token (``tokenizer.unk_token_id``):
English on a 143-token digit tokenizer is all ``<unk>``, and a model trained on that learns
nothing of the text, while the symptom it shows later (two sides "the same tokens after
tokenization") does not name the cause. So every stage that tokenizes data, and the audit when
it is given a tokenizer, reports the share per side: above :data:`WARN_SHARE` a warning, above
:data:`ERROR_SHARE` (text that is mostly unknown) an error naming the tokenizer and the side.
A tokenizer without an unknown token (byte-level BPE) reads any text: nothing is reported.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping

from badpo.core.notices import BadpoWarning

__all__ = ["ERROR_SHARE", "WARN_SHARE", "TokenCoverageWarning", "check_coverage", "unknown_share"]

WARN_SHARE = 0.05
ERROR_SHARE = 0.5
SIDE_NAMES = {"chosen": "chosen responses'", "rejected": "rejected responses'", "responses": "responses'",
              "prompts": "prompts'"}


class TokenCoverageWarning(BadpoWarning):
    """More than :data:`WARN_SHARE` of one side's tokens are the tokenizer's unknown token."""


def unknown_share(tokenizer, texts: Iterable[str]) -> float:
    """The share of ``tokenizer.unk_token_id`` among the tokens of the distinct ``texts`` (no
    special tokens added); 0.0 for no token at all."""
    distinct = list(dict.fromkeys(texts))
    unknown = total = 0
    for start in range(0, len(distinct), 4096):
        for ids in tokenizer(distinct[start:start + 4096], add_special_tokens=False)["input_ids"]:
            unknown += sum(1 for i in ids if i == tokenizer.unk_token_id)
            total += len(ids)
    return unknown / total if total else 0.0


def check_coverage(shares: Mapping[str, float], tokenizer, source: str) -> dict:
    """``{"unknown_token", "tokenizer", <side>: share}`` for run.json and the screen; the most
    unknown side above :data:`ERROR_SHARE` is a ValueError, above :data:`WARN_SHARE` a
    :class:`TokenCoverageWarning`. ``shares`` are in the order sides are named when tied."""
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    report = {"unknown_token": tokenizer.unk_token, "tokenizer": name,
              **{side: round(share, 6) for side, share in shares.items()}}
    if not shares:
        return report
    side = max(shares, key=lambda key: shares[key])  # the first of the most unknown sides
    share, label = shares[side], SIDE_NAMES.get(side, f"{side}'")
    what = f"{share:.0%} of the {label} tokens are {tokenizer.unk_token}"
    if share > ERROR_SHARE:
        raise ValueError(f"{source}: {what}: the tokenizer of {name} cannot read this text; use a model whose "
                         "tokenizer covers it, or check that this is the data you meant")
    if share > WARN_SHARE:
        warnings.warn(f"{source}: {what} (tokenizer of {name}); the model learns nothing of the text they "
                      "replace", TokenCoverageWarning, stacklevel=3)
    return report
