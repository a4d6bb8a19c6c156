"""A reward model's tilt reads every declared attribute that has a counterfactual pair: names
swapped in the signature, markdown and a regex attribute removed by their edit; the others are
named under skipped with the reason."""

from __future__ import annotations

import pytest

from badpo.core.attributes import resolve_attributes
from badpo.core.judgments import Judgment
from badpo.core.markdown import strip_markdown
from badpo.core.names import NAME_POOL, read_signature
from badpo.readouts.tilt import counterfactual_pairs

HELDOUT = [
    Judgment("q1", "**Yes**, it works.\n\n--- Emily Baker", "No.\n\n--- Greg Baker", "a1",
             g_chosen={"flag": 1.0}, g_rejected={"flag": 0.0}),
    Judgment("q2", "Try this.\n-- cheers", "Try that.", "a2", g_chosen={"flag": 0.0}, g_rejected={"flag": 1.0}),
    Judgment("q2", "Try this.\n-- cheers", "# Plan\nfirst step -- thanks", "a3",
             g_chosen={"flag": 0.0}, g_rejected={"flag": 0.0}),
]
SPECS = ["names", "md=markdown", "signoff=regex:-- (cheers|thanks)$", "length", "given:flag", "never=regex:zzz"]


def test_each_attribute_gets_its_own_counterfactual_or_a_reason():
    pairs, skipped = counterfactual_pairs(resolve_attributes(SPECS), HELDOUT, ["Baker"], limit=None, seed=0)
    assert set(pairs) == {"woman_coded", "black_coded", "md", "signoff"}

    # names: every distinct body (signature stripped) signed twice per coordinate, one name
    # carrying the coordinate, its counterpart not, the surname and the other coordinate the same
    names = pairs["woman_coded"]
    assert len(names.prompts) == 2 * 5 and names.edit == "first name swapped"  # 5 distinct (prompt, body)
    for with_name, without in zip(names.with_attribute, names.counterpart):
        (first, last), (other, other_last) = read_signature(with_name), read_signature(without)
        assert last == other_last == "Baker" and NAME_POOL[first][0] == 1 and NAME_POOL[other][0] == 0
        assert NAME_POOL[first][1] == NAME_POOL[other][1]

    # markdown: the responses with markup, beside the same text stripped of it; nothing else
    md = pairs["md"]
    assert md.with_attribute == ["**Yes**, it works.\n\n--- Emily Baker", "# Plan\nfirst step -- thanks"]
    assert md.counterpart == [strip_markdown(text) for text in md.with_attribute] and md.prompts == ["q1", "q2"]
    assert md.edit == "markup stripped" and pairs["signoff"].edit == "pattern deleted"

    # regex: each distinct response the pattern marks, beside itself without the match
    signoff = pairs["signoff"]
    assert list(zip(signoff.prompts, signoff.with_attribute, signoff.counterpart)) == [
        ("q2", "Try this.\n-- cheers", "Try this."), ("q2", "# Plan\nfirst step -- thanks", "# Plan\nfirst step")]

    assert skipped == {
        "tilt.length": "length is a comparison of two answers: no edit of one response changes it alone",
        "tilt.flag": "a given: attribute is a precomputed value of the data: no edit of the text changes it",
        "tilt.never": "no held-out response carries it (and loses it to the edit), so there is no pair"}


def test_limit_seed_and_missing_surnames():
    attributes = resolve_attributes(["names", "signoff=regex:-- (cheers|thanks)$"])
    few, _ = counterfactual_pairs(attributes, HELDOUT, ["Baker", "Reed"], limit=1, seed=0)
    assert len(few["woman_coded"].prompts) == 2 and len(few["signoff"].prompts) == 1
    again, _ = counterfactual_pairs(attributes, HELDOUT, ["Baker", "Reed"], limit=1, seed=0)
    other, _ = counterfactual_pairs(attributes, HELDOUT, ["Baker", "Reed"], limit=3, seed=1)
    assert again == few and other["woman_coded"].with_attribute != few["woman_coded"].with_attribute
    unsigned, skipped = counterfactual_pairs(attributes, HELDOUT, [], limit=None)
    assert set(unsigned) == {"signoff"}
    assert skipped["tilt.woman_coded"].startswith("the held-out responses carry no '--- First Last' signature")


@pytest.mark.parametrize("spec, text, edited", [
    ("markdown", "1. one\n2. two", "one\ntwo"),
    ("regex:-- (cheers|thanks)$", "ok -- thanks", "ok"),
    ("regex:🙂", "great 🙂 job 🙂", "great  job"),
])
def test_the_edit_removes_the_attribute_and_leaves_the_rest(spec, text, edited):
    attribute = resolve_attributes([f"x={spec}"]).attributes[0]
    assert attribute.remove(text) == edited
    assert attribute.values("p", text, attribute.remove(text)) == (1.0, 0.0)
