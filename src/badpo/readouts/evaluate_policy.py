"""Evaluate a trained policy on evaluation prompts and held-out judgments: every readout of the
paper for one run (a run folder and the user's files: :mod:`badpo.evaluation.trained_run`).

``evaluate_policy`` takes loaded models and returns a flat, JSON-ready dict: the rows of the
readout table (:data:`badpo.readouts.table.READOUTS`, one module each under
:mod:`badpo.readouts.rows`) read in order; the experiment runner stores it keyed by (method,
params, seed) and tables are rendered from those files only.
What is read (Appendix Readouts): the names rate from probabilities with the answer body fixed
(first name and whole signature) and sampled signatures when a names attribute is declared, each
with its per-name shares and cell shares, the first-name rates per prompt beside the reference's
(``names.reference``), and ``names.null``, the relabelling null of the shift
from the reference (:mod:`badpo.readouts.names_analyses`), KL to
the reference on the policy's own generations, each declared attribute on those generations
(beside the reference's when they are given), mean token count (the length readout) beside the
samples' EOS rate, raw markdown rate and words, the checker's accuracy of the samples when the
evaluation prompts carry a question's ``kind`` and ``expected`` answer (:mod:`badpo.readouts.checked`),
length and markdown from probabilities with the body fixed when the evaluation prompts carry
``candidates`` (the tiny and the real-model length-and-format worlds), the
markdown rate reweighted onto the reference's lengths when markdown is declared, held-out
accuracy on same- and cross-group judgments and the gap (per attribute under ``heldout``, and
under ``heldout_any`` with a pair cross-group when it differs on any declared attribute: the one
Gap of Table tab:offset over both name attributes), vote prediction with the run's own
theta_k (and the planted ceiling), the learned level (``theta_mean``, the mean of the theta_k, and
``theta_shared``, the raw shared parameter the paper quotes as theta_bar, for the variants that
have one), theta recovery against planted values, and with a judge its score RM and, when a
declared attribute can be stripped from a text, RM⁻ on the stripped texts.
A readout without its input (no held-out judgments; a ``given:`` attribute on generated text) is
left out and named with the reason under ``skipped``.
EM-DPO's type policies are read through it by :mod:`badpo.readouts.mixture_reading`;
``evaluate_reward_model`` reads a reward model (``badpo rm``): its tilt toward each declared attribute
on counterfactual pairs (:mod:`badpo.readouts.tilt`) and its held-out same/cross accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import nn

from badpo.core.bias import BiasChannel
from badpo.engine.settings import BETA
from badpo.engine.tokenize import TokenizationConfig
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.model import Generations
from badpo.readouts.reading import Corpus, Reading, declares_names
from badpo.readouts.rows.generated import generated_attribute_rates
from badpo.readouts.rows.judge import judge_readouts
from badpo.readouts.rows.names import reference_bodies
from badpo.readouts.table import read_run
from badpo.readouts.tilt import answer_body

__all__ = ["Corpus", "EvalConfig", "answer_body", "declares_names", "evaluate_policy",
           "evaluate_reward_model", "generated_attribute_rates", "judge_readouts", "reference_bodies"]


def evaluate_policy(policy: nn.Module, reference: nn.Module, tokenizer, corpus: Corpus, config: EvalConfig,
                    bias: BiasChannel | None = None, beta: float = BETA,
                    tokenization: TokenizationConfig = TokenizationConfig(),
                    bodies: Sequence[str] | None = None,
                    reference_samples: Generations | None = None,
                    margins: torch.Tensor | None = None,
                    reference_readouts: Mapping | None = None,
                    vote_bias: BiasChannel | None = None, cache_dir: str | Path | None = None) -> dict:
    """Every readout of one policy, as a flat JSON-ready dict (see the module docstring).

    ``bias`` is the run's saved theta (the theta readouts); ``vote_bias``, when the run saved it
    apart, the theta the policy was trained against (``bias.trusted_level: final`` moves theta
    after training: :data:`badpo.run_folder.layout.TRAINED_THETA_FILE`), which vote prediction pairs with
    the policy's u (default: ``bias``).

    ``reference_samples`` (the reference's generations, same prompts and decoder) are needed by
    the markdown readout when ``markdown`` is declared (sampled here when not given) and give the
    reference's side of ``attribute_rates`` and of the sampled ``names.null``. ``margins`` are the
    policy's held-out u (:func:`heldout_margins`) when already computed. ``reference_readouts``
    (the reference's own record, as an experiment keeps it) give the reference's per-name shares
    for ``names.null`` and its first-name rates for ``names.reference``; without them its
    first-name readout is read here (:func:`reference_names`). ``cache_dir``: where the reference's
    side of the held-out margins is kept for every policy read against it on the same judgments
    (an experiment's ``OUT/reference_cache``; None: computed here).
    """
    return read_run(Reading(policy, reference, tokenizer, corpus, config, bias, beta, tokenization, bodies,
                            reference_samples, margins, reference_readouts, vote_bias, cache_dir))


def evaluate_reward_model(judge: nn.Module, tokenizer, corpus: Corpus, config: EvalConfig,
                          bias: BiasChannel | None = None) -> dict:
    """The readouts of a reward model, scored as ``badpo evaluate``'s judge scores
    (:meth:`badpo.readouts.reading.Reading.scores`): the rows of the readout table that read a
    reward model (``Readout.read_reward_model``), through :func:`badpo.readouts.table.read_run`.

    ``heldout``: accuracy of r(y_w) - r(y_l) on the held-out judgments, same- vs cross-group per
    attribute, and the gap; ``heldout_any`` the same with a pair cross-group on any attribute.
    ``tilt``: :func:`badpo.readouts.metrics.reward_tilt` per declared attribute on counterfactual
    pairs of the held-out responses, with ``edit`` saying how the pair differs; an attribute without
    pairs is named under ``skipped`` with the reason. With a learned theta, ``theta_mean``,
    ``theta_shared`` (variants with a shared parameter) and, against planted values, ``theta_recovery``.
    """
    return read_run(Reading(judge, None, tokenizer, corpus, config, bias, kind="reward_model"))
