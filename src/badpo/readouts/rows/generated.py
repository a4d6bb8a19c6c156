"""The rows read on the policy's own generations (one sample per prompt, the same seed and
decoder for every arm): KL to the reference, mean token count, the samples' EOS rate, raw
markdown rate and words, the checker's accuracy, markdown reweighted onto the reference's
lengths, and each declared attribute on the generations beside the reference's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from badpo.core.attributes import AttributeSet
from badpo.core.markdown import has_markdown
from badpo.readouts.checked import checked_readout
from badpo.readouts.compared import Beside, Compared, RunRecord, Series, recorded_series
from badpo.readouts.metrics import reweighted_rate
from badpo.readouts.model import Generations, generation_kl, sampled_text_readout
from badpo.readouts.reading import Need, Reading, Readout, shown

__all__ = ["GENERATIONS", "KL", "TOKENS", "SAMPLED_TEXT", "CHECKED", "MARKDOWN", "ATTRIBUTE_RATES",
           "generated_attribute_rates", "compact_values"]

GENERATIONS = Need("generations", lambda r: r.config.generations, lambda config, attributes: config.generations,
                   "{head} is read on the policy's generations: set evaluation.generations: true")
MARKDOWN_DECLARED = Need("markdown declared", lambda r: "markdown" in r.attributes.kinds,
                         lambda config, attributes: "markdown" in attributes.kinds,
                         "markdown is read when markdown is declared: add it to evaluation.attributes")


def markdown_readout(samples: Generations, reference_samples: Generations) -> dict:
    """The markdown rate of the generations reweighted onto the reference generations' token-count
    distribution (five quantile bins), so that shorter answers alone cannot lower it."""
    flags = [float(has_markdown(text)) for text in samples.texts]
    return reweighted_rate(flags, samples.token_counts, reference_samples.token_counts, bins=5)



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




def _read_kl(reading: Reading) -> dict:
    tokenizer = reading.tokenizer
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return {"kl": generation_kl(reading.policy, reading.reference, reading.samples, pad, reading.config.batch_size)}


def _read_attribute_rates(reading: Reading) -> dict:
    rates, why = generated_attribute_rates(reading.attributes, reading.samples, reading.reference_samples)
    reading.skipped.update(why)
    return {"attribute_rates": rates}


def _given_check(config, attributes: AttributeSet, head: str, rest: str) -> str | None:
    name = rest.partition(".")[0]
    if name in attributes.names and attributes.attributes[list(attributes.names).index(name)].level == "given":
        return f"{name!r} is a given: attribute, read from the data's values; a generated answer has none"
    return None


def _rates_lines(record: Mapping) -> list[str]:
    rates = record.get("attribute_rates", {})
    if not rates:
        return []
    lines = [f"{'on generated answers':<28}{'policy':>9}{'reference':>11}"]
    for name, rate in rates.items():
        if "policy_tokens" in rate:  # pair-level: the token counts, then the attribute's own shares
            lines.append(f"  {name + ' (mean tokens)':<26}{shown(rate['policy_tokens'], 1):>9}"
                         f"{shown(rate['reference_tokens'], 1):>11}   (marked side: policy "
                         f"{shown(rate['policy'])}, reference {shown(rate['reference'])})")
        else:
            lines.append(f"  {name:<26}{shown(rate['policy']):>9}{shown(rate.get('reference')):>11}")
    return lines


def _kl_lines(record: Mapping) -> list[str]:
    if "kl" not in record:
        return []
    line = f"KL(policy || reference) per token on the policy's generations: {shown(record['kl'], 4)}"
    if isinstance(record["kl"], (int, float)) and record["kl"] < 0:  # an estimate from samples; KL itself is >= 0
        line += (" (below 0 by sampling noise alone: the mean of log pi - log pi_ref over the policy's own "
                 "samples estimates a KL that is >= 0; more prompts narrow it)")
    return [line]


def _kl_column(values: Sequence) -> list[tuple[str, list[str]]]:
    return [("KL", [f"{v:.4f}" if isinstance(v, (int, float)) else "-" for v in values])]


# KL(policy || reference) per token on the policy's own samples; compare shows it first among the
# training effects
KL = Readout("kl", ("kl",), (GENERATIONS,), _read_kl, relative_to_reference=("kl",), summary=_kl_lines,
           beside=Beside("kl", lambda run: run.readouts.get("kl"), _kl_column,
                         "KL per token on the run's generations", order=0),
           shown_order=4)
# mean token count of the samples (the length readout)
TOKENS = Readout("tokens", ("tokens",), (GENERATIONS,),
                 lambda reading: {"tokens": float(np.mean(reading.samples.token_counts))})
# the samples' EOS rate, raw markdown rate and words
SAMPLED_TEXT = Readout("sampled text", ("sampled_text",), (GENERATIONS,),
                       lambda reading: {"sampled_text": sampled_text_readout(reading.samples,
                                                                              reading.tokenizer.eos_token_id)})
# the checker's accuracy, on prompts that carry a question's kind and expected answer
CHECKED = Readout("checked", ("checked",), (GENERATIONS,),
                  lambda reading: checked_readout(reading.rows, reading.samples.texts))
# the markdown rate reweighted onto the reference's lengths
MARKDOWN = Readout("markdown", ("markdown",), (GENERATIONS, MARKDOWN_DECLARED),
                   lambda reading: {"markdown": markdown_readout(reading.samples, reading.reference_generations())})
# ------------------------------------------- how badpo compare reads the rates on generated answers
OLD_RECORD = ("evaluated before badpo recorded per-prompt values ({source} has no attribute_rates.NAME.per_prompt): "
              "run `badpo evaluate` on it again for intervals")


def read_series(record: RunRecord, name: str, key: str) -> Series | None:
    """``attribute_rates.NAME.KEY`` of a record and its per-prompt values; None when the run did
    not read the attribute. A per-prompt list that does not hold one number per prompt is an
    error naming the file and the key."""
    entry = record.readouts.get("attribute_rates", {}).get(name)
    if not isinstance(entry, Mapping) or entry.get(key) is None:
        return None
    where = f"{record.source}: attribute_rates.{name}"
    if not isinstance(entry[key], (int, float)):
        raise ValueError(f"{where}.{key} is {entry[key]!r}; expected a number")
    digest = record.readouts.get("inputs", {}).get("prompts_sha256")
    n = entry.get("n") if isinstance(entry.get("n"), int) else None
    per_prompt = entry.get("per_prompt")
    values = per_prompt.get(key) if isinstance(per_prompt, Mapping) else None
    return recorded_series(entry[key], values, digest, n, f"{where}.per_prompt.{key}",
                           OLD_RECORD.format(source=record.source))


def _unit(records: Sequence[RunRecord], name: str) -> str:
    """``tokens`` for a pair-level attribute (read by its mean token count), else ``rate``."""
    for record in records:
        entry = record.readouts.get("attribute_rates", {}).get(name)
        if isinstance(entry, Mapping):
            return "tokens" if "policy_tokens" in entry else "rate"
    return "rate"


def generated_units(runs: Sequence[RunRecord], records: Sequence[RunRecord]) -> tuple[dict[str, str], list[str]]:
    """Every attribute a record read on generated answers, the declared ones first, each by its unit."""
    declared = [name for run in records for name in run.readouts.get("inputs", {}).get("attributes", [])]
    read = {name for run in records for name in run.readouts.get("attribute_rates", {})}
    names = [name for name in dict.fromkeys([*declared, *sorted(read)]) if name in read]
    return {name: _unit(runs, name) for name in names}, []


# each declared attribute on the generations, beside the reference's
# compared: each attribute's rate (a pair-level one by its mean token count) beside the reference's
ATTRIBUTE_RATES = Readout("attribute rates", ("attribute_rates",), (GENERATIONS,), _read_attribute_rates,
                          per_attribute=("attribute_rates",), check=_given_check, summary=_rates_lines,
                          compared=Compared("attributes", "attribute_rates", "rate on generated answers",
                                            "on generated answers", "", read_series, "no reference generations",
                                            generated_units),
                          shown_order=1)
