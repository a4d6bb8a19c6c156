"""The rest of TRL's DPOConfig loss options in BADPOTrainer: the f-divergences (each log-ratio scored
by f' before the margin), WPO's weights and a MoE's load-balancing loss. With theta at 0 each is TRL's
own loss on the same batch; the scores and weights are worked out by hand; what cannot combine is
refused in one line. The world of tests/integrations/test_trl_integration.py (fixtures.trl)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("trl", reason="TRL is the optional extra 'trl' (installed by the 'test' extra)")

import torch  # noqa: E402

from badpo.core.bias import BiasChannel  # noqa: E402
from badpo.integrations.trl_losses import DIVERGENCES, wpo_weights  # noqa: E402
from fixtures.engine import build_tokenizer  # noqa: E402
from fixtures.trl import config, first_batch_loss, trl_world  # noqa: E402

ANNOTATORS = [f"ann{k}" for k in range(5)]
LN3 = math.log(3)


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    yield from trl_world(tmp_path_factory.mktemp("trl_divergences"), save_model_dir)


def test_each_divergence_scores_a_log_ratio_by_hand():
    """At t = pi / pi_ref = 2 (r = ln 2): forward KL 1 - 1/t = 1/2; JS log(2t / (t + 1)) = log(4/3);
    alpha 1/2: (t^-1/2 - 1) / (-1/2) = 2 - sqrt 2; alpha 1 is the reverse KL's r. Every score is 0 at r = 0."""
    r = torch.tensor([math.log(2.0), 0.0], dtype=torch.float64)
    expected = {"reverse_kl": math.log(2.0), "forward_kl": 0.5, "js_divergence": math.log(4 / 3),
                "alpha_divergence": 2 - math.sqrt(2)}
    for name, score in DIVERGENCES.items():
        values = score(r, 0.5)
        assert float(values[0]) == pytest.approx(expected[name], rel=1e-12) and float(values[1]) == 0.0, name
    assert float(DIVERGENCES["alpha_divergence"](r, 1.0)[0]) == pytest.approx(math.log(2.0), rel=1e-12)


def test_wpo_weights_by_hand():
    """One judgment: the chosen's two tokens at log p = log 0.5 with sum p^2 = 0.5 (ratio 1 each), the
    rejected's one token at p = 0.25 with sum p^2 = 0.5 (ratio 1/2): weight 1 x 1/2; the padded
    position (mask 0) and the first position (it predicts nothing) count for nothing."""
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])  # [2B, T]; position t predicts token t + 1
    logps = torch.log(torch.tensor([[0.5, 0.5, 0.9], [0.25, 0.3, 0.9]]))
    sq = torch.log(torch.tensor([[0.5, 0.5, 0.1], [0.5, 0.7, 0.1]]))
    assert float(wpo_weights(logps, sq, mask)[0]) == pytest.approx(0.5, rel=1e-6)


def _both(world, tmp_path, **options) -> tuple[float, float]:
    """The first batch's loss of TRL's DPOTrainer and of BADPOTrainer with theta frozen at 0, on the same
    batch and a policy that is not its reference."""
    from transformers import AutoModelForCausalLM
    from trl import DPOTrainer

    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer())
    trl = DPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                     args=config(tmp_path / "trl", **options), **kwargs)
    channel = BiasChannel("shared_mean", ["signed"], ANNOTATORS).requires_grad_(False)
    ours = BADPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                        args=config(tmp_path / "ours", **options), attributes=["given:signed"], bias=channel,
                        **kwargs)
    return first_batch_loss(trl), first_batch_loss(ours)


CASES = [dict(f_divergence_type="forward_kl"), dict(f_divergence_type="js_divergence"),
         dict(f_divergence_type="alpha_divergence", f_alpha_divergence_coef=0.3),
         dict(f_divergence_type="js_divergence", loss_type=["ipo", "hinge"], loss_weights=[0.5, 0.5]),
         dict(use_weighting=True), dict(use_weighting=True, loss_type=["hinge", "sigmoid_norm"]),
         dict(use_weighting=True, f_divergence_type="forward_kl")]


@pytest.mark.parametrize("options", CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_with_theta_at_zero_each_option_is_trls_own(world, tmp_path, options):
    theirs, ours = _both(world, tmp_path, **options)
    assert theirs > 0 and ours == pytest.approx(theirs, rel=1e-6)


def test_the_bias_enters_after_the_divergence_scores_the_log_ratios(world, tmp_path):
    """Policy = reference: every score is 0 whatever the divergence, so the loss is -log sigmoid(b) over
    b = ln 3 on 9 judgments, -ln 3 on 3, 0 on 12 (the plain sigmoid's value by hand)."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    expected = (9 * math.log(4 / 3) + 3 * math.log(4) + 12 * math.log(2)) / 24
    for divergence in ("forward_kl", "js_divergence", "alpha_divergence"):
        channel = BiasChannel("pooled", ["signed"], ANNOTATORS, init_mean=[LN3]).requires_grad_(False)
        trainer = BADPOTrainer(str(path / "model"), args=config(tmp_path, f_divergence_type=divergence),
                               train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"],
                               bias=channel)
        assert first_batch_loss(trainer) == pytest.approx(expected, rel=1e-6), divergence


def test_a_divergence_on_a_method_with_its_own_loss_is_refused(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    with pytest.raises(ValueError, match="^args.f_divergence_type: method 'r_dpo' has its own loss; the f-divergence "
                                         "'forward_kl' combine"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, f_divergence_type="forward_kl"), method="r_dpo",
                     train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"])


def _moe(path, seed: int):
    """A tiny Mixtral (two experts, one chosen per token) on the world's tokenizer, saved to ``path``."""
    from transformers import MixtralConfig, MixtralForCausalLM

    tokenizer = build_tokenizer()
    torch.manual_seed(seed)
    model = MixtralForCausalLM(MixtralConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, num_local_experts=2, num_experts_per_tok=1, output_router_logits=True,
        router_aux_loss_coef=0.05, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id))
    model.save_pretrained(path)
    return path


def test_a_moes_load_balancing_loss_is_added_beside_as_trl_adds_it(world, tmp_path):
    """router_aux_loss_coef (the model's own 0.05, and 0.2 given): with theta at 0 the loss is TRL's,
    which holds the auxiliary term; a dense model with a coefficient is refused by TRL itself."""
    from transformers import AutoModelForCausalLM
    from trl import DPOTrainer

    from badpo.integrations.trl import BADPOTrainer

    _, data = world
    reference, policy = _moe(tmp_path / "moe_ref", 0), _moe(tmp_path / "moe_policy", 1)
    kwargs = dict(train_dataset=data, processing_class=build_tokenizer())
    for coef in (None, 0.2):
        trl = DPOTrainer(str(policy), AutoModelForCausalLM.from_pretrained(reference),
                         args=config(tmp_path / "trl", router_aux_loss_coef=coef), **kwargs)
        channel = BiasChannel("shared_mean", ["signed"], ANNOTATORS).requires_grad_(False)
        ours = BADPOTrainer(str(policy), AutoModelForCausalLM.from_pretrained(reference),
                            args=config(tmp_path / "ours", router_aux_loss_coef=coef), attributes=["given:signed"],
                            bias=channel, **kwargs)
        assert ours.aux_loss_enabled and ours.router_aux_loss_coef == (0.05 if coef is None else 0.2)
        theirs = first_batch_loss(trl)
        assert theirs > 0 and first_batch_loss(ours) == pytest.approx(theirs, rel=1e-6)


def test_each_option_changes_the_loss_it_is_compared_on(world, tmp_path):
    """The equalities above are not the plain loss twice: each option moves TRL's loss and ours."""
    plain_theirs, plain_ours = _both(world, tmp_path / "plain")
    for options in (dict(use_weighting=True), dict(f_divergence_type="forward_kl")):
        theirs, ours = _both(world, tmp_path / next(iter(options)), **options)
        assert abs(theirs - plain_theirs) > 1e-4 and abs(ours - plain_ours) > 1e-4, options
