"""theta's checkpointed parts are named once (badpo.theta.state) for the engine and BADPOTrainer."""

from __future__ import annotations

import pytest

from badpo.theta.state import THETA_PARTS, check_same_parts, theta_parts


def test_the_parts_are_what_the_run_trains():
    bias, adam, cuts, weights = object(), object(), object(), object()
    assert theta_parts(bias, adam) == {"theta_optimizer": adam, "theta": bias}
    assert theta_parts(bias, None) == {}  # a frozen channel is rebuilt from the settings, not saved
    assert theta_parts(None, adam, cuts) == {"theta_optimizer": adam, "cuts": cuts}  # only the cut points learn
    assert set(theta_parts(bias, adam, cuts, weights)) == set(THETA_PARTS)


def test_a_checkpoint_of_other_parts_is_one_line_naming_both():
    parts = theta_parts(object(), object())
    check_same_parts({"theta": {}, "theta_optimizer": {}, "cuts": None, "tokens_seen": 3}, parts, "ck")
    with pytest.raises(ValueError, match=r"^ck: holds theta's parts \['cuts', 'theta', 'theta_optimizer'\], "
                                         r"this run trains \['theta', 'theta_optimizer'\] \(another variant"):
        check_same_parts({"theta": {}, "theta_optimizer": {}, "cuts": {}}, parts, "ck")


def test_the_engine_checkpoints_the_same_parts():
    from types import SimpleNamespace

    from badpo.engine.checkpoint import checkpoint_contents

    run = SimpleNamespace(policy=None, optimizer=object(), scheduler=object(), theta_optimizer=object(), bias=object(),
                          cuts=object(), weighting=None)
    states = checkpoint_contents(run, object()).states
    assert set(states) - {"training", "optimizer", "scheduler"} == {"theta", "theta_optimizer", "cuts"}
