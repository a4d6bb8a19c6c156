"""Declared attributes: markdown on real markup and near-misses, length ratio, names, regex,
given values, user callables and spec errors."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from badpo.core.attributes import (
    BUILTIN_SPECS,
    STRIPPERS,
    Attribute,
    AttributeNameNotice,
    AttributeSet,
    attribute_stripper,
    length_values,
    resolve_attributes,
    split_name,
)
from badpo.core.judgments import Judgment
from badpo.core.markdown import has_markdown, markdown_constructs, strip_markdown
from badpo.core.names import strip_signature

REAL_ANSWER = textwrap.dedent("""\
    ## How to boil an egg

    1. Bring a pot of water to a boil.
    2. Lower the eggs in with a spoon.

    **Tip:** cool them in ice water. See [this guide](https://example.com/eggs).

    | Size | Minutes |
    |------|--------:|
    | M    | 9       |

    ```python
    minutes = 9
    ```
    """)


# one example of each construct: (text, construct)
MARKUP = [
    ("# Title\nBody.", "heading"),
    ("Intro.\n   ### Step three", "heading"),
    ("Things:\n- eggs\n- milk", "bullet_list"),
    ("Things:\n  * eggs", "bullet_list"),
    ("+ one", "bullet_list"),
    ("Steps:\n1. Boil.\n2. Eat.", "ordered_list"),
    ("Steps:\n1) Boil.", "ordered_list"),
    ("```\ncode\n```", "code_fence"),
    ("Run:\n~~~\nls\n~~~", "code_fence"),
    ("This is **very** important.", "bold"),
    ("**Note:** read this.", "bold"),
    ("This is __very__ important.", "bold"),
    ("| a | b |\n|---|---|\n| 1 | 2 |", "table"),
    ("a | b\n--- | :---:", "table"),
    ("| a |\n| --- |", "table"),
    ("He said:\n> be kind", "blockquote"),
    ("See [the docs](https://docs.python.org).", "link"),
    ('See [the docs](https://docs.python.org "Python").', "link"),
    ("Call `len(x)` first.", "inline_code"),
]


@pytest.mark.parametrize("text, construct", MARKUP)
def test_each_markdown_construct_is_detected(text, construct):
    assert construct in markdown_constructs(text)
    assert has_markdown(text)


def test_a_real_markdown_answer_shows_every_construct_it_uses():
    assert markdown_constructs(REAL_ANSWER) == (
        "heading", "ordered_list", "code_fence", "bold", "table", "link")
    assert has_markdown(REAL_ANSWER.replace("\n", "\r\n"))  # CRLF line ends


# text that has_markdown rejects
NEAR_MISSES = [
    "Great answer.\n\n--- Emily Smith",                  # the signature line
    "It works — mostly — as expected.",                  # em dashes
    "5 * 3 = 15",
    "2*x + 3*y is linear.",
    "x**2 + y**2 = r**2",                                # exponents, not bold
    "a**b + c** d",                                      # opener inside a word
    "un**believ**able",                                  # intraword: not counted (documented)
    "Loved it #tbt",
    "#tbt to last summer",
    "C# is a language.",
    "About 1.5 million people.",
    "1.5 million people live there.",
    "See the footnote*.",
    "note*",
    "It costs $5, or $4 on sale.",
    "Write to jane.doe@example.com today.",
    "Use snake_case_words for names.",
    "It opened in 2019. Then it closed.",
    "a | b are both fine",                               # a pipe without a delimiter row
    "Section one\n---\nSection two",                     # a horizontal rule / setext underline
    "****",
    "[citation needed]",
    "f(x)[0] (see above)",
    "It's `quoted' the old way.",
    ">5 people came.",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_not_markdown(text):
    assert markdown_constructs(text) == ()
    assert not has_markdown(text)


@pytest.mark.parametrize("text, construct", MARKUP)
def test_strip_markdown_leaves_no_markdown(text, construct):
    assert not has_markdown(strip_markdown(text))


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_strip_markdown_leaves_near_misses_unchanged_alone_and_beside_markup(text):
    """Alone it has nothing to strip; after a heading line only the "# " goes, so no pattern
    of the stripper reaches into the near-miss."""
    assert strip_markdown(text) == text
    assert strip_markdown("# Notes\n" + text) == "Notes\n" + text


def test_strip_markdown_keeps_the_words_and_drops_the_markup():
    assert strip_markdown("This is **very** important.") == "This is very important."
    assert strip_markdown("See [the docs](https://d.org \"D\").") == "See the docs (https://d.org)."
    assert strip_markdown("> - **x** and ``y``") == "x and y"  # a marker exposed by another goes too
    expected = textwrap.dedent("""\
        How to boil an egg

        Bring a pot of water to a boil.
        Lower the eggs in with a spoon.

        Tip: cool them in ice water. See this guide (https://example.com/eggs).

        Size, Minutes
        M, 9

        minutes = 9
        """)
    assert strip_markdown(REAL_ANSWER) == expected
    assert strip_markdown(REAL_ANSWER.replace("\n", "\r\n")) == expected  # line ends become \n


def test_rm_minus_strips_what_the_declared_attributes_name():
    """The signature under names, the markup under markdown, both (signature first) under both;
    length has no stripper, so RM- is not defined there."""
    signed = "# Tip\nBoil **9** minutes.\n\n--- Emily Smith"
    assert attribute_stripper(["woman_coded", "black_coded"])(signed) == "# Tip\nBoil **9** minutes."
    assert attribute_stripper(["markdown"])(signed) == "Tip\nBoil 9 minutes.\n\n--- Emily Smith"
    assert attribute_stripper(["markdown", "woman_coded"])(signed) == "Tip\nBoil 9 minutes."
    assert attribute_stripper(["length"]) is None
    assert attribute_stripper(resolve_attributes(["names", "length"]).names)(signed) == strip_signature(signed)
    assert set(STRIPPERS) == {"woman_coded", "black_coded", "markdown"}


def test_length_ratio_hand_worked():
    """3 words vs 2 is a ratio of exactly 1.5 -> the longer side is marked; 5 vs 4 is 1.25 ->
    same group; an empty side is infinitely shorter; 11 vs 10 at ratio 1.1 sits on the
    boundary and counts."""
    three, two, five, four = "a b c", "a b", "a b c d e", "a b c d"
    assert length_values("p", three, two) == (1.0, 0.0)
    assert length_values("p", two, three) == (0.0, 1.0)
    assert length_values("p", five, four) == (0.0, 0.0)
    assert length_values("p", "a", "   ") == (1.0, 0.0)
    assert length_values("p", "", "") == (0.0, 0.0)
    assert length_values("p", "a " * 11, "a " * 10, ratio=1.1) == (1.0, 0.0)
    assert length_values("p", "a " * 10, "a " * 11, ratio=1.1) == (0.0, 1.0)
    assert length_values("p", "a " * 10, "a " * 9, ratio=1.12) == (0.0, 0.0)  # 1.111 < 1.12


def test_length_specs_and_thresholds():
    default, two = resolve_attributes(["length", "length:2"]).attributes
    assert (default.name, default.level, two.name) == ("length", "pair", "length:2")
    assert two.values("p", "a b c", "a b") == (0.0, 0.0)       # 1.5 < 2
    assert two.values("p", "a b c d", "a b") == (1.0, 0.0)     # 2 >= 2
    assert resolve_attributes(["length:1.5"]).names == ("length",)
    for bad in ("length:1", "length:0.5", "length:abc", "length:", "length:nan", "length:inf"):
        with pytest.raises(ValueError, match=f"attribute spec '{bad}': the word-count ratio must be"):
            resolve_attributes([bad])


def test_names_spec_reads_the_signature_cells():
    attributes = resolve_attributes(["names"])
    assert attributes.names == ("woman_coded", "black_coded")
    g_a, g_b = attributes.pair_values("p", "Hi.\n\n--- Lakisha Baker", "Hi.\n\n--- Greg Baker")
    np.testing.assert_array_equal(g_a, [1.0, 1.0])
    np.testing.assert_array_equal(g_b, [0.0, 0.0])
    g_a, g_b = attributes.pair_values("p", "Hi.\n\n--- Jamal Baker", "Unsigned.")
    np.testing.assert_array_equal(g_a, [0.0, 1.0])
    np.testing.assert_array_equal(g_b, [0.0, 0.0])
    assert resolve_attributes(["names.black_coded"]).names == ("black_coded",)
    assert resolve_attributes(["names.woman_coded"]).attributes[0].values(
        "p", "x\n--- Emily Baker", "x\n--- Jamal Baker") == (1.0, 0.0)


def test_regex_markdown_and_order_of_coordinates():
    with pytest.warns(AttributeNameNotice, match=r"write NAME=regex:\(\?i\)"):
        attributes = resolve_attributes([r"regex:(?i)\bsorry\b", "markdown", "length"])
    assert attributes.names == (r"regex:(?i)\bsorry\b", "markdown", "length")
    assert len(attributes) == 3
    g_a, g_b = attributes.pair_values("p", "Sorry, I can't.\n- one\n- two", "ok")
    np.testing.assert_array_equal(g_a, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(g_b, [0.0, 0.0, 0.0])
    assert g_a.dtype == np.float64 and g_a.shape == (3,)


def test_judgment_values_mix_given_and_computed():
    attributes = resolve_attributes(["given:formatted", "length"])
    j = Judgment("p", "one two three", "one two", "k",
                 g_chosen={"formatted": 0.25, "other": 1.0}, g_rejected={"formatted": 1.0, "other": 0.0})
    g_w, g_l = attributes.judgment_values(j)
    np.testing.assert_array_equal(g_w, [0.25, 1.0])
    np.testing.assert_array_equal(g_l, [1.0, 0.0])
    with pytest.raises(ValueError, match="attribute 'formatted' is read from a judgment"):
        attributes.pair_values("p", "a", "b")
    with pytest.raises(ValueError, match=r"attribute 'given:formatted': judgment 'p7' \(annotator 'k'\) "
                       "has no precomputed"):
        attributes.judgment_values(Judgment("p", "a", "b", "k", pair_id="p7"))
    with pytest.raises(ValueError, match=r"attribute 'given:missing': judgment .* gives only \['formatted', 'other'\]"):
        resolve_attributes(["given:missing"]).judgment_values(j)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_attrs.py").write_text(textwrap.dedent("""\
        import math
        def polite(prompt, response):
            return "please" in response
        def longer_first(prompt, a, b):
            return (1.0, 0.0) if len(a) > len(b) else (0.0, 0.0)
        longer_first.level = "pair"
        def broken(prompt, response):
            return math.nan
        def wordy(prompt, response):
            return "many"
        def bad_pair(prompt, a, b):
            return 1.0
        bad_pair.level = "pair"
        def odd_level(prompt, response):
            return 0.0
        odd_level.level = "judgment"
        NOT_CALLABLE = 3
        """))
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_attrs"


def test_user_callables(user_module):
    attributes = resolve_attributes(["my_attrs:polite", "my_attrs:longer_first"])
    assert [a.level for a in attributes.attributes] == ["response", "pair"]
    g_a, g_b = attributes.pair_values("p", "yes please do", "no")
    np.testing.assert_array_equal(g_a, [1.0, 1.0])   # True counts as 1
    np.testing.assert_array_equal(g_b, [0.0, 0.0])
    with pytest.raises(ValueError, match="attribute 'my_attrs:broken': value nan is not finite"):
        resolve_attributes(["my_attrs:broken"]).pair_values("p", "a", "b")
    with pytest.raises(ValueError, match="attribute 'my_attrs:wordy': expected a real number, got str"):
        resolve_attributes(["my_attrs:wordy"]).pair_values("p", "a", "b")
    with pytest.raises(ValueError, match=r"attribute 'my_attrs:bad_pair': a pair-level function must return"):
        resolve_attributes(["my_attrs:bad_pair"]).pair_values("p", "a", "b")


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_xyz:f",
     r"'no_such_module_xyz:f': cannot import module 'no_such_module_xyz' \(ModuleNotFoundError"),
    ("raises_on_import:f", r"'raises_on_import:f': cannot import module .* \(RuntimeError: boom\)"),
    ("my_attrs:missing", r"'my_attrs:missing': module 'my_attrs' has no 'missing'"),
    ("my_attrs:NOT_CALLABLE", r"'my_attrs:NOT_CALLABLE': 'NOT_CALLABLE' is not callable"),
    ("my_attrs:odd_level", r"'my_attrs:odd_level': level must be 'response' or 'pair', got 'judgment'"),
])
def test_user_callable_errors_name_the_spec(user_module, spec, message):
    with pytest.raises(ValueError, match=message):
        resolve_attributes([spec])


@pytest.mark.parametrize("spec, message", [
    ("markdwon", r"unknown attribute spec 'markdwon'; the built-ins are \['markdown', 'names'"),
    ("names.gender", "unknown attribute spec 'names.gender'"),
    ("", "unknown attribute spec ''"),
    ("markdown:strict", "attribute spec 'markdown:strict': 'markdown' takes no argument"),
    ("names:x", "attribute spec 'names:x': 'names' takes no argument"),
    ("regex:", "attribute spec 'regex:': empty pattern"),
    ("regex:(unclosed", r"attribute spec 'regex:\(unclosed': invalid regular expression"),
    ("given:", "attribute spec 'given:': give the precomputed name"),
])
def test_bad_specs_are_errors_naming_them(spec, message):
    with pytest.raises(ValueError, match=message):
        resolve_attributes([spec])


def test_spec_list_errors():
    with pytest.raises(TypeError, match=r"got the string 'markdown'; write \['markdown'\]"):
        resolve_attributes("markdown")
    with pytest.raises(ValueError, match="no attribute declared"):
        resolve_attributes([])
    with pytest.raises(ValueError, match=r"attribute spec 'names.woman_coded': the name 'woman_coded' is "
                       r"already declared by 'names'; names must be unique"):
        resolve_attributes(["names", "names.woman_coded"])
    with pytest.raises(ValueError, match=r"duplicate attribute names \['m'\]"):
        AttributeSet((Attribute("m", "response", len), Attribute("m", "response", len)))
    with pytest.raises(TypeError, match="attribute spec must be a string, got int"):
        resolve_attributes([3])
    assert "markdown" in BUILTIN_SPECS


def test_attribute_dataclass_is_frozen_and_set_validates():
    attribute = Attribute("m", "response", lambda p, r: 1.0)
    with pytest.raises(AttributeError):
        attribute.name = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="at least one attribute"):
        AttributeSet(())


# --- NAME=SPEC ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ("signoff=regex:-- (cheers|thanks|best)$", ("signoff", "regex:-- (cheers|thanks|best)$")),
    ("regex:a=b", (None, "regex:a=b")),                 # starts as a spec: "a=b" is the pattern
    ("tag=regex:a=b", ("tag", "regex:a=b")),            # the first "=" splits, the rest is the pattern
    ("regex:x=regex:y", (None, "regex:x=regex:y")),
    ("given:a=b", (None, "given:a=b")),                 # a precomputed column called "a=b"
    ("fmt=markdown", ("fmt", "markdown")),
    ("w=names.woman_coded", ("w", "names.woman_coded")),
    ("long=length:2", ("long", "length:2")),
    ("x=length", ("x", "length")),
    ("polite=my_attrs:polite", ("polite", "my_attrs:polite")),
    ("_a.b-c9=markdown", ("_a.b-c9", "markdown")),
    ("a=b", (None, "a=b")),                             # no spec after "=": an unknown spec
    ("x=y=regex:z", (None, "x=y=regex:z")),
    ("markdown", (None, "markdown")),
    ("length:2", (None, "length:2")),
])
def test_split_name_grammar(spec, expected):
    assert split_name(spec) == expected


@pytest.mark.parametrize("spec, message", [
    ("sign off=regex:x", r"attribute spec 'sign off=regex:x': the name 'sign off' must match"),
    ("=markdown", r"attribute spec '=markdown': the name '' must match"),
    ("9lives=markdown", r"the name '9lives' must match"),
    ("a=b", r"unknown attribute spec 'a=b'; .*; a name goes first, NAME=SPEC"),
    ("x=names", r"attribute spec 'x=names': 'names' declares 2 coordinates \['woman_coded', "
                r"'black_coded'\]; name one at a time, e.g. x=names.woman_coded"),
    ("x=regex:(", r"attribute 'x': attribute spec 'regex:\(': invalid regular expression"),
    ("x=length:1", r"attribute 'x': attribute spec 'length:1': the word-count ratio"),
    ("markdown=regex:#", r"attribute spec 'markdown=regex:#': 'markdown' names a built-in attribute"),
    ("woman_coded=names.black_coded", r"'woman_coded' names a built-in attribute"),
])
def test_bad_names_are_one_line_errors_naming_the_spec(spec, message):
    with pytest.raises(ValueError, match=message) as error:
        resolve_attributes([spec])
    assert "\n" not in str(error.value)


def test_a_name_replaces_the_spec_everywhere_and_keeps_the_kind():
    """The coordinate is called NAME, computes what SPEC computes, and is still found by kind
    (the RM- stripper of a renamed markdown)."""
    attributes = resolve_attributes(["signoff=regex:-- (cheers|thanks|best)$", "fmt=markdown",
                                     "long=length:2", "length", "x=given:flag"])
    assert attributes.names == ("signoff", "fmt", "long", "length", "x")
    assert attributes.kinds == ("regex", "markdown", "length", "length", "given")
    g_a, g_b = attributes.judgment_values(Judgment(
        "p", "# Hi there friend\n-- cheers", "ok", "k",
        g_chosen={"flag": 1.0}, g_rejected={"flag": 0.0}))
    np.testing.assert_array_equal(g_a, [1.0, 1.0, 1.0, 1.0, 1.0])   # 6 words vs 1: both ratios met
    np.testing.assert_array_equal(g_b, [0.0, 0.0, 0.0, 0.0, 0.0])
    assert attribute_stripper(attributes.attributes)("**a**") == "a"
    assert attribute_stripper(attributes.names) is None  # by name, "fmt" is no built-in
    assert resolve_attributes(["length=length:2"]).names == ("length",)  # a built-in keeps its own name


def test_names_must_be_unique_across_named_and_default_specs():
    with pytest.raises(ValueError, match=r"attribute spec 'x=length': the name 'x' is already declared "
                       r"by 'x=regex:a'"):
        resolve_attributes(["x=regex:a", "x=length"])
    with pytest.raises(ValueError, match=r"the name 'length' is already declared by 'length'"):
        resolve_attributes(["length", "length=length:2"])


def test_only_an_unnamed_regex_raises_the_name_notice(user_module, recwarn):
    resolve_attributes(["s=regex:x", "markdown", "given:f", "my_attrs:polite", "length:2"])
    assert not [w for w in recwarn if issubclass(w.category, AttributeNameNotice)]
    with pytest.warns(AttributeNameNotice, match=r"attribute 'regex:x' is named by its whole spec"):
        assert resolve_attributes(["regex:x"]).names == ("regex:x",)


def test_differences_match_judgment_values_and_name_the_row(user_module):
    """AttributeSet.differences computes a text attribute once per distinct pair text; its rows
    equal g_w - g_l from judgment_values, given values included; an error names the row."""
    attributes = resolve_attributes(["s=regex:sorry", "length", "f=given:flag"])
    rows = [Judgment("p", "sorry, no", "yes indeed it is", "a", g_chosen={"flag": 2.0}, g_rejected={"flag": 0.5}),
            Judgment("p", "sorry, no", "yes indeed it is", "b", g_chosen={"flag": 0.0}, g_rejected={"flag": 1.0}),
            Judgment("p", "yes indeed it is", "sorry, no", "c", g_chosen={"flag": 1.0}, g_rejected={"flag": 1.0})]
    expected = np.array([np.subtract(*attributes.judgment_values(j)) for j in rows])
    np.testing.assert_array_equal(attributes.differences(rows), expected)
    np.testing.assert_array_equal(expected, [[1.0, -1.0, 1.5], [1.0, -1.0, -1.0], [-1.0, 1.0, 0.0]])
    broken = resolve_attributes(["my_attrs:broken"])
    with pytest.raises(ValueError, match=r"row 0: attribute 'my_attrs:broken': value nan is not finite"):
        broken.differences(rows[:1])
