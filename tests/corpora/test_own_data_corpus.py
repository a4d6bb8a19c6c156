"""The own-data corpus: a user's CSV in their own column names, split by prompt deterministically
(or with held-out judgments and prompts given), written in badpo's fields; the experiment runner
logs what was chosen and refuses a corpus whose source file changed since it was built."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from badpo.core.config import ConfigError, from_dict
from badpo.core.judgments import read_judgments, validate_judgments
from badpo.corpora.builders import build_and_describe, corpus_sources
from badpo.corpora.own_data import OwnDataConfig, build_own_data, split_by_prompt
from badpo.data.sources import IgnoredColumnsWarning
from badpo.experiment.backend import engine_backend
from badpo.experiment.config import ExperimentConfig
from badpo.experiment.runner import prepare_corpus
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.table import readout_unavailable
from fixtures.files import read_jsonl
from fixtures.own_data import ATTRIBUTE, COLUMNS, user_rows, write_user_csv

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path, **changes) -> dict:
    """own-data settings on the user's CSV (written to tmp_path/mine.csv unless ``data`` is given)."""
    data = changes.pop("data") if "data" in changes else str(write_user_csv(tmp_path / "mine.csv"))
    return {"data": data, "columns": COLUMNS, "heldout_share": 0.25, **changes}


def test_the_split_is_by_prompt_exact_and_independent_of_row_order():
    """40 prompt ids, share 0.25: the 10 ids with the smallest sha256("0:<id>") are held out (all of
    their judgments), whatever order the rows come in; another seed holds out others."""
    rows = [{"prompt": f"prompt {i % 40}", "chosen": "a", "rejected": "b", "annotator": f"k{i % 7}",
             "prompt_id": f"id{i % 40}"} for i in range(160)]
    judgments = validate_judgments(rows)
    train, heldout, how = split_by_prompt(judgments, 0.25, 0)
    expected = set(sorted((f"id{i}" for i in range(40)),
                          key=lambda group: hashlib.sha256(f"0:{group}".encode()).hexdigest())[:10])
    assert {j.prompt_id for j in heldout} == expected and len(heldout) == 40 and len(train) == 120
    assert not {j.prompt_id for j in train} & expected
    assert how == {"held_out": "split", "by": "prompt_id", "share": 0.25, "seed": 0, "groups": 40,
                   "heldout_groups": 10}
    shuffled = list(judgments)
    random.Random(1).shuffle(shuffled)
    assert {j.prompt_id for j in split_by_prompt(shuffled, 0.25, 0)[1]} == expected
    assert {j.prompt_id for j in split_by_prompt(judgments, 0.25, 1)[1]} != expected


def test_without_prompt_ids_the_split_is_by_prompt_text_and_keeps_one_of_each_side():
    """Rounding: 3 prompts at share 0.1 -> round(0.3) = 0, raised to 1; at 0.9 -> 3, lowered to 2."""
    judgments = validate_judgments([{"prompt": f"p{i % 3}", "chosen": "a", "rejected": "b", "annotator": "k"}
                                    for i in range(6)])
    for share, held in ((0.1, 1), (0.9, 2)):
        _, heldout, how = split_by_prompt(judgments, share, 0)
        assert how["by"] == "prompt" and how["heldout_groups"] == held == len({j.prompt for j in heldout})
    with pytest.raises(ValueError, match="data: data has 1 distinct prompt"):
        split_by_prompt(judgments[:1], 0.5, 0)


def test_a_user_csv_becomes_the_corpus_folder(tmp_path):
    """12 prompts x 4 judgments in the user's columns; share 0.25 holds out 3 prompts (12
    judgments). Every row lands in one file, in badpo's fields; the evaluation prompts are the held-out
    prompts, each once; stats.json records the source's sha256 and the choice."""
    out = tmp_path / "corpus"
    text = build_and_describe("own-data", _config(tmp_path), out)
    train, heldout = read_judgments(out / "train.jsonl"), read_judgments(out / "heldout.jsonl")
    assert (len(train), len(heldout)) == (36, 12)
    assert sorted((j.prompt_id, j.annotator, j.chosen) for j in train + heldout) == sorted(
        (r["question_id"], r["rater"], r["answer_won"]) for r in user_rows())
    prompts = read_jsonl(out / "eval_prompts.jsonl")
    assert [p["prompt"] for p in prompts] == list(dict.fromkeys(j.prompt for j in heldout)) and len(prompts) == 3
    stats = json.loads((out / "stats.json").read_text())
    assert stats["split"]["by"] == "prompt_id" and stats["split"]["heldout_groups"] == 3
    source = _config(tmp_path, data=str(tmp_path / "mine.csv"))
    assert stats["sha256"]["data"] == corpus_sources("own-data", source)["data"]
    assert "held out: 12 judgments on 3 of the 12 distinct prompt ids (heldout_share 0.25" in text
    assert "evaluation prompts: 3 from the held-out judgments' distinct prompts" in text


def test_given_heldout_judgments_and_prompts_are_used_as_they_are(tmp_path):
    """All of `data` trains; the held-out file's prompts that also appear in training are counted;
    the prompts file is read through columns.prompt."""
    rows = user_rows(8)
    write_user_csv(tmp_path / "mine.csv", rows[:24])
    write_user_csv(tmp_path / "held.csv", rows[20:])  # prompt q05 is on both sides
    (tmp_path / "prompts.csv").write_text("query,note\nwrite code first,x\nmaybe here,y\n")
    with pytest.warns(IgnoredColumnsWarning, match="ignoring column"):  # named, not dropped silently
        stats = build_own_data(from_dict(OwnDataConfig, _config(
            tmp_path, data=str(tmp_path / "mine.csv"), heldout=str(tmp_path / "held.csv"),
            prompts=str(tmp_path / "prompts.csv"))), tmp_path / "corpus")
    assert (stats["train"], stats["heldout"], stats["eval_prompts"]) == (24, 12, 2)
    assert stats["split"] == {"held_out": "given", "shared_prompts": 1}
    assert [p["prompt"] for p in read_jsonl(tmp_path / "corpus" / "eval_prompts.jsonl")] == [
        "write code first", "maybe here"]


@pytest.mark.parametrize("changes, message", [
    ({"heldout_share": 1.0}, "heldout_share: must lie in (0, 1)"),
    ({"heldout_split": "test"}, "heldout_split: the split of `heldout`"),
    ({"data": ""}, "data: name your judgments"),
    ({"columns": {"annotator": "worker"}}, "worker"),
])
def test_bad_settings_are_one_line_errors_naming_the_key(tmp_path, changes, message):
    with pytest.raises((ConfigError, ValueError), match=message.replace("(", r"\(").replace(")", r"\)")):
        build_own_data(from_dict(OwnDataConfig, _config(tmp_path, **changes)), tmp_path / "corpus")


def test_chat_prompts_are_refused_with_the_reason(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"prompt": [{"role": "user", "content": "hi"}], "chosen": "a", "rejected": "b",
                                "annotator": "k"}) + "\n")
    with pytest.raises(ConfigError, match="data: the prompts are chat messages"):
        build_own_data(OwnDataConfig(data=str(path)), tmp_path / "corpus")


def test_the_runner_logs_the_split_and_refuses_a_corpus_whose_file_changed(tmp_path):
    config = from_dict(ExperimentConfig, {
        "output_dir": str(tmp_path / "out"), "corpus": {"builder": "own-data", "config": _config(tmp_path)},
        "arms": [{"name": "DPO", "method": "dpo"}]})
    lines: list[str] = []
    backend = engine_backend(evaluate=None)
    folder = prepare_corpus(config, backend, tmp_path / "out", lines.append)
    assert any(line.startswith("corpus: held out: 12 judgments on 3 of the 12") for line in lines)
    assert any(f"written to {folder}:" in line for line in lines)  # the final folder, not the temporary one
    assert "outdir" not in json.loads((folder / "stats.json").read_text())
    assert prepare_corpus(config, backend, tmp_path / "out", lines.append) == folder  # reused
    write_user_csv(tmp_path / "mine.csv", user_rows(13))
    with pytest.raises(ConfigError, match="corpus: data changed since .* was built from it; delete that folder"):
        prepare_corpus(config, backend, tmp_path / "out", lines.append)


def test_a_rate_of_an_undeclared_or_given_attribute_is_refused_when_planned():
    config = EvalConfig(attributes=(ATTRIBUTE, "given:signed"))
    assert readout_unavailable(config, "attribute_rates.emily.policy") is None
    assert "'other' is not a declared attribute" in readout_unavailable(config, "attribute_rates.other.policy")
    assert "given: attribute" in readout_unavailable(config, "attribute_rates.signed.policy")


def test_the_example_csv_reads_through_the_shipped_configs_columns(tmp_path, cli_training, capsys):
    """``badpo build example-csv`` (20 prompts) then the corpus of configs/experiment_tiny_own_data.yaml
    pointed at it: every column the config maps is in the file, 4 of the 20 prompts are held out,
    and the tiny model saved beside it reads every text (no unknown token)."""
    from transformers import AutoTokenizer

    from badpo.core.config import load_config

    assert cli_training(["build", "example-csv", str(tmp_path / "ex"), "n_pairs=20"]) == 0
    assert "80 judgments by" in capsys.readouterr().out
    config = load_config(ExperimentConfig, ROOT / "configs" / "experiment_tiny_own_data.yaml",
                         [f"output_dir={tmp_path / 'out'}", f"corpus.config.data={tmp_path / 'ex' / 'judgments.csv'}"])
    folder = prepare_corpus(config, engine_backend(evaluate=None), tmp_path / "out", lambda line: None)
    stats = json.loads((folder / "stats.json").read_text())
    assert (stats["read"], stats["split"]["heldout_groups"], stats["annotators"] > 1) == (80, 4, True)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "ex" / "model")
    texts = [t for j in read_judgments(folder / "train.jsonl") for t in (j.prompt, j.chosen, j.rejected)]
    assert all(tokenizer.unk_token_id not in ids for ids in tokenizer(texts)["input_ids"])
