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
``evaluate_mixture`` reads a mixture of type policies (EM-DPO + MinMax-DPO) through the same readouts;
``evaluate_reward_model`` reads a reward model (``badpo rm``): its tilt toward each declared attribute
on counterfactual pairs (:mod:`badpo.readouts.tilt`) and its held-out same/cross accuracy.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from badpo.core.attributes import resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.engine.settings import BETA
from badpo.engine.tokenize import TokenizationConfig
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.mixture_metrics import weighted_mean_readouts
from badpo.readouts.model import Generations, generate, heldout_margins
from badpo.readouts.reading import Corpus, Mixing, Reading, declares_names
from badpo.readouts.rows.generated import generated_attribute_rates
from badpo.readouts.rows.judge import judge_readouts
from badpo.readouts.rows.names import bodies_for, reference_bodies, reference_names
from badpo.readouts.table import READOUTS, read_run
from badpo.readouts.tilt import answer_body
from badpo.run_folder.layout import MIXTURE_FILE

__all__ = ["Corpus", "EvalConfig", "Mixture", "answer_body", "declares_names", "evaluate_mixture", "evaluate_policy",
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


@dataclass(frozen=True)
class Mixture:
    """A trained mixture of type policies (EM-DPO + MinMax-DPO), as its ``mixture.json`` states it."""

    weights: tuple[float, ...]  # w over the K type policies
    type_probabilities: dict[str, list[float]]  # annotator -> gamma [K]
    priors: tuple[float, ...]  # the mixing proportions: the gamma of an annotator never seen
    policies: tuple[Path, ...]  # the K policy folders

    @classmethod
    def load(cls, run_dir: str | Path) -> Mixture | None:
        """The mixture of a finished run folder, or None for a run of one policy."""
        path = Path(run_dir) / MIXTURE_FILE
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("policies") is None:
            raise FileNotFoundError(f"{path}: the type policies were not saved (save_policy: false); "
                                    "nothing to evaluate")
        return cls(tuple(data["weights"]), data["type_probabilities"], tuple(data["priors"]),
                   tuple(Path(run_dir) / p for p in data["policies"]))


def evaluate_mixture(load_policy, mixture: Mixture, reference: nn.Module, tokenizer, corpus: Corpus,
                     config: EvalConfig, beta: float = BETA,
                     tokenization: TokenizationConfig = TokenizationConfig(),
                     bodies: Sequence[str] | None = None,
                     reference_samples: Generations | None = None,
                     reference_readouts: Mapping | None = None, cache_dir: str | Path | None = None) -> dict:
    """Every readout of a mixture of type policies (Baselines appendix, EM-DPO + MinMax-DPO).

    Each readout is the w-weighted mean of the type policies' readouts
    (:func:`badpo.readouts.mixture_metrics.weighted_mean_readouts`), except where a row of the readout table
    says how its mixture differs (``Readout.mixed``, given a :class:`badpo.readouts.reading.Mixing`):
    per-prompt values, the sampled names' shares as ratios of the mixed counts, names.null of the
    mixed shares; vote prediction, where a held-out vote is predicted by its own annotator's mixture,
    p = sum_k gamma_k sigmoid(u_k) (:func:`badpo.readouts.mixture_metrics.mixture_vote_logits`; an annotator
    absent from training gets the priors); and, with planted classes, ``type_recovery``: whether
    the most probable types are the classes. ``load_policy(path)`` loads one type policy; one is
    held in memory at a time.
    ``reference_samples`` and ``reference_readouts`` are as for :func:`evaluate_policy`, shared by
    the K policies; ``names.null`` is that of the mixture's per-name shares. The reference's side
    of the held-out margins is computed once for the K policies (kept in ``cache_dir``, else in a
    scratch folder removed on return).
    """
    rows = corpus.eval_prompts[: config.max_prompts]
    attributes = resolve_attributes(config.attributes)
    if bodies is None and declares_names(attributes) and config.body != "own":
        bodies = bodies_for(rows, config, reference, reference, tokenizer, tokenization)  # once for all K
    if reference_samples is None and config.generations and "markdown" in attributes.kinds:
        reference_samples = generate(reference, tokenizer, [row["prompt"] for row in rows], config.temperature,
                                     config.top_p, config.max_new_tokens, config.seed, config.batch_size,
                                     tokenization, "reference answers")
    if reference_readouts is None and declares_names(attributes):  # read once for all K
        reference_readouts = reference_names(reference, tokenizer, rows, config, tokenization, bodies,
                                             reference_samples)
    type_readouts, type_margins = [], []
    with tempfile.TemporaryDirectory(prefix="badpo-heldout-") as scratch:
        for path in mixture.policies:
            policy = load_policy(path)
            margins = (heldout_margins(policy, reference, tokenizer, corpus.heldout, beta, tokenization,
                                       config.batch_size, cache_dir or scratch) if corpus.heldout else None)
            type_readouts.append(evaluate_policy(policy, reference, tokenizer, corpus, config, beta=beta,
                                                 tokenization=tokenization, bodies=bodies,
                                                 reference_samples=reference_samples, margins=margins,
                                                 reference_readouts=reference_readouts))
            type_margins.append(margins)
            del policy
    result = weighted_mean_readouts(type_readouts, mixture.weights)
    result["mixture"] = {"weights": list(mixture.weights), "types": type_readouts}
    mixing = Mixing(type_readouts, mixture.weights, reference_readouts, corpus, attributes,
                    type_margins if corpus.heldout else None, mixture.type_probabilities, mixture.priors)
    for row in READOUTS:  # where a row's mixture is not the w-mean of its types'
        if row.mixed is not None:
            row.mixed(result, mixing)
    return result


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
