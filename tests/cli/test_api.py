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
from fixtures.runs import write_pair

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


def test_tensorboard_receives_the_logged_scalars(world):
    pytest.importorskip("tensorboard", reason="the test extra installs tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = badpo.train(make_config(world, "tracked", "steps=2"), report={"report_to": ["tensorboard"]})
    events = EventAccumulator(str(result.run_dir / "tensorboard"))
    events.Reload()
    logged = [json.loads(line) for line in (result.run_dir / "log.jsonl").read_text().splitlines()]
    for key in ("loss", "theta_bar/signed", "lr"):
        path = key.split("/")
        expected = [record[path[0]] if len(path) == 1 else record[path[0]][path[1]] for record in logged]
        scalars = events.Scalars(key)
        assert [s.step for s in scalars] == [1, 2]
        assert [s.value for s in scalars] == pytest.approx(expected, rel=1e-6)


def test_sft_and_evaluate_are_one_call(world, monkeypatch, save_model_dir):
    chat = [{"prompt": [{"role": "user", "content": "write code"}],
             "response": [{"role": "assistant", "content": "sure i think"}]}] * 4
    save_model_dir(world / "chat-model", chat_template=True)
    result = badpo.sft({"model": {"name_or_path": str(world / "chat-model")}, "batch_size": 4,
                        "micro_batch_size": 4, "output_dir": str(world / "sft"),
                        "report": {"progress_bar": False}, "runtime": {"num_threads": 1}},
                       data=datasets.Dataset.from_list(chat))
    assert result.summary["rows"] == 4 and (result.model_dir / "model.safetensors").exists()

    seen = {}

    def evaluate_run_dir(run_dir, settings, data, trust_remote_code=False):
        seen.update(run_dir=run_dir, settings=settings, data=data)
        return {"kl": 0.5}

    monkeypatch.setattr("badpo.readouts.run.evaluate_run_dir", evaluate_run_dir)
    evaluated = badpo.evaluate(world / "sft", {"seed": 3}, corpus=world, max_new_tokens=8,
                               columns={"prompt": "question"})
    # no attributes among the settings: the run's own are read
    assert seen["settings"] == {"seed": 3, "max_new_tokens": 8}
    assert (seen["data"].corpus, seen["data"].columns.prompt, seen["data"].heldout) == (str(world), "question", None)
    assert json.loads((world / "sft" / "readouts.json").read_text()) == evaluated.readouts == {"kl": 0.5}


def test_import_badpo_loads_no_engine_until_the_api_is_used():
    code = "import sys, badpo; print('torch' in sys.modules, 'badpo.api' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]
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
    assert [path.name for path in written.files] == ["compare.json", "compare.md", "compare.png", "theta.png"]
    alone = badpo.compare(ba, baseline=dpo, reference=dpo)
    assert alone.comparison["baseline"] == "DPO" and alone.comparison["reference"]["label"] == "reference (dpo)"


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
