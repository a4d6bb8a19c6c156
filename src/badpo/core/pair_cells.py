"""The judgments of a pair-effect fit compressed to what its likelihood reads (exactly).

Judgment i of pair p enters :mod:`badpo.core.pair_level`'s likelihood as log sigma(z), with
z = s_i tau v + theta . a_i + o_i. Oriented to its pair's first side (b_i = s_i a_i, c_i = s_i o_i,
s_i^2 = 1) this is log sigma(s_i x) with x = tau v + theta . b_i + c_i: the judgments of a pair
that share (b, c) differ only in their side, so a *cell* (pair, b, c) holds k votes for the first
side and l for the second and contributes k log sigma(x) + l log sigma(-x). Pairs whose cells are
the same (b, c, k, l) have the same likelihood, so each distinct pair is kept once with its count.
On preference data the attributes take few values (a length or markdown difference of -1, 0, 1)
and a pair has a handful of votes: a million judgments become a few hundred distinct pairs, and
the fit's cost no longer grows with the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["PairCells", "pair_cells"]


@dataclass(frozen=True)
class PairCells:
    """The distinct pairs of a set of judgments: ``b`` ``[C, d]`` and ``c`` ``[C]`` of every cell,
    ``k`` / ``l`` ``[C]`` its votes for the first / second side (float64), ``member`` ``[C]`` the
    distinct pair it belongs to (sorted), ``bounds`` ``[U + 1]`` each distinct pair's cells, and
    ``weight`` ``[U]`` how many pairs of the data it stands for."""

    b: Tensor
    c: Tensor
    k: Tensor
    l: Tensor  # noqa: E741 - the paper's k and l
    member: Tensor
    bounds: Tensor
    weight: Tensor


def _unique_rows(rows: Tensor) -> tuple[Tensor, Tensor]:
    """(the distinct rows, sorted; the index of each row's distinct row)."""
    return torch.unique(rows, dim=0, return_inverse=True)


def pair_cells(a: Tensor, pair: Tensor, side: Tensor, o: Tensor) -> PairCells:
    """The cells of judgments with attribute differences ``a`` ``[n, d]``, pair indices ``pair``
    ``[n]`` (0..P-1), sides ``side`` ``[n]`` (+-1) and offsets ``o`` ``[n]``; every pair's
    likelihood given its quality is the sum over its cells, and the data's is the weighted sum over
    the distinct pairs (module docstring)."""
    s = side.double()
    b, c = s[:, None] * a.double(), s * o.double()
    cells, cell_of = _unique_rows(torch.cat([pair.double()[:, None], b, c[:, None]], dim=1))
    first = (s > 0).double()
    k = torch.zeros(len(cells), dtype=torch.float64).index_add_(0, cell_of, first)
    l = torch.zeros(len(cells), dtype=torch.float64).index_add_(0, cell_of, 1.0 - first)  # noqa: E741
    d = a.shape[1]
    pattern = torch.cat([cells[:, 1:2 + d], k[:, None], l[:, None]], dim=1)  # (b, c, k, l): pair left out
    _, pattern_id = _unique_rows(pattern)
    owner = cells[:, 0].long()  # cells sorted by pair, then by (b, c): a canonical order within a pair
    counts = torch.bincount(owner)
    if bool((counts == 1).all()):  # one cell a pair (the usual case): the pattern is the pair's key
        kept, key = torch.unique(pattern_id, return_inverse=True)
        weight = torch.bincount(key).double()
        first_cell = torch.zeros(len(kept), dtype=torch.long).scatter_(0, key, torch.arange(len(key)))
        select = first_cell
        member = torch.arange(len(kept))
    else:
        select, member, weight = _distinct_pairs(pattern_id.numpy(), counts.numpy())
    bounds = torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(member, minlength=len(weight)).cumsum(0)])
    return PairCells(b=pattern[select, :d], c=pattern[select, d], k=pattern[select, d + 1],
                     l=pattern[select, d + 2], member=member, bounds=bounds, weight=weight)


def _distinct_pairs(pattern_id: np.ndarray, counts: np.ndarray) -> tuple[Tensor, Tensor, Tensor]:
    """(the cells kept, the distinct pair of each, each distinct pair's count) when some pair has
    several cells: a pair's key is the sequence of its cells' patterns."""
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    seen: dict[tuple[int, ...], int] = {}
    weight: list[int] = []
    select: list[np.ndarray] = []
    member: list[np.ndarray] = []
    for start, count in zip(starts.tolist(), counts.tolist()):
        key = tuple(pattern_id[start:start + count].tolist())
        index = seen.get(key)
        if index is None:
            index = seen[key] = len(weight)
            weight.append(0)
            select.append(np.arange(start, start + count))
            member.append(np.full(count, index))
        weight[index] += 1
    return (torch.from_numpy(np.concatenate(select)), torch.from_numpy(np.concatenate(member)),
            torch.tensor(weight, dtype=torch.float64))
