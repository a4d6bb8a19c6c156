"""The method table's own facts: combined rows come from the row that says so, views are typed."""

from __future__ import annotations

import pytest

from badpo.methods import LEARNED_VARIANTS, METHODS, Needs


def test_each_row_that_combines_with_a_bias_has_one_row_per_learned_variant_and_no_other_does():
    combining = {name for name, row in METHODS.items() if row.combines_with_bias}
    assert combining == {"r_dpo", "sampo", "ld_dpo", "simpo", "group_dro_dpo", "crowd_prefrl"}
    combined = {name for name in METHODS if "_ba_" in name}
    assert combined == {f"{name}_ba_{variant}" for name in combining for variant in LEARNED_VARIANTS}
    for name in combined:
        base, variant = name.split("_ba_")
        row, parent = METHODS[name], METHODS[base]
        assert row.bias_variant == variant and row.loss is parent.loss and row.needs == parent.needs
        assert not row.combines_with_bias  # no r_dpo_ba_pooled_ba_pooled


def test_a_misspelt_view_is_an_error_where_the_row_is_written():
    assert Needs(lengths=True).lengths and not Needs().token_logratios
    with pytest.raises(TypeError, match="lenghts"):
        Needs(lenghts=True)
