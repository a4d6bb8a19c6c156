"""experiments/analyses/name_tokens.py: first-name mass by name length, worked by hand."""

from __future__ import annotations

import math

import pytest

from badpo.core.names import NAME_POOL
from fixtures.benchmarks import load_analysis


@pytest.fixture(scope="module")
def name_tokens():
    return load_analysis("name_tokens")


def test_mass_is_summed_by_race_coded_cell_and_token_count(name_tokens):
    """Four names at 0.4 / 0.3 / 0.2 / 0.1: a two-token and a one-token black-coded name, a
    one-token and a three-token white-coded one; the perplexity is exp of the entropy."""
    black = [n for n in NAME_POOL if NAME_POOL[n][1] == 1][:2]
    white = [n for n in NAME_POOL if NAME_POOL[n][1] == 0][:2]
    shares = {black[0]: 0.4, black[1]: 0.3, white[0]: 0.2, white[1]: 0.1}
    lengths = {black[0]: 2, black[1]: 1, white[0]: 1, white[1]: 3}
    out = name_tokens.mass_by_length(shares, lengths.__getitem__)
    assert out["longer, black"] == pytest.approx(0.4) and out["one-token, black"] == pytest.approx(0.3)
    assert out["one-token, white"] == pytest.approx(0.2) and out["longer, white"] == pytest.approx(0.1)
    entropy = -sum(p * math.log(p) for p in (0.4, 0.3, 0.2, 0.1))
    assert out["perplexity"] == pytest.approx(math.exp(entropy))


def test_records_read_out_under_other_settings_are_rows_of_their_own(name_tokens):
    """Three bodies of one run are three rows, not three seeds of one."""
    records = [{"evaluation": {"body": b, "max_prompts": 200}} for b in ("given", "reference", "own")]
    assert [name_tokens.readout_label(r, records) for r in records] == [" [body=given]", " [body=reference]",
                                                                         " [body=own]"]
    assert name_tokens.readout_label(records[0], records[:1]) == ""
