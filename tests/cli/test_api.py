"""The Python API (badpo.api): the README's example runs as written, a datasets.Dataset trains like
the same rows from a file, ``import badpo`` stays light, and the trackers are accelerate's."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import badpo
from badpo.core.config import to_dict
from fixtures.engine import judgment_rows, make_config, write_jsonl
from fixtures.runs import readouts, write_pair, write_run

datasets = pytest.importorskip("datasets")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    world = tmp_path_factory.mktemp("api")
    save_model_dir(world / "model")
    write_jsonl(world / "judgments.jsonl", judgment_rows())
    return world


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- the block below is run by tests/cli/test_api.py -->\n```python\n(.*?)```",
                      text, re.S)
    assert match, "README.md lost its tested Python example"
    return match.group(1)


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch, capsys, save_model_dir):
    monkeypatch.chdir(tmp_path)
    save_model_dir(tmp_path / "runs" / "my-sft")
    rows = []
    for row in judgment_rows():
        row = {**row, "worker_id": row.pop("annotator")}
        del row["g_chosen"], row["g_rejected"]
        rows.append(row)
    write_jsonl(tmp_path / "my_judgments.jsonl", rows)
    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "configs" / "train_tiny.yaml", tmp_path / "configs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the config leaves threads to torch; one, like every engine test
    try:
        exec(compile(readme_example(), "README.md", "exec"), {})
    finally:
        torch.set_num_threads(threads)
    run_dir, theta_bar, loss = capsys.readouterr().out.splitlines()
    assert Path(run_dir) == Path("runs/api-example")
    records = [json.loads(line) for line in (tmp_path / run_dir / "log.jsonl").read_text().splitlines()]
    assert len(records) == 20 and float(loss) == records[-1]["loss"]
    saved = json.loads((tmp_path / run_dir / "theta.json").read_text())
    assert theta_bar == str(saved["theta_bar"]) and set(saved["theta_bar"]) == {"signoff"}
    summary = json.loads((tmp_path / run_dir / "run.json").read_text())
    assert summary["input"]["judgments_read"] == len(rows)


def test_a_dataset_trains_like_the_same_rows_from_a_file(world):
    """Same rows, same config: the in-memory dataset (with a mapped annotator column and an extra
    one) and the JSONL file give the same log; config.yaml records the dataset's fingerprint, and a
    second call with the same dataset finds the finished run."""
    from_file = badpo.train(to_dict(make_config(world, "from-file", "steps=2")))
    rows = [{("rater" if key == "annotator" else key): value for key, value in row.items()} | {"note": "x"}
            for row in judgment_rows()]
    dataset = datasets.Dataset.from_list(rows)
    config = to_dict(make_config(world, "from-dataset", "steps=2"))
    with pytest.warns(UserWarning, match=r"ignoring column\(s\) \['note'\]"):
        result = badpo.train(config, data=dataset, columns={"annotator": "rater"},
                             runtime={"num_threads": 1})
    assert result.final == {**from_file.final, "elapsed_s": result.final["elapsed_s"]}
    assert result.theta["theta_bar"] == from_file.theta["theta_bar"]
    recorded = (result.run_dir / "config.yaml").read_text()
    assert f"data: datasets.Dataset:{dataset._fingerprint}" in recorded
    again = badpo.train(config, data=dataset, columns={"annotator": "rater"})  # finished: not read again
    assert again.final == result.final
    rows = badpo.train(to_dict(make_config(world, "from-rows", "steps=2")), data=judgment_rows())
    assert rows.final == {**from_file.final, "elapsed_s": rows.final["elapsed_s"]}
    assert "data: rows:" in (rows.run_dir / "config.yaml").read_text()


def test_a_reward_model_is_one_call_and_its_summary_names_no_generation_setting(world):
    """badpo.rm trains on a list of rows; badpo.evaluate reads it on rows too, and its summary
    says it read a reward model, prints no max_new_tokens, and says why the tilt was skipped."""
    rows = judgment_rows()
    config = {"variant": "shared_mean", "attributes": ["given:signed"], "model": {"name_or_path": str(world / "model")},
              "steps": 2, "batch_size": 8, "micro_batch_size": 8, "runtime": {"num_threads": 1},
              "report": {"progress_bar": False}, "output_dir": str(world / "rm")}
    result = badpo.rm(config, data=rows)
    assert isinstance(result, badpo.RMResult) and (result.run_dir / "reward_model" / "config.json").exists()
    assert set(result.theta["theta_bar"]) == {"signed"} and result.summary().splitlines()[0] == str(result.run_dir)
    evaluated = badpo.evaluate(result.run_dir, heldout=rows)
    lines = evaluated.summary().splitlines()
    assert lines[0].startswith(f"a reward model: read {len(rows)} held-out judgments (rows:")
    assert lines[0].endswith("; attributes signed") and "max_new_tokens" not in evaluated.summary()
    assert ("skipped tilt.signed: a given: attribute is a precomputed value of the data: no edit of the text "
            "changes it") in lines


def test_tensorboard_receives_the_logged_scalars(world):
    pytest.importorskip("tensorboard", reason="the test extra installs tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = badpo.train(make_config(world, "tracked", "steps=2"), report={"report_to": ["tensorboard"]})
    events = EventAccumulator(str(result.run_dir / "tensorboard"), size_guidance={"histograms": 0})  # keep all
    events.Reload()
    logged = [json.loads(line) for line in (result.run_dir / "log.jsonl").read_text().splitlines()]
    for key in ("loss", "theta_bar/signed", "lr"):
        path = key.split("/")
        expected = [record[path[0]] if len(path) == 1 else record[path[0]][path[1]] for record in logged]
        scalars = events.Scalars(key)
        assert [s.step for s in scalars] == [1, 2]
        assert [s.value for s in scalars] == pytest.approx(expected, rel=1e-6)
    # each annotator's theta_k: a curve each (5 annotators), their spread, a histogram, a final table
    final = json.loads((result.run_dir / "theta.json").read_text())
    theta = {annotator: entry["theta"]["signed"] for annotator, entry in final["annotators"].items()}
    assert len(theta) == 5
    for annotator, value in theta.items():
        assert events.Scalars(f"theta_k/signed/{annotator}")[-1].value == pytest.approx(value, abs=1e-6)
    assert [s.step for s in events.Scalars("theta_k_sd/signed")] == [1, 2]
    assert [h.step for h in events.Histograms("theta_k/signed")] == [1, 2]
    assert events.Histograms("theta_k/signed")[-1].histogram_value.num == 5
    assert [t.step for t in events.Tensors("theta_k/text_summary")] == [2]


def test_sft_and_evaluate_are_one_call(world, monkeypatch, save_model_dir):
    chat = [{"prompt": [{"role": "user", "content": "write code"}],
             "response": [{"role": "assistant", "content": "sure i think"}]}] * 4
    save_model_dir(world / "chat-model", chat_template=True)
    result = badpo.sft({"model": {"name_or_path": str(world / "chat-model")}, "batch_size": 4,
                        "micro_batch_size": 4, "output_dir": str(world / "sft"),
                        "report": {"progress_bar": False}, "runtime": {"num_threads": 1}},
                       data=datasets.Dataset.from_list(chat))
    assert result.record["rows"] == 4 and (result.model_dir / "model.safetensors").exists()

    seen = {}

    def evaluate_run_dir(run_dir, settings, data, trust_remote_code=False):
        seen.update(run_dir=run_dir, settings=settings, data=data)
        return {"kl": 0.5}

    monkeypatch.setattr("badpo.evaluation.trained_run.evaluate_run_dir", evaluate_run_dir)
    evaluated = badpo.evaluate(world / "sft", {"seed": 3}, corpus=world, max_new_tokens=8,
                               columns={"prompt": "question"})
    # no attributes among the settings: the run's own are read
    assert seen["settings"] == {"seed": 3, "max_new_tokens": 8}
    assert (seen["data"].corpus, seen["data"].columns.prompt, seen["data"].heldout) == (str(world), "question", None)
    assert json.loads((world / "sft" / "readouts.json").read_text()) == evaluated.readouts == {"kl": 0.5}


def test_import_badpo_loads_no_engine_until_the_api_is_used():
    code = ("import sys, badpo; print('torch' in sys.modules, 'badpo.api' in sys.modules); "
            "import badpo.auditing.estimates; print('badpo.api' in sys.modules, 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False", "False", "False"]  # the light audit layer loads neither
    assert badpo.train is importlib.import_module("badpo.api").train
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        badpo.trian  # noqa: B018


def test_compare_takes_what_the_command_takes_and_prints_what_it_prints(tmp_path, capsys):
    """badpo.compare(runs, reference=, baseline=, out=) is `badpo compare`: the same text, the
    same compare.json; one run folder may be given alone."""
    from badpo.cli import main

    dpo, ba = write_pair(tmp_path)
    assert main(["compare", str(dpo), str(ba)]) == 0
    result = badpo.compare([dpo, ba])
    assert str(result) == capsys.readouterr().out
    written = badpo.compare((dpo, ba), out=tmp_path / "out")
    assert json.loads((tmp_path / "out" / "compare.json").read_text()) == json.loads(json.dumps(written.comparison))
    assert [path.name for path in written.files] == ["compare.json", "compare.md", "compare.png", "theta.png",
                                                     "report.html"]
    # a run whose policy stands for the reference (its own readouts: a copy of dpo is refused)
    clean = write_run(tmp_path / "clean", "dpo", readouts({"woman_coded": 12, "black_coded": 4}))
    alone = badpo.compare(ba, baseline=dpo, reference=clean)
    assert alone.comparison["baseline"] == "DPO" and alone.comparison["reference"]["label"] == "reference (clean)"
    with pytest.raises(ValueError, match="one run given twice"):  # the baseline as its own reference
        badpo.compare(ba, baseline=dpo, reference=dpo / "readouts.json")


def test_chat_rows_train_like_plain_prompts_under_the_same_template(world, save_model_dir):
    """A one-user-turn conversation is rendered by badpo.data.sources and tokenized as it is; a
    plain prompt is rendered by the engine as one user turn. Same tokens, so the same run."""
    save_model_dir(world / "chat-ref", chat_template=True)
    plain = judgment_rows()
    chat = [{**row, "prompt": [{"role": "user", "content": row["prompt"]}],
             "chosen": [{"role": "assistant", "content": row["chosen"]}]} for row in plain]
    finals = []
    for name, rows in (("plain", plain), ("chat", chat)):
        config = to_dict(make_config(world, f"template-{name}", "steps=2"))
        config["model"]["name_or_path"] = str(world / "chat-ref")
        finals.append(badpo.train(config, data=datasets.Dataset.from_list(rows)).final)
    assert finals[0] == {**finals[1], "elapsed_s": finals[0]["elapsed_s"]}


def test_evaluate_takes_a_dataset_a_list_of_rows_or_a_path_as_its_command_takes_a_file(tmp_path, monkeypatch, capsys):
    """heldout= and prompts= read a datasets.Dataset or a list of dict rows as the same rows from a
    file (here read back inside the evaluation, while their in-memory names are registered); the
    result's summary() is what `badpo evaluate` prints; a value of another type is one line."""
    from badpo.cli import main
    from badpo.core.config import ConfigError
    from badpo.data.sources import read_judgment_source, read_prompt_source

    rows = judgment_rows()
    write_jsonl(tmp_path / "heldout.jsonl", rows)
    (tmp_path / "run").mkdir()
    seen = []

    def evaluate_run_dir(run_dir, settings, data, trust_remote_code=False):
        judgments = read_judgment_source(data.heldout).rows
        prompts = read_prompt_source(data.prompts).rows if data.prompts is not None else None
        seen.append((data.heldout, judgments, prompts))
        return {"inputs": {"n_heldout": len(judgments), "heldout": data.heldout, "attributes": ["signed"]},
                "heldout": {"signed": {"same_accuracy": 0.5, "cross_accuracy": 0.25, "gap": 0.25, "n_same": 4,
                                       "n_cross": 8}}}

    monkeypatch.setattr("badpo.evaluation.trained_run.evaluate_run_dir", evaluate_run_dir)
    assert main(["evaluate", str(tmp_path / "run"), "--heldout", str(tmp_path / "heldout.jsonl")]) == 0
    printed = capsys.readouterr().out
    from_path = badpo.evaluate(tmp_path / "run", heldout=tmp_path / "heldout.jsonl", overwrite=True)
    assert from_path.summary() + "\n" == printed and str(from_path) == from_path.summary()
    assert from_path.path == tmp_path / "run" / "readouts.json"

    prompts = [{"prompt": "what is the best way to learn"}, {"prompt": "write code"}]
    badpo.evaluate(tmp_path / "run", heldout=rows, prompts=prompts, overwrite=True)
    badpo.evaluate(tmp_path / "run", heldout=datasets.Dataset.from_list(rows), overwrite=True)
    (file_name, from_file, _), (rows_name, from_rows, read_prompts), (dataset_name, from_dataset, _) = seen[1:]
    assert from_rows == from_dataset == from_file and len(from_file) == len(rows)
    assert [row["prompt"] for row in read_prompts] == [row["prompt"] for row in prompts]
    assert rows_name.startswith("rows:") and dataset_name.startswith("datasets.Dataset:")
    with pytest.raises(ConfigError, match="was a list of rows given to the Python API"):
        read_judgment_source(rows_name)  # the name is gone after the call

    for value, message in ((42, r"^heldout: expected a path, a Hub dataset id, a datasets.Dataset or a list of dict "
                                r"rows, got int$"),
                           ([rows[0], "x"], r"^heldout: row 1 is a str, not a dict of column -> value$"),
                           (datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}),
                            r"^heldout: expected one split \(a datasets.Dataset\), got a DatasetDict$")):
        with pytest.raises(ConfigError, match=message):
            badpo.evaluate(tmp_path / "run", heldout=value, overwrite=True)


def test_audit_is_the_command_in_one_call(tmp_path, capsys):
    """badpo.audit(data, attributes) holds what `badpo audit` prints (summary()) and writes (json_out,
    report); a Dataset or a list of rows audits as the same rows from a file."""
    from badpo.cli import main
    from badpo.core.config import ConfigError

    rows = judgment_rows()
    path = tmp_path / "judgments.jsonl"
    write_jsonl(path, rows)
    assert main(["audit", str(path), "-a", "given:signed", "--json", str(tmp_path / "cli.json")]) == 0
    printed = capsys.readouterr().out
    result = badpo.audit(path, "given:signed", json_out=tmp_path / "api.json")
    assert result.summary() == str(result) == printed
    assert (tmp_path / "api.json").read_text() == (tmp_path / "cli.json").read_text() == result.to_json()
    for data in (rows, datasets.Dataset.from_list(rows)):
        again = badpo.audit(data, ["given:signed"])
        assert again.text == printed and again.audit.coordinates == result.audit.coordinates
    reported = badpo.audit(path, ["given:signed"], report=tmp_path / "report")
    assert reported.report["attributes"][0]["name"] == "signed" and (tmp_path / "report" / "README.md").exists()
    assert "report written to" in reported.summary()
    example = badpo.audit(example=True)
    assert example.text.startswith("labels: 12000 judgments (rows by form: chosen_rejected 12000); 0 ties")
    assert "\nbadpo label audit:" in example.text and "planted corpus (seed 0" in example.text

    for kwargs, message in (({}, "give data and at least one attribute"),
                            ({"data": path}, "give data and at least one attribute"),
                            ({"example": True, "data": path}, "example=True audits the built-in corpus"),
                            ({"data": path, "attributes": "given:signed", "run": tmp_path}, "give report=DIR"),
                            ({"data": 3.5, "attributes": "given:signed"}, "^data: expected a path")):
        with pytest.raises(ConfigError, match=message):
            badpo.audit(**kwargs)
