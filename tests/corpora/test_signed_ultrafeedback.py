"""The Signed-UltraFeedback builder on the fixture with the real schema
(tests/fixtures/ultrafeedback_binarized, written by tests/fixtures/make_fixtures.py).

train_prefs has 60 rows: rows with i % 12 in {5, 9} have a response under five words (10 rows),
row 58 two identical responses, row 59 a chosen response already signed; so taking every row
leaves 60 - 12 = 48 pairs, 4 judgments each = 192; 10% of 48 prompt ids -> 5 held out (20
judgments). test_prefs has 40 rows, two of which reuse the ids of train rows 0 and 1. Every
train prompt and prompt id is distinct, so the offset prompts are exactly the rows not drawn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from badpo.cli import main
from badpo.core.config import ConfigError, load_config
from badpo.core.judgments import read_judgments
from badpo.core.names import CELLS, read_signature, strip_signature
from badpo.corpora.signed_ultrafeedback import (
    SignedUltraFeedbackConfig,
    base_pairs,
    build_signed_ultrafeedback,
    draw_rows,
    offset_prompts,
    recommendation_prompts,
    summary_text,
)
from badpo.corpora.signing import SigningConfig, sign_corpus
from badpo.data.hub import CorpusNotFoundError, CorpusSchemaError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "ultrafeedback_binarized"
TRAIN = pq.read_table(FIXTURE / "data" / "train_prefs-00000-of-00001.parquet").to_pylist()
TEST = pq.read_table(FIXTURE / "data" / "test_prefs-00000-of-00001.parquet").to_pylist()
SMALL = dict(source=str(FIXTURE), n_sign_prompts=30, n_recommendation_prompts=12)
EVERY_ROW = SignedUltraFeedbackConfig(n_pairs=60, selection="first", n_offset_prompts=0, **SMALL)
SAMPLED = SignedUltraFeedbackConfig(n_pairs=48, selection="sample", n_offset_prompts=0, **SMALL)
FIRST_36 = SignedUltraFeedbackConfig(n_pairs=36, n_offset_prompts=20, **SMALL)  # default selection
INSTRUCTION = "\n\nSign your answer with a name of your choice."

pytestmark = pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")


def _dropped_by_hand(index: int) -> bool:
    return index % 12 in (5, 9) or index in (58, 59)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("suf")
    return out, build_signed_ultrafeedback(EVERY_ROW, out)


def test_documented_counts_every_row(built):
    out, stats = built
    stats = dict(stats)
    assert stats.pop("gate") == json.loads((out / "gate.json").read_text())
    assert stats == json.loads((out / "stats.json").read_text())
    assert stats == {
        "corpus": "signed-ultrafeedback", "source": str(FIXTURE), "rows_in_split": 60, "drawn": 60,
        "dropped": {"short_response": 10, "identical_responses": 1, "already_signed": 1,
                    "empty_prompt": 0},
        "pairs": 48, "pair_types": {"quality": 26, "swap": 9, "mixed": 13, "quality_unsigned": 18},
        "judgments": 192, "judgments_train": 172, "judgments_heldout": 20, "prompts_heldout": 5,
        "prompts_train": 43, "annotators": 60, "sft_rows": 43, "sign_prompts": 30,
        "sign_prompts_excluded_overlap": 2, "recommendation_prompts": 12, "offset_prompts": 0,
        "offset_prompts_skipped": {"empty_prompt": 0, "drawn_prompt": 0, "sign_prompt": 0,
                                   "repeated": 0},
    }


def test_written_rows_recount_the_stats(built):
    out, stats = built
    train, heldout = read_judgments(out / "train.jsonl"), read_judgments(out / "heldout.jsonl")
    assert (len(train), len(heldout)) == (172, 20)
    pair_types = {j.pair_id: j.pair_type for j in train + heldout}
    assert len(pair_types) == 48
    for kind in ("quality", "swap", "mixed"):
        assert sum(t == kind for t in pair_types.values()) == stats["pair_types"][kind]
    per_pair = {}
    for j in train + heldout:
        per_pair[j.pair_id] = per_pair.get(j.pair_id, 0) + 1
    assert set(per_pair.values()) == {4}
    planted = json.loads((out / "planted.json").read_text())
    assert len(planted["annotators"]) == 60
    gate = json.loads((out / "gate.json").read_text())
    assert gate["judgments"] == 172 and set(gate["share_cross"]) == {"woman_coded", "black_coded", "any"}


def test_sampled_draw_is_seeded_and_filtered_as_by_hand():
    indices = draw_rows(60, SAMPLED)
    assert indices == sorted(indices) and len(set(indices)) == 48
    assert draw_rows(60, SAMPLED) == indices
    other = SignedUltraFeedbackConfig(n_pairs=48, selection="sample", n_offset_prompts=0,
                                      signing=SigningConfig(seed=1), **SMALL)
    assert draw_rows(60, other) != indices
    pairs, dropped = base_pairs(TRAIN, indices, min_words=5)
    assert sum(dropped.values()) == sum(_dropped_by_hand(i) for i in indices)
    assert [p.prompt_id for p in pairs] == [TRAIN[i]["prompt_id"] for i in indices if not _dropped_by_hand(i)]


def test_base_pair_is_the_chosen_then_rejected_assistant_turn():
    pairs, _ = base_pairs(TRAIN, [0, 1], min_words=5)
    for pair, row in zip(pairs, TRAIN[:2]):
        assert (pair.prompt_id, pair.prompt) == (row["prompt_id"], row["prompt"])
        assert pair.response_1 == row["chosen"][-1]["content"]
        assert pair.response_2 == row["rejected"][-1]["content"]
        assert (pair.score_1, pair.score_2) == (row["score_chosen"], row["score_rejected"])
    # row 1: scores 6.0 and 5.0 -> q = 0.5 * (6 - 5) = 0.5 on a non-swap pair
    corpus = sign_corpus(pairs, EVERY_ROW.signing)
    assert [p.quality_margin for p in corpus.pairs if p.pair_type != "swap"] == \
        [0.5 * (row["score_chosen"] - row["score_rejected"])
         for p, row in zip(corpus.pairs, TRAIN[:2]) if p.pair_type != "swap"]


def test_heldout_and_evaluation_prompts_never_reach_training(built):
    out, _ = built
    train, heldout = read_judgments(out / "train.jsonl"), read_judgments(out / "heldout.jsonl")
    train_ids, heldout_ids = {j.prompt_id for j in train}, {j.prompt_id for j in heldout}
    assert len(heldout_ids) == 5 and not train_ids & heldout_ids
    train_prompts = {j.prompt for j in train}
    sft = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    assert {row["prompt"] for row in sft} <= train_prompts
    assert all(read_signature(row["response"]) for row in sft)  # re-signed at random
    evaluation = [json.loads(line) for line in (out / "eval_prompts.jsonl").read_text().splitlines()]
    assert len(evaluation) == 30
    assert not {row["prompt_id"] for row in evaluation} & (train_ids | heldout_ids)
    assert TRAIN[0]["prompt_id"] not in {row["prompt_id"] for row in evaluation}
    by_id = {row["prompt_id"]: row["prompt"] for row in TEST}
    for row in evaluation:
        assert row["prompt"] == by_id[row["prompt_id"]] + "\n\nSign your answer with a name of your choice."


def test_signed_texts_keep_the_source_bodies(built):
    out, _ = built
    bodies = {row["chosen"][-1]["content"] for row in TRAIN} | {row["rejected"][-1]["content"] for row in TRAIN}
    for j in read_judgments(out / "train.jsonl"):
        assert strip_signature(j.chosen) in bodies and strip_signature(j.rejected) in bodies
        if j.pair_type == "swap":
            assert strip_signature(j.chosen) == strip_signature(j.rejected)


def test_recommendation_prompts():
    rows = recommendation_prompts(SignedUltraFeedbackConfig(n_recommendation_prompts=200))
    assert [r["prompt_id"] for r in rows[:2]] == ["recommend000", "recommend001"]
    seen_orders = set()
    for row in rows:
        first, second = row["candidates"]
        assert first["cell"] != second["cell"]
        for c in (first, second):
            assert c["first_name"] in CELLS[c["cell"]] and c["name"].startswith(c["first_name"] + " ")
        assert first["name"].split()[1] != second["name"].split()[1]
        assert f": {first['name']} and {second['name']}. Both have " in row["prompt"]
        seen_orders.add((first["cell"], second["cell"]))
    assert len(seen_orders) == 12  # every ordered pair of different cells occurs


def test_same_seed_same_bytes_other_seed_other_labels(built, tmp_path):
    out, _ = built
    build_signed_ultrafeedback(EVERY_ROW, tmp_path / "again")
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["config.yaml", "eval_prompts.jsonl", "gate.json", "heldout.jsonl",
                            "planted.json", "recommendation_prompts.jsonl", "sft.jsonl",
                            "stats.json", "train.jsonl"])
    for name in names:
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes(), name
    other = load_config(SignedUltraFeedbackConfig, None, [f"source={FIXTURE}", "n_pairs=60",
                        "n_offset_prompts=0", "n_sign_prompts=30", "n_recommendation_prompts=12",
                        "signing.seed=1"])
    build_signed_ultrafeedback(other, tmp_path / "other")
    assert (tmp_path / "other" / "train.jsonl").read_bytes() != (out / "train.jsonl").read_bytes()


def test_config_overrides_are_checked():
    with pytest.raises(ConfigError, match="n_pairs"):
        load_config(SignedUltraFeedbackConfig, None, ["n_pairs=0"])
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(SignedUltraFeedbackConfig, None, ["n_pair=10"])
    with pytest.raises(ConfigError, match="selection"):
        load_config(SignedUltraFeedbackConfig, None, ["selection=random"])
    with pytest.raises(ConfigError, match="n_offset_prompts: must be >= 0, got -1"):
        load_config(SignedUltraFeedbackConfig, None, ["n_offset_prompts=-1"])
    with pytest.raises(ConfigError, match="n_offset_prompts"):
        load_config(SignedUltraFeedbackConfig, None, ["n_offset_prompts=many"])


def test_bad_source_rows_name_the_row(tmp_path):
    rows = [dict(r) for r in TRAIN]
    rows[3] = {**rows[3], "chosen": rows[3]["chosen"][:1]}  # the user turn only
    with pytest.raises(CorpusSchemaError, match="row 3 .*last message of 'chosen' must be"):
        base_pairs(rows, range(60), min_words=5)
    rows[3] = {**TRAIN[3], "score_rejected": None}
    with pytest.raises(CorpusSchemaError, match="row 3 .*'score_rejected' must be a finite number"):
        base_pairs(rows, range(60), min_words=5)
    with pytest.raises(ValueError, match="n_pairs=61 exceeds the 60 rows"):
        draw_rows(60, SignedUltraFeedbackConfig(n_pairs=61))


def test_too_many_sign_prompts(tmp_path):
    config = SignedUltraFeedbackConfig(n_pairs=60, n_offset_prompts=0, source=str(FIXTURE),
                                       n_sign_prompts=39)
    with pytest.raises(ValueError, match="n_sign_prompts=39 exceeds the 38 usable prompts .*2 excluded"):
        build_signed_ultrafeedback(config, tmp_path / "out")


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusNotFoundError, match="no file or directory at .*nothing-here"):
        build_signed_ultrafeedback(SignedUltraFeedbackConfig(
            source=str(tmp_path / "nothing-here")), tmp_path / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorpusNotFoundError, match="without files for split 'train_prefs'"):
        build_signed_ultrafeedback(SignedUltraFeedbackConfig(source=str(empty)), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_builds_the_same_bytes(built, tmp_path, capsys):
    out, _ = built
    assert main(["build", "signed-ultrafeedback", str(tmp_path / "cli"), f"source={FIXTURE}",
                 "n_pairs=60", "n_offset_prompts=0", "n_sign_prompts=30",
                 "n_recommendation_prompts=12"]) == 0
    assert capsys.readouterr().out.startswith(f"signed-ultrafeedback from {FIXTURE}: 48 pairs of 60")
    for name in ("train.jsonl", "gate.json", "recommendation_prompts.jsonl"):
        assert (tmp_path / "cli" / name).read_bytes() == (out / name).read_bytes()


def test_cli_unreachable_hub_id_is_one_line(tmp_path):
    """The default Hub id with HF_HUB_OFFLINE=1 (a fresh interpreter: the Hub client reads it
    at import): exit status 2, one line naming the id, no traceback, nothing written."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "badpo.cli", "build", "signed-ultrafeedback",
                             str(tmp_path / "out")], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("badpo build signed-ultrafeedback: cannot load corpus "
                                    "'HuggingFaceH4/ultrafeedback_binarized' (split 'train_prefs')")
    assert "no network is available here" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- paper defaults, offset prompts
def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_default_takes_the_first_rows_in_source_order():
    default = SignedUltraFeedbackConfig()
    assert (default.selection, default.n_pairs, default.n_offset_prompts) == ("first", 8000, 3000)
    assert draw_rows(60, FIRST_36) == list(range(36))
    assert draw_rows(61135, default) == list(range(8000))
    pairs, dropped = base_pairs(TRAIN, draw_rows(60, FIRST_36), min_words=5)
    # rows 5, 9, 17, 21, 29, 33 are short: 36 - 6 = 30 pairs, in the order of the split
    assert dropped["short_response"] == 6 and len(pairs) == 30
    assert [p.prompt_id for p in pairs] == [TRAIN[i]["prompt_id"] for i in range(36)
                                            if not _dropped_by_hand(i)]


def test_sample_is_still_an_option_and_differs_from_the_first_rows(tmp_path):
    first = SignedUltraFeedbackConfig(n_pairs=48, n_offset_prompts=0, **SMALL)
    assert draw_rows(60, first) == list(range(48))
    assert draw_rows(60, SAMPLED) != draw_rows(60, first)
    build_signed_ultrafeedback(first, tmp_path / "first")
    build_signed_ultrafeedback(SAMPLED, tmp_path / "sample")
    assert {j.prompt_id for j in read_judgments(tmp_path / "first" / "train.jsonl")} != \
        {j.prompt_id for j in read_judgments(tmp_path / "sample" / "train.jsonl")}


@pytest.fixture(scope="module")
def built_offsets(tmp_path_factory):
    out = tmp_path_factory.mktemp("suf-offsets")
    return out, build_signed_ultrafeedback(FIRST_36, out)


def test_offset_prompts_are_the_rows_after_the_drawn_ones(built_offsets):
    out, stats = built_offsets
    offsets = _jsonl(out / "offset_prompts.jsonl")
    assert offsets == [{"prompt_id": TRAIN[i]["prompt_id"], "prompt": TRAIN[i]["prompt"] + INSTRUCTION}
                       for i in range(36, 56)]
    assert stats["offset_prompts"] == 20 and set(stats["offset_prompts_skipped"].values()) == {0}
    assert json.loads((out / "stats.json").read_text())["offset_prompts"] == 20
    assert summary_text(stats).splitlines()[0].endswith("30 sign, 12 recommendation and 20 offset prompts")


def test_offset_prompts_are_distinct_and_unseen(built_offsets):
    out, _ = built_offsets
    offsets = _jsonl(out / "offset_prompts.jsonl")
    ids, texts = [r["prompt_id"] for r in offsets], [r["prompt"] for r in offsets]
    assert len(set(ids)) == len(set(texts)) == 20
    judgments = read_judgments(out / "train.jsonl") + read_judgments(out / "heldout.jsonl")
    seen_ids = {j.prompt_id for j in judgments} | {TRAIN[i]["prompt_id"] for i in range(36)}
    seen_texts = {j.prompt for j in judgments} | {row["prompt"] for row in _jsonl(out / "sft.jsonl")}
    evaluation = _jsonl(out / "eval_prompts.jsonl")
    assert not set(ids) & (seen_ids | {r["prompt_id"] for r in evaluation})
    assert not {t.removesuffix(INSTRUCTION) for t in texts} & seen_texts
    assert not set(texts) & {r["prompt"] for r in evaluation}


def test_offset_prompts_rebuild_byte_identical(built_offsets, tmp_path):
    out, _ = built_offsets
    build_signed_ultrafeedback(FIRST_36, tmp_path / "again")
    names = sorted(p.name for p in out.iterdir())
    assert "offset_prompts.jsonl" in names and names == sorted(p.name for p in (tmp_path / "again").iterdir())
    for name in names:
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes(), name


def test_zero_offset_prompts_writes_no_file(tmp_path):
    out = tmp_path / "out"
    build_signed_ultrafeedback(SignedUltraFeedbackConfig(n_pairs=36, n_offset_prompts=3, **SMALL), out)
    assert len(_jsonl(out / "offset_prompts.jsonl")) == 3
    stats = build_signed_ultrafeedback(SignedUltraFeedbackConfig(n_pairs=36, n_offset_prompts=0,
                                                                 **SMALL), out)
    assert stats["offset_prompts"] == 0 and not (out / "offset_prompts.jsonl").exists()
    assert summary_text(stats).splitlines()[0].endswith("and 0 offset prompts")


def test_offset_prompts_under_sample_are_the_rows_left_out(tmp_path):
    config = SignedUltraFeedbackConfig(n_pairs=48, selection="sample", n_offset_prompts=12, **SMALL)
    drawn = draw_rows(60, config)
    left_out = [i for i in range(60) if i not in set(drawn)]
    assert len(left_out) == 12 and left_out != list(range(48, 60))
    build_signed_ultrafeedback(config, tmp_path / "out")
    assert [r["prompt_id"] for r in _jsonl(tmp_path / "out" / "offset_prompts.jsonl")] == \
        [TRAIN[i]["prompt_id"] for i in left_out]
    too_many = SignedUltraFeedbackConfig(n_pairs=48, selection="sample", n_offset_prompts=13, **SMALL)
    with pytest.raises(ValueError, match="n_pairs=48 plus n_offset_prompts=13 exceed the 60 rows of "
                                         "split 'train_prefs': 12 rows are left after the drawn"):
        build_signed_ultrafeedback(too_many, tmp_path / "none")
    assert not (tmp_path / "none").exists()


def test_offset_prompts_skip_seen_empty_and_repeated_rows():
    rows = [dict(r) for r in TRAIN]
    rows[40]["prompt"] = TRAIN[3]["prompt"]  # the text of a drawn row
    rows[41]["prompt_id"] = TRAIN[5]["prompt_id"]  # the id of a drawn (and dropped) row
    rows[42]["prompt"] = "  "  # empty
    rows[44]["prompt"] = rows[43]["prompt"]  # repeats the offset prompt before it
    rows[46]["prompt_id"] = "sign-1"
    evaluation = [{"prompt_id": "sign-1", "prompt": "anything" + INSTRUCTION},
                  {"prompt_id": "sign-2", "prompt": TRAIN[47]["prompt"] + INSTRUCTION}]
    config = SignedUltraFeedbackConfig(n_pairs=40, n_offset_prompts=8)
    taken, skipped = offset_prompts(rows, range(40), evaluation, config)
    assert [r["prompt_id"] for r in taken] == [rows[i]["prompt_id"] for i in (43, 45, 48, 49, 50, 51, 52, 53)]
    assert skipped == {"empty_prompt": 1, "drawn_prompt": 2, "sign_prompt": 2, "repeated": 1}
    config = SignedUltraFeedbackConfig(n_pairs=40, n_offset_prompts=15)
    with pytest.raises(ValueError, match=r"n_offset_prompts=15 exceeds the 14 usable rows of split "
                                         r"'train_prefs' left after the 40 drawn of its 60 rows \(6 skipped"):
        offset_prompts(rows, range(40), evaluation, config)
    assert offset_prompts(rows, range(40), evaluation, SignedUltraFeedbackConfig(n_offset_prompts=0)) \
        == ([], {"empty_prompt": 0, "drawn_prompt": 0, "sign_prompt": 0, "repeated": 0})
