"""LD-DPO (the ld_dpo rows): the tokens past a pair's shared length weighted by alpha, worked by hand;
alpha = 1 is DPO, alpha = 0 cuts the longer response to the shared length."""

from __future__ import annotations

import math

import pytest
import torch

from badpo.methods import JudgmentBatch, get_arm


def _batch(chosen, rejected, bias=0.0) -> JudgmentBatch:
    """Per-token log-ratios of one judgment; the summed log-probs are their sums (reference 0)."""
    c, r = torch.tensor(chosen), torch.tensor(rejected)
    return JudgmentBatch(policy_chosen=c.sum()[None], policy_rejected=r.sum()[None],
                         reference_chosen=torch.zeros(1), reference_rejected=torch.zeros(1),
                         bias_logit=torch.tensor([bias]), beta=0.5, chosen_token_logratios=(c,),
                         rejected_token_logratios=(r,))


def test_ld_dpo_is_worked_by_hand():
    """Shared length 2: chosen 0.4 - 0.2 + alpha (1.0 + 0.6), rejected -0.3 + 0.1; alpha 0.25, beta 0.5,
    b = 0.1: z = 0.5 (0.6 - (-0.2)) + 0.1 = 0.5."""
    row = get_arm("ld_dpo_ba_pooled")
    terms = row.loss(_batch([0.4, -0.2, 1.0, 0.6], [-0.3, 0.1], bias=0.1), row.parse_params({"alpha": 0.25}))
    assert float(terms.logits) == pytest.approx(0.5, abs=1e-6)
    assert float(terms.losses) == pytest.approx(math.log1p(math.exp(-0.5)), abs=1e-6)


def test_alpha_one_is_dpo_and_alpha_zero_cuts_to_the_shared_length():
    batch = _batch([0.4, -0.2, 1.0, 0.6], [-0.3, 0.1])
    ld, dpo = get_arm("ld_dpo"), get_arm("dpo")
    assert torch.allclose(ld.loss(batch, ld.parse_params({"alpha": 1.0})).losses, dpo.loss(batch, None).losses)
    cut = _batch([0.4, -0.2], [-0.3, 0.1])
    assert torch.allclose(ld.loss(batch, ld.parse_params({"alpha": 0.0})).losses, dpo.loss(cut, None).losses)
    with pytest.raises(ValueError, match=r"method_params.alpha: must be in \[0, 1\]"):
        ld.parse_params({"alpha": 1.5})
