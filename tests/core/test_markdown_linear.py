"""Markdown is found and stripped in time linear in the text (issue 49, item 3).

One hostile answer stalled audit, discover and training: 60 KB of ``*`` took 64 s, and the bold
and link regexes grow quadratically (``**a `` repeated, cubically) with the row. Bold and links are
now scanned with exactly their regex's spans, the table's pipe line is a lookahead, and markup
nested deeper than 16 passes is flattened; the results on normal markdown are unchanged.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import textwrap

import pytest

from badpo.core.attributes import resolve_attributes
from badpo.core.markdown import MARKDOWN_PATTERNS, has_markdown, markdown_constructs, strip_markdown
from badpo.core.markdown_scan import BOLD, LINK, LINK_WITH_IMAGE

# the table regex as it was, which backtracked over the pipes of a line
_OLD_TABLE = re.compile(r"^[^\n]*\|[^\n]*\n[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?$", re.MULTILINE)

NORMAL = [
    "# Title\n\nSome **bold** and __strong__ words, a [link](https://x.org \"t\") and ![img](a.png).",
    "- **Step 1**: mix\n- *Step 2*: bake at 180°C\n  1. check `oven`\n> a quote with **emphasis**",
    "| a | b |\n|---|:-:|\n| 1 | **2** |\n| 3 | [4](u) |\n\nafter the table",
    "x**2 + y**2 = z**2, snake_case and __init__ stay; 2*x + 3*y; --- Jane Doe",
    "```python\nprint('**not bold**')\n```\n**a** **b** [c](d)[e](f) **unclosed",
    "> - > nested **[bold link](u)** and `code`\n>     > deep",
    "***both***, **a **b** c**, [a [b] c](u), [x](y z), ** spaced **, __x__y, a__b__",
]


def _spans(pattern, text: str, groups: int = 0) -> list:
    return [(m.span(), tuple(m.group(i + 1) for i in range(groups))) for m in pattern.finditer(text)]


@pytest.mark.parametrize("scanned, groups", [(BOLD, 0), (LINK, 0), (LINK_WITH_IMAGE, 2)])
def test_the_scans_give_their_regex_s_spans(scanned, groups):
    regex = re.compile(scanned.pattern)
    rng = random.Random(49)
    texts = list(NORMAL)
    for alphabet in ("*_ a\n\tb", "[]()! \"a\t\nb", "*_[]()!\" a\nb\t"):
        texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(3000)]
    for text in texts:
        assert _spans(scanned, text, groups) == _spans(regex, text, groups), text
        assert scanned.sub("", text) == regex.sub("", text), text


def test_the_table_lookahead_matches_as_before():
    rng = random.Random(3)
    texts = [*NORMAL, *("".join(rng.choice("|-: a\n") for _ in range(rng.randint(0, 30))) for _ in range(3000))]
    for text in texts:
        assert _spans(MARKDOWN_PATTERNS["table"], text) == _spans(_OLD_TABLE, text), text


# what the regexes before issue 49 read and left of NORMAL (computed with them)
BEFORE = [
    (("heading", "bold", "link"), "Title\n\nSome bold and strong words, a link (https://x.org) and img (a.png)."),
    (("bullet_list", "ordered_list", "bold", "blockquote", "inline_code"),
     "Step 1: mix\n*Step 2*: bake at 180°C\n  check oven\na quote with emphasis"),
    (("bold", "table", "link"), "a, b\n1, 2\n3, 4 (u)\n\nafter the table"),
    (("bold",), "x**2 + y**2 = z**2, snake_case and init stay; 2*x + 3*y; --- Jane Doe"),
    (("code_fence", "bold", "link"), "print('not bold')\na b c (d)e (f) **unclosed"),
    (("bold", "blockquote", "link", "inline_code"), "nested bold link (u) and code\ndeep"),
    (("bold",), "*both*, a b c, [a [b] c](u), [x](y z), ** spaced **, x__y, a__b"),
]


def test_normal_markdown_reads_and_strips_as_before():
    assert [(markdown_constructs(text), strip_markdown(text)) for text in NORMAL] == BEFORE
    assert all(not has_markdown(plain) for _, plain in BEFORE)


def test_markup_nested_past_the_passes_is_flattened_and_leaves_none():
    for text in ("> " * 40 + "x", "- > " * 40 + "x", "**" * 40 + "x" + "**" * 40, "1. - # " * 30 + "y"):
        plain = strip_markdown(text)
        assert not has_markdown(plain) and plain.strip().endswith(("x", "y")), plain


def test_a_regex_spec_of_a_scanned_construct_is_matched_by_the_scan():
    attribute = resolve_attributes([f"md_bold=regex:{BOLD.pattern}"]).attributes[0]
    assert attribute.fn("", "a **big** deal") == 1.0 and attribute.fn("", "x**2") == 0.0
    assert attribute.remove("a **big** deal") == "a  deal"


_HOSTILE = textwrap.dedent("""
    import json, time
    from badpo.auditing.candidate_attributes import LIBRARY
    from badpo.core.attributes import resolve_attributes
    from badpo.core.markdown import has_markdown, strip_markdown
    attributes = resolve_attributes(["markdown", *[s for s in LIBRARY if s.startswith("md_")]]).attributes
    rows = {"stars": "*" * 10**6, "bold starts": "**a " * 250_000, "underscores": "_" * 10**6,
            "brackets": "[" * 10**6, "link starts": "[a](" * 250_000, "pipes": "|" * 10**6 + "\\n|-|",
            "quotes": "> " * 500_000 + "x", "nested bold": "**" * 250_000 + "x" + "**" * 250_000}
    seconds = {}
    for name, text in rows.items():
        start = time.monotonic()
        values = [a.fn("", text) for a in attributes]
        assert not has_markdown(strip_markdown(text)), name
        seconds[name] = time.monotonic() - start
    print(json.dumps(seconds))
""")


def test_a_one_megabyte_hostile_row_is_read_and_stripped_in_seconds():
    """Each row takes about a second on two busy cores (every markdown attribute of the audit and
    discover's library, and the strip); the bounds are generous for a slow CI box, and the old
    patterns took minutes on a twentieth of such a row."""
    done = subprocess.run([sys.executable, "-c", _HOSTILE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seconds = json.loads(done.stdout)
    assert len(seconds) == 8 and all(value < 20 for value in seconds.values()), seconds
