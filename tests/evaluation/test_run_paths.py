"""A run folder's relative paths are read from where the run was made (issue 37, item 6): a run
trained with ``model.name_or_path=models/ref`` and ``output_dir=runs/x`` could be evaluated only
from the folder it was trained in."""

from __future__ import annotations

import pytest

from badpo.run_folder.paths import made_from, resolved_from


def test_relative_paths_of_a_run_are_read_from_where_it_was_made(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "models" / "ref").mkdir(parents=True)
    (project / "runs" / "x").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)  # evaluated from another folder
    origin = made_from(project / "runs" / "x", "runs/x")
    assert origin == project.resolve()
    assert resolved_from(origin, "models/ref") == str(project.resolve() / "models" / "ref")
    assert resolved_from(origin, "org/hub-model") == "org/hub-model"  # nothing there: a Hub id stays
    assert resolved_from(origin, None) is None
    moved = tmp_path / "elsewhere" / "runs" / "x"  # the project moved as a whole: found again
    (tmp_path / "elsewhere" / "models" / "ref").mkdir(parents=True)
    moved.mkdir(parents=True)
    assert resolved_from(made_from(moved, "runs/x"), "models/ref") == str((tmp_path / "elsewhere").resolve()
                                                                          / "models" / "ref")
    assert made_from(project / "runs" / "x", "runs/renamed") is None  # renamed since: nothing to guess
    assert made_from(project / "runs" / "x", str(project / "runs" / "x")) is None  # absolute: nothing to resolve


def test_a_run_moved_away_from_its_relative_reference_says_so_when_the_reference_fails_to_load(tmp_path,
                                                                                           monkeypatch):
    """A copied run folder whose config.yaml names its reference ``sft`` (relative) evaluated from
    elsewhere: loading ``sft`` as a Hub id fails with a network error; the line now says that ``sft``
    names no folder here, and which folder of that name sits above the run."""
    from badpo.core.config import ConfigError
    from badpo.evaluation.trained_run import TrainedRun
    from badpo.run_folder.paths import moved_reference

    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "config.json").write_text("{}")
    run = tmp_path / "moved" / "dpo"
    run.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "moved")
    said = moved_reference(run, None, "sft")
    assert said == (f"config.yaml's model.name_or_path 'sft' is a relative path that names no folder here; "
                    f"{tmp_path.resolve() / 'sft'} is a folder of that name: if the reference was a local folder, "
                    "write its path there")
    assert moved_reference(run, None, str(tmp_path / "sft")) is None  # absolute: loads or fails by itself
    assert moved_reference(run, None, "HuggingFaceTB/SmolLM2-135M-Instruct") is None  # a Hub id: no guess
    assert moved_reference(run, None, "./ref").endswith("names no folder here: if the reference was a local "
                                                        "folder, write its path there")
    monkeypatch.chdir(tmp_path)
    assert moved_reference(run, None, "sft") is None  # names a folder here
    trained = TrainedRun.of_settings({"model": {"name_or_path": "sft"}}, run / "policy", tmp_path / "nowhere")
    trained = trained.__class__(**{**trained.__dict__, "moved": said})

    def offline(*args, **kwargs):
        raise ConfigError("model.name_or_path: cannot load 'sft' (We couldn't connect to 'https://huggingface.co')")

    monkeypatch.setattr("badpo.evaluation.trained_run.load_causal_lm", offline)
    with pytest.raises(ConfigError) as raised:
        trained.load_reference()
    assert str(raised.value).startswith("model.name_or_path: cannot load 'sft' (We couldn't connect to")
    assert str(raised.value).endswith(f"{tmp_path.resolve() / 'sft'} is a folder of that name: if the reference "
                                      "was a local folder, write its path there")


def test_a_run_whose_reference_folder_is_gone_is_refused_before_any_load_tries_the_hub(tmp_path, monkeypatch):
    """run.json records whether the model named a local folder when the run was made; when that
    bare name (``sft``, the shape of a Hub id) names no folder any more, evaluate says so at once:
    before, transformers tried the Hub first, ~20 lines of retries for ~25 s offline (issue 37)."""
    import json

    from badpo.core.config import ConfigError
    from badpo.evaluation.trained_run import TrainedRun

    run = tmp_path / "dpo"
    (run / "policy").mkdir(parents=True)
    (run / "config.yaml").write_text("model:\n  name_or_path: sft\noutput_dir: dpo\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("badpo.evaluation.trained_run.load_causal_lm", lambda *a, **k: pytest.fail("a load was tried"))
    (run / "run.json").write_text(json.dumps({"model_was_folder": True}))
    with pytest.raises(ConfigError, match="'sft' is a relative path that names no folder here or in .*: it was a "
                                          "local folder when the run was made, write its path there"):
        TrainedRun.open(run).load_reference()
    (run / "run.json").write_text(json.dumps({"model_was_folder": False}))  # a Hub id: its load says
    with pytest.raises(pytest.fail.Exception, match="a load was tried"):
        TrainedRun.open(run).load_reference()


def test_train_records_that_its_model_was_a_local_folder(tmp_path, save_model_dir):
    import json

    from badpo.engine.train import train
    from fixtures.engine import judgment_rows, make_config, write_jsonl

    save_model_dir(tmp_path / "model", "gpt2")
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    out = train(make_config(tmp_path, "one", "steps=1", f"cache_dir={tmp_path / 'cache'}"))
    assert json.loads((out / "run.json").read_text())["model_was_folder"] is True
