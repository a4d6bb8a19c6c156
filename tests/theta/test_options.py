"""theta's options are checked once (badpo.theta.options) and each refusal names the option of the
front door that called: the engine's config keys or BADPOTrainer's arguments."""

from __future__ import annotations

import pytest

from badpo.core.config import ConfigError
from badpo.methods import get_arm
from badpo.run_folder.external import TRAINER_LEVELS
from badpo.theta.level import TILT_QUALITY
from badpo.theta.options import (
    ENGINE,
    INIT_RULES,
    LEVEL_NAMES,
    LEVEL_RULES,
    TRL,
    check_init,
    check_level,
    check_level_has_theta,
    check_lr,
    check_orthogonal,
)
from badpo.theta.start import START_RULES


def test_the_names_are_the_rows_of_the_tables():
    assert LEVEL_NAMES == tuple(LEVEL_RULES) and INIT_RULES == tuple(START_RULES)
    # every tilt a rule names has its reader, and the run folder's list of what BADPOTrainer records is
    # the rules that keep no margin (run_folder sits below theta and cannot read the table)
    assert {rule.tilt for rule in LEVEL_RULES.values()} - {None} == set(TILT_QUALITY)
    assert TRAINER_LEVELS == tuple(name for name, rule in LEVEL_RULES.items() if not rule.reads_last_margins)


def test_the_config_annotations_offer_the_rows_of_the_tables():
    import typing

    from badpo.engine.settings import BiasSettings

    hints = typing.get_type_hints(BiasSettings)
    assert typing.get_args(hints["level"]) == LEVEL_NAMES and typing.get_args(hints["init"]) == INIT_RULES


@pytest.mark.parametrize(("front", "level", "micro", "lr", "init"), [
    (ENGINE, "bias.level", "micro_batch_size", "bias.lr", "bias.init"),
    (TRL, "bias_level", "args.per_device_train_batch_size", "theta_lr", "theta_init")])
def test_each_refusal_names_the_callers_option(front, level, micro, lr, init):
    refused = rf"^{level}: orthogonal needs a theta .* 'dpo' learns none; leave {level} at adam$"
    with pytest.raises(ConfigError, match=refused):
        check_level_has_theta("orthogonal", False, "method 'dpo'", front)
    with pytest.raises(ConfigError, match=rf"^{level}: orthogonal takes .* raise {micro} above 2$"):
        check_orthogonal(False, get_arm("ba_dpo_pooled"), 2, 2, front)
    with pytest.raises(ConfigError, match=rf"^{lr}: must be > 0, got 0.0$"):
        check_lr(0.0, front)
    with pytest.raises(ConfigError, match=rf"^{init}: one of "):
        check_init("warm", front)
    with pytest.raises(ConfigError, match=rf"^{level}: one of "):
        check_level("steady", front)
    check_orthogonal(False, get_arm("ba_dpo_pooled"), 3, 2, front)  # a micro-batch above d passes
    check_level_has_theta("adam", False, "method 'dpo'", front)


def test_only_a_front_door_that_keeps_every_margin_runs_the_tilt_rules():
    for name, rule in LEVEL_RULES.items():
        check_level(name, ENGINE)
        if rule.reads_last_margins:
            with pytest.raises(ConfigError, match=f"^bias_level: {name} moves theta after every step"):
                check_level(name, TRL)
        else:
            check_level(name, TRL)
    assert [name for name, rule in LEVEL_RULES.items() if rule.reads_last_margins] == ["tilt", "tilt_given_quality"]


def test_a_setting_that_leaves_a_deciding_default_says_so_in_one_line():
    from badpo.engine.settings import BiasSettings
    from badpo.theta.options import departures

    assert departures(BiasSettings()) == []
    lines = departures(BiasSettings(init="zero", level="orthogonal"))
    assert lines == ["bias.init: zero departs from the library's default reference (the fit of the labels at the "
                     "reference)", "bias.level: orthogonal departs from the library's default adam (theta's own "
                     "Adam after the start)"]
    assert BiasSettings().init == "reference" and BiasSettings().level == "adam"  # the defaults named above
