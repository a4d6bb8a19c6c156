"""``overwrite=true`` deletes only what badpo wrote (issue 49, item 1).

A user's folder holding their own ``config.yaml``, ``policy/my_model.bin`` and ``checkpoints/``
was refused once ("set overwrite=true to delete that run"), and with ``overwrite=true`` the model
file and the checkpoints were gone. Every claim of a folder writes its data record first, so
run-named entries without one are the user's: refused, with or without overwrite, and kept.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from badpo.core.config import ConfigError, to_dict
from badpo.core.notices import BadpoWarning
from badpo.engine.run_folder import DATA_FILE, claim, own_folder
from fixtures.engine import judgment_rows, make_config, write_jsonl


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def world(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    return tmp_path


def _users_folder(world: Path) -> Path:
    folder = world / "mine"
    (folder / "policy").mkdir(parents=True)
    (folder / "policy" / "my_model.bin").write_bytes(b"weights of my own")
    (folder / "checkpoints" / "epoch-3").mkdir(parents=True)
    (folder / "checkpoints" / "epoch-3" / "state.pt").write_bytes(b"my checkpoint")
    (folder / "config.yaml").write_text("lr: 0.1\n")
    return folder


@pytest.mark.parametrize("overwrite", [False, True])
def test_overwrite_refuses_a_folder_of_the_users_files_named_like_a_runs_and_keeps_them(world, overwrite):
    folder = _users_folder(world)
    before = _files(folder)
    config = make_config(world, "mine", f"overwrite={str(overwrite).lower()}")
    with pytest.raises(ConfigError) as refused:
        claim(folder, config, overwrite)
    line = str(refused.value)
    assert line == (f"output_dir: {folder} holds checkpoints, config.yaml, policy but no {DATA_FILE}, which every "
                    "badpo run writes first, so they are not a run's; badpo neither deletes nor writes among "
                    "them: move them away or choose another output_dir")
    assert _files(folder) == before


def test_the_refusal_comes_before_the_lock_leaves_a_file_among_the_users(world):
    folder = _users_folder(world)
    before = _files(folder)
    accelerator = SimpleNamespace(is_main_process=True, wait_for_everyone=lambda: None)
    with pytest.raises(ConfigError, match="not a run's"), own_folder(folder, make_config(world, "mine"), accelerator):
        pass
    assert _files(folder) == before and not (folder / ".lock").exists()


def test_overwrite_of_a_badpo_run_deletes_its_files_and_says_what_it_keeps(world):
    folder = world / "run"
    first = make_config(world, "run")
    claim(folder, first, overwrite=False)
    (folder / "config.yaml").write_text(yaml.safe_dump(to_dict(first)))
    (folder / "checkpoints" / "step-000002").mkdir(parents=True)
    (folder / "run.json").write_text("{}")
    (folder / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match=r"belongs to another run \(runtime.seed: 42 -> 7\)"):
        claim(folder, make_config(world, "run", "runtime.seed=7"), overwrite=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        claim(folder, make_config(world, "run", "runtime.seed=7"), overwrite=True)
    said = [str(w.message) for w in caught if issubclass(w.category, BadpoWarning)]
    assert said == [f"output_dir {folder}: overwrite deleted the run's files and kept 1 that are not a run's "
                    "(notes.txt)"]
    assert sorted(p.name for p in folder.iterdir()) == [DATA_FILE, "notes.txt"]
