"""The method contract beyond the DPO family: a reference-free loss (SimPO) and the logit a method
has at the start, around which theta's start fits the labels (R-DPO's length term, SimPO's
length-normalised margin minus gamma), worked by hand."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.optimize import minimize_scalar

from badpo.core.level_step import LOGISTIC
from badpo.methods import JudgmentBatch, get_arm, logit_at_start
from badpo.theta.labels import ThetaLabels
from badpo.theta.start import initial_level


def _batch(**overrides) -> JudgmentBatch:
    values = dict(policy_chosen=torch.tensor([-4.0]), policy_rejected=torch.tensor([-9.0]),
                  reference_chosen=torch.tensor([float("nan")]), reference_rejected=torch.tensor([float("nan")]),
                  bias_logit=torch.tensor([0.3]), beta=2.0, chosen_lengths=torch.tensor([2]),
                  rejected_lengths=torch.tensor([3]))
    return JudgmentBatch(**(values | overrides))


def test_simpo_is_worked_by_hand_and_reads_no_reference():
    """beta (-4 / 2 - (-9 / 3)) - gamma + b = 2 (-2 + 3) - 0.5 + 0.3 = 1.8, whatever the
    reference (NaN here)."""
    row = get_arm("simpo_ba_pooled")
    assert row.reference_free and row.learns_theta and not get_arm("dpo").reference_free
    terms = row.loss(_batch(), row.parse_params({}))
    assert float(terms.logits) == pytest.approx(1.8, abs=1e-6)
    assert float(terms.losses) == pytest.approx(math.log1p(math.exp(-1.8)), abs=1e-6)
    assert float(terms.chosen_rewards) == pytest.approx(-4.0) and float(terms.rejected_rewards) == pytest.approx(-6.0)
    plain = get_arm("simpo")
    assert not plain.learns_theta
    assert float(plain.loss(_batch(), plain.parse_params({"gamma": 0.0})).logits) == pytest.approx(2.3, abs=1e-6)
    with pytest.raises(ValueError, match="method_params.gamma: must be >= 0"):
        plain.parse_params({"gamma": -1.0})


def test_the_logit_at_the_start_is_each_methods_own():
    """Policy at the reference, no bias: 0 for DPO, IPO and SamPO; alpha (|y_w| - |y_l|) for R-DPO;
    beta (ref_w / |y_w| - ref_l / |y_l|) - gamma for SimPO."""
    ref_w, ref_l = torch.tensor([-4.0, -6.0]), torch.tensor([-9.0, -2.0])
    len_w, len_l = torch.tensor([2, 3]), torch.tensor([3, 1])

    def start(name, **params):
        row = get_arm(name)
        return logit_at_start(row, row.parse_params(params), ref_w, ref_l, len_w, len_l, beta=2.0).tolist()

    for name in ("dpo", "ba_dpo_pooled", "ipo", "sampo_ba_pooled"):
        assert start(name) == [0.0, 0.0]
    assert start("r_dpo_ba_pooled", alpha=0.5) == pytest.approx([-0.5, 1.0])
    assert start("simpo_ba_pooled", gamma=0.5) == pytest.approx([2 * (-2 + 3) - 0.5, 2 * (-2 + 2) - 0.5])


def test_thetas_start_fits_the_labels_around_the_logit_at_the_start():
    """One attribute; the start solves the logistic score equation in theta with the method's logit
    c_i as an offset, checked against a scalar minimiser of the same loss; with c = 0 it is another
    level (the start would be wrong without the offset)."""
    diff = torch.tensor([[1.0], [1.0], [1.0], [-1.0], [1.0], [-1.0], [0.0], [1.0]], dtype=torch.float64)
    c = torch.tensor([0.4, -1.2, 0.8, 0.3, -0.5, 1.1, 0.2, -0.9], dtype=torch.float64)
    n = len(diff)
    labels = ThetaLabels(diff, torch.zeros(n, dtype=torch.long), ("a",), ("x",), torch.arange(n),
                         torch.ones(n, dtype=torch.float64))
    level = initial_level("reference", labels, ["x"], LOGISTIC, start_logits=c)[0]

    def loss(theta: float) -> float:
        return float(torch.nn.functional.softplus(-(c + theta * diff[:, 0])).sum())

    assert level == pytest.approx(minimize_scalar(loss, bounds=(-10, 10), method="bounded",
                                                  options={"xatol": 1e-10}).x, abs=1e-6)
    score = float(((1 - torch.sigmoid(c + level * diff[:, 0])) * diff[:, 0]).sum())
    assert abs(score) < 1e-8
    assert abs(initial_level("reference", labels, ["x"], LOGISTIC)[0] - level) > 0.1
