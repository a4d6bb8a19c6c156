"""Attribute kinds are rows of a table (badpo.core.attributes.ATTRIBUTE_KINDS), like METHODS and
READOUTS: the spec grammar, the built-in names, the strippers and the unknown-spec error all read
it, so a new kind is one row and its builder (shown here with a kind the library does not have)."""

from __future__ import annotations

import pytest

from badpo.core import attributes
from badpo.core.attributes import (
    ATTRIBUTE_KINDS,
    BUILTIN_SPECS,
    STRIPPERS,
    Attribute,
    AttributeKind,
    imports_user_code,
    kind_of,
    resolve_attributes,
    split_name,
)
from badpo.core.names import NAME_ATTRIBUTES

EXAMPLES = {"markdown": "markdown", "names": "names", "length": "length:2", "regex": "regex:thanks",
            "given": "given:formatted", "library": "exclamation", "callable": "math:fabs"}


def test_every_kind_has_an_example_and_each_example_is_of_its_kind():
    assert [kind.name for kind in ATTRIBUTE_KINDS] == list(EXAMPLES)
    for name, spec in EXAMPLES.items():
        assert kind_of(spec).name == name, spec
    assert BUILTIN_SPECS == tuple(form for kind in ATTRIBUTE_KINDS for form in kind.forms)
    assert set(STRIPPERS) == {"markdown", *NAME_ATTRIBUTES}


def test_a_builtin_head_decides_before_the_callable_pattern():
    assert kind_of("markdown:x") is None and not imports_user_code("markdown:x")
    assert imports_user_code("math:fabs") and not imports_user_code("regex:a:b") and not imports_user_code("length:2")
    with pytest.raises(ValueError, match="'markdown' takes no argument"):
        resolve_attributes(["markdown:x"])


def test_a_new_kind_is_one_row(monkeypatch):
    """A 'words' kind (the word count of a response, an optional minimum): resolved, named with
    NAME=, listed among the built-ins in the unknown-spec error, without touching anything else."""
    def build(spec: str, argument: str | None) -> list[Attribute]:
        least = int(argument or 0)
        return [Attribute("words", "response", lambda prompt, text: float(len(text.split()) >= least), "words")]

    kind = AttributeKind("words", ("words", "words:N"), build, heads=("words",), argument="optional",
                         coordinates=("words",))
    monkeypatch.setattr(attributes, "ATTRIBUTE_KINDS", (*ATTRIBUTE_KINDS, kind))
    found = resolve_attributes(["words:3", "short=regex:^ok$"])
    assert found.names == ("words", "short")
    assert found.pair_values("p", "one two three", "one")[0].tolist() == [1.0, 0.0]
    assert split_name("w=words:2") == ("w", "words:2")
    with pytest.raises(ValueError, match="unknown attribute spec 'wordz'"):
        resolve_attributes(["wordz"])


def test_a_name_discover_prints_is_a_spec_train_takes():
    """discover's table names its library candidates (exclamation, emoji, hedge); each name alone is
    the named spec it screened, without the notice a regex named by its pattern gets."""
    import warnings

    from badpo.core.attribute_library import LIBRARY_SPECS

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = resolve_attributes(["exclamation", "emoji", "calm=hedge"])
    assert found.names == ("exclamation", "emoji", "calm") and set(found.kinds) == {"regex"}
    assert found.pair_values("p", "Really!", "no")[0].tolist() == [1.0, 0.0, 0.0]
    assert all(kind_of(name).name == "library" for name in LIBRARY_SPECS)


def test_a_library_name_is_a_whole_spec_so_a_module_of_that_name_stays_a_user_function(tmp_path, monkeypatch):
    """`unit:fn` (a user's module called unit) resolved to a user function before the library's
    names were specs, and still does; `unit` alone is the library's."""
    (tmp_path / "unit.py").write_text("def fn(prompt, response):\n    return float(len(response) > 3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = resolve_attributes(["unit:fn", "unit"])
    assert found.kinds == ("callable", "regex") and imports_user_code("unit:fn") and not imports_user_code("unit")
