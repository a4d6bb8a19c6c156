"""Loading a corpus split by Hub id or local copy (badpo.data.hub): every form of local copy
gives the same rows, and a missing corpus is one clear CorpusNotFoundError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from badpo.data.hub import CorpusNotFoundError, CorpusSchemaError, load_split, require_columns

FIXTURES = Path(__file__).parents[1] / "fixtures"
UF = FIXTURES / "ultrafeedback_binarized"
TRAIN_FILE = UF / "data" / "train_prefs-00000-of-00001.parquet"
TRAIN = pq.read_table(TRAIN_FILE).to_pylist()


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_snapshot_directory_picks_the_split():
    assert list(load_split(str(UF), "train_prefs")) == TRAIN
    assert len(load_split(str(UF), "test_prefs")) == 40


def test_files_and_split_placeholder(tmp_path):
    for split in ("train_prefs", "test_prefs"):
        _jsonl(tmp_path / f"{split}.jsonl", pq.read_table(
            UF / "data" / f"{split}-00000-of-00001.parquet").to_pylist())
    assert load_split(str(tmp_path / "{split}.jsonl"), "train_prefs") == TRAIN
    assert load_split(str(tmp_path), "train_prefs") == TRAIN  # SPLIT.jsonl in a directory
    assert load_split(str(TRAIN_FILE), "anything") == TRAIN  # a plain file is the split
    (tmp_path / "rows.json").write_text(json.dumps(TRAIN[:3]))
    assert load_split(str(tmp_path / "rows.json"), "train") == TRAIN[:3]


def test_saved_to_disk(tmp_path):
    import datasets

    whole = datasets.DatasetDict({"train_prefs": datasets.Dataset.from_list(TRAIN)})
    whole.save_to_disk(str(tmp_path / "dict"))
    assert load_split(str(tmp_path / "dict"), "train_prefs").to_list() == TRAIN
    with pytest.raises(CorpusNotFoundError, match=r"has no split 'test_prefs'; it has \['train_prefs'\]"):
        load_split(str(tmp_path / "dict"), "test_prefs")
    single = datasets.Dataset.from_list(TRAIN[:5], split=datasets.Split("train_prefs"))
    single.save_to_disk(str(tmp_path / "single"))
    assert load_split(str(tmp_path / "single"), "train_prefs").to_list() == TRAIN[:5]
    with pytest.raises(CorpusNotFoundError, match="holds split 'train_prefs', not 'test_prefs'"):
        load_split(str(tmp_path / "single"), "test_prefs")


def test_missing_local_sources(tmp_path):
    with pytest.raises(CorpusNotFoundError, match=r"no file or directory at .*missing\.parquet"):
        load_split(str(tmp_path / "missing.parquet"), "train")
    with pytest.raises(CorpusNotFoundError, match=r"no file or directory at 'not/here' \(corpus source '\./not/here'"):
        load_split("./not/here", "train")
    with pytest.raises(CorpusNotFoundError, match="without files for split 'test'"):
        load_split(str(UF), "test")
    (tmp_path / "rows.csv").write_text("a,b\n")
    with pytest.raises(CorpusNotFoundError, match="unsupported file type '.csv'"):
        load_split(str(tmp_path / "rows.csv"), "train")
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(CorpusSchemaError, match="bad.jsonl' line 2: not valid JSON"):
        load_split(str(tmp_path / "bad.jsonl"), "train")


def test_require_columns():
    require_columns(TRAIN, ["prompt", "chosen"], "uf", "train_prefs")
    with pytest.raises(CorpusSchemaError, match=r"'uf' split 'train_prefs' lacks column\(s\) \['score'\]"):
        require_columns(TRAIN, ["prompt", "score"], "uf", "train_prefs")
    with pytest.raises(CorpusSchemaError, match="has no rows"):
        require_columns([], ["prompt"], "uf", "train_prefs")


def test_unreachable_hub_id_offline():
    """A fresh interpreter, since huggingface_hub reads HF_HUB_OFFLINE when it is imported."""
    code = ("from badpo.data.hub import load_split, CorpusNotFoundError\n"
            "try:\n    load_split('no-such-org/no-such-corpus', 'train')\n"
            "except CorpusNotFoundError as error:\n    print('CAUGHT', error)\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("CAUGHT cannot load corpus 'no-such-org/no-such-corpus'")
    assert "HF_HUB_OFFLINE is set; no network is available here" in result.stdout
    assert "Traceback" not in result.stderr


def test_hub_value_errors_become_corpus_not_found(monkeypatch):
    """datasets raises ValueError for an unknown split or configuration name."""
    import datasets

    def refuse(path, name=None, split=None):
        raise ValueError(f'Unknown split "{split}". Should be one of [\'train\'].')

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    with pytest.raises(CorpusNotFoundError, match=r"cannot load split 'dev' of Hub dataset "
                       r"'org/corpus' \(subset 'main'\): Unknown split \"dev\""):
        load_split("org/corpus", "dev", subset="main")
