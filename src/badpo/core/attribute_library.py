"""The attribute library of ``badpo audit --discover``: the specs it screens, each as ``badpo train``
takes it, and, for every named one, the name alone as a spec (``-a exclamation`` is
``exclamation=regex:!``; :data:`badpo.core.attributes.ATTRIBUTE_KINDS` reads :data:`LIBRARY_SPECS`).
What each one marks: :mod:`badpo.auditing.candidate_attributes`."""

from __future__ import annotations

from badpo.core.markdown import MARKDOWN_PATTERNS

__all__ = ["LIBRARY", "LIBRARY_SPECS"]

_TABLE = MARKDOWN_PATTERNS["table"].pattern
_BOLD = MARKDOWN_PATTERNS["bold"].pattern

LIBRARY: tuple[str, ...] = (
    "length",
    "markdown",
    "names",
    r"md_list=regex:(?m)^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S",
    r"md_header=regex:(?m)^ {0,3}#{1,6}[ \t]+\S",
    f"md_bold=regex:{_BOLD}",
    r"md_code=regex:(?m)^ {0,3}(?:```|~~~)|`[^`\n]+`",
    f"md_table=regex:(?m){_TABLE}",
    r"emoji=regex:[\U0001F300-\U0001FAFF\u2600-\u27BF\U0001F000-\U0001F2FF]",
    r"exclamation=regex:!",
    r"question=regex:\?",
    r"first_person=regex:\b(?:I|I'm|I've|I'd|I'll|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Oo]ur|[Uu]s)\b",
    r"second_person=regex:(?i)\b(?:you|your|yours|yourself|yourselves)\b",
    r"hedge=regex:(?i)\b(?:perhaps|possibly|probably|maybe|might|it seems|seems to|I think|I believe"
    r"|arguably|likely|generally|typically)\b",
    r"refusal=regex:(?i)\b(?:sorry|apologi[sz]e|apologies|I can(?:no|')t|I am unable|I'm unable"
    r"|I won't|as an AI)\b",
    r"number=regex:\d",
    r"unit=regex:\d\s?(?:%|°[CF]?|(?:km|kg|mg|g|m|cm|mm|ml|l|s|ms|h|min|mph|GB|MB|KB|USD|EUR)\b)|[$€£]\s?\d",
    r"url=regex:https?://|\bwww\.",
    r"signature=regex:(?m)^--- \S",
    r"opens_affirmation=regex:(?i)\A\s*(?:sure|certainly|of course|absolutely|great question|yes)\b",
    r"ends_question=regex:\?\s*\Z",
    r"ends_exclamation=regex:!\s*\Z",
)
"""Attribute specs, each as ``badpo train`` takes it (a name for every ``regex:`` one)."""
LIBRARY_SPECS: dict[str, str] = {spec.partition("=")[0]: spec for spec in LIBRARY if "=regex:" in spec}
"""Each named library spec by its name: what the name alone declares."""
