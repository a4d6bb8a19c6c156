"""Reading EM-DPO's mixture of type policies: the one adapter between a run of several policies
and the readout table (Baselines appendix, EM-DPO + MinMax-DPO).

A run of several policies saves ``mixture.json`` (:data:`badpo.run_folder.layout.MIXTURE_FILE`):
the K type policies, their weights w, each annotator's type probabilities gamma and the priors.
:func:`evaluate_mixture` reads each type policy through the same rows as any policy
(:func:`badpo.readouts.evaluate_policy.evaluate_policy`), takes the w-weighted mean of their
readings key by key (:func:`badpo.readouts.mixture_metrics.weighted_mean_readouts`), then applies
:data:`COMBINED`: the readouts whose mixture is not that mean. The readout rows know nothing of
mixtures; a readout whose mixture differs from the mean adds its function to :data:`COMBINED`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from badpo.core.attributes import AttributeSet, resolve_attributes
from badpo.engine.settings import BETA
from badpo.engine.tokenize import TokenizationConfig
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.evaluate_policy import evaluate_policy
from badpo.readouts.mixture_metrics import (
    mixture_vote_logits,
    type_class_agreement,
    weighted_mean_readouts,
    weighted_values,
)
from badpo.readouts.model import Generations, generate, heldout_margins
from badpo.readouts.names_analyses import sampled_shares
from badpo.readouts.reading import Corpus, declares_names
from badpo.readouts.rows.generated import compact_values
from badpo.readouts.rows.heldout import attribute_values, planted_annotators, vote_readouts
from badpo.readouts.rows.names import bodies_for, names_against_reference, reference_names
from badpo.run_folder.layout import MIXTURE_FILE

__all__ = ["COMBINED", "Mixing", "Mixture", "evaluate_mixture"]


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


@dataclass(frozen=True)
class Mixing:
    """What a function of :data:`COMBINED` gets beside the mixture's result (the w-mean of its
    types' readings), to write where that mean is not the mixture's reading."""

    types: Sequence[Mapping]  # each type policy's reading, in type order
    weights: Sequence[float]  # w over the K types
    reference: Mapping | None  # the reference's readouts, shared by the K types
    corpus: Corpus
    attributes: AttributeSet
    type_margins: Sequence[torch.Tensor] | None  # each type's held-out u [N]; None without held-out judgments
    type_probabilities: Mapping[str, Sequence[float]]  # annotator -> gamma [K]
    priors: Sequence[float]  # the gamma of an annotator never seen in training


def evaluate_mixture(load_policy, mixture: Mixture, reference: nn.Module, tokenizer, corpus: Corpus,
                     config: EvalConfig, beta: float = BETA,
                     tokenization: TokenizationConfig = TokenizationConfig(),
                     bodies: Sequence[str] | None = None,
                     reference_samples: Generations | None = None,
                     reference_readouts: Mapping | None = None, cache_dir: str | Path | None = None) -> dict:
    """Every readout of a mixture of type policies (Baselines appendix, EM-DPO + MinMax-DPO).

    Each readout is the w-weighted mean of the type policies' readouts, except those of
    :data:`COMBINED`: per-prompt values, the sampled names' shares as ratios of the mixed counts,
    names.null of the mixed shares; vote prediction, where a held-out vote is predicted by its own
    annotator's mixture, p = sum_k gamma_k sigmoid(u_k) (an annotator absent from training gets
    the priors); and, with planted classes, ``type_recovery``: whether the most probable types are
    the classes. ``load_policy(path)`` loads one type policy; one is held in memory at a time.
    ``reference_samples`` and ``reference_readouts`` are as for
    :func:`~badpo.readouts.evaluate_policy.evaluate_policy`, shared by the K policies; the
    reference's side of the held-out margins is computed once for the K policies (kept in
    ``cache_dir``, else in a scratch folder removed on return).
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
    for combine in COMBINED:
        combine(result, mixing)
    return result


# ------------------------------------------------- the readouts whose mixture is not the w-mean

def _first_name_per_prompt(result: dict, mixing: Mixing) -> None:
    """Per-prompt first-name rates: each prompt's w-weighted mean over the types."""
    per_prompt = result.get("names", {}).get("per_prompt")
    if isinstance(per_prompt, dict):
        parts = [readouts["names"]["per_prompt"]["first_name"] for readouts in mixing.types]
        per_prompt["first_name"] = {name: compact_values(weighted_values([part[name] for part in parts],
                                                                         mixing.weights))
                                    for name in parts[0]}


def _votes(result: dict, mixing: Mixing) -> None:
    """Vote prediction: a held-out vote is predicted by its own annotator's mixture,
    p = sum_k gamma_k sigmoid(u_k) (:func:`badpo.readouts.mixture_metrics.mixture_vote_logits`; an
    annotator absent from training gets the priors), not by the w-mean of the types' predictions."""
    if mixing.type_margins is None:
        return
    heldout = mixing.corpus.heldout
    gamma = [mixing.type_probabilities.get(j.annotator, list(mixing.priors)) for j in heldout]
    logits = mixture_vote_logits(torch.stack(list(mixing.type_margins)).numpy(), gamma)
    g_w, g_l = attribute_values(heldout, mixing.attributes)
    result.update(vote_readouts(logits, heldout, g_w, g_l, mixing.attributes.names, None, mixing.corpus.planted))
    result["votes_unseen_annotator_judgments"] = sum(1 for j in heldout if j.annotator not in mixing.type_probabilities)


def _sampled_shares(result: dict, mixing: Mixing) -> None:
    """The sampled-signature shares: ratios of the w-mixed counts, not the w-mean of ratios."""
    if isinstance(result.get("sampled", {}).get("per_name"), dict):
        result["sampled"].update(sampled_shares(result["sampled"]["per_name"]))


def _attribute_rates_per_prompt(result: dict, mixing: Mixing) -> None:
    """Per-prompt values of each attribute rate: each prompt's w-weighted mean over the types
    (their mean over prompts is the mixture's rate), which the key-by-key w-mean leaves out where
    the types' lists differ."""
    for name, rate in result.get("attribute_rates", {}).items():
        parts = [readouts["attribute_rates"][name]["per_prompt"] for readouts in mixing.types]
        rate["per_prompt"] = {side: compact_values(weighted_values([part[side] for part in parts], mixing.weights))
                              for side in parts[0]}


def _against_reference(result: dict, mixing: Mixing) -> None:
    """names.null and names.reference of the mixture's own shares (linear in the types')."""
    names_against_reference(result, mixing.reference)


def _type_recovery(result: dict, mixing: Mixing) -> None:
    """With planted classes, whether the most probable types are the annotator classes
    (:func:`badpo.readouts.mixture_metrics.type_class_agreement`); read beside vote prediction."""
    if mixing.type_margins is None or mixing.corpus.planted is None:
        return
    _, classes = planted_annotators(mixing.corpus.planted)
    result["type_recovery"] = type_class_agreement(mixing.type_probabilities, classes)


# in the order of the rows they stand for (badpo.readouts.table.READOUTS): the names row, held-out
# judgments, sampled signatures, attribute rates, names against the reference (which reads the
# mixed shares the earlier ones wrote), the types
COMBINED: tuple[Callable[[dict, Mixing], None], ...] = (
    _first_name_per_prompt, _votes, _sampled_shares, _attribute_rates_per_prompt, _against_reference, _type_recovery)
