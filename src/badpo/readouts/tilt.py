"""Counterfactual pairs of held-out responses, for a reward model's tilt toward each attribute.

A pair is one response in two versions that differ in the attribute alone, so that a reward
model blind to it scores both alike (:func:`badpo.readouts.metrics.reward_tilt` reads the share of
pairs where the attribute side scores higher). How a pair is made depends on the attribute:

- a name coordinate (``names``): the response's body signed with a first name that carries the
  attribute and with one that does not, the other coordinate and the surname the same
  (:func:`counterfactual_signatures`);
- an attribute with an edit that removes it (``Attribute.remove``: ``markdown`` strips the
  markup, ``regex:`` deletes the pattern's matches): each held-out response that carries the
  attribute, beside its edited self, kept when the edit does remove the attribute and leaves text;
- any other (``length``, ``given:``, ``module:function``) has no such edit, and is named under
  ``skipped`` with the reason, as is an attribute no held-out response carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from badpo.core.attributes import Attribute, AttributeSet
from badpo.core.judgments import Judgment
from badpo.core.names import NAME_ATTRIBUTES, NAME_POOL, POOL_NAMES, sign, strip_signature

__all__ = ["Pairs", "answer_body", "counterfactual_pairs", "counterfactual_signatures"]

EDITS = {"markdown": "markup stripped", "regex": "pattern deleted"}  # how an edited pair differs, by kind
NO_EDIT = {
    "length": "length is a comparison of two answers: no edit of one response changes it alone",
    "given": "a given: attribute is a precomputed value of the data: no edit of the text changes it",
    "callable": "a module:function attribute declares no edit that removes it from a response",
}


@dataclass(frozen=True)
class Pairs:
    """Counterfactual pairs of one attribute: pair i is ``with_attribute[i]`` and ``counterpart[i]``,
    both answers to ``prompts[i]``; ``edit`` says how they differ."""

    prompts: list[str]
    with_attribute: list[str]
    counterpart: list[str]
    edit: str


def answer_body(answer: str) -> str:
    """The answer without the signature line that ends it, where the names are read. Only a
    ``--- First Last`` last line is a signature: a ``---`` rule inside the answer is content."""
    return strip_signature(answer).strip()


def counterfactual_signatures(responses: Sequence[str], surnames: Sequence[str], seed: int = 0
                              ) -> dict[str, tuple[list[int], list[str], list[str]]]:
    """Per name attribute, each response signed with a first name carrying the attribute and with
    one that does not, the other attribute and the surname the same on both sides: twice per
    response and attribute (e.g. woman_coded: white woman vs white man, black woman vs black man),
    names drawn uniformly from their cells with ``seed``. Returns {attribute: (response index,
    attribute-side texts, counterpart texts)}."""
    if not surnames:
        raise ValueError("counterfactual signatures need surnames; the corpus's held-out judgments have no signature")
    cells: dict[tuple[int, ...], list[str]] = {}
    for name in POOL_NAMES:
        cells.setdefault(tuple(NAME_POOL[name]), []).append(name)
    rng = np.random.default_rng([seed, 0xC0F])
    result = {}
    for a, attribute in enumerate(NAME_ATTRIBUTES):
        index, with_attribute, counterpart = [], [], []
        for i, response in enumerate(responses):
            for values in sorted(v for v in cells if v[a] == 1):
                other = values[:a] + (0,) + values[a + 1:]
                last = surnames[rng.integers(len(surnames))]
                firsts = (cells[values][rng.integers(len(cells[values]))],
                          cells[other][rng.integers(len(cells[other]))])
                index.append(i)
                with_attribute.append(sign(response, firsts[0], last))
                counterpart.append(sign(response, firsts[1], last))
        result[attribute] = (index, with_attribute, counterpart)
    return result


def _edited_pairs(attribute: Attribute, responses: Sequence[tuple[str, str]], limit: int | None) -> Pairs:
    """The first ``limit`` responses that carry ``attribute``, each beside its edit without it."""
    prompts, with_attribute, counterpart = [], [], []
    for prompt, text in responses:
        if limit is not None and len(prompts) >= limit:
            break
        edited = attribute.remove(text)
        if edited.strip() and attribute.values(prompt, text, edited) == (1.0, 0.0):
            prompts.append(prompt)
            with_attribute.append(text)
            counterpart.append(edited)
    return Pairs(prompts, with_attribute, counterpart, EDITS.get(attribute.kind, f"{attribute.name} removed"))


def counterfactual_pairs(attributes: AttributeSet, heldout: Sequence[Judgment], surnames: Sequence[str],
                         limit: int | None = None, seed: int = 0) -> tuple[dict[str, Pairs], dict[str, str]]:
    """({attribute name: its pairs}, {"tilt.<name>": why it has none}) on the held-out responses
    (module docstring). ``limit``: the first this many distinct responses are signed (names: two
    pairs each), or carry the attribute (an edit); ``seed`` draws the names."""
    responses = list(dict.fromkeys((j.prompt, text) for j in heldout for text in (j.chosen, j.rejected)))
    pairs: dict[str, Pairs] = {}
    skipped: dict[str, str] = {}
    signed = None
    for attribute in attributes.attributes:
        key = f"tilt.{attribute.name}"
        if attribute.kind in NAME_ATTRIBUTES:
            if not surnames:
                skipped[key] = ("the held-out responses carry no '--- First Last' signature, so there is no "
                                "surname to sign the counterfactual pairs with")
                continue
            if signed is None:
                bodies = list(dict.fromkeys((prompt, answer_body(text)) for prompt, text in responses))[:limit]
                signed = bodies, counterfactual_signatures([body for _, body in bodies], surnames, seed)
            bodies, by_kind = signed
            index, with_attribute, counterpart = by_kind[attribute.kind]
            pairs[attribute.name] = Pairs([bodies[i][0] for i in index], with_attribute, counterpart,
                                          "first name swapped")
        elif attribute.remove is None:
            skipped[key] = NO_EDIT.get(attribute.kind, "no edit removes this attribute from a response alone")
        else:
            found = _edited_pairs(attribute, responses, limit)
            if found.prompts:
                pairs[attribute.name] = found
            else:
                skipped[key] = "no held-out response carries it (and loses it to the edit), so there is no pair"
    return pairs, skipped
