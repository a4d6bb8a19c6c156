"""TRL's loss types in BADPOTrainer (badpo.integrations.trl_losses): with theta at 0 each loss type
TRL takes as a function of the DPO margin is TRL's own loss on the same batch; the bias enters where
the margin does (worked out by hand); theta's start follows the loss's link; the others are refused.

The world of tests/integrations/test_trl_integration.py (fixtures.trl): 24 judgments, the signed
side winning 9 of its 12 cross-group judgments."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("trl", reason="TRL is the optional extra 'trl' (installed by the 'test' extra)")

from badpo.core.bias import BiasChannel  # noqa: E402
from badpo.integrations.trl_losses import MARGIN_LOSSES, NOT_OF_THE_MARGIN  # noqa: E402
from fixtures.engine import build_tokenizer  # noqa: E402
from fixtures.trl import config, first_batch_loss, trl_world  # noqa: E402

ANNOTATORS = [f"ann{k}" for k in range(5)]
LN3 = math.log(3)


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    yield from trl_world(tmp_path_factory.mktemp("trl_losses"), save_model_dir)


def settings(name: str) -> dict:
    """Each loss type's own option where TRL asks one of it."""
    return {"exo_pair": {"label_smoothing": 0.1}, "robust": {"label_smoothing": 0.2}}.get(name, {})


CASES = [([name], None, settings(name)) for name in MARGIN_LOSSES] + [
    (["sigmoid", "hinge", "discopop"], [0.5, 0.3, 0.2], {}),
    (["ipo", "sigmoid_norm"], [1.0, 2.0], {}),
    (["robust", "exo_pair"], [0.4, 0.6], {"label_smoothing": 0.15}),
]


@pytest.mark.parametrize(("loss_type", "weights", "extra"), CASES, ids=lambda case: str(case))
def test_with_theta_at_zero_each_loss_type_is_trls_own(world, tmp_path, loss_type, weights, extra):
    """A policy that is not its reference, so every margin differs from 0; the same batch."""
    from transformers import AutoModelForCausalLM
    from trl import DPOTrainer

    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    options = dict(loss_type=loss_type, loss_weights=weights, **extra)
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer())
    trl = DPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                     args=config(tmp_path / "trl", **options), **kwargs)
    channel = BiasChannel("shared_mean", ["signed"], ANNOTATORS).requires_grad_(False)
    ours = BADPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                        args=config(tmp_path / "ours", **options), attributes=["given:signed"], bias=channel,
                        **kwargs)
    theirs = first_batch_loss(trl)
    assert theirs > 0 and first_batch_loss(ours) == pytest.approx(theirs, rel=1e-6)


HAND = {  # policy = reference: every margin 0, b = ln 3 on 9 judgments, -ln 3 on 3, 0 on 12; beta 0.1
    "hinge": (3 * (1 + LN3) + 12 * 1.0) / 24,
    "ipo": (9 * (LN3 - 5) ** 2 + 3 * (-LN3 - 5) ** 2 + 12 * 25.0) / 24,
    "sigmoid_norm": (9 * math.log(4 / 3) + 3 * math.log(4) + 12 * math.log(2)) / 24,
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_the_bias_enters_where_the_margin_does(world, tmp_path, name):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    channel = BiasChannel("pooled", ["signed"], ANNOTATORS, init_mean=[LN3]).requires_grad_(False)
    trainer = BADPOTrainer(str(path / "model"), args=config(tmp_path, loss_type=[name]), train_dataset=data,
                           processing_class=build_tokenizer(), attributes=["given:signed"], bias=channel)
    assert first_batch_loss(trainer) == pytest.approx(HAND[name], rel=1e-6)


def test_theta_starts_by_the_loss_types_link(world, tmp_path):
    """IPO's squared link at margin 0: theta minimises sum (theta d - 5)^2 over d = +1 (9), -1 (3):
    theta = 5 (9 - 3) / 12 = 2.5; hinge starts at the logistic fit, log(9 / 3); a mix of the two
    links is refused unless theta starts at 0."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    common = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"],
                  bias="pooled")

    def start(**options) -> float:
        trainer = BADPOTrainer(str(path / "model"), args=config(tmp_path, **options), **common)
        return float(trainer.bias.shared_parameter().detach())

    assert start(loss_type=["ipo"]) == pytest.approx(2.5, abs=1e-6)
    assert start(loss_type=["hinge"]) == pytest.approx(LN3, abs=1e-6)
    with pytest.raises(ValueError, match="theta_init: the loss types mix IPO's squared loss"):
        start(loss_type=["ipo", "sigmoid"])
    trainer = BADPOTrainer(str(path / "model"), args=config(tmp_path, loss_type=["ipo", "sigmoid"]),
                           theta_init="zero", **common)
    assert float(trainer.bias.shared_parameter().detach()) == 0.0


@pytest.mark.parametrize("name", sorted(NOT_OF_THE_MARGIN))
def test_a_loss_the_bias_cannot_enter_is_refused_by_name(world, tmp_path, name):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    with pytest.raises(ValueError, match=f"args.loss_type: '{name}' .* so BA-DPO's bias cannot enter it"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, loss_type=["sigmoid", name]), train_dataset=data,
                     processing_class=build_tokenizer(), attributes=["given:signed"])


def test_a_method_with_its_own_loss_takes_no_other_loss_type(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    common = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"])
    with pytest.raises(ValueError, match="method 'ipo' has its own loss"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, loss_type=["hinge"]), method="ipo", **common)


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_ld_alpha_is_badpos_ld_dpo_and_with_theta_at_zero_trls_own(world, tmp_path, alpha):
    """TRL's ld_alpha trains the ld_dpo row of the channel's variant with that alpha; a policy that
    is not its reference, the same batch, theta frozen at 0: TRL's loss."""
    from transformers import AutoModelForCausalLM
    from trl import DPOTrainer

    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer())
    trl = DPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                     args=config(tmp_path / "trl", ld_alpha=alpha), **kwargs)
    channel = BiasChannel("shared_mean", ["signed"], ANNOTATORS).requires_grad_(False)
    ours = BADPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                        args=config(tmp_path / "ours", ld_alpha=alpha), attributes=["given:signed"], bias=channel,
                        theta_init="zero", **kwargs)
    assert ours.method_name == "ld_dpo_ba_shared_mean" and ours.method_params.alpha == alpha
    theirs = first_batch_loss(trl)
    assert theirs > 0 and first_batch_loss(ours) == pytest.approx(theirs, rel=1e-6)


def test_ld_alpha_with_another_method_or_alpha_is_refused(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    common = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"])
    with pytest.raises(ValueError, match="^args.ld_alpha: LD-DPO's weighting is the loss of method 'ld_dpo'; "
                                         "method 'dpo' is another"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, ld_alpha=0.5), method="dpo", **common)
    with pytest.raises(ValueError, match="^args.ld_alpha is 0.5 and method_params.alpha is 0.2: give one"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, ld_alpha=0.5), method="ld_dpo",
                     method_params={"alpha": 0.2}, **common)


@pytest.mark.parametrize("name", [name for name, row in MARGIN_LOSSES.items() if row.method is not None])
def test_a_loss_type_named_like_a_method_is_that_methods_loss(world, tmp_path, name):
    """One name, one margin: TRL's loss type and the method row it names (``ipo``: the ``ipo`` row
    with the per-token margin and tau = beta) give the same loss on the same batch, theta included."""
    from transformers import AutoModelForCausalLM

    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    beta = 0.1
    method, params = MARGIN_LOSSES[name].method(beta)
    losses = []
    for options, extra in (({"loss_type": [name]}, {}), ({}, {"method": method, "method_params": params})):
        channel = BiasChannel("pooled", ["signed"], ANNOTATORS, init_mean=[0.4]).requires_grad_(False)
        reference = AutoModelForCausalLM.from_pretrained(path / "model")
        trainer = BADPOTrainer(str(path / "policy"), reference, args=config(tmp_path, beta=beta, **options),
                               train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"],
                               bias=channel, **extra)
        losses.append(first_batch_loss(trainer))
    assert losses[0] > 0 and losses[1] == pytest.approx(losses[0], rel=1e-6)
