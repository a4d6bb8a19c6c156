"""Text the tokenizer cannot read is named as such (issue 21, item 7): the share of unknown tokens
per side is kept in run.json (sft.json) and said on screen; above 5% a warning, above 50% an error
naming the tokenizer and the side, in ``audit``, ``sft``, ``train`` and ``rm``.

The test tokenizer (fixtures.engine) is a word list: a word outside it is ``<unk>``. Before the
check, mostly unknown text trained (sft) or was refused by its symptom, "chosen and rejected are
the same tokens after tokenization".
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest

from badpo.cli import main
from badpo.core.config import apply_overrides, from_dict
from badpo.engine.settings import RMConfig, SFTConfig, TrainConfig
from fixtures.engine import judgment_rows, make_config, write_jsonl

ENGLISH = ["zebra quick brown fox jumps", "over lazy dogs tonight please", "cooking dinner takes hours",
           "answers vary widely indeed"]


def english_rows() -> list[dict]:
    """The fixture's judgments with every response replaced by words outside the vocabulary."""
    rows = []
    for row in judgment_rows():
        pair = int(row["pair_id"][1:])
        a, b = ENGLISH[pair % 4], ENGLISH[(pair + 1) % 4]
        first = row["chosen"] < row["rejected"]
        rows.append({**row, "chosen": a if first else b, "rejected": b if first else a})
    return rows


def sprinkled_rows() -> list[dict]:
    """One unknown word at the end of every response: 11% to 25% of a side's tokens."""
    return [{**r, "chosen": r["chosen"] + " zebra", "rejected": r["rejected"] + " zebra"} for r in judgment_rows()]


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("coverage")
    save_model_dir(root / "model")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    write_jsonl(root / "english.jsonl", english_rows())
    write_jsonl(root / "sprinkled.jsonl", sprinkled_rows())
    return root


def argv(world: Path, stage: str, name: str, data: str, *overrides: str) -> list[str]:
    """The CLI call of a stage on ``data`` (a file of the world) with a tiny config."""
    config_class, extra = {
        "train": (TrainConfig, {"method": "dpo", "cache_dir": str(world / "cache")}),
        "rm": (RMConfig, {"variant": "none"}),
        "sft": (SFTConfig, {"source": "judgments", "epochs": 1.0, "batch_size": 6, "micro_batch_size": 6}),
    }[stage]
    base = {"data": str(world / data), "model": {"name_or_path": str(world / "model")},
            "runtime": {"num_threads": 1}, "report": {"progress_bar": False}, "output_dir": str(world / name),
            **({"steps": 1, "batch_size": 8, "micro_batch_size": 8} if stage != "sft" else {}), **extra}
    path = world / f"{name}.yaml"
    config = from_dict(config_class, apply_overrides(base, list(overrides)))
    path.write_text(json.dumps(dataclasses.asdict(config)))
    return [stage, "-c", str(path)]


@pytest.mark.parametrize("stage, side", [("sft", "responses'"), ("train", "chosen responses'"),
                                         ("rm", "chosen responses'")])
def test_mostly_unknown_text_is_an_error_naming_the_tokenizer(world, cli_error, stage, side):
    line = cli_error(argv(world, stage, f"english-{stage}", "english.jsonl"))
    assert f"english.jsonl: 100% of the {side} tokens are <unk>: the tokenizer of {world / 'model'} " \
           "cannot read this text" in line
    assert not (world / f"english-{stage}").exists()


def test_the_audit_checks_the_tokenizer_it_is_given(world, cli_error, capsys):
    english = str(world / "english.jsonl")
    line = cli_error(["audit", english, "-a", "given:signed", "--tokenizer", str(world / "model")])
    assert "100% of the chosen responses' tokens are <unk>: the tokenizer of" in line
    assert main(["audit", str(world / "judgments.jsonl"), "-a", "given:signed", "--tokenizer",
                 str(world / "model")]) == 0
    assert "cannot read (<unk>): prompts 0.0%, chosen 0.0%, rejected 0.0%" in capsys.readouterr().out


def test_some_unknown_text_warns_and_every_share_is_kept_in_run_json(world, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv(world, "train", "sprinkled", "sprinkled.jsonl")) == 0
    messages = [str(w.message) for w in caught if type(w.message).__name__ == "TokenCoverageWarning"]
    assert len(messages) == 1 and "of the chosen responses' tokens are <unk> (tokenizer of" in messages[0]
    shares = json.loads((world / "sprinkled" / "run.json").read_text())["input"]["unknown_tokens"]
    assert shares["unknown_token"] == "<unk>" and shares["prompts"] == 0.0
    assert 0.05 < shares["chosen"] < 0.5 and 0.05 < shares["rejected"] < 0.5


def test_readable_text_reports_zero_and_sft_keeps_the_shares(world, capsys):
    assert main(argv(world, "sft", "clean-sft", "judgments.jsonl")) == 0
    shares = json.loads((world / "clean-sft" / "sft.json").read_text())["unknown_tokens"]
    assert (shares["responses"], shares["prompts"]) == (0.0, 0.0)
    assert "<unk> tokens" not in capsys.readouterr().err


def test_a_few_unknown_tokens_are_said_on_screen_without_a_warning(world, capsys):
    rows = judgment_rows(n_pairs=40)
    text = rows[0]["chosen"]  # one response of one pair, in each of its judgments
    rows = [{**r, **{side: text + " zebra" for side in ("chosen", "rejected") if r[side] == text}} for r in rows]
    write_jsonl(world / "one_unknown.jsonl", rows)
    assert main(argv(world, "train", "one-unknown", "one_unknown.jsonl")) == 0
    err = capsys.readouterr().err
    assert "badpo train: <unk> tokens (the tokenizer of" in err and "badpo: warning" not in err


def test_a_tokenizer_without_an_unknown_token_reports_nothing(world):
    from badpo.core.judgments import validate_judgments
    from badpo.engine.batches import build_preference_data
    from badpo.engine.tokenize import TokenizationConfig
    from fixtures.engine import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.unk_token = None
    data = build_preference_data(validate_judgments(judgment_rows()), None, tokenizer, TokenizationConfig())
    assert data.input_report["unknown_tokens"] is None
    assert make_config(world, "unused").data  # the fixture's config helper stays importable
