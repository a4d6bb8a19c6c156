"""The MultiPref builder on the fixture with the real nested schema (tests/fixtures/multipref).

The fixture (tests/fixtures/make_fixtures.py): 82 comparisons, 4 annotations each (2 crowd from
crowd-00..07, 2 expert from expert-00..05). Comparison i < 80 belongs to prompt i // 2 and its
annotation j says PREFS[(i + j) % 5] (A-clearly, A-slightly, Tie, B-slightly, B-clearly):

- one Tie per comparison except i % 5 == 3 -> 80 - 16 = 64 ties, 320 - 64 = 256 judgments;
- i % 5 == 3 votes B, B, A, A: no majority, so no SFT row;
- comparisons 80 (identical completions) and 81 (empty completion_b) of prompt 40 are dropped,
  their 8 annotations (no tie) still count: 328 annotations, tie share 64 / 328.

40 prompts remain; 10% -> 4 held out. Seed 0 holds out 27 judgments (229 train); 72 training
comparisons, 13 of them without majority -> 59 SFT rows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from badpo.cli import main
from badpo.core.attributes import word_count
from badpo.core.judgments import read_judgments
from badpo.core.markdown import has_markdown
from badpo.corpora.multipref import (
    MultiPrefConfig,
    build_multipref,
    multipref_corpus,
    split_prompt_ids,
)
from badpo.data.hub import CorpusNotFoundError, CorpusSchemaError, load_split

FIXTURE = Path(__file__).parents[1] / "fixtures" / "multipref"
RAW = pq.read_table(FIXTURE / "data" / "train-00000-of-00001.parquet").to_pylist()
CONFIG = MultiPrefConfig(source=str(FIXTURE), n_eval_prompts=3)


@pytest.fixture(scope="module")
def corpus():
    return multipref_corpus(load_split(str(FIXTURE), "train"), CONFIG)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("multipref")
    return out, build_multipref(CONFIG, out)


def test_documented_counts(corpus):
    assert corpus.counts == {
        "comparisons": 82, "prompts": 41, "annotations": 328, "ties_dropped": 64,
        "tie_share": 64 / 328, "comparisons_dropped_empty": 1, "comparisons_dropped_identical": 1,
        "comparisons_kept": 80, "comparisons_judged": 80, "judgments": 256, "judgments_train": 229,
        "judgments_heldout": 27,
        "prompts_train": 36, "prompts_heldout": 4, "annotators": 14, "annotators_crowd": 8,
        "annotators_expert": 6, "sft_rows": 59, "sft_skipped_no_majority": 13, "eval_prompts": 3,
    }


def test_counts_match_an_independent_recount_of_the_raw_file(corpus):
    """Recount from the parquet rows directly, without the builder's code paths."""
    annotations = [a for row in RAW for key in ("normal_worker_annotations", "expert_worker_annotations")
                   for a in row[key]]
    assert len(annotations) == corpus.counts["annotations"]
    assert sum(a["overall_pref"] == "Tie" for a in annotations) == corpus.counts["ties_dropped"]
    usable = [r for r in RAW if r["completion_b"].strip() and r["completion_a"] != r["completion_b"]]
    heldout = {j.prompt_id for j in corpus.heldout}
    expected_heldout = sum(a["overall_pref"] != "Tie" for r in usable if r["prompt_id"] in heldout
                           for a in r["normal_worker_annotations"] + r["expert_worker_annotations"])
    assert len(corpus.heldout) == expected_heldout
    assert len(corpus.train) + len(corpus.heldout) == 4 * len(usable) - corpus.counts["ties_dropped"]


def test_first_comparison_by_hand(corpus):
    """Comparison 0 (prompt 0, never held out at seed 0): A-clearly (crowd-00), A-slightly
    (crowd-01), Tie (expert-02, dropped), B-slightly (expert-03)."""
    first = RAW[0]
    rows = [j for j in corpus.train if j.pair_id == first["comparison_id"]]
    assert [(j.annotator, j.annotator_class) for j in rows] == [
        ("crowd-00", "crowd"), ("crowd-01", "crowd"), ("expert-03", "expert")]
    a, b = first["completion_a"], first["completion_b"]
    assert [(j.chosen, j.rejected) for j in rows] == [(a, b), (a, b), (b, a)]
    assert {(j.prompt, j.prompt_id) for j in rows} == {(first["text"], "mp-prompt-000")}


def test_sft_takes_the_majority_and_skips_equal_votes(corpus):
    """i % 5 == 1 votes A, Tie, B, B -> B; i % 5 == 3 votes B, B, A, A -> no row."""
    by_pair = {row["pair_id"]: row["response"] for row in corpus.sft}
    train_prompts = {j.prompt_id for j in corpus.train}
    for i, raw in enumerate(RAW[:80]):
        if raw["prompt_id"] not in train_prompts:
            assert raw["comparison_id"] not in by_pair
        elif i % 5 == 3:
            assert raw["comparison_id"] not in by_pair
        else:
            winner = "completion_a" if i % 5 in (0, 4) else "completion_b"
            assert by_pair[raw["comparison_id"]] == raw[winner]


def test_heldout_prompts_never_reach_training(corpus):
    train = {j.prompt_id for j in corpus.train}
    heldout = {j.prompt_id for j in corpus.heldout}
    assert len(heldout) == 4 and not train & heldout
    assert {row["prompt_id"] for row in corpus.sft} <= train
    evaluation = {row["prompt_id"] for row in corpus.eval_prompts}
    assert len(evaluation) == 3 and evaluation <= heldout


def test_split_depends_on_the_ids_and_seed_only():
    ids = [f"p{i:03d}" for i in range(200)]
    heldout = split_prompt_ids(ids, 0.1, seed=5)
    assert len(heldout) == 20
    assert split_prompt_ids(list(reversed(ids)) + ids, 0.1, seed=5) == heldout
    assert split_prompt_ids(ids, 0.1, seed=6) != heldout
    assert len(split_prompt_ids(ids[:25], 0.1, seed=0)) == 3  # 2.5 rounds half up
    with pytest.raises(ValueError, match="heldout_fraction"):
        split_prompt_ids(ids[:4], 0.1, seed=0)  # floor(0.4 + 0.5) = 0 held out


def test_row_order_does_not_change_the_split(corpus):
    shuffled = multipref_corpus(list(reversed(RAW)), CONFIG)
    assert {j.prompt_id for j in shuffled.heldout} == {j.prompt_id for j in corpus.heldout}


def test_same_seed_same_bytes_other_seed_other_split(built, tmp_path):
    out, _ = built
    again = tmp_path / "again"
    build_multipref(CONFIG, again)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["audit.json", "config.yaml", "eval_prompts.jsonl", "heldout.jsonl",
                     "sft.jsonl", "stats.json", "train.jsonl"]
    for name in names:
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
    other = tmp_path / "other"
    build_multipref(MultiPrefConfig(source=str(FIXTURE), n_eval_prompts=3, seed=1), other)
    assert (other / "heldout.jsonl").read_bytes() != (out / "heldout.jsonl").read_bytes()


def test_written_files_read_back(built, corpus):
    out, stats = built
    assert read_judgments(out / "train.jsonl") == corpus.train
    assert read_judgments(out / "heldout.jsonl") == corpus.heldout
    assert json.loads((out / "stats.json").read_text())["judgments"] == 256
    assert stats["ties_dropped"] == 64


def test_audit_summary_matches_a_direct_count(built, corpus):
    """Cross-group and wins recomputed from word counts and the markdown test directly."""
    _, stats = built
    judgments = corpus.train + corpus.heldout
    long_w = [word_count(j.chosen) >= 1.5 * word_count(j.rejected) for j in judgments]
    long_l = [word_count(j.rejected) >= 1.5 * word_count(j.chosen) for j in judgments]
    length = stats["audit"]["length"]["all"]["length"]
    assert (length["cross"], length["wins"]) == (sum(long_w) + sum(long_l), sum(long_w)) == (122, 60)
    md = [(has_markdown(j.chosen), has_markdown(j.rejected)) for j in judgments]
    markdown = stats["audit"]["markdown"]["all"]["markdown"]
    assert (markdown["cross"], markdown["wins"]) == (sum(w != l for w, l in md), sum(w and not l for w, l in md))
    assert (markdown["cross"], markdown["wins"]) == (65, 33)
    assert length["share_cross"] == 122 / 256
    assert length["theta_hat"] == pytest.approx(-0.0327898228)  # log(60 / 62)
    assert length["odds"] == pytest.approx(60 / 62)  # the paper's Odds column restates theta-hat
    on_train = stats["audit"]["length"]["train"]["length"]
    train_w = sum(word_count(j.chosen) >= 1.5 * word_count(j.rejected) for j in corpus.train)
    train_l = sum(word_count(j.rejected) >= 1.5 * word_count(j.chosen) for j in corpus.train)
    assert (on_train["judgments"], on_train["cross"], on_train["wins"]) == (229, train_w + train_l, train_w)


def test_audit_file_holds_the_training_audit(built):
    out, _ = built
    full = json.loads((out / "audit.json").read_text())
    assert sorted(full) == ["length", "markdown"]
    assert full["length"]["n_judgments"] == 229 and full["length"]["attribute_names"] == ["length"]


def test_bad_annotation_names_the_comparison():
    rows = [dict(r) for r in RAW]
    bad = [dict(a) for a in rows[5]["expert_worker_annotations"]]
    bad[1]["overall_pref"] = "A-is-better"
    rows[5] = {**rows[5], "expert_worker_annotations": bad}
    with pytest.raises(CorpusSchemaError, match=rf"row 5 .*{rows[5]['comparison_id']}.*'A-is-better'"):
        multipref_corpus(rows, CONFIG)


def test_evaluator_in_both_pools_is_refused():
    rows = [dict(r) for r in RAW]
    crowd = [dict(a) for a in rows[3]["normal_worker_annotations"]]
    crowd[0]["evaluator"] = "expert-01"
    rows[3] = {**rows[3], "normal_worker_annotations": crowd}
    with pytest.raises(CorpusSchemaError, match="'expert-01' appears as both crowd and expert"):
        multipref_corpus(rows, CONFIG)


def test_missing_column_and_too_many_eval_prompts(tmp_path):
    path = tmp_path / "mp.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "text"}) + "\n" for r in RAW))
    with pytest.raises(CorpusSchemaError, match=r"lacks column\(s\) \['text'\]"):
        build_multipref(MultiPrefConfig(source=str(path)), tmp_path / "out")
    with pytest.raises(ValueError, match="n_eval_prompts=300 exceeds the 4 held-out prompts"):
        multipref_corpus(RAW, MultiPrefConfig())


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusNotFoundError, match="no file or directory at .*nowhere"):
        build_multipref(MultiPrefConfig(source=str(tmp_path / "nowhere")), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_builds_and_reports_a_missing_source_in_one_line(built, tmp_path, capsys, cli_error):
    assert main(["build", "multipref", str(tmp_path / "cli"), f"source={FIXTURE}",
                 "n_eval_prompts=3"]) == 0
    assert capsys.readouterr().out.startswith(f"multipref from {FIXTURE}: 256 judgments (229 train")
    assert (tmp_path / "cli" / "train.jsonl").read_bytes() == (built[0] / "train.jsonl").read_bytes()
    assert re.match(r"^badpo build multipref: no file or directory at .*nowhere",
                    cli_error(["build", "multipref", str(tmp_path / "x"), f"source={tmp_path / 'nowhere'}"]))
