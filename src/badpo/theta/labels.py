"""What theta's start and level rules read of the training judgments, as tensors: the same for
``badpo train`` (built from the engine's data) and for TRL (built from the dataset's rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from badpo.auditing.start_level import judgment_pairs

__all__ = ["ThetaLabels", "labels_of_judgments"]


@dataclass(frozen=True)
class ThetaLabels:
    """The N training judgments as theta sees them: ``attr_diff`` ``[N, A]`` g(y_w) - g(y_l);
    ``annotator_index`` ``[N]`` rows of ``annotators``; ``pair`` ``[N]`` each judgment's pair and
    ``side`` ``[N]`` (float64) +1 where it chose the side its pair's first judgment chose, -1
    otherwise (the orientation the per-pair quality of the conditional start is read in)."""

    attr_diff: Tensor
    annotator_index: Tensor
    annotators: tuple[str, ...]
    attribute_names: tuple[str, ...]
    pair: Tensor
    side: Tensor

    def __len__(self) -> int:
        return self.attr_diff.shape[0]


def labels_of_judgments(judgments: Sequence, differences: Tensor, annotators: Sequence[str],
                        attribute_names: Sequence[str]) -> ThetaLabels:
    """The labels of validated judgments whose attribute differences are ``differences`` ``[N, A]``
    (pairs as :func:`badpo.core.judgments.pair_key` groups them, read in their first judgment's
    orientation, as the engine reads them)."""
    row = {name: i for i, name in enumerate(annotators)}
    pair, side = judgment_pairs(judgments)
    return ThetaLabels(
        attr_diff=differences.double().reshape(len(judgments), len(attribute_names)),
        annotator_index=torch.tensor([row[j.annotator] for j in judgments], dtype=torch.long),
        annotators=tuple(annotators), attribute_names=tuple(attribute_names),
        pair=torch.from_numpy(pair), side=torch.from_numpy(side))
