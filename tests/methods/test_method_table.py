"""The method table's own facts: a row is a loss, the bias variant is a setting; an arm (a method
with a variant) has one name, and the names configs used before the split still name the same arm."""

from __future__ import annotations

import warnings

import pytest

from badpo.core.bias import VARIANTS
from badpo.core.config import ConfigError, load_config, to_dict
from badpo.engine.config_checks import check_rm
from badpo.engine.settings import ArmNameNotice, RMConfig, TrainConfig
from badpo.experiment.records import keyed_settings
from badpo.methods import LEARNED_VARIANTS, METHODS, Needs, arm, arm_name, arm_settings, get_arm, split_arm_name
from badpo.methods.arms import legacy_arm_names
from badpo.run_folder.identity import identity

# every name `method:` took before the bias variant became a setting (the table of the last release)
BEFORE = ({"dpo", "ba_dpo_shuffled_ids", "ipo", "em_dpo"} | {f"ba_dpo_{v}" for v in LEARNED_VARIANTS}
          | {f"ba_ipo_{v}" for v in LEARNED_VARIANTS}
          | {f"{m}{s}" for m in ("r_dpo", "sampo", "ld_dpo", "simpo", "group_dro_dpo", "crowd_prefrl")
             for s in ("", *(f"_ba_{v}" for v in LEARNED_VARIANTS))})


def test_the_table_holds_losses_only_and_every_old_name_is_an_arm_of_one_of_them():
    assert set(METHODS) == {"dpo", "r_dpo", "sampo", "ld_dpo", "simpo", "group_dro_dpo", "crowd_prefrl", "ipo",
                            "em_dpo"}
    assert not any("_ba_" in name or name.startswith("ba_") for name in METHODS)
    assert set(METHODS) | set(legacy_arm_names()) == BEFORE
    for name in BEFORE:
        row = get_arm(name)
        assert row.name == name and row.loss is METHODS[row.method].loss and row.needs == METHODS[row.method].needs


def test_arm_names_round_trip_and_the_variants_are_all_reachable():
    assert arm_name("dpo") == "dpo" and arm_name("dpo", "pooled") == "ba_dpo_pooled"
    assert arm_name("ipo", "shared_mean") == "ba_ipo_shared_mean" and arm_name("r_dpo", "pooled") == "r_dpo_ba_pooled"
    assert arm_name("dpo", "per_annotator", True) == "ba_dpo_shuffled_ids"
    for name, (method, variant, shuffled) in legacy_arm_names().items():
        assert arm_name(method, variant, shuffled) == name and split_arm_name(name) == (method, variant, shuffled)
    assert {get_arm(n).bias_variant for n in BEFORE} == set(VARIANTS)
    assert not get_arm("dpo").learns_theta and get_arm("ba_dpo_pooled").learns_theta
    assert split_arm_name("dpo") is None and arm_settings("dpo") == {"method": "dpo"}
    assert arm_settings("ba_dpo_shuffled_ids") == {"method": "dpo", "bias.variant": "per_annotator",
                                                   "bias.shuffled_ids": True}


def test_an_arm_refuses_what_its_method_or_variant_cannot_do_in_one_line():
    with pytest.raises(ConfigError, match="bias.variant: method 'em_dpo' takes no bias"):
        arm("em_dpo", "pooled")
    with pytest.raises(ConfigError, match="bias.shuffled_ids: .*'pooled' does not read"):
        arm("dpo", "pooled", True)
    with pytest.raises(ConfigError, match="bias.variant: unknown bias variant 'pooling'"):
        arm("dpo", "pooling")
    with pytest.raises(ConfigError, match=r"unknown method 'dpoo'"):
        arm("dpoo")
    with pytest.raises(ConfigError, match=r"'ba_dpo_pooled' \(an arm's name: give method and bias.variant\)"):
        arm("ba_dpo_pooled")


def test_the_old_name_is_split_with_one_notice_and_the_run_keeps_its_identity_and_key():
    with pytest.warns(ArmNameNotice, match="'r_dpo_ba_pooled' is now method: r_dpo with bias.variant: pooled"):
        old = load_config(TrainConfig, None, ["method=r_dpo_ba_pooled", "output_dir=runs/x"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = load_config(TrainConfig, None, ["method=r_dpo", "bias.variant=pooled", "output_dir=runs/x"])
    assert old == new and new.arm.name == "r_dpo_ba_pooled" and new.run_name == "r_dpo_ba_pooled"
    assert identity(new)["method"] == "r_dpo_ba_pooled" and "variant" not in identity(new)["bias"]
    # the key of a record made before the split: method as the arm's name, no bias.variant
    before = to_dict(new)
    before["method"] = "r_dpo_ba_pooled"
    del before["bias"]["variant"], before["bias"]["shuffled_ids"]
    assert keyed_settings(to_dict(new)) == keyed_settings(before)
    assert TrainConfig(output_dir="runs/{method}-seed{seed}", method="dpo").resolved().output_dir == "runs/dpo-seed42"


def test_an_old_name_and_another_variant_are_refused_and_rm_takes_bias_variant():
    both = ["bias.variant=shared_mean", "method=ba_dpo_pooled"]
    for order in (both, both[::-1]):
        with pytest.raises(ConfigError, match="with bias.variant pooled, but bias.variant is shared_mean"):
            load_config(TrainConfig, None, order)  # a file and an override: which came last cannot be told
    with pytest.raises(ConfigError, match="^bias.shuffled_ids: the shuffled-ids control is a preference arm"):
        check_rm(load_config(RMConfig, None, ["bias.shuffled_ids=true", "data=x.jsonl", "model.name_or_path=m"]))
    assert RMConfig().method == "rm_shared_mean"
    assert load_config(RMConfig, None, ["bias.variant=pooled"]).method == "rm_pooled"
    with pytest.warns(ArmNameNotice, match="variant: none is now bias.variant: none"):
        old = load_config(RMConfig, None, ["variant=none"])
    assert old.method == "rm_none" and identity(old)["variant"] == "none"
    assert identity(old) == identity(load_config(RMConfig, None, ["bias.variant=none"]))


def test_a_misspelt_view_is_an_error_where_the_row_is_written():
    assert Needs(lengths=True).lengths and not Needs().token_logratios
    with pytest.raises(TypeError, match="lenghts"):
        Needs(lenghts=True)
