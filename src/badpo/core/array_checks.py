"""Input checks shared by the readouts and the anchor: array-likes to float64, with errors that
name the argument and the offending index. Core module: numpy and torch only."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

ArrayLike = Tensor | np.ndarray | Sequence


def as_float64(values: ArrayLike, name: str) -> Tensor:
    """Any array-like -> a float64 CPU tensor; a ragged or non-numeric input names the argument."""
    if isinstance(values, Tensor):
        return values.detach().to("cpu", torch.float64)
    try:
        return torch.from_numpy(np.array(values, dtype=np.float64))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: expected numbers, got {type(values).__name__} ({error})") from None


def check_finite(values: Tensor, name: str, allow_minus_inf: bool = False) -> None:
    """NaN (and +inf, and -inf unless allowed) is an error naming the first offending index."""
    bad = torch.isnan(values) | (values == math.inf)
    if not allow_minus_inf:
        bad |= values == -math.inf
    if bad.any():
        index = tuple(int(i) for i in bad.nonzero()[0])
        where = index[0] if len(index) == 1 else index
        raise ValueError(f"{name}[{where}] is {values[index].item()}; expected a finite number")


def check_labels(labels: ArrayLike, attribute_names: Sequence[str], candidates: int) -> Tensor:
    """A [C, q] 0/1 float64 matrix matching the candidates and the attribute names."""
    matrix = as_float64(labels, "labels")
    if isinstance(attribute_names, str):
        raise ValueError(f"attribute_names must be a sequence of names, not the string {attribute_names!r}")
    if matrix.dim() != 2 or matrix.shape != (candidates, len(attribute_names)):
        raise ValueError(
            f"labels must have shape [C={candidates}, q={len(attribute_names)}] (one row per "
            f"candidate, one column per attribute {list(attribute_names)}), got {tuple(matrix.shape)}"
        )
    off = ~((matrix == 0) | (matrix == 1))
    if off.any():
        row, column = (int(i) for i in off.nonzero()[0])
        raise ValueError(f"labels[{row}, {column}] is {matrix[row, column].item()}; labels must be 0 or 1")
    return matrix


def check_candidate_logprobs(candidate_logprobs: ArrayLike, name: str = "candidate_logprobs") -> Tensor:
    """Log-probs [..., C]; -inf (probability 0) is allowed, NaN/+inf and an all -inf row are not."""
    logps = as_float64(candidate_logprobs, name)
    if logps.dim() == 0 or logps.shape[-1] == 0:
        raise ValueError(f"{name} must have at least one candidate, got shape {tuple(logps.shape)}")
    check_finite(logps, name, allow_minus_inf=True)
    dead = (logps == -math.inf).all(dim=-1)
    if dead.any():
        where = tuple(int(i) for i in dead.nonzero()[0]) if dead.dim() else ()
        raise ValueError(f"{name}{list(where)}: every candidate has log-prob -inf; nothing to renormalise")
    return logps
