"""A user's regex attribute is matched with a time limit (badpo.core.user_pattern): a pattern that
backtracks without end on a hostile row is a one-line error naming the row, not a hang (before,
`badpo audit --attribute 'regex:(a|aa)+$'` on a row of 5,000 a's ran until killed), and every
pattern that is not hostile reads exactly what ``re`` reads."""

from __future__ import annotations

import json
import re

import pytest

from badpo.core import user_pattern
from badpo.core.attributes import resolve_attributes
from badpo.core.user_pattern import PatternTimeout, compile_user_pattern


@pytest.mark.parametrize("pattern", [r"\d+", r"(?i)thanks?", r"^Sure[,!]", r"\*\*[^*]+\*\*", r"(\w+)\s+\1",
                                     r"[\U0001F600-\U0001F64F]", r"—\s*\w+$", r"(?m)^- "])
def test_search_and_sub_read_what_re_reads(pattern):
    texts = ["Sure, 12 apples", "thanks thanks", "**bold** and *not*", "line\n- item\n- two", "😀 hi — Ana",
             "", "no match here"]
    timed, plain = compile_user_pattern(pattern), re.compile(pattern)
    for text in texts:
        assert bool(timed.search(text)) == bool(plain.search(text)), (pattern, text)
        assert timed.sub("", text) == plain.sub("", text), (pattern, text)


def test_a_pattern_re_and_regex_would_read_apart_is_refused_and_the_syntax_is_re_s(monkeypatch):
    """``[[:alpha:]]`` is a literal set to re (with a warning that this will change) and a POSIX class
    to regex; and the syntax is regex's VERSION0 (re's) even where a library made VERSION1 the default."""
    import regex

    re.purge()  # re warns only when it compiles, not for a pattern in its cache
    for pattern in ("[[:alpha:]]+", "[a-z--b]"):  # a POSIX class and a set difference to regex
        with pytest.raises(re.error, match=r"Possible (nested set|set difference) .*: re and regex read it apart"):
            compile_user_pattern(pattern)
    monkeypatch.setattr(regex, "DEFAULT_VERSION", regex.VERSION1)
    assert compile_user_pattern(r"\w+").compiled.flags & regex.VERSION0


def test_an_invalid_pattern_is_re_s_own_error():
    with pytest.raises(re.error):
        compile_user_pattern("(unclosed")
    with pytest.raises(ValueError, match=r"invalid regular expression"):
        resolve_attributes(["regex:(unclosed"])


def test_a_pattern_that_backtracks_without_end_stops_and_says_why(monkeypatch):
    monkeypatch.setattr(user_pattern, "PATTERN_SECONDS", 0.2)
    hostile = compile_user_pattern(r"(a|aa)+$")
    assert hostile.search("aaaa") and not hostile.search("aab")  # short texts match at once
    for step in (lambda text: hostile.search(text), lambda text: hostile.sub("", text)):
        with pytest.raises(PatternTimeout, match=r"^regex '\(a\|aa\)\+\$': still matching after 0.2 s on one text "
                                                 r"of 5,001 characters; .* rewrite it without them$"):
            step("a" * 5000 + "b")


def test_the_audit_names_the_row_the_pattern_hangs_on(tmp_path, monkeypatch, capsys):
    from badpo.cli import main

    monkeypatch.setattr(user_pattern, "PATTERN_SECONDS", 0.2)
    rows = [{"prompt": f"p{i}", "chosen": f"fine {i}", "rejected": f"other {i}", "annotator": f"a{i % 3}"}
            for i in range(6)]
    rows[4]["chosen"] = "a" * 5000 + "b"
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["audit", str(data), "--attribute", "tail=regex:(a|aa)+$"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"badpo audit: {data}: row 4: regex '(a|aa)+$': still matching after 0.2 s")
