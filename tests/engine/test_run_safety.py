"""A run folder holds one run, and bad input gets a clear answer before any training.

Each test is a fault a user met: a second run into a finished run's folder, a killed run resumed
into the wrong folder, two runs at once, a kill while the final files are written, pairs that
tokenize alike, beta <= 0, an attribute the labels cannot identify, and errors shown as
tracebacks.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from badpo.auditing.estimates import BiasIdentifiabilityWarning
from badpo.cli import main
from badpo.core.config import ConfigError, load_config, to_dict
from badpo.core.judgments import JudgmentError
from badpo.engine.checkpoint import list_checkpoints
from badpo.engine.settings import SFTConfig, TrainConfig
from badpo.engine.train import train
from badpo.run_folder import final_commit, identity, layout
from fixtures.engine import judgment_rows, log_records, make_config, write_jsonl


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("run_safety")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def _missing_data(world: Path, name: str, *overrides: str) -> TrainConfig:
    """A config whose data does not exist: an error about anything else was raised before the
    data (or the model) was loaded."""
    return make_config(world, name, f"data={world / 'nowhere.jsonl'}", *overrides)


# --------------------------------------------------------------- numbers checked before loading
@pytest.mark.parametrize("override, key", [
    ("beta=-1", "beta"), ("beta=0", "beta"), ("optim.lr=0", "optim.lr"), ("bias.lr=-0.01", "bias.lr"),
    ("optim.adam_betas=[0.9, 1.0]", r"optim.adam_betas\[1\]"), ("optim.adam_eps=0", "optim.adam_eps"),
    ("optim.weight_decay=-1", "optim.weight_decay"), ("lora.enabled=true", None),
    ("runtime.seed=-3", "runtime.seed"), ("keep_checkpoints=0", "keep_checkpoints"),
    ("report.log_every=0", "report.log_every"), ("bias.fixed_offset=[.nan]", "bias.fixed_offset"),
])
def test_out_of_range_numbers_are_config_errors_before_loading(world, override, key):
    if key is None:  # a valid override: LoRA with its default rank passes the checks
        with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
            train(_missing_data(world, "checks", override))
        return
    with pytest.raises(ConfigError, match=f"^{key}: must"):
        train(_missing_data(world, "checks", override))


def test_a_missing_tracker_is_named_with_its_extra_when_the_config_is_read(world, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboard" else find_spec(name, *a))
    with pytest.raises(ConfigError, match=r"report.report_to: tensorboard is not installed; "
                                          r"pip install -e '.\[tensorboard\]' \(in badpo's clone\)"):
        train(_missing_data(world, "trackers", "report.report_to=[tensorboard]"))
    with pytest.raises(ConfigError, match="report.report_to: tensorboard"):
        from badpo.engine.sft import sft

        sft(load_config(SFTConfig, None, [f"data={world / 'nowhere.jsonl'}",
                                          f"model.name_or_path={world / 'model'}",
                                          "report.report_to=[tensorboard]"]))


def test_the_tensorboard_tracker_writes_events(world):
    pytest.importorskip("tensorboard", reason="the test extra installs tensorboard")
    out = train(make_config(world, "tensorboard", "steps=1", "report.report_to=[tensorboard]"))
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))


# --------------------------------------------------------------------------------- run identity
def test_a_folder_holding_another_run_is_refused_unless_overwrite(world):
    out = train(make_config(world, "identity", "steps=2"))
    theta = (out / "theta.json").read_bytes()
    with pytest.raises(ConfigError, match=r"output_dir: .*identity belongs to another run "
                                          r"\(runtime.seed: 42 -> 7\); .*overwrite=true"):
        train(make_config(world, "identity", "steps=2", "runtime.seed=7"))
    assert (out / "theta.json").read_bytes() == theta and len(log_records(out)) == 2
    train(make_config(world, "identity", "steps=2", "runtime.seed=7", "overwrite=true"))
    assert load_config(TrainConfig, out / "config.yaml").runtime.seed == 7
    assert (out / "theta.json").read_bytes() != theta


def test_a_finished_run_is_kept_when_run_or_resumed_again(world, capsys):
    out = train(make_config(world, "finished", "steps=2"))
    files = {name: (out / name).read_bytes() for name in ("run.json", "theta.json", "log.jsonl")}
    assert json.loads(files["run.json"])["final"]["loss"] > 0
    capsys.readouterr()
    for extra in ((), ("resume_from=latest",), ("resume_from=latest", "stop_after_steps=1")):
        assert train(make_config(world, "finished", "steps=2", *extra)) == out
        assert "finished; its results are kept" in capsys.readouterr().err
        assert {name: (out / name).read_bytes() for name in files} == files


def test_a_killed_run_is_resumed_only_by_its_own_config(world):
    out = train(make_config(world, "killed", "steps=4", "stop_after_steps=2"))
    assert [p.name for p in list_checkpoints(out)] == ["step-000002"]
    assert not (out / "run.json").exists()
    with pytest.raises(ConfigError, match="holds an unfinished run of this config .*step-000002.*"
                                          "resume_from=latest"):
        train(make_config(world, "killed", "steps=4"))
    with pytest.raises(ConfigError, match=r"output_dir: .*belongs to another run \(beta: 0.1 -> 0.2\)"):
        train(make_config(world, "killed", "steps=4", "beta=0.2", "resume_from=latest"))
    checkpoint = list_checkpoints(out)[-1]
    with pytest.raises(ConfigError, match=r"resume_from: .*step-000002 belongs to another run "
                                          r"\(method: 'ba_dpo_shared_mean' -> 'dpo'\)"):
        train(make_config(world, "elsewhere", "steps=4", "method=dpo", f"resume_from={checkpoint}"))
    assert not (world / "elsewhere" / "policy").exists()
    # the keys that only steer stopping, saving and reporting may change on resume
    train(make_config(world, "killed", "steps=4", "resume_from=latest", "save_every=1",
                      "keep_checkpoints=1", "report.log_every=2"))
    assert [p.name for p in list_checkpoints(out)] == ["step-000004"]
    assert json.loads((out / "run.json").read_text())["steps"] == 4


def test_pruning_keeps_the_checkpoint_just_saved(world):
    """Resumed from step 2 while steps 4 and 6 exist, keeping 2: the new step 3 is kept beside
    the newest (before the fix the two oldest, step 2 and the step-3 checkpoint just written,
    were deleted)."""
    out = train(make_config(world, "prune", "steps=8", "save_every=2", "keep_checkpoints=3",
                            "stop_after_steps=6"))
    assert [p.name for p in list_checkpoints(out)] == ["step-000002", "step-000004", "step-000006"]
    train(make_config(world, "prune", "steps=8", "save_every=1", "keep_checkpoints=2",
                      "stop_after_steps=3", f"resume_from={list_checkpoints(out)[0]}"))
    assert [p.name for p in list_checkpoints(out)] == ["step-000003", "step-000006"]


def test_a_second_run_into_a_locked_folder_is_refused(world):
    folder = world / "locked"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from badpo.run_folder.ownership import run_lock\n"
         f"with run_lock(Path({str(folder)!r})):\n    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"output_dir: {folder} is in use by process {holder.pid}"):
            train(make_config(world, "locked", "steps=1"))
    finally:
        holder.kill()
        holder.wait()
    out = train(make_config(world, "locked", "steps=1"))  # the dead holder's lock is gone
    assert (out / "run.json").exists()


# --------------------------------------------------------------------- the final commit is atomic
def _state(folder: Path) -> dict[str, str]:
    found = {}
    for name in layout.FINAL_NAMES:
        path = folder / name
        if path.is_dir():
            found[name] = "".join(p.read_text() for p in sorted(path.iterdir()))
        elif path.exists():
            found[name] = path.read_text()
    return found


def _write(version: str, with_theta: bool):
    def write(staging: Path) -> None:
        (staging / "policy").mkdir()
        (staging / "policy" / "model.safetensors").write_text(f"weights {version}")
        (staging / "policy" / "config.json").write_text(f"config {version}")
        if with_theta:
            (staging / "theta.json").write_text(f"theta {version}")
        (staging / "run.json").write_text(f"run {version}")

    return write


class Killed(BaseException):
    """A kill: nothing after it runs (BaseException, so no handler swallows it)."""


@pytest.mark.parametrize("new_has_theta", [True, False])
def test_a_kill_at_any_point_of_the_final_commit_leaves_the_old_or_the_new_state(
        tmp_path, monkeypatch, new_has_theta):
    """Kill the commit before its 1st, 2nd, ... filesystem change (rename, tree removal, unlink),
    then recover as the next run does: the folder holds the old or the new state, never a mix."""
    old, new = _state_of("old", True), _state_of("new", new_has_theta)
    for kill_at in itertools.count():
        folder = tmp_path / f"kill{kill_at}"
        folder.mkdir()
        final_commit.commit_final(folder, _write("old", with_theta=True))
        assert _state(folder) == old
        calls = []

        def counted(real):
            def call(*args, **kwargs):
                if len(calls) == kill_at:
                    raise Killed
                calls.append(1)
                return real(*args, **kwargs)
            return call

        with monkeypatch.context() as patch:
            for owner, name in ((final_commit.os, "replace"), (final_commit.shutil, "rmtree"),
                                (final_commit.Path, "unlink")):
                patch.setattr(owner, name, counted(getattr(owner, name)))
            try:
                final_commit.commit_final(folder, _write("new", with_theta=new_has_theta))
                finished = True
            except Killed:
                finished = False
        if not finished:
            final_commit.recover_final_commit(folder)
        assert _state(folder) in (old, new), (kill_at, _state(folder))
        assert not final_commit.interrupted_commit(folder)
        if finished:
            assert _state(folder) == new
            break
    assert kill_at >= 5  # the commit has that many steps, each interrupted once above


@pytest.mark.parametrize("full", ["oserror", "safetensors"])
def test_a_full_disk_during_the_final_write_is_one_line_and_leaves_the_old_state(tmp_path, full):
    """No space left while the model is written (safetensors raises its own error, not an OSError):
    one line naming the folder and why, the staging folder gone (it held the space), the previous
    complete state in place, and the next commit goes through."""
    import errno

    from safetensors import SafetensorError

    folder = tmp_path / "run"
    folder.mkdir()
    final_commit.commit_final(folder, _write("old", with_theta=True))

    def no_space(staging: Path) -> None:
        (staging / "policy").mkdir()
        (staging / "policy" / "config.json").write_text("half")
        if full == "oserror":
            raise OSError(errno.ENOSPC, "No space left on device")
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")

    with pytest.raises(OSError, match=r"run: the final outputs could not be written \((No space left on device|Error "
                                      r"while serializing.*)\); nothing of them was put in place"):
        final_commit.commit_final(folder, no_space)
    assert not (folder / layout.STAGING).exists() and _state(folder) == _state_of("old", True)
    final_commit.commit_final(folder, _write("new", with_theta=True))
    assert _state(folder) == _state_of("new", True)


def _state_of(version: str, with_theta: bool) -> dict[str, str]:
    state = {"policy": f"config {version}weights {version}", "run.json": f"run {version}",
             ".run-files": "policy/config.json\npolicy/model.safetensors\n"}  # what overwrite may delete there
    if with_theta:
        state["theta.json"] = f"theta {version}"
    return state


# -------------------------------------------------------------------------------- bad input
def test_a_pair_identical_after_truncation_is_an_error_naming_the_row(world, tmp_path):
    rows = judgment_rows()
    rows[5]["chosen"], rows[5]["rejected"] = "yes good answer here", "yes good answer here and more"
    rows[5]["pair_id"] = "cut"
    data = write_jsonl(tmp_path / "cut.jsonl", rows)
    # prompt "what is the best way to cook" is 7 tokens; max_length 10 leaves 3 response tokens
    with pytest.raises(JudgmentError, match=r"cut.jsonl row 5: chosen and rejected are the same tokens "
                                            r"after tokenization \(a response was cut by "
                                            r"tokenization.max_length\); 1 such row"):
        train(make_config(world, "cut", f"data={data}", "tokenization.max_length=10",
                          "tokenization.max_prompt_tokens=8"))
    rows[5]["rejected"] = "yes  good answer   here"
    data = write_jsonl(tmp_path / "space.jsonl", rows)
    with pytest.raises(JudgmentError, match=r"row 5: .*equal up to whitespace"):
        train(make_config(world, "space", f"data={data}"))


def test_dropped_identical_pairs_duplicates_and_truncation_are_counted(world, tmp_path, capsys):
    rows = judgment_rows()
    rows[5]["rejected"] = rows[5]["chosen"] + " "
    rows[5]["pair_id"] = "ws"
    rows.append(dict(rows[0]))  # an exact duplicate of row 0
    data = write_jsonl(tmp_path / "mixed.jsonl", rows)
    out = train(make_config(world, "dropped", f"data={data}", "drop_identical_pairs=true", "steps=1",
                            "tokenization.max_length=12", "tokenization.max_prompt_tokens=6"))
    report = json.loads((out / "run.json").read_text())["input"]
    assert report["judgments_read"] == 25 and report["identical_pairs_dropped"] == 1
    assert report["exact_duplicate_judgments"] == 1
    assert report["truncated_prompts"] > 0 and report["truncated_responses"] > 0
    assert json.loads((out / "run.json").read_text())["judgments"] == 24
    err = capsys.readouterr().err
    for text in ("1 judgment(s) with identical sides dropped", "1 exact duplicate judgment(s), kept",
                 f"{report['truncated_prompts']} prompt(s) cut", f"{report['truncated_responses']} response(s) cut"):
        assert text in err


def test_duplicates_drop_drops_the_repeats_as_the_audit_does_and_keep_stays_keyed_as_before(world, tmp_path,
                                                                                          capsys):
    """``duplicates=drop`` (as ``badpo audit --duplicates drop``) trains on the first of each exact
    duplicate; ``keep`` (the default) says how to drop them. The key is part of a run's identity only
    when set away from keep, so every run made before it keeps its identity."""
    from badpo.run_folder.identity import identity

    rows = judgment_rows()
    rows += [dict(rows[0]), dict(rows[3])]  # two exact duplicates
    data = write_jsonl(tmp_path / "twice.jsonl", rows)
    kept = train(make_config(world, "kept", f"data={data}", "steps=1"))
    err = capsys.readouterr().err
    assert "2 exact duplicate judgment(s), kept: each counts as a vote (duplicates=drop drops" in err
    dropped = train(make_config(world, "dropped_repeats", f"data={data}", "steps=1", "duplicates=drop"))
    assert "badpo train: 2 exact duplicate judgment(s) dropped (duplicates=drop)" in capsys.readouterr().err
    runs = {name: json.loads((out / "run.json").read_text()) for name, out in (("keep", kept), ("drop", dropped))}
    assert runs["keep"]["judgments"] == 26 and runs["drop"]["judgments"] == 24
    assert runs["drop"]["input"]["exact_duplicates_dropped"] == 2 and runs["drop"]["input"]["judgments_read"] == 26
    assert "duplicates" not in identity(make_config(world, "x"))  # keep: as before the key existed
    assert identity(make_config(world, "x", "duplicates=drop"))["duplicates"] == "drop"


def test_a_run_into_a_folder_of_the_user_s_files_says_it_goes_beside_them(world, tmp_path):
    """``output_dir=.`` in a folder of one's own files wrote the run among them without a word."""
    import warnings

    from badpo.core.notices import BadpoWarning

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(make_config(world, "unused", "steps=1", f"output_dir={folder}"))
    said = [str(w.message) for w in caught if issubclass(w.category, BadpoWarning) and "not a run's" in str(w.message)]
    assert said == [f"output_dir {folder} holds 1 file(s) that are not a run's (notes.txt): the run's files go "
                    "beside them; overwrite=true would delete only the run's own"]
    assert (folder / "notes.txt").read_text() == "mine\n" and (folder / "run.json").is_file()


# ------------------------------------------------------------------------- train audits the labels
def test_an_attribute_that_never_differs_is_an_error_for_an_arm_that_learns_it(world, tmp_path):
    rows = judgment_rows()
    for row in rows:
        row["g_chosen"], row["g_rejected"] = {"signed": 1.0}, {"signed": 1.0}
    data = write_jsonl(tmp_path / "flat.jsonl", rows)
    with pytest.raises(ConfigError, match="attributes: 'signed' never differs .*cannot learn its theta"):
        train(make_config(world, "flat", f"data={data}", "method=ba_dpo_pooled"))
    out = train(make_config(world, "flat-dpo", f"data={data}", "method=dpo", "steps=1"))
    assert not (out / "audit.json").exists()  # DPO learns no theta: nothing to audit


def test_divergent_annotators_are_warned_about_and_the_audit_is_written(world):
    """In the fixture ann1 and ann4 chose the signed side in every cross-group judgment."""
    with pytest.warns(BiasIdentifiabilityWarning, match=r"2 annotator\(s\) chose the attribute side "
                                                        r"in every cross-group judgment.*ann1, ann4"):
        out = train(make_config(world, "audited", "steps=1"))
    audit = json.loads((out / "audit.json").read_text())
    assert audit["coordinates"][0]["diverge_up"] == ["ann1", "ann4"]
    assert json.loads((out / "run.json").read_text())["audit_warnings"] == audit["warnings"]


# ------------------------------------------------------------------------------- errors, one line
def test_user_errors_are_one_line_with_status_2(world, tmp_path, cli_error, capsys):
    base = [f"data={world / 'judgments.jsonl'}", "attributes=[given:signed]", "cache_dir=null",
            "report.progress_bar=false", f"output_dir={tmp_path / 'cli'}"]
    line = cli_error(["train", *base, f"model.name_or_path={tmp_path / 'no-model'}"])
    assert line == (f"badpo train: model.name_or_path: no such folder '{tmp_path / 'no-model'}' "
                    "(--debug for the traceback)")
    assert cli_error(["train", *base, f"model.name_or_path={world / 'model'}", "beta=-1"]).startswith(
        "badpo train: beta: must be > 0, got -1.0")
    broken = tmp_path / "broken.yaml"
    broken.write_text("steps: 3\nbeta: [0.1\nmethod: dpo\n")
    assert cli_error(["train", "-c", str(broken)]).startswith(
        f"badpo train: {broken}: YAML syntax error at line ")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"steps: 3\n# caf\xe9\n")
    assert cli_error(["train", "-c", str(latin)]).startswith(f"badpo train: {latin} line 2: not UTF-8 text")
    bad_bytes = tmp_path / "bytes.jsonl"
    bad_bytes.write_bytes((world / "judgments.jsonl").read_bytes() + b'{"prompt": "caf\xe9"}\n')
    assert f"{bad_bytes} line 25: not UTF-8 text" in cli_error(
        ["audit", str(bad_bytes), "-a", "given:signed"])
    with pytest.raises(ConfigError):  # --debug: the exception itself, with its traceback
        main(["--debug", "train", *base, f"model.name_or_path={world / 'model'}", "beta=-1"])


def test_hub_ids_and_paths_are_told_apart():
    from badpo.engine.runtime import looks_local

    assert not looks_local("Qwen/Qwen2.5-0.5B-Instruct") and not looks_local("gpt2")
    assert looks_local("/models/qwen") and looks_local("./runs/sft") and looks_local("runs/a/model")
    assert looks_local("~/models/x")


def test_run_control_keys_exist_in_the_config():
    """Every key that may change on resume names a real TrainConfig key (a typo would make the
    identity check stricter than documented without anyone noticing)."""
    plain = to_dict(TrainConfig())
    for dotted in identity.RUN_CONTROL_KEYS:
        node = plain
        for part in dotted.split("."):
            assert part in node, dotted
            node = node[part]
    assert "beta" in identity.identity(TrainConfig()) and "resume_from" not in identity.identity(TrainConfig())


def test_sides_equal_up_to_whitespace_that_tokenize_apart_are_counted_and_kept():
    """The tiny world's tokenizer keeps whitespace: '1 4 1 3' is 4 tokens, '1 4 1 3  ' 6 (two
    space tokens). Such a pair is not token-identical, so it trains (on whitespace alone): kept,
    and counted as whitespace_only_pairs (1 of 2 judgments; the other pair differs in words)."""
    from badpo.core.judgments import validate_judgments
    from badpo.corpora.tiny import build_tokenizer
    from badpo.engine.batches import build_preference_data
    from badpo.engine.settings import TokenizationConfig

    rows = [{"pair_id": "p0", "prompt": "reverse 3 1 4 1\n", "chosen": "1 4 1 3", "rejected": "1 4 1 3  ",
             "annotator": "a"},
            {"pair_id": "p1", "prompt": "reverse 3 1 4 1\n", "chosen": "1 4 1 3", "rejected": "3 1 4 1",
             "annotator": "a"}]
    data = build_preference_data(validate_judgments(rows), None, build_tokenizer(["Smith"], 64),
                                 TokenizationConfig(max_prompt_tokens=16, max_length=32))
    assert data.input_report["whitespace_only_pairs"] == 1
    assert data.input_report["identical_pairs_dropped"] == 0 and len(data.chosen_row) == 2
