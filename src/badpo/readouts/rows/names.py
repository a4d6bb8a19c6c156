"""The names rows: where the policy's first-name mass sits at the signature (from probabilities,
after a fixed answer body; and on its sampled signatures), and its shift from the reference
against relabelling the pool (``names.null``) beside the reference's own rates (``names.reference``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from badpo.core.attributes import AttributeSet
from badpo.core.names import NAME_ATTRIBUTES
from badpo.core.progress import progress
from badpo.engine.tokenize import TokenizationConfig, encode_prompts
from badpo.readouts.compared import Compared, RunRecord, Series, as_mapping, recorded_series
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.metrics import sampled_signature_rates
from badpo.readouts.model import Generations, cut_at_eos, plain_decoding
from badpo.readouts.names_analyses import names_null_readouts, names_reference, sampled_names
from badpo.readouts.names_scoring import names_readout
from badpo.readouts.reading import Corpus, Need, Reading, Readout, declares_names, shown
from badpo.readouts.rows.generated import GENERATIONS
from badpo.readouts.tilt import answer_body

__all__ = ["NAMES", "SAMPLED", "AGAINST_REFERENCE", "NAMES_DECLARED", "reference_bodies", "bodies_for",
           "reference_names", "sampled_readout", "names_against_reference"]


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




def bodies_for(rows: Sequence[dict], config: EvalConfig, policy: nn.Module, reference: nn.Module, tokenizer,
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




def reference_names(reference: nn.Module, tokenizer, rows: Sequence[dict], config: EvalConfig,
                    tokenization: TokenizationConfig, bodies: Sequence[str] | None,
                    reference_samples: Generations | None) -> dict:
    """The reference's side of ``names.null``: its first-name readout after the bodies the
    policy's names are read after (under ``body: own`` its own), and its sampled signatures when
    its generations are given. ``bodies`` may be None (read here)."""
    if bodies is None or config.body == "own":
        bodies = bodies_for(rows, config, reference, reference, tokenizer, tokenization)
    side: dict = {"names": names_readout(reference, tokenizer, [row["prompt"] for row in rows], bodies,
                                         None, tokenization)}
    if reference_samples is not None:
        side["sampled"] = sampled_readout(reference_samples.texts)
    return side


def sampled_readout(texts: Sequence[str]) -> dict:
    """Rates from sampled signatures and what they record per name (``per_name``, ``cells``)."""
    return {**sampled_signature_rates(list(texts)), **sampled_names(texts)}


def names_readouts(policy: nn.Module, reference: nn.Module, tokenizer, corpus: Corpus, config: EvalConfig,
                    tokenization: TokenizationConfig, bodies: Sequence[str] | None,
                    reference_readouts: Mapping | None) -> tuple[dict, Mapping | None]:
    """(the policy's names readout, the reference's side of ``names.null`` and ``names.reference``):
    the reference's readouts as given, or with its first names read here when they hold no per-name
    shares or no per-prompt first-name rates (none given, or a record read before badpo recorded them)."""
    rows = corpus.eval_prompts[: config.max_prompts]
    bodies = bodies if bodies is not None else bodies_for(rows, config, policy, reference, tokenizer, tokenization)
    surnames = corpus.surnames[: config.surnames] if config.whole_signature else None
    readout = names_readout(policy, tokenizer, [row["prompt"] for row in rows], bodies, surnames, tokenization,
                            whole_signature_prompts=config.whole_signature_prompts)
    recorded = (reference_readouts or {}).get("names", {})
    if policy is not reference and ("per_name" not in recorded or "first_name" not in recorded.get("per_prompt", {})):
        reference_readouts = {**(reference_readouts or {}),
                              **reference_names(reference, tokenizer, rows, config, tokenization, bodies, None)}
    return readout, reference_readouts


def names_null(result: dict, reference_side: Mapping | None, reference_samples: Generations | None = None) -> None:
    """``names.null`` of ``result`` against ``reference_side`` (the reference's readouts; its
    sampled signatures from ``reference_samples`` when it records none), in place:
    :func:`badpo.readouts.names_analyses.names_null_readouts`; left out when nothing has both sides."""
    names = result.get("names")
    if not isinstance(names, dict) or reference_side is None:
        return
    if reference_samples is not None and "per_name" not in reference_side.get("sampled", {}):
        reference_side = {**reference_side, "sampled": sampled_readout(reference_samples.texts)}
    names.pop("null", None)
    null = names_null_readouts(result, reference_side)
    if null:
        names["null"] = null


def names_against_reference(result: dict, reference_side: Mapping | None,
                             reference_samples: Generations | None = None) -> None:
    """``names.null`` and ``names.reference`` of ``result``, in place (:func:`names_null`,
    names_analyses.names_reference)."""
    names_null(result, reference_side, reference_samples)
    names_reference(result, reference_side)



def _names_planned(config: EvalConfig, attributes: AttributeSet) -> bool:
    return any(kind == "names" or kind in NAME_ATTRIBUTES for kind in attributes.kinds)


NAMES_DECLARED = Need("a names attribute", lambda r: declares_names(r.attributes), _names_planned,
                      "names readouts need a names attribute in evaluation.attributes")
APART = Need("a policy apart from the reference", lambda r: r.policy is not r.reference)


def _names_check(config: EvalConfig, attributes: AttributeSet, head: str, rest: str) -> str | None:
    """names.whole_signature, and the whole signature's per_name, cells and null, need the whole
    signature read; the null of the sampled signatures needs generations."""
    parts = rest.split(".")
    readout = parts[1] if parts[0] in ("per_name", "cells", "null") and len(parts) > 1 else parts[0]
    if readout == "whole_signature" and not config.whole_signature:
        return "set evaluation.whole_signature: true"
    if head == "names" and readout == "sampled" and not config.generations:
        return "names.null.sampled is read on the policy's generations: set evaluation.generations: true"
    return None


def _read_names(reading: Reading) -> dict:
    readout, reading.reference_readouts = names_readouts(
        reading.policy, reading.reference, reading.tokenizer, reading.corpus, reading.config, reading.tokenization,
        reading.bodies, reading.reference_readouts)
    return {"names": readout}


def _names_lines(record: Mapping) -> list[str]:
    if "names" not in record:
        return []
    first = record["names"].get("first_name", {})
    lines = ["names rate from probabilities (first name): "
             + ", ".join(f"{name} {shown(rate)}" for name, rate in first.items())]
    for readout, null in record["names"].get("null", {}).items():
        lines.append(f"names shift from the reference ({readout.replace('_', ' ')}), against relabelling the "
                     "pool: " + ", ".join(f"{name} {shown(entry['shift'])} (null sd {shown(entry['null_sd'])}, "
                                          f"p {shown(entry['p'])})"
                                          for name, entry in null.items() if name != "without"))
    return lines


def _read_against_reference(reading: Reading) -> dict:
    names_against_reference(reading.result, reading.reference_readouts, reading.reference_samples)
    return {}


# ------------------------------------- how badpo compare reads the rate from first-name probabilities
OLD_FIRST_NAME = ("evaluated before badpo recorded per-prompt first-name rates ({source} has no "
                  "names.per_prompt.first_name): run `badpo evaluate` on it again for intervals")


def read_first_name(record: RunRecord, name: str, key: str) -> Series | None:
    """The first-name rate of NAME from probabilities and its per-prompt values: the policy's
    (``key`` policy: ``names.first_name``, ``names.per_prompt.first_name``) or the reference's
    read after the same bodies (``key`` reference: ``names.reference``; in a record written before
    that, ``names.first_name`` minus the shift ``names.null.first_name`` reports, without values).
    None when the record holds neither."""
    names = as_mapping(record.readouts.get("names"))
    inputs = as_mapping(record.readouts.get("inputs"))
    digest, n = inputs.get("prompts_sha256"), inputs.get("n_prompts")
    n = n if isinstance(n, int) else None
    old = OLD_FIRST_NAME.format(source=record.source)
    side = names if key == "policy" else as_mapping(names.get("reference"))
    mean = as_mapping(side.get("first_name")).get(name)
    where = f"{record.source}: names{'' if key == 'policy' else '.reference'}"
    if mean is None and key == "reference":
        policy = as_mapping(names.get("first_name")).get(name)
        shift = as_mapping(as_mapping(as_mapping(names.get("null")).get("first_name")).get(name)).get("shift")
        if isinstance(policy, (int, float)) and isinstance(shift, (int, float)):
            return Series(float(policy) - float(shift), None, digest, old, n)
    if mean is None:
        return None
    if not isinstance(mean, (int, float)):
        raise ValueError(f"{where}.first_name.{name} is {mean!r}; expected a number")
    values = as_mapping(as_mapping(side.get("per_prompt")).get("first_name")).get(name)
    return recorded_series(mean, values, digest, n, f"{where}.per_prompt.first_name.{name}", old)


def first_name_units(runs: Sequence[RunRecord],
                     records: Sequence[RunRecord]) -> tuple[dict[str, str] | None, list[str]]:
    """The rate from first-name probabilities, when every record read it (with a note when only
    some did): one attribute per coded side of the name pool."""
    read = [as_mapping(as_mapping(record.readouts.get("names")).get("first_name")) for record in records]
    if not any(read):
        return None, []
    missing = [record for record, first in zip(records, read) if not first]
    if missing:
        return None, [f"the rate from first-name probabilities is not compared: {missing[0].source} holds no "
                      "names.first_name (no names attribute declared, or another readout)"]
    return dict.fromkeys((name for first in read for name in first), "rate"), []


def null_p(record: RunRecord, name: str) -> float | None:
    """The one-sided p of ``names.null.first_name.NAME`` (the relabelling null evaluate computed
    of the first-name shift), or None when the record has none."""
    entry = as_mapping(as_mapping(as_mapping(record.readouts.get("names")).get("null")).get("first_name")).get(name)
    p = entry.get("p") if isinstance(entry, Mapping) else None
    return float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else None


# the names rate from probabilities with the answer body fixed (first name; whole signature);
# compared: the first-name rate beside the reference's read after the same bodies, judged against
# evaluate's relabelling null
NAMES = Readout("names", ("names",), (NAMES_DECLARED,), _read_names, check=_names_check, summary=_names_lines,
                compared=Compared("first_name", "names.first_name", "rate from probabilities (first name, body fixed)",
                                  "from first-name probabilities (body fixed)", " (first-name probability)",
                                  read_first_name, "no names.reference and no names.null.first_name",
                                  first_name_units, null_p),
                shown_order=5)
# the names rate of the policy's sampled signatures, with its per-name and cell shares
SAMPLED = Readout("sampled signatures", ("sampled",), (GENERATIONS, NAMES_DECLARED),
                  lambda reading: {"sampled": sampled_readout(reading.samples.texts)}, check=_names_check)
# names.null and names.reference, added under the names row's path once every row is read
AGAINST_REFERENCE = Readout("names against the reference", (), (APART,), _read_against_reference)
