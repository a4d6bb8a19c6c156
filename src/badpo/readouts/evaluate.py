"""Evaluate a trained policy on evaluation prompts and held-out judgments: every readout of the
paper for one run (a run folder and the user's files: :mod:`badpo.readouts.run`).

``evaluate_policy`` takes loaded models and returns a flat, JSON-ready dict; the experiment
runner stores it keyed by (method, params, seed) and tables are rendered from those files only.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from badpo.core.attributes import AttributeSet, attribute_stripper, has_markdown, resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.core.judgments import Judgment, read_judgments
from badpo.core.names import NAME_ATTRIBUTES, read_signature
from badpo.engine.mixture import MIXTURE_FILE
from badpo.engine.settings import BETA
from badpo.engine.tokenize import TokenizationConfig, encode_prompts
from badpo.readouts.checked import checked_readout
from badpo.readouts.metrics import (
    heldout_accuracy,
    reward_tilt,
    reweighted_rate,
    sampled_signature_rates,
    theta_recovery,
    vote_prediction,
)
from badpo.readouts.mixture import mixture_vote_logits, type_class_agreement, weighted_mean_readouts
from badpo.readouts.model import (
    Generations,
    cut_at_eos,
    format_readout,
    generate,
    generation_kl,
    heldout_margins,
    judge_scores,
    load_judge,
    names_readout,
    plain_decoding,
    progress,
    sampled_text_readout,
)
from badpo.readouts.names_analyses import names_null_readouts, names_reference, sampled_names, sampled_shares
from badpo.readouts.settings import EvalConfig
from badpo.readouts.tilt import answer_body, counterfactual_pairs


@dataclass(frozen=True)
class Corpus:
    """The files of a built corpus folder that evaluation reads."""

    eval_prompts: list[dict]
    heldout: list[Judgment]
    planted: dict | None  # annotator -> (class, theta), for scoring only

    @classmethod
    def load(cls, folder: str | Path) -> Corpus:
        folder = Path(folder)
        prompts = []
        path = folder / "eval_prompts.jsonl"
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"]:
                    raise ValueError(f"{path}:{number}: an evaluation prompt needs a non-empty 'prompt'")
                prompts.append(row)
        planted_path = folder / "planted.json"
        planted = json.loads(planted_path.read_text()) if planted_path.exists() else None
        return cls(prompts, read_judgments(folder / "heldout.jsonl"), planted)

    @property
    def surnames(self) -> list[str]:
        """The surnames the corpus signs with (read from its held-out signatures), for the
        whole-signature marginal."""
        found = {signature[1] for j in self.heldout for text in (j.chosen, j.rejected)
                 if (signature := read_signature(text)) is not None}
        return sorted(found)


def reference_bodies(reference: nn.Module, tokenizer, prompts: Sequence[str],
                     tokenization: TokenizationConfig, max_new_tokens: int) -> list[str]:
    """The reference's greedy answer to each prompt, through its first EOS, with its signature
    cut off (:func:`answer_body`): the fixed body after which every arm's name probabilities are
    read (one body for all arms). Text after EOS is not part of the answer."""
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    device = next(reference.parameters()).device
    bodies = []
    for ids in progress(encode_prompts(tokenizer, prompts, tokenization), "reference answer bodies"):
        ids = torch.tensor([ids[-tokenization.max_prompt_tokens:]], device=device)
        with plain_decoding(reference):
            out = reference.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                     max_new_tokens=max_new_tokens, pad_token_id=pad, eos_token_id=eos)
        answer = cut_at_eos(out[0, ids.shape[1]:].tolist(), eos)
        bodies.append(answer_body(tokenizer.decode(answer, skip_special_tokens=True)))
    return bodies


def _planted_theta(planted: dict) -> tuple[dict[str, list[float]], dict[str, str]]:
    theta = {a["annotator"]: a["theta"] for a in planted["annotators"]}
    classes = {a["annotator"]: a["annotator_class"] for a in planted["annotators"]}
    return theta, classes


def _own_bias_logits(bias: BiasChannel, heldout: Sequence[Judgment], diff: torch.Tensor,
                     names: Sequence[str]) -> tuple[torch.Tensor, int]:
    """b = (theta_k + offset) . dg of each held-out judgment with the run's own theta, [N], and the
    number of judgments whose annotator the run never saw (they get theta_bar: pooled and DPO give
    every annotator the same theta anyway)."""
    columns = diff[:, [list(names).index(name) for name in bias.attribute_names]]
    with torch.no_grad():
        mean = bias.mean().double()
        position = {a: i for i, a in enumerate(bias.annotators)} if bias.facts.per_annotator else {}
        theta = bias.theta().double() if position else None
        rows = [theta[position[j.annotator]] if j.annotator in position else mean for j in heldout]
        per_judgment = torch.stack(rows) + bias.fixed_offset.double()
    unseen = sum(1 for j in heldout if position and j.annotator not in position)
    return (per_judgment * columns).sum(dim=1), unseen


def _vote_readouts(margins: torch.Tensor, heldout: Sequence[Judgment], g_w: np.ndarray, g_l: np.ndarray,
                   names: Sequence[str], bias: BiasChannel | None, planted: dict | None) -> dict:
    """Vote prediction by the sign of u + theta_k . (g_w - g_l) on the held-out judgments that are
    cross-group on each attribute in turn: with the run's own theta_k, and with the planted ones
    (the ceiling). DPO (no bias channel) predicts with u alone."""
    diff = torch.tensor(g_w - g_l, dtype=torch.float64)
    classes = [j.annotator_class for j in heldout]
    own, unseen = torch.zeros(len(heldout), dtype=torch.float64), 0
    if bias is not None:
        own, unseen = _own_bias_logits(bias, heldout, diff, names)
    ceiling = None
    if planted is not None:
        theta, _ = _planted_theta(planted)
        planted_names = planted["attribute_names"]
        # an attribute the labels were not drawn with has a planted theta of 0
        planted_theta = torch.tensor(
            [[theta[j.annotator][planted_names.index(n)] if n in planted_names else 0.0 for n in names]
             for j in heldout], dtype=torch.float64)
        ceiling = (planted_theta * diff).sum(dim=1)
    result: dict = {"votes_unseen_annotator_judgments": unseen}
    for a, name in enumerate(names):
        cross = diff[:, a] != 0
        result[f"votes/{name}"] = vote_prediction(margins, own, cross, classes)
        if ceiling is not None:
            result[f"votes_ceiling/{name}"] = vote_prediction(margins, ceiling, cross, classes)
    return result


def _bodies(rows: Sequence[dict], config: EvalConfig, policy: nn.Module, reference: nn.Module, tokenizer,
            tokenization: TokenizationConfig) -> list[str]:
    """The bodies the names are read after (``evaluation.body``): the reference's greedy answers,
    the read model's own (``own``: ``policy``'s, read the same way), or the prompts' ``body``."""
    if config.body in ("reference", "own"):
        model = reference if config.body == "reference" else policy
        return reference_bodies(model, tokenizer, [row["prompt"] for row in rows], tokenization,
                                config.max_new_tokens)
    missing = [i for i, row in enumerate(rows) if not isinstance(row.get("body"), str)]
    if missing:
        raise ValueError(f"evaluation.body is 'given' but evaluation prompts {missing[:5]} have no 'body' "
                         "field; use evaluation.body=reference")
    return [row["body"] for row in rows]


def _theta_readouts(bias: BiasChannel, planted: dict | None) -> dict:
    """The learned level per attribute and, against planted values, the recovery of every theta_k.

    ``theta_mean`` is the mean of the theta_k (Corollary "Reward-bias degeneracy"); ``theta_shared``
    the raw shared parameter, the theta_bar the paper's text quotes (pooled: its one theta, equal to
    the mean; theta_bar + eps_k: theta_bar, which differs from the mean by mean_k eps_k, not held at
    0 in training). A variant without a shared parameter (per_annotator) writes no ``theta_shared``.
    """
    names = list(bias.attribute_names)
    result = {"theta_mean": dict(zip(names, bias.mean().tolist()))}
    if bias.facts.shared_parameter is not None:
        result["theta_shared"] = dict(zip(names, bias.shared_parameter().tolist()))
    if planted is not None and bias.facts.per_annotator:
        theta, classes = _planted_theta(planted)
        # over the planted attributes, and the annotators the run learned (one absent from
        # training has no theta to recover)
        shared = [(i, planted["attribute_names"].index(n)) for i, n in enumerate(names)
                  if n in planted["attribute_names"]]
        learned = {a: [row[i] for i, _ in shared] for a, row in zip(bias.annotators, bias.theta().tolist())}
        planted_theta = {a: [theta[a][c] for _, c in shared] for a in learned if a in theta}
        result["theta_recovery"] = theta_recovery(learned, planted_theta, classes,
                                                  [names[i] for i, _ in shared])
    return result


def _markdown_readout(samples: Generations, reference_samples: Generations) -> dict:
    """The markdown rate of the generations reweighted onto the reference generations' token-count
    distribution (five quantile bins), so that shorter answers alone cannot lower it."""
    flags = [float(has_markdown(text)) for text in samples.texts]
    return reweighted_rate(flags, samples.token_counts, reference_samples.token_counts, bins=5)


def reference_names(reference: nn.Module, tokenizer, rows: Sequence[dict], config: EvalConfig,
                    tokenization: TokenizationConfig, bodies: Sequence[str] | None,
                    reference_samples: Generations | None) -> dict:
    """The reference's side of ``names.null``: its first-name readout after the bodies the
    policy's names are read after (under ``body: own`` its own), and its sampled signatures when
    its generations are given. ``bodies`` may be None (read here)."""
    if bodies is None or config.body == "own":
        bodies = _bodies(rows, config, reference, reference, tokenizer, tokenization)
    side: dict = {"names": names_readout(reference, tokenizer, [row["prompt"] for row in rows], bodies,
                                         None, tokenization)}
    if reference_samples is not None:
        side["sampled"] = _sampled_readout(reference_samples.texts)
    return side


def _sampled_readout(texts: Sequence[str]) -> dict:
    """Rates from sampled signatures and what they record per name (``per_name``, ``cells``)."""
    return {**sampled_signature_rates(list(texts)), **sampled_names(texts)}


def _names_readouts(policy: nn.Module, reference: nn.Module, tokenizer, corpus: Corpus, config: EvalConfig,
                    tokenization: TokenizationConfig, bodies: Sequence[str] | None,
                    reference_readouts: Mapping | None) -> tuple[dict, Mapping | None]:
    """(the policy's names readout, the reference's side of ``names.null`` and ``names.reference``):
    the reference's readouts as given, or with its first names read here when they hold no per-name
    shares or no per-prompt first-name rates (none given, or a record read before badpo recorded them)."""
    rows = corpus.eval_prompts[: config.max_prompts]
    bodies = bodies if bodies is not None else _bodies(rows, config, policy, reference, tokenizer, tokenization)
    surnames = corpus.surnames[: config.surnames] if config.whole_signature else None
    readout = names_readout(policy, tokenizer, [row["prompt"] for row in rows], bodies, surnames, tokenization,
                            whole_signature_prompts=config.whole_signature_prompts)
    recorded = (reference_readouts or {}).get("names", {})
    if policy is not reference and ("per_name" not in recorded or "first_name" not in recorded.get("per_prompt", {})):
        reference_readouts = {**(reference_readouts or {}),
                              **reference_names(reference, tokenizer, rows, config, tokenization, bodies, None)}
    return readout, reference_readouts


def _names_null(result: dict, reference_side: Mapping | None, reference_samples: Generations | None = None) -> None:
    """``names.null`` of ``result`` against ``reference_side`` (the reference's readouts; its
    sampled signatures from ``reference_samples`` when it records none), in place:
    :func:`badpo.readouts.names_analyses.names_null_readouts`; left out when nothing has both sides."""
    names = result.get("names")
    if not isinstance(names, dict) or reference_side is None:
        return
    if reference_samples is not None and "per_name" not in reference_side.get("sampled", {}):
        reference_side = {**reference_side, "sampled": _sampled_readout(reference_samples.texts)}
    names.pop("null", None)
    null = names_null_readouts(result, reference_side)
    if null:
        names["null"] = null


def _names_against_reference(result: dict, reference_side: Mapping | None,
                             reference_samples: Generations | None = None) -> None:
    """``names.null`` and ``names.reference`` of ``result``, in place (:func:`_names_null`,
    names_analyses.names_reference)."""
    _names_null(result, reference_side, reference_samples)
    names_reference(result, reference_side)


def declares_names(attributes: AttributeSet) -> bool:
    """Whether a names coordinate is declared (by what it is, whatever it is called): the names
    readouts exist only then."""
    return any(kind in NAME_ATTRIBUTES for kind in attributes.kinds)


def generated_attribute_rates(attributes: AttributeSet, samples: Generations,
                              reference_samples: Generations | None) -> tuple[dict, dict]:
    """Each declared attribute on the policy's generations and, when given, the reference's (same
    prompts, decoder and seed): how often the policy produces what the labels were biased toward.

    A response-level attribute gives its mean value, the rate of a 0/1 attribute
    (``{"policy", "reference", "n"}``). A pair-level one (length) is defined on two answers to one
    prompt: the policy's against the reference's, its two values averaged over the prompts (for
    ``length``: the share of prompts where the policy's answer has ``ratio`` times the reference's
    words, and the other way round), beside the mean token counts of both. A ``given:`` attribute
    has no value on a new text. ``per_prompt`` holds the values each mean is taken over, one per
    prompt in prompt order (:func:`compact_values`), for intervals over prompts. Returns (rates by
    attribute name, {readout: why it is skipped}).
    """
    if reference_samples is not None and reference_samples.prompts != samples.prompts:
        raise ValueError("the reference's generations answer other prompts than the policy's")
    others = reference_samples.texts if reference_samples is not None else samples.texts
    rates: dict = {}
    skipped: dict = {}
    for attribute in attributes.attributes:
        key = f"attribute_rates.{attribute.name}"
        if attribute.level == "given":
            skipped[key] = "a given: attribute is read from the data's precomputed values; a generated answer has none"
            continue
        if attribute.level == "pair" and reference_samples is None:
            skipped[key] = ("a pair-level attribute compares the policy's answer with the reference's; "
                            "no reference generations")
            continue
        values = np.array([attribute.values(prompt, text, other)
                           for prompt, text, other in zip(samples.prompts, samples.texts, others)]).reshape(-1, 2)
        rates[attribute.name] = {"policy": float(values[:, 0].mean()), "n": len(samples.texts)}
        per_prompt = {"policy": values[:, 0]}
        if reference_samples is not None:
            rates[attribute.name]["reference"] = float(values[:, 1].mean())
            per_prompt["reference"] = values[:, 1]
        if attribute.level == "pair":
            rates[attribute.name].update(policy_tokens=float(np.mean(samples.token_counts)),
                                         reference_tokens=float(np.mean(reference_samples.token_counts)))
            per_prompt.update(policy_tokens=samples.token_counts, reference_tokens=reference_samples.token_counts)
        rates[attribute.name]["per_prompt"] = {side: compact_values(v) for side, v in per_prompt.items()}
    return rates, skipped


def compact_values(values) -> list[float | int]:
    """Per-prompt values for readouts.json, in prompt order: a whole number as an int (a 0/1 flag
    or a token count is written as 0 / 1 / 57, not 0.0), any other value as it is, so that their
    mean is the recorded rate exactly and ``badpo compare`` can resample the prompts."""
    return [int(v) if float(v).is_integer() else float(v) for v in np.asarray(values, dtype=np.float64)]


def _heldout_readouts(margins: torch.Tensor, corpus: Corpus, attributes: AttributeSet,
                      vote_bias: BiasChannel | None, skipped: dict) -> dict:
    """Held-out accuracy (per attribute and on any) and vote prediction with ``vote_bias``, the
    theta the policy was trained against; why votes are not read goes into ``skipped``."""
    values = [attributes.judgment_values(j) for j in corpus.heldout]
    g_w = np.array([v[0] for v in values])
    g_l = np.array([v[1] for v in values])
    result = {"heldout": {name: heldout_accuracy(margins, g_w[:, [a]], g_l[:, [a]])
                          for a, name in enumerate(attributes.names)},
              "heldout_any": heldout_accuracy(margins, g_w, g_l)}
    theta_names = vote_bias.attribute_names if vote_bias is not None else ()
    undeclared = [name for name in theta_names if name not in attributes.names]
    if undeclared:  # u + theta_k . dg needs dg on every attribute the run's theta is on
        skipped["votes"] = (f"the run's theta is on {undeclared}, which evaluation.attributes does not "
                            "declare; declare them too for vote prediction")
    else:
        result.update(_vote_readouts(margins, corpus.heldout, g_w, g_l, attributes.names, vote_bias,
                                     corpus.planted))
    return result


def evaluate_policy(policy: nn.Module, reference: nn.Module, tokenizer, corpus: Corpus, config: EvalConfig,
                    bias: BiasChannel | None = None, beta: float = BETA,
                    tokenization: TokenizationConfig = TokenizationConfig(),
                    bodies: Sequence[str] | None = None,
                    reference_samples: Generations | None = None,
                    margins: torch.Tensor | None = None,
                    reference_readouts: Mapping | None = None,
                    vote_bias: BiasChannel | None = None) -> dict:
    """Every readout of one policy, as a flat JSON-ready dict (see the module docstring).

    ``bias`` is the run's saved theta (the theta readouts); ``vote_bias``, when the run saved it
    apart, the theta the policy was trained against (``bias.trusted_level: final`` moves theta
    after training: :data:`badpo.core.bias.TRAINED_THETA_FILE`), which vote prediction pairs with
    the policy's u (default: ``bias``).

    ``reference_samples`` (the reference's generations, same prompts and decoder) are needed by
    the markdown readout when ``markdown`` is declared (sampled here when not given) and give the
    reference's side of ``attribute_rates`` and of the sampled ``names.null``. ``margins`` are the
    policy's held-out u (:func:`heldout_margins`) when already computed. ``reference_readouts``
    (the reference's own record, as an experiment keeps it) give the reference's per-name shares
    for ``names.null`` and its first-name rates for ``names.reference``; without them its
    first-name readout is read here (:func:`reference_names`).
    """
    rows = corpus.eval_prompts[: config.max_prompts]
    prompts = [row["prompt"] for row in rows]
    attributes = resolve_attributes(config.attributes)
    names = declares_names(attributes)
    result: dict = {}
    skipped: dict = {}
    if names:
        result["names"], reference_readouts = _names_readouts(policy, reference, tokenizer, corpus, config,
                                                              tokenization, bodies, reference_readouts)
    if rows and all("candidates" in row for row in rows):  # length and markdown with the body fixed
        result["candidates"] = format_readout(policy, tokenizer, rows, tokenization, config.batch_size)

    if corpus.heldout:
        if margins is None:
            margins = heldout_margins(policy, reference, tokenizer, corpus.heldout, beta, tokenization,
                                      config.batch_size)
        result.update(_heldout_readouts(margins, corpus, attributes, bias if vote_bias is None else vote_bias,
                                        skipped))
    else:
        skipped["heldout"] = skipped["votes"] = "no held-out judgments"
    if bias is not None and bias.facts.learns_theta:
        result.update(_theta_readouts(bias, corpus.planted))

    if config.generations:
        samples = generate(policy, tokenizer, prompts, config.temperature, config.top_p,
                           config.max_new_tokens, config.seed, config.batch_size, tokenization, "policy answers")
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        result["kl"] = generation_kl(policy, reference, samples, pad, config.batch_size)
        if names:
            result["sampled"] = _sampled_readout(samples.texts)
        result["tokens"] = float(np.mean(samples.token_counts))
        result["sampled_text"] = sampled_text_readout(samples, tokenizer.eos_token_id)
        result.update(checked_readout(rows, samples.texts))  # prompts with a checker: its accuracy
        if reference_samples is None and policy is reference:
            reference_samples = samples
        if "markdown" in attributes.names:
            if reference_samples is None:
                reference_samples = generate(reference, tokenizer, prompts, config.temperature, config.top_p,
                                             config.max_new_tokens, config.seed, config.batch_size,
                                             tokenization, "reference answers")
            result["markdown"] = _markdown_readout(samples, reference_samples)
        result["attribute_rates"], why = generated_attribute_rates(attributes, samples, reference_samples)
        skipped.update(why)
        if config.judge is not None:
            result.update(judge_readouts(config.judge, prompts, list(samples.texts), attributes.names,
                                         config.judge_max_tokens, next(policy.parameters()).device))
    if policy is not reference:
        _names_against_reference(result, reference_readouts, reference_samples)
    if skipped:
        result["skipped"] = skipped
    return result


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
                     reference_readouts: Mapping | None = None) -> dict:
    """Every readout of a mixture of type policies (Baselines appendix, EM-DPO + MinMax-DPO).

    Each readout is the w-weighted mean of the type policies' readouts
    (:func:`badpo.readouts.mixture.weighted_mean_readouts`), except the sampled names' shares, ratios
    of the mixed counts (:func:`badpo.readouts.names_analyses.sampled_shares`), and vote prediction: a held-out vote is
    predicted by its own annotator's mixture, p = sum_k gamma_k sigmoid(u_k)
    (:func:`badpo.readouts.mixture.mixture_vote_logits`; an annotator absent from training gets the
    priors). With planted classes, ``type_recovery`` says whether the most probable types are the
    classes. ``load_policy(path)`` loads one type policy; one is held in memory at a time.
    ``reference_samples`` and ``reference_readouts`` are as for :func:`evaluate_policy`, shared by
    the K policies; ``names.null`` is that of the mixture's per-name shares.
    """
    rows = corpus.eval_prompts[: config.max_prompts]
    attributes = resolve_attributes(config.attributes)
    if bodies is None and declares_names(attributes) and config.body != "own":
        bodies = _bodies(rows, config, reference, reference, tokenizer, tokenization)  # once for all K
    if reference_samples is None and config.generations and "markdown" in attributes.names:
        reference_samples = generate(reference, tokenizer, [row["prompt"] for row in rows], config.temperature,
                                     config.top_p, config.max_new_tokens, config.seed, config.batch_size,
                                     tokenization, "reference answers")
    if reference_readouts is None and declares_names(attributes):  # read once for all K
        reference_readouts = reference_names(reference, tokenizer, rows, config, tokenization, bodies,
                                             reference_samples)
    type_readouts, type_margins = [], []
    for path in mixture.policies:
        policy = load_policy(path)
        margins = (heldout_margins(policy, reference, tokenizer, corpus.heldout, beta, tokenization,
                                   config.batch_size) if corpus.heldout else None)
        type_readouts.append(evaluate_policy(policy, reference, tokenizer, corpus, config, beta=beta,
                                             tokenization=tokenization, bodies=bodies,
                                             reference_samples=reference_samples, margins=margins,
                                             reference_readouts=reference_readouts))
        type_margins.append(margins)
        del policy
    result = weighted_mean_readouts(type_readouts, mixture.weights)
    _mixture_per_prompt(result, type_readouts, mixture.weights)
    _names_against_reference(result, reference_readouts)  # of the mixture's shares (linear in the types')
    if isinstance(result.get("sampled", {}).get("per_name"), dict):  # ratios of counts: of the mixed counts
        result["sampled"].update(sampled_shares(result["sampled"]["per_name"]))
    result["mixture"] = {"weights": list(mixture.weights), "types": type_readouts}
    if not corpus.heldout:
        return result
    gamma = [mixture.type_probabilities.get(j.annotator, list(mixture.priors)) for j in corpus.heldout]
    logits = mixture_vote_logits(torch.stack(type_margins).numpy(), gamma)
    values = [attributes.judgment_values(j) for j in corpus.heldout]
    g_w, g_l = np.array([v[0] for v in values]), np.array([v[1] for v in values])
    result.update(_vote_readouts(logits, corpus.heldout, g_w, g_l, attributes.names, None, corpus.planted))
    result["votes_unseen_annotator_judgments"] = sum(
        1 for j in corpus.heldout if j.annotator not in mixture.type_probabilities)
    if corpus.planted is not None:
        _, classes = _planted_theta(corpus.planted)
        result["type_recovery"] = type_class_agreement(mixture.type_probabilities, classes)
    return result


def _mixture_per_prompt(result: dict, type_readouts: Sequence[dict], weights: Sequence[float]) -> None:
    """The mixture's per-prompt values of the attributes on generations and of the first-name
    rates: each prompt's w-weighted mean over the type policies (their mean over prompts is the
    mixture's rate), which the key-by-key mean of :func:`weighted_mean_readouts` leaves out when
    the types' lists differ."""
    for name, rate in result.get("attribute_rates", {}).items():
        parts = [readouts["attribute_rates"][name]["per_prompt"] for readouts in type_readouts]
        rate["per_prompt"] = {side: _weighted_values([part[side] for part in parts], weights) for side in parts[0]}
    per_prompt = result.get("names", {}).get("per_prompt")
    if isinstance(per_prompt, dict):
        parts = [readouts["names"]["per_prompt"]["first_name"] for readouts in type_readouts]
        per_prompt["first_name"] = {name: _weighted_values([part[name] for part in parts], weights)
                                    for name in parts[0]}


def _weighted_values(lists: Sequence[Sequence[float]], weights: Sequence[float]) -> list[float | int]:
    """Each prompt's w-weighted mean of K per-prompt lists (exactly their value where they agree)."""
    values = np.array(lists, dtype=np.float64)  # [K, P]
    shared = (values == values[0]).all(axis=0)
    return compact_values(np.where(shared, values[0], np.average(values, axis=0, weights=weights)))


def judge_readouts(judge_name: str, prompts: Sequence[str], texts: Sequence[str], names: Sequence[str],
                   max_tokens: int = 2048, device: torch.device | None = None) -> dict:
    """Mean judge score RM and, when a declared attribute (``names``, as in AttributeSet.names)
    has a stripper, RM⁻ on the texts with it removed; under length (none has) RM⁻ is left out,
    as in the paper."""
    judge, judge_tokenizer = load_judge(judge_name, device)

    def mean_score(strip) -> float:
        return float(np.mean(judge_scores(judge, prompts, texts, strip=strip, tokenizer=judge_tokenizer,
                                          max_tokens=max_tokens)))

    result = {"rm": mean_score(None)}
    strip = attribute_stripper(names)
    if strip is not None:
        result["rm_minus"] = mean_score(strip)
    return result


def evaluate_reward_model(judge: nn.Module, tokenizer, corpus: Corpus, config: EvalConfig,
                          bias: BiasChannel | None = None) -> dict:
    """The readouts of a reward model, scored as ``badpo evaluate``'s judge scores (judge_scores).

    ``heldout``: accuracy of r(y_w) - r(y_l) on the held-out judgments, same- vs cross-group per
    attribute, and the gap; ``heldout_any`` the same with a pair cross-group on any attribute.
    ``tilt``: :func:`badpo.readouts.metrics.reward_tilt` per declared attribute on counterfactual
    pairs of the held-out responses (:func:`badpo.readouts.tilt.counterfactual_pairs`: names
    swapped in the signature, or the attribute removed by its edit; the first ``max_prompts``
    responses), with ``edit`` saying how the pair differs; an attribute without pairs is named
    under ``skipped`` with the reason. With a learned theta, ``theta_mean``, ``theta_shared``
    (variants with a shared parameter) and, against planted values, ``theta_recovery``.
    """
    def score(prompts: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        return np.array(judge_scores(judge, prompts, texts, tokenizer=tokenizer, batch_size=config.batch_size,
                                     max_tokens=config.judge_max_tokens))

    attributes = resolve_attributes(config.attributes)
    heldout = corpus.heldout
    prompts = [j.prompt for j in heldout]
    margins = torch.tensor(score(prompts, [j.chosen for j in heldout]) - score(prompts, [j.rejected for j in heldout]))
    values = [attributes.judgment_values(j) for j in heldout]
    g_w, g_l = np.array([v[0] for v in values]), np.array([v[1] for v in values])
    result: dict = {"heldout": {name: heldout_accuracy(margins, g_w[:, [a]], g_l[:, [a]])
                                for a, name in enumerate(attributes.names)},
                    "heldout_any": heldout_accuracy(margins, g_w, g_l)}
    pairs, skipped = counterfactual_pairs(attributes, heldout, corpus.surnames, config.max_prompts, config.seed)
    if pairs:
        result["tilt"] = {name: {**reward_tilt(score(p.prompts, p.with_attribute), score(p.prompts, p.counterpart)),
                                 "edit": p.edit} for name, p in pairs.items()}
    if skipped:
        result["skipped"] = skipped
    if bias is not None and bias.facts.learns_theta:
        result.update(_theta_readouts(bias, corpus.planted))
    return result
