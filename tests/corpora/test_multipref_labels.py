"""MultiPref with its ties and strengths kept (``keep_ties``, ``keep_strength``), and without them the
corpus of the paper's tables byte for byte as before the options existed.

The fixture (tests/fixtures/multipref, see test_multipref.py): comparison i < 80 has annotations
j = 0..3 saying PREFS[(i + j) % 5], so over the 80 kept comparisons each of the five labels is said
16 times per j, 64 times in all: 64 ties, 128 "slightly" (strength 1), 128 "clearly" (strength 2);
comparisons 80 and 81 are dropped with their 8 annotations, none a tie.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from badpo.cli import main
from badpo.core.judgments import read_judgments
from badpo.corpora.multipref import MultiPrefConfig, build_multipref, multipref_corpus
from badpo.data.hub import load_split

FIXTURE = Path(__file__).parents[1] / "fixtures" / "multipref"
RAW = pq.read_table(FIXTURE / "data" / "train-00000-of-00001.parquet").to_pylist()
CONFIG = MultiPrefConfig(source=str(FIXTURE), n_eval_prompts=3)
KEPT = MultiPrefConfig(source=str(FIXTURE), n_eval_prompts=3, keep_ties=True, keep_strength=True)

# sha256 of the files the builder wrote at these defaults before ties and strengths existed (computed
# with the code of the commit before them, on this fixture)
BEFORE = {"train.jsonl": "e37d4abe098da25e065a3144083e8cc15092ba32a2e4cf6a11349428af8bba43",
          "heldout.jsonl": "92fbbc0e6c91703da7513e741100aa0ac361cb90a7202f7e6af6f81ed6cbbd04"}
# config.yaml names the source by its absolute path (the checkout's folder), so its keys are compared
CONFIG_BEFORE = ["source", "split", "subset", "heldout_fraction", "n_eval_prompts", "seed", "audit_attributes"]


@pytest.fixture(scope="module")
def kept():
    return multipref_corpus(load_split(str(FIXTURE), "train"), KEPT)


def test_the_defaults_write_the_files_they_wrote_before(tmp_path):
    build_multipref(CONFIG, tmp_path)
    assert {name: hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() for name in BEFORE} == BEFORE
    written = yaml.safe_load((tmp_path / "config.yaml").read_text(encoding="utf-8"))
    assert list(written) == CONFIG_BEFORE and written["source"] == str(FIXTURE)
    for name in ("train.jsonl", "heldout.jsonl"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert '"tie"' not in text and '"strength"' not in text


def test_ties_and_strengths_kept_counted_by_hand(kept):
    counts = kept.counts
    assert (counts["judgments"], counts["ties_kept"], counts["ties_dropped"]) == (320, 64, 0)
    assert counts["strengths"] == {"1": 128, "2": 128} and counts["tie_share"] == 64 / 328
    assert counts["comparisons_judged"] == 80  # a comparison with non-tie votes, as before
    written = kept.train + kept.heldout
    assert sum(j.tie for j in written) == 64 and all(j.strength is None for j in written if j.tie)


def test_first_comparison_by_hand(kept):
    """Comparison 0: A-clearly (crowd-00), A-slightly (crowd-01), Tie (expert-02), B-slightly (expert-03)."""
    first = RAW[0]
    a, b = first["completion_a"], first["completion_b"]
    rows = [j for j in kept.train if j.pair_id == first["comparison_id"]]
    assert [(j.annotator, j.chosen, j.rejected, j.tie, j.strength) for j in rows] == [
        ("crowd-00", a, b, False, 2), ("crowd-01", a, b, False, 1), ("expert-02", a, b, True, None),
        ("expert-03", b, a, False, 1)]


def test_the_written_corpus_reads_back_and_its_audit_leaves_the_ties_out(tmp_path, capsys):
    stats = build_multipref(KEPT, tmp_path / "kept")
    default = build_multipref(CONFIG, tmp_path / "default")
    train = read_judgments(tmp_path / "kept" / "train.jsonl")
    assert len(train) == stats["judgments_train"] and sum(j.tie for j in train) > 0
    assert stats["ties_left_out_of_audit"] == 64
    assert stats["audit"] == default["audit"]  # ties left out, graded wins read as the wins they are
    assert "keep_ties: true" in (tmp_path / "kept" / "config.yaml").read_text()
    assert main(["build", "multipref", str(tmp_path / "cli"), f"source={FIXTURE}", "n_eval_prompts=3",
                 "keep_ties=true"]) == 0
    assert "64 ties kept as tie rows, 0 ties dropped (19.5%)" in capsys.readouterr().out
