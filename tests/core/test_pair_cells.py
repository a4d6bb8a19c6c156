"""The pair-effect likelihood on the distinct pairs (badpo.core.pair_cells) is the likelihood of the
judgments themselves: checked against the dense formula written out here, with one cell a pair and
with several (offsets that differ within a pair), and the compression counted by hand."""

from __future__ import annotations

import math

import pytest
import torch

from badpo.core.pair_cells import pair_cells
from badpo.core.pair_level import pair_log_likelihood


def dense(theta, spread, a, pair, side, o, nodes=4001):
    """sum_p log int prod_i sigma(s_i tau v + theta . a_i + o_i) phi(v) dv, by a fine trapezoid rule."""
    v = torch.linspace(-9, 9, nodes, dtype=torch.float64)
    log_phi = -v ** 2 / 2 - 0.5 * math.log(2 * math.pi) + math.log(float(v[1] - v[0]))
    z = side[:, None] * spread * v[None, :] + (a @ theta)[:, None] + o[:, None]
    per_pair = torch.zeros(int(pair.max()) + 1, nodes, dtype=torch.float64).index_add(
        0, pair, torch.nn.functional.logsigmoid(z))
    return float(torch.logsumexp(per_pair + log_phi, dim=1).sum())


def world(offsets: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    pairs, votes = 60, 5
    d = torch.randint(-1, 2, (pairs, 2), generator=g).double()
    pair = torch.arange(pairs).repeat_interleave(votes)
    side = torch.where(torch.rand(len(pair), generator=g) < 0.6, 1.0, -1.0).double()
    a = side[:, None] * d[pair]
    o = (0.3 * torch.randn(len(pair), generator=g)).round(decimals=1) if offsets else torch.zeros(len(pair))
    return a, pair, side, o.double()


@pytest.mark.parametrize("offsets", [False, True])
@pytest.mark.parametrize("spread", [0.0, 1.3, 4.0])
def test_the_distinct_pairs_likelihood_is_the_judgments(offsets, spread):
    a, pair, side, o = world(offsets)
    theta = torch.tensor([0.7, -0.4], dtype=torch.float64)
    got = float(pair_log_likelihood(theta, spread, a, pair, side, o))
    assert got == pytest.approx(dense(theta, spread, a, pair, side, o), abs=1e-7)


def test_the_compression_by_hand():
    """Pairs 0 and 1 are the same (b (1, 0), two votes for the first side, one for the second); pair 2
    has two cells (offsets 0 and 0.5): three distinct pairs would be two."""
    a = torch.tensor([[1.0, 0], [1, 0], [-1, 0], [1, 0], [-1, 0], [1, 0], [0, 1], [0, 1]], dtype=torch.float64)
    side = torch.tensor([1.0, 1, -1, 1, -1, 1, 1, 1], dtype=torch.float64)
    pair = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2])
    o = torch.tensor([0, 0, 0, 0, 0, 0, 0, 0.5], dtype=torch.float64)
    cells = pair_cells(a, pair, side, o)
    assert cells.weight.tolist() == [2.0, 1.0] and cells.bounds.tolist() == [0, 1, 3]
    assert cells.k.tolist() == [2.0, 1.0, 1.0] and cells.l.tolist() == [1.0, 0.0, 0.0]
    assert cells.c.tolist() == [0.0, 0.0, 0.5] and cells.b.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
