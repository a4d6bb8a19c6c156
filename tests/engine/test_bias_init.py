"""Where theta starts (``bias.init``): the reference fit, worked by hand and checked against its
defining property, the zero gradient of the arm's own loss in the shared level at the reference."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from scipy.optimize import minimize

from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError, from_dict
from badpo.core.losses import ba_dpo_loss
from badpo.engine.preference import build_bias, start_level
from badpo.engine.settings import BiasSettings, TrainConfig
from badpo.methods import get_arm
from badpo.theta.labels import ThetaLabels


def _data(diff, annotators=None, names=("a",)):
    """The fields of PreferenceData the start reads: g(y_w) - g(y_l) [N, q] and who judged."""
    diff = torch.tensor(diff, dtype=torch.float32).reshape(len(diff), len(names))
    ids = annotators or ["x"] * len(diff)
    known = sorted(set(ids))
    index = torch.tensor([known.index(a) for a in ids])
    labels = ThetaLabels(diff, index, tuple(known), tuple(names), torch.arange(len(diff)),
                         torch.ones(len(diff), dtype=torch.float64))  # one judgment a pair
    return SimpleNamespace(attr_diff=diff, attribute_names=tuple(names), annotators=tuple(known),
                           annotator_index=index, annotator_classes=None, theta_labels=lambda: labels,
                           grades=None)


def _config(method="ba_dpo_pooled", **bias):
    return from_dict(TrainConfig, {"method": method, "bias": bias})


def _start(diff, method="ba_dpo_pooled", annotators=None, names=("a",), trusted=None, **bias):
    config = _config(method, **bias)
    data = _data(diff, annotators, names)
    declared = list(names)
    values = config.bias.trusted_values(len(names))
    return start_level(get_arm(method), config, data, declared, values if trusted is None else trusted)


def test_one_attribute_reference_start_is_the_log_odds_of_its_cross_group_wins():
    """9 wins and 3 losses of the attribute side, 4 same-group judgments: log(9 / 3)."""
    diff = [1.0] * 9 + [-1.0] * 3 + [0.0] * 4
    assert _start(diff)[0] == pytest.approx(math.log(3), abs=1e-9)
    assert _start(diff, init="offline")[0] == pytest.approx(math.log(3), abs=1e-15)
    assert _start(diff, init="zero") is None


def test_two_attributes_are_fitted_jointly_as_an_independent_optimiser_finds():
    """Pairs that differ on both attributes couple them: the marginal log-odds are then not the
    fit, and scipy's BFGS on sum softplus(-theta . a) finds the same point as Newton."""
    rows = [[1, 1]] * 6 + [[-1, -1]] * 1 + [[1, 0]] * 3 + [[-1, 0]] * 4 + [[0, 1]] * 5 + [[0, -1]] * 2
    start = _start(rows, names=("a", "b"))
    a = torch.tensor(rows, dtype=torch.float64).numpy()

    def loss(theta):
        return float(torch.nn.functional.softplus(-torch.tensor(a @ theta)).sum())

    independent = minimize(loss, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
    assert start == pytest.approx(list(independent), abs=1e-6)
    marginal = _start(rows, names=("a", "b"), init="offline")
    assert abs(start[0] - marginal[0]) > 0.1  # the coupling matters here


def test_the_reference_start_zeroes_the_shared_level_gradient_of_the_arm_loss():
    """The defining property: with the policy at the reference (every margin 0) the BA-DPO loss
    of the built channel has no gradient in its shared level, for pooled and theta_bar + eps_k."""
    rows = [[1, 1]] * 6 + [[-1, -1]] * 2 + [[1, 0]] * 3 + [[-1, 0]] * 4 + [[0, 1]] * 5 + [[0, -1]] * 2
    ids = [f"k{i % 5}" for i in range(len(rows))]
    for method in ("ba_dpo_pooled", "ba_dpo_shared_mean", "ba_dpo_per_annotator"):
        config, data = _config(method), _data(rows, ids, ("a", "b"))
        channel = build_bias(get_arm(method), config, data)
        zero = torch.zeros(len(rows))
        losses, _, _ = ba_dpo_loss(zero, zero, zero, zero, channel(data.annotator_index, data.attr_diff),
                                   beta=0.1)
        parameters = [p for p in channel.parameters() if p.requires_grad]
        gradients = torch.autograd.grad(losses.sum(), parameters)
        shared = gradients[0] if method != "ba_dpo_per_annotator" else gradients[0].sum(0)
        assert shared.abs().max() < 1e-5, method
        zero_start = build_bias(get_arm(method), _config(method, init="zero"), data)
        losses, _, _ = ba_dpo_loss(zero, zero, zero, zero,
                                   zero_start(data.annotator_index, data.attr_diff), beta=0.1)
        assert torch.autograd.grad(losses.sum(), [p for p in zero_start.parameters()
                                                  if p.requires_grad])[0].abs().max() > 0.5


def test_the_fixed_offset_is_counted_and_trusted_judgments_are_left_out():
    """A fixed offset c is part of every logit: the learned start is the fit minus c. Judgments of
    trusted annotators (theta_k fixed) do not enter the fit of the others' level."""
    diff = [1.0] * 9 + [-1.0] * 3
    assert _start(diff, fixed_offset=[0.4])[0] == pytest.approx(math.log(3) - 0.4, abs=1e-9)
    ids = ["u"] * 12 + ["t"] * 10
    diff_t = diff + [-1.0] * 10  # the trusted annotator always picks the other side
    start = _start(diff_t, method="ba_dpo_shared_mean", annotators=ids, trusted={"t": [0.0]})
    assert start[0] == pytest.approx(math.log(3), abs=1e-9)


def test_every_annotator_trusted_has_no_level_to_fit_and_keeps_its_values():
    """With every annotator trusted no judgment is left to fit a level on (the fit over zero rows
    crashed before): the start is None and the channel holds exactly the trusted theta_k, which is
    how a run with known planted values (an oracle arm) is trained."""
    ids = ["p"] * 3 + ["q"] * 3
    trusted = {"p": [0.7], "q": [1.3]}
    assert _start([1.0, -1.0, 1.0] * 2, method="ba_dpo_per_annotator", annotators=ids, trusted=trusted) is None
    config = from_dict(TrainConfig, {"method": "ba_dpo_per_annotator", "bias": {"trusted": trusted}})
    bias = build_bias(get_arm("ba_dpo_per_annotator"), config, _data([1.0, -1.0, 1.0] * 2, ids))
    theta = bias.theta().detach()
    assert theta[:, 0].tolist() == pytest.approx([0.7, 1.3], abs=1e-6)
    data = _data([1.0, -1.0, 1.0] * 2, ids)
    bias(data.annotator_index, data.attr_diff).sum().backward()  # no gradient reaches a trusted row
    assert all(p.grad is None or not p.grad.any() for p in bias.parameters())


def test_ba_ipo_starts_at_its_squared_link_fit():
    """IPO's link (z - 1/(2 tau))^2 at u = 0: theta a_n ~ 1/(2 tau), so theta = 5 (w - l) / (w + l)
    at tau = 0.1, by least squares over a_n in {+1, -1}."""
    diff = [1.0] * 9 + [-1.0] * 3
    start = _start(diff, method="ba_ipo_pooled")
    assert start[0] == pytest.approx(5.0 * (9 - 3) / 12, abs=1e-9)


def test_untouched_attribute_starts_at_zero_and_no_finite_start_is_refused_naming_the_attribute():
    assert _start([[1, 0], [-1, 0], [1, 0]], names=("a", "b"))[1] == 0.0
    # b's side won each of its cross-group judgments: b is named, not a
    with pytest.raises(ConfigError, match=r"bias.init: reference: \['b'\]: no finite fit .* bias.init: zero"):
        _start([[1, 1], [-1, 0], [1, 0], [0, 1]], names=("a", "b"))
    # two attributes that always differ together: their levels cannot be told apart
    with pytest.raises(ConfigError, match=r"\['a', 'b'\]: no finite joint fit .* collinear"):
        _start([[1, 1], [-1, -1], [1, 1]], names=("a", "b"))


def test_a_few_huge_differences_are_named_as_the_cause_not_a_clean_sweep():
    """One difference of 1e25 beside +-1 that the side won half of (issue 49's retry: the refusal
    said the side "won every, or none" of its judgments, which it had not)."""
    diffs = [1e25] + [1.0, -1.0] * 20
    with pytest.raises(ConfigError, match=r"won 21 of 41 judgments .* largest difference \(1e\+25\) is 1e\+25 "
                                          r"times the median .* comparable scale"):
        _start(diffs)


def test_a_small_scale_attribute_gets_its_large_start():
    """given: values of +-0.01 whose side wins 9 of 12: theta . 0.01 = log 3, theta ~ 110, beyond
    the search's bound on the logit had it bounded theta itself."""
    diff = [0.01] * 9 + [-0.01] * 3
    assert _start(diff)[0] == pytest.approx(100 * math.log(3), rel=1e-6)  # 0.01 in float32


def test_offline_start_refuses_trusted_and_fixed_offsets():
    with pytest.raises(ConfigError, match="bias.init: offline counts every judgment"):
        _start([1.0, -1.0, 1.0], init="offline", fixed_offset=[0.4])
    with pytest.raises(ConfigError, match="bias.init: offline counts every judgment"):
        _start([1.0, -1.0, 1.0], method="ba_dpo_shared_mean", annotators=["u", "t", "u"],
               trusted={"t": [0.0]}, init="offline")


def test_init_options_and_the_old_key():
    assert BiasSettings().init == "reference"  # the default of every arm with a learned theta
    assert build_bias(get_arm("dpo"), _config("dpo"), _data([1.0, -1.0])).theta().abs().max() == 0
    with pytest.raises(ConfigError, match="bias.init: offline: method 'dpo' learns no theta"):
        build_bias(get_arm("dpo"), _config("dpo", init="offline"), _data([1.0, -1.0]))
    with pytest.raises(ConfigError, match="bias.warm_start: no longer a key; use bias.init: offline"):
        from_dict(TrainConfig, {"bias": {"warm_start": True}})
    with pytest.raises(ConfigError, match="bias.init"):
        _config(init="warm")
    assert isinstance(build_bias(get_arm("ba_dpo_pooled"), _config(), _data([1.0, -1.0, 1.0])), BiasChannel)
