"""Each annotator's theta_k reaches the trackers: its spread always, a curve per annotator when
there are few, a table at the end, and no annotator id with ``report.annotator_ids: false``."""

from __future__ import annotations

import pytest

from badpo.core.bias import BiasChannel
from badpo.engine.reporting import THETA_K_CURVES, annotator_theta, log_theta_k, theta_k_scalars


class Tracker:
    """An accelerate tracker that keeps what it is given (with a table, as wandb's has)."""

    name = "fake"

    def __init__(self) -> None:
        self.logged, self.tables = [], []

    def log(self, values, step):
        self.logged.append((step, values))

    def log_table(self, table_name, columns=None, data=None, step=None):
        self.tables.append((table_name, columns, data, step))


THETA = {"signoff": {"a": 1.0, "b": 3.0}, "length": {"a": -0.5, "b": 0.5}}


def test_the_spread_and_a_curve_per_annotator():
    assert theta_k_scalars(THETA) == {"theta_k_sd/signoff": 1.0, "theta_k/signoff/a": 1.0, "theta_k/signoff/b": 3.0,
                                      "theta_k_sd/length": 0.5, "theta_k/length/a": -0.5, "theta_k/length/b": 0.5}
    assert theta_k_scalars(THETA, ids=False) == {"theta_k_sd/signoff": 1.0, "theta_k_sd/length": 0.5}
    many = {"x": {f"k{i}": float(i) for i in range(THETA_K_CURVES + 1)}}
    assert list(theta_k_scalars(many)) == ["theta_k_sd/x"]  # too many curves to read: the spread only


def test_the_final_step_adds_a_table_annotator_by_attribute():
    tracker = Tracker()
    log_theta_k(tracker, THETA, step=3)
    log_theta_k(tracker, THETA, step=4, final=True)
    assert [step for step, _ in tracker.logged] == [3, 4]
    assert tracker.tables == [("theta_k", ["annotator", "signoff", "length"], [["a", 1.0, -0.5], ["b", 3.0, 0.5]], 4)]
    private = Tracker()
    log_theta_k(private, THETA, step=4, final=True, ids=False)
    assert private.tables == [] and all("/a" not in key for _, values in private.logged for key in values)


def test_only_a_per_annotator_theta_is_listed():
    shared = BiasChannel("shared_mean", ["signoff"], annotators=["a", "b"], init_mean=[0.25])
    assert annotator_theta(shared) == {"signoff": {"a": pytest.approx(0.25), "b": pytest.approx(0.25)}}
    assert annotator_theta(BiasChannel("pooled", ["signoff"])) is None
    assert annotator_theta(None) is None
