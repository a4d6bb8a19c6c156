"""experiments/analyses/trusted_paired.py: the paired distance to a yardstick, worked by hand."""

from __future__ import annotations

import pytest

from fixtures.benchmarks import load_analysis


@pytest.fixture(scope="module")
def trusted_paired():
    return load_analysis("trusted_paired")


def test_distances_are_paired_by_seed_against_the_yardstick_of_that_seed(trusted_paired):
    """Seed 1: yardstick 0.40, five trusted 0.41, none 0.45 -> 0.01 - 0.05 = -0.04. Seed 2:
    yardstick 0.50, five trusted 0.44, none 0.52 -> 0.06 - 0.02 = +0.04. A seed the yardstick lacks
    is left out."""
    rates = lambda black: {"black_coded": black, "woman_coded": 0.5}  # noqa: E731
    arms = {trusted_paired.FIVE: {1: rates(0.41), 2: rates(0.44), 3: rates(0.0)},
            trusted_paired.NONE: {1: rates(0.45), 2: rates(0.52), 3: rates(0.0)}}
    gaps = trusted_paired.paired_gaps(arms, {1: rates(0.40), 2: rates(0.50)}, "black_coded")
    assert gaps.tolist() == pytest.approx([-0.04, 0.04])
