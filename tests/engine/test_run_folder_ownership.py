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
from badpo.run_folder.layout import DATA_FILE
from badpo.run_folder.ownership import claim, own_folder
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


def _finished_run(world: Path, name: str = "run") -> Path:
    """A run folder as a finished run leaves it: claimed, configured, its final outputs committed
    (commit_final lists the files it wrote in policy/), one checkpoint."""
    from badpo.run_folder.final_commit import commit_final

    folder = world / name
    first = make_config(world, name)
    claim(folder, first, overwrite=False)
    (folder / "config.yaml").write_text(yaml.safe_dump(to_dict(first)))

    def write(staging: Path) -> None:
        (staging / "policy").mkdir()
        (staging / "policy" / "model.safetensors").write_bytes(b"the run's weights")
        (staging / "policy" / "config.json").write_text("{}")
        (staging / "run.json").write_text("{}")

    commit_final(folder, write)
    (folder / "checkpoints" / "step-000002").mkdir(parents=True)
    (folder / "checkpoints" / "step-000002" / "state.safetensors").write_bytes(b"state")
    return folder


def test_overwrite_keeps_the_users_files_beside_the_run_and_in_checkpoints(world):
    """Issue 49's retry: the user's checkpoints/mine/a.pt and notes.txt beside a run survive
    overwrite=true, and the warning names them."""
    folder = _finished_run(world)
    (folder / "checkpoints" / "mine").mkdir()
    (folder / "checkpoints" / "mine" / "a.pt").write_bytes(b"my checkpoint")
    (folder / "notes.txt").write_text("mine\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        claim(folder, make_config(world, "run", "runtime.seed=7"), overwrite=True)
    said = [str(w.message) for w in caught if issubclass(w.category, BadpoWarning)]
    assert said == [f"output_dir {folder}: overwrite deleted the run's files and kept 2 that are not a run's "
                    "(notes.txt, checkpoints/mine)"]
    assert sorted(_files(folder)) == sorted([DATA_FILE, "checkpoints/mine/a.pt", "notes.txt"])


def test_a_users_file_inside_the_runs_policy_is_refused_before_anything_is_deleted(world):
    """The second retry: overwrite said it kept policy/my_model.bin, and the run's final commit,
    which replaces policy/ as a whole, then deleted it. Now overwrite is refused and nothing is
    touched (a resumed run, which would replace policy/ too, is refused below)."""
    folder = _finished_run(world)
    (folder / "policy" / "my_model.bin").write_bytes(b"weights of my own")
    before = _files(folder)
    with pytest.raises(ConfigError, match=r"holds 1 file\(s\) that no run wrote inside a run's model folder "
                                          r"\(policy/my_model.bin\); a run replaces that folder as a whole"):
        claim(folder, make_config(world, "run", "runtime.seed=7"), overwrite=True)
    assert _files(folder) == before


def test_a_finished_run_started_again_with_a_users_file_in_policy_is_read_not_refused(world):
    """The review of the refusal: started again with its own config a finished run is only read
    (nothing is committed), so a file in policy/ is no reason to refuse, listed or not."""
    folder = _finished_run(world)
    (folder / "policy" / "my_model.bin").write_bytes(b"weights of my own")
    claim(folder, make_config(world, "run"), overwrite=False)
    (folder / ".run-files").unlink()  # as a run of a badpo before the listing left it
    claim(folder, make_config(world, "run"), overwrite=False)
    assert (folder / "policy" / "my_model.bin").read_bytes() == b"weights of my own"


def test_an_unfinished_run_with_a_users_file_in_policy_is_refused_naming_it(world):
    """A resumed run commits policy/ at its end, so a file there would be lost: refused, with the
    user's file named (not the message about runs before the listing)."""
    folder = world / "run"
    claim(folder, make_config(world, "run"), overwrite=False)
    (folder / "config.yaml").write_text(yaml.safe_dump(to_dict(make_config(world, "run"))))
    (folder / "checkpoints" / "step-000002").mkdir(parents=True)
    (folder / "policy").mkdir()
    (folder / "policy" / "my_model.bin").write_bytes(b"weights of my own")
    with pytest.raises(ConfigError, match=r"\(policy/my_model.bin\); a run replaces that folder"):
        claim(folder, make_config(world, "run"), overwrite=False)
    assert (folder / "policy" / "my_model.bin").exists()


def test_overwrite_refuses_a_model_folder_no_listing_accounts_for(world):
    folder = _finished_run(world)
    (folder / ".run-files").unlink()  # as a run of a badpo before the listing left it
    before = _files(folder)
    with pytest.raises(ConfigError, match=r"policy was written before badpo listed a run's files \(.run-files\)"):
        claim(folder, make_config(world, "run", "runtime.seed=7"), overwrite=True)
    assert _files(folder) == before


def test_a_train_run_does_not_overwrite_an_sft_reference(world):
    """Issue 49's retry: train overwrite=true into an SFT reference's folder replaced its
    config.yaml, data record and log and kept its weights: half reference, half run."""
    folder = _finished_run(world, "reference")
    (folder / "sft.json").write_text("{}")
    before = _files(folder)
    with pytest.raises(ConfigError, match="holds an SFT reference \\(sft.json\\), not a run of this stage"):
        claim(folder, make_config(world, "reference", "runtime.seed=7"), overwrite=True)
    assert _files(folder) == before


def test_an_sft_reference_does_not_overwrite_a_train_run(world):
    """Issue 76's re-trial, the other way round: sft overwrite=true into a finished train run
    replaced its config.yaml, log and data record and kept policy/, run.json and theta.json: a folder
    evaluate could no longer read. Refused, nothing touched."""
    from badpo.engine.sft import sft_run_files

    folder = _finished_run(world)
    before = _files(folder)
    with pytest.raises(ConfigError, match=r"holds a preference or reward model run \(run.json.*\), not a run of "
                                          "this stage; overwrite does not delete another stage's run"):
        claim(folder, make_config(world, "run", "runtime.seed=7"), overwrite=True, run_files=sft_run_files)
    assert _files(folder) == before


def test_an_audits_output_is_refused_inside_a_run_or_a_model_folder(world, tmp_path, cli_error):
    """Issue 49's retry: `audit --json RUN/theta.json --overwrite` replaced a run's theta.json, and
    `--json SFT/model.safetensors --overwrite` a reference's weights; evaluate and compare refused
    the same. core.outputs' torch-free marks agree with the engine's on a finished run."""
    from badpo.run_folder.layout import holds_run_or_model, is_run_folder

    run = _finished_run(world)
    assert is_run_folder(run) and holds_run_or_model(run) == "run"
    assert holds_run_or_model(run / "policy") == "model" and holds_run_or_model(world) is None
    (run / "theta.json").write_text("{}")
    data = world / "judgments.jsonl"
    for option, target in (("--json", run / "theta.json"), ("--json", run / "policy" / "model.safetensors"),
                           ("--report", run / "report")):
        before = _files(run)
        line = cli_error(["audit", str(data), "-a", "names", option, str(target), "--overwrite"])
        assert line.startswith(f"badpo audit: {option} {target}: inside the ")
        assert _files(run) == before
