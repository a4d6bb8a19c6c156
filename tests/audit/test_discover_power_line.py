""""Nothing found" says what it does not cover (issue 49, item 10): "the smallest effect these
data could have shown" read as reassurance where an attribute no candidate carries, or one too
rare to test, may still be biased."""

from __future__ import annotations

from badpo.auditing.discover import discover
from badpo.auditing.discover_report import format_discovery
from fixtures.discover_worlds import signed_world


def test_nothing_found_names_what_the_power_line_does_not_cover():
    result = discover(signed_world(0, null=True, n_pairs=600))
    assert not result.findings and result.tested
    lines = format_discovery(result).splitlines()
    power = next(line for line in lines if line.startswith("the smallest effect"))
    assert f"on the {len(result.tested)} tested candidates only (power 80% on both halves)" in power
    covered = lines[lines.index(power) + 1]
    assert covered.startswith("not covered: a bias on an attribute no candidate carries (only the library's "
                              "attributes and the data's words and two-word phrases were tested)")
    assert f"the {len(result.untestable)} candidate(s) below that could not be tested or never differ" in covered
    assert covered.endswith("and a smaller bias. Nothing found is not evidence that the annotators are unbiased.")
