"""Data in the audit report is text (issue 76's re-trial): an outlying annotator whose id holds
Markdown or HTML is written into README.md escaped, and report.html (built from that README) shows
it as the characters it is, with no live code, emphasis or tag."""

from __future__ import annotations

import json
import random

from badpo.cli import main

MARKUP = "a|b`c`**bold**"
TAG = "<script>alert(1)</script>"


def _judgments(path) -> None:
    """600 pairs, 3 of 8 annotators each; the two ids with markup favour the signed side strongly."""
    rng = random.Random(0)
    ids = [MARKUP, TAG, *(f"plain_{k}" for k in range(6))]
    with open(path, "w", encoding="utf-8") as handle:
        for pair in range(600):
            plain, signed = "word " * rng.randint(5, 30), "word " * rng.randint(5, 30) + "-- cheers"
            for annotator in rng.sample(ids, 3):
                chance = 0.95 if annotator in (MARKUP, TAG) else 0.5
                chosen, rejected = (signed, plain) if rng.random() < chance else (plain, signed)
                handle.write(json.dumps({"prompt": f"q{pair}", "chosen": chosen, "rejected": rejected,
                                         "annotator": annotator}) + "\n")


def test_an_outlying_id_with_markup_is_text_in_the_readme_and_the_page(tmp_path, capsys):
    _judgments(tmp_path / "j.jsonl")
    assert main(["audit", str(tmp_path / "j.jsonl"), "-a", "signoff=regex:-- cheers$",
                 "--report", str(tmp_path / "report")]) == 0
    readme = (tmp_path / "report" / "README.md").read_text(encoding="utf-8")
    outlying = next(line for line in readme.splitlines() if line.startswith("- outlying:"))
    assert r"a\|b\`c\`\*\*bold\*\*" in outlying and "&lt;script&gt;alert(1)&lt;/script&gt;" in outlying
    assert "<script>" not in readme and "**bold**" not in readme
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "<script>alert" not in page and "<strong>bold" not in page and "<code>c</code>" not in page


def test_a_pair_id_reused_for_other_texts_is_refused_as_training_refuses_it(tmp_path, cli_error):
    """The audit read a file whose pair_id named two different comparisons, which train refuses
    (issue 76's re-trial): one check for both, naming the row."""
    rows = [{"prompt": "p", "chosen": "a", "rejected": "b", "annotator": "r1", "pair_id": "x"},
            {"prompt": "p", "chosen": "b", "rejected": "a", "annotator": "r2", "pair_id": "x"},
            {"prompt": "p", "chosen": "c", "rejected": "a", "annotator": "r3", "pair_id": "x"}]
    (tmp_path / "j.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    line = cli_error(["audit", str(tmp_path / "j.jsonl"), "-a", "length"])
    assert "row 2: pair 'x' compares other texts than its first row" in line
