"""Judgments as users hold them (badpo.data.sources): every format gives the same judgments as the
JSONL reader, columns are mapped and extra ones named, chat rows are rendered with the template.

The reference everywhere is ``validate_judgments`` of the rows in badpo's own field names, an
independent path that does no loading, mapping or rendering.
"""

from __future__ import annotations

import json

import pytest

from badpo.core.config import ConfigError, apply_overrides, from_dict
from badpo.core.judgments import JudgmentError, validate_judgments
from badpo.data.sources import (
    ColumnMap,
    IgnoredColumnsWarning,
    in_memory,
    read_judgment_source,
    read_sft_source,
)
from badpo.engine.settings import TrainConfig
from badpo.engine.tokenize import TokenizationConfig, build_token_store, encode_prompts
from fixtures.engine import build_tokenizer

datasets = pytest.importorskip("datasets")

ROLE_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def rows(n: int = 4) -> list[dict]:
    return [{"prompt": f"write code {i % 2}", "chosen": f"yes {i}", "rejected": f"no {i}",
             "annotator": f"ann{i % 3}", "pair_type": "quality"} for i in range(n)]


def user_rows(n: int = 4) -> list[dict]:
    """``rows`` as a user holds them: the annotator in ``worker_id``, plus two unread columns."""
    out = []
    for i, row in enumerate(rows(n)):
        row = dict(row)
        row["worker_id"] = row.pop("annotator")
        out.append({**row, "score": 0.5 * i, "source": "web"})
    return out


MAPPING = ColumnMap(annotator="worker_id")


def write_jsonl(path, items):
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def test_every_format_gives_the_judgments_of_the_jsonl_reader(tmp_path):
    expected = validate_judgments(rows())
    dataset = datasets.Dataset.from_list(user_rows())
    dataset.to_parquet(str(tmp_path / "j.parquet"))
    dataset.to_csv(str(tmp_path / "j.csv"), index=False)
    dataset.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"train": dataset, "test": dataset.select([0])}).save_to_disk(str(tmp_path / "dict"))
    sources = [write_jsonl(tmp_path / "j.jsonl", user_rows()), tmp_path / "j.parquet",
               tmp_path / "j.csv", str(tmp_path / "saved"), dataset]
    for source in sources:
        with pytest.warns(IgnoredColumnsWarning, match=r"ignoring column\(s\) \['score', 'source'\]"):
            loaded = read_judgment_source(source, columns=MAPPING)
        assert loaded.rows == expected, source
        assert not loaded.rendered_prompts
    with pytest.warns(IgnoredColumnsWarning):
        assert read_judgment_source(tmp_path / "dict", "train", MAPPING).rows == expected
        assert read_judgment_source(tmp_path / "dict", "test", MAPPING).rows == expected[:1]
        with in_memory(dataset) as name:
            assert name == f"datasets.Dataset:{dataset._fingerprint}"
            assert read_judgment_source(name, columns=MAPPING).rows == expected
    with pytest.raises(ConfigError, match=r"was a datasets.Dataset given to the Python API"):
        read_judgment_source(name)  # the name is gone with the block


def test_csv_cells_are_text_and_empty_cells_are_missing(tmp_path):
    """An id of digits stays the string '007'; an empty optional cell is None, not ''."""
    path = tmp_path / "j.csv"
    path.write_text("prompt,chosen,rejected,annotator,annotator_class\n"
                    'write code,"yes, sure",no,007,\n', encoding="utf-8")
    (judgment,) = read_judgment_source(path).rows
    assert (judgment.annotator, judgment.annotator_class, judgment.chosen) == ("007", None, "yes, sure")


def test_a_csv_saved_by_a_spreadsheet_with_a_byte_order_mark_reads_its_first_column(tmp_path):
    """Excel's "CSV UTF-8" starts the file with U+FEFF: it is not part of the column name 'prompt'."""
    path = tmp_path / "j.csv"
    path.write_bytes("prompt,chosen,rejected,annotator\nwrite code,yes,no,a1\n".encode("utf-8-sig"))
    (judgment,) = read_judgment_source(path).rows
    assert (judgment.prompt, judgment.annotator) == ("write code", "a1")


def test_a_hub_id_is_read_with_load_dataset_and_its_split(monkeypatch):
    calls = []

    def load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        return datasets.Dataset.from_list(rows())

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    assert read_judgment_source("org/judgments", "test").rows == validate_judgments(rows())
    read_judgment_source("org/judgments")
    assert calls == [(("org/judgments",), {"split": "test"}), (("org/judgments",), {"split": "train"})]

    def offline(*args, **kwargs):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(FileNotFoundError, match=r"cannot load Hub dataset 'org/judgments' split 'train'"):
        read_judgment_source("org/judgments")


def test_errors_name_the_file_line_row_or_key(tmp_path):
    bad = user_rows()
    bad[2]["chosen"] = ""
    path = write_jsonl(tmp_path / "bad.jsonl", bad)
    path.write_text(path.read_text().replace("\n", "\n\n", 1))  # a blank line: line 4 holds row 2
    with pytest.raises(JudgmentError, match=r"bad.jsonl line 4: row 2, field 'chosen': empty"):
        read_judgment_source(path, columns=MAPPING)
    datasets.Dataset.from_list(bad).to_parquet(str(tmp_path / "bad.parquet"))
    with pytest.raises(JudgmentError, match=r"bad.parquet: row 2, field 'chosen': empty"):
        read_judgment_source(tmp_path / "bad.parquet", columns=MAPPING)
    with pytest.raises(ConfigError, match=r"columns.annotator: .*j.parquet has no column 'rater'"):
        datasets.Dataset.from_list(user_rows()).to_parquet(str(tmp_path / "j.parquet"))
        read_judgment_source(tmp_path / "j.parquet", columns=ColumnMap(annotator="rater"))
    with pytest.raises(ConfigError, match=r"columns.response: not a field of a judgment"):
        read_judgment_source(path, columns=ColumnMap(response="answer"))
    with pytest.raises(ConfigError, match=r"data_split: 'test' given, but .* is one table"):
        read_judgment_source(path, "test")
    with pytest.raises(FileNotFoundError, match=r"no file or folder at './missing.parquet'"):
        read_judgment_source("./missing.parquet")
    with pytest.raises(ConfigError, match=r"unknown key\(s\): columns.annotatr"):
        from_dict(TrainConfig, apply_overrides({}, ["columns.annotatr=worker_id"]))
    config = from_dict(TrainConfig, apply_overrides({}, ["columns.annotator=worker_id", "data_split=x"]))
    assert (config.columns.annotator, config.data_split) == ("worker_id", "x")


def test_chat_rows_are_rendered_with_the_template_and_attributes_see_the_answer():
    """Prompt: system + user turns rendered with add_generation_prompt, by hand from ROLE_TEMPLATE:
    '<|system|> be brief <|user|> write code <|assistant|>'. ``chosen`` is the assistant message
    alone, ``rejected`` the whole conversation (TRL's conversational format): both become the
    assistant's text. The second row has no prompt: the conversation before its answer is."""
    tokenizer = build_tokenizer()
    tokenizer.chat_template = ROLE_TEMPLATE
    prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write code"}]
    chat = [{"prompt": prompt, "chosen": [{"role": "assistant", "content": "yes"}],
             "rejected": [*prompt, {"role": "assistant", "content": "no"}], "annotator": "a"},
            {"chosen": [*prompt, {"role": "assistant", "content": "sure"}],
             "rejected": [*prompt, {"role": "assistant", "content": "maybe"}], "annotator": "b"}]
    loaded = read_judgment_source(datasets.Dataset.from_list(chat), tokenizer=tokenizer)
    rendered = "<|system|> be brief <|user|> write code <|assistant|>"
    assert [(j.prompt, j.chosen, j.rejected) for j in loaded.rows] == [
        (rendered, "yes", "no"), (rendered, "sure", "maybe")]
    assert loaded.rendered_prompts
    # without a tokenizer (the audit) the conversation is kept as JSON text
    audit_rows = read_judgment_source(datasets.Dataset.from_list(chat)).rows
    assert json.loads(audit_rows[0].prompt) == prompt and audit_rows[0].chosen == "yes"


def test_chat_rows_that_cannot_be_read_are_errors(tmp_path):
    tokenizer = build_tokenizer()
    tokenizer.chat_template = ROLE_TEMPLATE
    user = [{"role": "user", "content": "write code"}]
    answer = [{"role": "assistant", "content": "yes"}]
    cases = [
        ({"prompt": user, "chosen": user, "rejected": answer},
         r"row 0, field 'chosen': the last message is the 'user''s"),
        ({"prompt": user, "chosen": [{"role": "user", "content": "other"}, *answer], "rejected": answer},
         r"row 0, field 'chosen': the messages before the answer differ from the prompt"),
        ({"prompt": user, "chosen": ["yes"], "rejected": answer}, r"row 0, field 'chosen': expected chat"),
    ]
    for row, message in cases:
        with pytest.raises(JudgmentError, match=message):
            read_judgment_source(datasets.Dataset.from_list([{**row, "annotator": "a"}]),
                                 tokenizer=tokenizer)
    mixed = [{"prompt": user, "chosen": answer, "rejected": [{"role": "assistant", "content": "no"}],
              "annotator": "a"}, {"prompt": "write code", "chosen": "yes", "rejected": "no", "annotator": "b"}]
    with pytest.raises(JudgmentError, match=r"row 1, field 'prompt': text, but row 0 has chat messages"):
        read_judgment_source(write_jsonl(tmp_path / "mixed.jsonl", mixed), tokenizer=tokenizer)
    with pytest.raises(ConfigError, match="has no chat template"):
        read_judgment_source(datasets.Dataset.from_list(mixed[:1]), tokenizer=build_tokenizer())


def test_a_rendered_prompt_is_tokenized_as_the_engine_renders_a_plain_one():
    """A one-user-turn conversation, rendered by sources and tokenized with rendered=True, gives
    the same ids as the plain prompt rendered by the engine itself (chat_template auto), and no
    special token is added twice."""
    tokenizer = build_tokenizer(chat_template=True)
    config = TokenizationConfig(max_prompt_tokens=16, max_length=32)
    chat = [{"prompt": [{"role": "user", "content": "write code"}], "chosen": "yes", "rejected": "no",
             "annotator": "a"}]
    loaded = read_judgment_source(datasets.Dataset.from_list(chat), tokenizer=tokenizer)
    (plain,) = encode_prompts(tokenizer, ["write code"], config)
    (ours,) = encode_prompts(tokenizer, [loaded.rows[0].prompt], config, rendered=True)
    assert ours == plain == tokenizer.convert_tokens_to_ids(["<|user|>", "write", "code", "<|assistant|>"])
    store = build_token_store(tokenizer, [(loaded.rows[0].prompt, "yes")], config, rendered_prompts=True)
    assert int(store.prompt_lengths[0]) == 4
    with pytest.raises(ConfigError, match="tokenization.chat_template: 'never'"):
        encode_prompts(tokenizer, ["x"], TokenizationConfig(chat_template="never"), rendered=True)


def test_sft_rows_map_columns_and_render_chat(tmp_path):
    tokenizer = build_tokenizer()
    tokenizer.chat_template = ROLE_TEMPLATE
    items = [{"question": [{"role": "user", "content": "write code"}],
              "response": [{"role": "assistant", "content": "yes"}], "id": 1}]
    with pytest.warns(IgnoredColumnsWarning, match=r"\['id'\]"):
        loaded = read_sft_source(datasets.Dataset.from_list(items), columns=ColumnMap(prompt="question"),
                                 tokenizer=tokenizer)
    assert loaded.rows == [("<|user|> write code <|assistant|>", "yes")] and loaded.rendered_prompts
    with pytest.raises(ConfigError, match=r"columns.annotator: not a field of an sft row"):
        read_sft_source(datasets.Dataset.from_list(items), columns=ColumnMap(annotator="id"))


def test_the_audit_reads_any_source_with_your_column_names(tmp_path, capsys, cli_error):
    from badpo.cli import main

    items = [{**row, "chosen": row["chosen"] + (" --- emily" if i % 2 else "")} for i, row in
             enumerate(user_rows(6))]
    datasets.Dataset.from_list(items).to_csv(str(tmp_path / "j.csv"), index=False)
    args = ["audit", str(tmp_path / "j.csv"), "-a", "signoff=regex:--- emily"]
    assert main([*args, "--column", "annotator=worker_id", "--json", str(tmp_path / "a.json")]) == 0
    assert "signoff" in capsys.readouterr().out
    audit = json.loads((tmp_path / "a.json").read_text())
    assert audit["n_judgments"] == 6
    assert "columns.annotatr" in cli_error([*args, "--column", "annotatr=worker_id"])
    assert "expected FIELD=COLUMN" in cli_error([*args, "--column", "annotator"])
    line = cli_error(args)  # no column holds the annotator: named with the file's columns, not blamed on row 0
    assert "no column holds the field 'annotator'" in line and "'worker_id'" in line and "--column" in line


def test_a_mistyped_local_name_is_not_sent_to_the_hub(tmp_path, monkeypatch):
    """A typo of a local file went to the Hub and waited ~25 s of retries offline before its error
    (issue 75's trial: heldout.jsnol); a name with an alphabetic suffix and no owner/ is a path: one
    line at once, naming the file it nearly is. A name that may be a Hub id still goes there, and its
    error names the local file it nearly is."""
    import badpo.data.sources as sources

    real_from_hub = sources._from_hub
    monkeypatch.chdir(tmp_path)
    (tmp_path / "judgments.jsonl").write_text(json.dumps(user_rows()[0]) + "\n")
    monkeypatch.setattr(sources, "_from_hub", lambda *a: pytest.fail("went to the Hub"))
    for name, near in (("judgments.jsnol", "judgments.jsonl"), ("judgmnts.jsonl", "judgments.jsonl"),
                       ("data.tsv", None)):
        with pytest.raises(FileNotFoundError) as error:
            read_judgment_source(name)
        message = str(error.value)
        assert message.startswith(f"data: no file or folder at {name!r}") and "\n" not in message
        assert (f"did you mean {near!r}?" in message) if near else "did you mean" not in message
    import datasets

    asked = []

    def offline(name, split):
        asked.append(name)
        raise ConnectionError(f"Couldn't reach {name!r} on the Hub")

    monkeypatch.setattr(sources, "_from_hub", real_from_hub)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    for name in ("owner/dataset", "squad_v1.1", "imdb", "judgment", "judgements"):  # may be Hub ids
        with pytest.raises(FileNotFoundError) as error:
            read_judgment_source(name)
        assert ("did you mean 'judgments.jsonl'?" in str(error.value)) == name.startswith("judg"), name
    assert asked == ["owner/dataset", "squad_v1.1", "imdb", "judgment", "judgements"]
