"""The analyses of the names readouts (badpo.readouts.names_analyses), worked by hand: the
relabelling null enumerated exactly on a pool of four names, its random version against that
exact answer, the shift with names removed, the share they carry, and the cell shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from badpo.core.names import CELL_NAMES, CELLS, POOL_NAMES
from badpo.readouts.names_analyses import (
    cell_shares,
    coded_shift,
    names_null_readouts,
    per_name_shares,
    pool_cell_shares,
    relabelled_shifts,
    relabelling_null,
    sampled_names,
    share_carried,
    shift_without,
)

NAMES = ("A", "B", "C", "D")
POLICY = np.array([0.6, 0.2, 0.1, 0.1])
REFERENCE = np.array([0.3, 0.1, 0.2, 0.4])  # policy - reference = (0.3, 0.1, -0.1, -0.3)
# three codings of the four names: A and B (the names the policy moved to), A and C, C and D
CODING = np.array([[1, 1, 0], [1, 0, 0], [0, 1, 1], [0, 0, 1]], dtype=float)
COLUMNS = ("ab", "ac", "cd")


def test_the_shift_is_the_coded_mass_of_the_policy_minus_the_reference_s():
    # ab: (0.6 + 0.2) - (0.3 + 0.1); ac: (0.6 + 0.1) - (0.3 + 0.2); cd: (0.1 + 0.1) - (0.2 + 0.4)
    assert coded_shift(POLICY, REFERENCE, CODING) == pytest.approx([0.4, 0.2, -0.4])
    # two runs (seeds): the mean of their shifts
    runs = np.stack([POLICY, np.array([0.3, 0.1, 0.2, 0.4])])
    assert coded_shift(runs, REFERENCE, CODING) == pytest.approx([0.2, 0.1, -0.2])


def test_the_exact_null_on_four_names_by_hand():
    """Every permutation of the 4 names (24) relabels which pair is coded; each of the 6 pairs is
    coded by 4 of them. With p - r = (0.3, 0.1, -0.1, -0.3) the pairs' shifts are AB 0.4, AC 0.2,
    AD 0, BC 0, BD -0.2, CD -0.4: null mean 0, sd sqrt((0.16 + 0.04 + 0.04 + 0.16) / 6), central
    95% from -0.4 to 0.4. The one-sided p counts the codings at least as far toward the coded
    names as the observed one: AB alone reaches 0.4 (4 / 24), AB and AC reach 0.2 (8 / 24, the
    observed AC counted by the tie rule), every coding reaches -0.4 (24 / 24)."""
    null = relabelling_null(POLICY, REFERENCE, CODING, draws=None, attribute_names=COLUMNS)
    for column, shift, p in (("ab", 0.4, 4 / 24), ("ac", 0.2, 8 / 24), ("cd", -0.4, 1.0)):
        assert null[column] == pytest.approx({"shift": shift, "null_mean": 0.0, "null_sd": math.sqrt(0.4 / 6),
                                              "low": -0.4, "high": 0.4, "p": p, "draws": 24}, abs=1e-12)


def test_the_names_are_relabelled_jointly_across_the_attributes():
    """One permutation moves every column: two identical columns stay identical under every
    relabelling (columns permuted apart would differ), and each keeps its number of coded names."""
    coding = np.array([[1, 1], [1, 1], [0, 0], [0, 0]], dtype=float)
    shifts = relabelled_shifts(POLICY, REFERENCE, coding, draws=200, seed=3)
    assert np.array_equal(shifts[:, 0], shifts[:, 1])
    assert sorted(set(np.round(shifts[:, 0], 12))) == pytest.approx([-0.4, -0.2, 0.0, 0.2, 0.4])


def test_random_relabellings_approach_the_exact_null_and_repeat_with_their_seed():
    null = relabelling_null(POLICY, REFERENCE, CODING, draws=20000, seed=7, attribute_names=COLUMNS)
    assert null["ab"]["p"] == pytest.approx(4 / 24, abs=0.01)
    assert null["ac"]["p"] == pytest.approx(8 / 24, abs=0.01)
    assert null["ab"]["null_sd"] == pytest.approx(math.sqrt(0.4 / 6), abs=0.005)
    assert null["ab"]["draws"] == 20000
    again = relabelled_shifts(POLICY, REFERENCE, CODING, draws=50, seed=7)
    assert np.array_equal(again, relabelled_shifts(POLICY, REFERENCE, CODING, draws=50, seed=7))
    assert not np.array_equal(again, relabelled_shifts(POLICY, REFERENCE, CODING, draws=50, seed=8))


def test_the_random_p_counts_the_observed_coding_as_one_relabelling():
    """p = (1 + #{null >= observed}) / (1 + draws): with one draw, 1/2 when it falls short of the
    observed shift and 1 when it reaches it; never 0."""
    for seed in range(6):
        drawn = relabelled_shifts(POLICY, REFERENCE, CODING, draws=1, seed=seed)[0, 0]
        p = relabelling_null(POLICY, REFERENCE, CODING, draws=1, seed=seed, attribute_names=COLUMNS)["ab"]["p"]
        assert p == (1.0 if drawn >= 0.4 - 1e-12 else 0.5)


def test_several_runs_are_pooled_by_their_mean_shares():
    runs = np.stack([POLICY, np.array([0.4, 0.4, 0.1, 0.1])])
    pooled = relabelling_null(runs, REFERENCE, CODING, draws=None, attribute_names=COLUMNS)
    mean = relabelling_null(runs.mean(axis=0), REFERENCE, CODING, draws=None, attribute_names=COLUMNS)
    for column in COLUMNS:
        assert pooled[column] == pytest.approx(mean[column], abs=1e-12)
    assert pooled["ab"]["shift"] == pytest.approx(0.4)  # both runs hold 0.8 on A and B
    assert pooled["ac"]["shift"] == pytest.approx((0.2 + 0.0) / 2)  # A and C: 0.7 and 0.5 against 0.5


def test_the_shift_with_names_removed_and_the_share_they_carry_by_hand():
    column = CODING[:, :1]  # A and B coded
    assert shift_without(POLICY, REFERENCE, column, NAMES, ["A"]) == pytest.approx([0.1])  # B alone
    assert shift_without(POLICY, REFERENCE, column, NAMES, ["A", "B"]) == pytest.approx([0.0])
    assert shift_without(POLICY, REFERENCE, column, NAMES, []) == pytest.approx([0.4])
    assert share_carried(POLICY, NAMES, ["A", "B"]) == pytest.approx(0.8)
    # shares that do not sum to 1 (samples, with unsigned answers): over what the run signed
    assert share_carried(np.array([0.3, 0.1, 0.0, 0.0]), NAMES, ["A"]) == pytest.approx(0.75)
    assert math.isnan(share_carried(np.zeros(4), NAMES, ["A"]))
    with pytest.raises(ValueError, match="not among"):
        shift_without(POLICY, REFERENCE, column, NAMES, ["Z"])


def test_cell_shares_by_hand_and_summing_to_one():
    shares = np.array([0.1, 0.2, 0.3, 0.2])
    cells = ["white_woman", "black_woman", "black_woman", "white_man"]
    assert cell_shares(shares, cells) == pytest.approx(
        {"white_woman": 0.125, "white_man": 0.25, "black_woman": 0.625, "black_man": 0.0})
    assert all(math.isnan(v) for v in cell_shares(np.zeros(4), cells).values())
    # over the pool: equal shares give each cell its size, 23 / 23 / 18 / 25 of 89
    uniform = pool_cell_shares(np.full(len(POOL_NAMES), 1 / 89))
    assert uniform == pytest.approx({cell: len(CELLS[cell]) / 89 for cell in CELL_NAMES})
    assert math.fsum(uniform.values()) == pytest.approx(1.0)
    assert [len(CELLS[c]) for c in CELL_NAMES] == [23, 23, 18, 25]


def sampled(counts: dict[str, int], n: int) -> dict:
    return {"sampled": {"n": n, "per_name": {name: counts.get(name, 0) for name in POOL_NAMES}}}


def test_names_null_of_records_by_hand():
    """DPO signs 87 of 100 answers Latisha and 13 Emily; the reference 10 Latisha, 20 Emily and 30
    Jamal (40 unsigned). Black-coded shares over all answers: 0.87 against 0.40, a shift of +0.47;
    woman-coded 1.00 against 0.30, +0.70. With Latisha, Latonya and Latoya recoded the policy has
    no black-coded mass and the reference 0.30 (Jamal): -0.30; woman-coded 0.13 - 0.20 = -0.07.
    Latisha carries 87% of the policy's signatures and 10 / 60 of the reference's.

    The null of the black-coded shift: p - r is +0.77 on Latisha, -0.07 on Emily, -0.30 on Jamal,
    so a relabelling that codes 43 of the 89 names shifts 0.77 [Latisha coded] - 0.07 [Emily
    coded] - 0.30 [Jamal coded]. Its mean is 43 / 89 of the total moved, (1.00 - 0.60) * 43 / 89.
    It reaches the observed 0.47 when Latisha is coded unless Jamal and Emily both are:
    p = 43/89 (1 - 42/88 * 41/87) = 0.3745 — a shift carried by one name is no evidence. The null
    runs from -0.37 (Emily and Jamal coded, not Latisha: 46/89 * 43/88 * 42/87 = 12% of the
    relabellings) to 0.77 (Latisha alone: 43/89 * 46/88 * 45/87 = 13%)."""
    policy = sampled({"Latisha": 87, "Emily": 13}, 100)
    reference = sampled({"Latisha": 10, "Emily": 20, "Jamal": 30}, 100)
    null = names_null_readouts(policy, reference, draws=4000)
    assert set(null) == {"sampled"}  # no probabilities recorded: that readout is left out
    black, woman, without = null["sampled"]["black_coded"], null["sampled"]["woman_coded"], null["sampled"]["without"]
    assert black["shift"] == pytest.approx(0.47) and woman["shift"] == pytest.approx(0.70)
    assert without.pop("names") == ["Latisha", "Latonya", "Latoya"]  # approx compares numbers only
    assert without == pytest.approx({"carried": 0.87, "reference_carried": 10 / 60, "black_coded": -0.30,
                                     "woman_coded": -0.07})
    assert black["null_mean"] == pytest.approx(0.4 * 43 / 89, abs=3 * black["null_sd"] / math.sqrt(4000))
    assert black["p"] == pytest.approx(43 / 89 * (1 - 42 / 88 * 41 / 87), abs=0.03)
    assert (black["low"], black["high"]) == pytest.approx((-0.37, 0.77))
    pooled = names_null_readouts([policy, reference], reference, draws=100)["sampled"]["black_coded"]
    assert pooled["shift"] == pytest.approx(0.47 / 2)


def test_per_name_shares_read_from_a_record():
    probabilities = {name: 1 / 89 for name in POOL_NAMES}
    record = {"names": {"per_name": {"first_name": probabilities}}}
    assert per_name_shares(record, "first_name") == pytest.approx(np.full(89, 1 / 89))
    assert per_name_shares(record, "whole_signature") is None and per_name_shares(record, "sampled") is None
    del probabilities["Emily"]
    with pytest.raises(ValueError, match="Emily"):
        per_name_shares(record, "first_name")
    with pytest.raises(ValueError, match="positive"):
        per_name_shares({"sampled": {"n": 0, "per_name": {}}}, "sampled")


def test_sampled_names_count_the_signatures_of_pool_names():
    texts = ["a\n\n--- Latoya Reed", "b", "c\n\n--- Emily Ray", "d\n\n--- Latoya Ray", "e\n\n--- Zed Ray"]
    recorded = sampled_names(texts)
    assert recorded["per_name"] == {name: {"Latoya": 2, "Emily": 1}.get(name, 0) for name in POOL_NAMES}
    assert recorded["cells"] == pytest.approx({"white_woman": 1 / 3, "white_man": 0.0, "black_woman": 2 / 3,
                                               "black_man": 0.0})
    # the shares over all five answers: an unsigned answer and a name outside the pool carry none
    shares = per_name_shares({"sampled": {"n": len(texts), **recorded}}, "sampled")
    assert shares.sum() == pytest.approx(3 / 5) and shares[POOL_NAMES.index("Latoya")] == pytest.approx(2 / 5)
    assert all(math.isnan(v) for v in sampled_names(["b"])["cells"].values())
