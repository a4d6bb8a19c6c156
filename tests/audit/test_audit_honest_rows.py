"""The audit keeps people and rows honest (issue 37, item 4).

Before: a file with every judgment twice was audited without a word (every standard error shrinks
by sqrt 2); ``A01`` and ``A01 ``, or ``René`` in NFC and NFD, were two annotators; a CSV annotator
named ``NA``, ``None`` or ``null``, or an answer ``N/A``, was refused as null although CSV cells
are text; a file without a ``prompt`` column blamed "row 0, field prompt".
"""

from __future__ import annotations

import csv
import json
import unicodedata
import warnings

import pytest

import badpo
from badpo.cli import main
from badpo.core.config import ConfigError
from badpo.core.judgments import duplicate_rows, validate_judgments
from badpo.data.sources import read_judgment_source

SIGNOFF = "signoff=regex:thanks"


def rows(n: int = 24) -> list[dict]:
    """Judgments by three annotators; the signed side wins two of three."""
    out = []
    for i in range(n):
        signed, plain = f"answer {i} thanks", f"answer {i} bye"
        chosen, rejected = (signed, plain) if i % 3 else (plain, signed)
        out.append({"prompt": f"question {i % 6}", "chosen": chosen, "rejected": rejected, "annotator": f"A{i % 3}"})
    return out


def write_jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def write_csv(path, records, header=("prompt", "chosen", "rejected", "annotator")) -> str:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([[r.get(h, "") for h in header] for r in records])
    return str(path)


def test_exact_duplicates_are_said_and_kept_or_dropped_by_option(tmp_path, capsys):
    data = write_jsonl(tmp_path / "twice.jsonl", rows() + rows())
    assert duplicate_rows(validate_judgments(rows() + rows())) == list(range(24, 48))
    kept = badpo.audit(data, SIGNOFF)
    assert kept.audit.n_judgments == 48
    assert kept.summary().startswith(f"24 exact duplicate judgment(s) in {data} (first: row 24, 0-based), kept: ")
    dropped = badpo.audit(data, SIGNOFF, duplicates="drop")
    assert dropped.audit.n_judgments == 24 and "dropped (--duplicates drop)" in dropped.summary().splitlines()[0]
    once = badpo.audit(write_jsonl(tmp_path / "once.jsonl", rows()), SIGNOFF)
    assert "duplicate" not in once.summary()
    assert main(["audit", data, "-a", SIGNOFF, "--duplicates", "drop"]) == 0
    assert "24 exact duplicate judgment(s)" in capsys.readouterr().out


def test_annotator_ids_are_normalised_and_the_merge_is_said():
    nfc = unicodedata.normalize("NFC", "René")
    nfd = unicodedata.normalize("NFD", "René")
    assert nfc != nfd
    records = rows(6)
    for record, name in zip(records, ["A01", "A01 ", " A01", nfc, nfd, "B7"]):
        record["annotator"] = name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        judgments = validate_judgments(records)
    assert [j.annotator for j in judgments] == ["A01", "A01", "A01", nfc, nfc, "B7"]
    said = [str(w.message) for w in caught if "annotator ids normalised" in str(w.message)]
    assert len(said) == 1 and "3 spelling(s) merged into another of the same annotator, 2 annotator(s)" in said[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        validate_judgments(rows(6))
    assert not [w for w in caught if "normalised" in str(w.message)]  # nothing to say


def test_csv_cells_are_text_and_only_an_empty_cell_is_null(tmp_path):
    records = rows(4)
    for record, name in zip(records, ["NA", "None", "null", "N/A"]):
        record["annotator"] = name
    records[0]["chosen"] = "N/A"
    judgments = read_judgment_source(write_csv(tmp_path / "na.csv", records)).rows
    assert [j.annotator for j in judgments] == ["NA", "None", "null", "N/A"] and judgments[0].chosen == "N/A"
    records[1]["annotator"] = ""
    with pytest.raises(ValueError, match="row 1, field 'annotator': null"):
        read_judgment_source(write_csv(tmp_path / "empty.csv", records))


def test_a_missing_column_is_named_with_the_columns_the_file_has(tmp_path, cli_error):
    records = [{"question": r["prompt"], **{k: v for k, v in r.items() if k != "prompt"}} for r in rows(4)]
    data = write_csv(tmp_path / "q.csv", records, header=("question", "chosen", "rejected", "annotator"))
    with pytest.raises(ConfigError) as raised:
        read_judgment_source(data)
    message = str(raised.value)
    assert "no column holds the field 'prompt'" in message and "'question'" in message
    assert "--column prompt=COLUMN" in message and "columns.prompt=COLUMN" in message and "row 0" not in message
    line = cli_error(["audit", data, "-a", SIGNOFF])
    assert "no column holds the field 'prompt'" in line
    assert badpo.audit(data, SIGNOFF, columns={"prompt": "question"}).audit.n_judgments == 4
    jsonl = write_jsonl(tmp_path / "q.jsonl", records)
    with pytest.raises(ConfigError, match=r"no column holds the field 'prompt'; its columns are \['question'"):
        read_judgment_source(jsonl)


def test_a_stream_state_with_a_negative_offset_is_one_line_naming_it(tmp_path):
    from badpo.auditing.stream_file import run_stream

    data, state = write_jsonl(tmp_path / "s.jsonl", rows(12)), tmp_path / "state.json"
    run_stream(data, state, [SIGNOFF])
    saved = json.loads(state.read_text())
    saved["source"]["offset"] = -5
    state.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"state.json: its 'source' has a negative offset, line or row count"):
        run_stream(data, state, [SIGNOFF])


def test_a_second_reader_of_one_stream_state_is_refused(tmp_path):
    from badpo.auditing.stream_file import one_reader, run_stream

    data, state = write_jsonl(tmp_path / "s.jsonl", rows(12)), tmp_path / "state.json"
    with one_reader(state):  # a --follow holding the state
        with pytest.raises(ValueError, match="another badpo audit --stream is reading this state now"):
            run_stream(data, state, [SIGNOFF])
    assert not state.exists()  # the refused reader wrote nothing
    run_stream(data, state, [SIGNOFF])  # released: the next reader goes on
    assert json.loads(state.read_text())["source"]["rows"] == 12
