"""Preference methods: one row each in :data:`METHODS` (:mod:`badpo.methods.table`).

- :mod:`~badpo.methods.view`: what a loss sees (``JudgmentBatch``, ``Needs``, ``StepView``).
- :mod:`~badpo.methods.baselines`: the losses and their typed parameters.
- :mod:`~badpo.methods.weighting`: loss weights with state (Group-DRO, Crowd-PrefRL).
- :mod:`~badpo.methods.em`: EM-DPO + MinMax-DPO's maths.
- :mod:`~badpo.methods.table`: the ``Method`` row and the table.
- :mod:`~badpo.methods.arms`: an arm, a method trained with a bias variant, and its name.
"""

from __future__ import annotations

from badpo.methods.arms import LEARNED_VARIANTS, Arm, arm, arm_name, arm_settings, get_arm, split_arm_name
from badpo.methods.baselines import (
    CrowdParams,
    GroupParams,
    IPOParams,
    NoParams,
    RDPOParams,
    ba_dpo_terms,
    ipo_terms,
    r_dpo_terms,
    sampo_terms,
)
from badpo.methods.em import (
    EMParams,
    TypeWeights,
    annotator_loglik,
    initial_type_probabilities,
    minimax_weights,
    type_log_posterior,
    type_utilities,
    vote_halves,
)
from badpo.methods.table import METHODS, Method, get_method, logit_at_start, logit_is_zero_at_start
from badpo.methods.view import JudgmentBatch, LossTerms, Needs, StepView, sample_seeds
from badpo.methods.weighting import GroupWeights, Weighting

__all__ = ["METHODS", "LEARNED_VARIANTS", "Method", "Arm", "arm", "arm_name", "arm_settings", "get_arm",
           "split_arm_name", "logit_at_start", "logit_is_zero_at_start", "Needs", "StepView", "JudgmentBatch",
           "LossTerms",
           "GroupWeights", "Weighting", "get_method", "sample_seeds", "ba_dpo_terms", "r_dpo_terms",
           "ipo_terms", "sampo_terms", "NoParams", "RDPOParams", "IPOParams", "GroupParams",
           "CrowdParams", "EMParams", "TypeWeights", "vote_halves",
           "initial_type_probabilities", "annotator_loglik", "type_log_posterior", "type_utilities",
           "minimax_weights"]
