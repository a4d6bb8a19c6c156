"""The smaller defects of issue 21 (item 6), each through the public CLI where a user meets it: data
errors name the file, a sweep checks every arm's column mapping when it is planned, the audit and
``rm`` refuse an annotator in two classes alike, ``rm`` stays out of its backbone's folder and
leaves nothing when refused, and each stage names itself in its notices."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from badpo.cli import main
from badpo.core.config import ConfigError, apply_overrides, from_dict, load_config
from badpo.engine.settings import RMConfig
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from badpo.experiment.runner import Backend, plan_experiment, prepare_corpus
from fixtures.engine import judgment_rows, write_jsonl
from fixtures.experiment import fake_backend, quiet


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("user_data")
    save_model_dir(root / "model")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def rm_argv(world: Path, name: str, *overrides: str, data: Path | None = None) -> list[str]:
    base = {"variant": "shared_mean", "data": str(data or world / "judgments.jsonl"),
            "attributes": ["given:signed"], "model": {"name_or_path": str(world / "model")}, "steps": 1,
            "batch_size": 8, "micro_batch_size": 8, "runtime": {"num_threads": 1},
            "report": {"progress_bar": False}, "output_dir": str(world / name)}
    path = world / f"{name.replace('/', '-')}.yaml"
    path.write_text(json.dumps(dataclasses.asdict(from_dict(RMConfig, apply_overrides(base, list(overrides))))))
    return ["rm", "-c", str(path)]


def test_an_empty_heldout_file_is_a_one_line_error_naming_it(world, tmp_path, cli_error):
    empty = tmp_path / "heldout.jsonl"
    empty.write_text("")
    assert cli_error(["audit", str(empty), "-a", "given:signed"]) == (
        f"badpo audit: {empty}: no judgments (the source holds no row) (--debug for the traceback)")
    from badpo.data.sources import read_judgment_source

    with pytest.raises(ValueError, match=f"^{empty}: no judgments"):  # what evaluate --heldout reads
        read_judgment_source(str(empty))


@pytest.mark.parametrize("name, text, message", [
    ("header.csv", "prompt,chosen,rejected,annotator\n",
     "has a header (prompt, chosen, rejected, annotator) and no row"),
    ("data.parquet", "this is not parquet\n", "is not a readable parquet file (ArrowInvalid: "),
    # issue 49's retry: these read "DatasetGenerationError: An error occurred while generating the dataset"
    ("ragged.csv", "prompt,chosen,rejected,annotator\na,b,c,d\ne,f,g,h,extra\n",
     "is not a readable csv file (ParserError: Error tokenizing data. C error: Expected 4 fields in line 3, saw 5)"),
    ("cut.json", '[{"prompt": "a", "chosen": "b", "rejected": "c", "annotator": "d"}, {"prompt": "e", "cho',
     "is not a readable json file (ValueError: "),
])
def test_a_file_datasets_cannot_read_is_named(world, tmp_path, cli_error, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    line = cli_error(["audit", str(path), "-a", "given:signed"])  # one line: datasets logs nothing
    assert f"data: {str(path)!r} {message}" in line
    line = cli_error(rm_argv(world, "rm-bad-file", data=path))
    assert f"data: {str(path)!r} {message}" in line


def test_every_arms_column_mapping_is_checked_when_the_sweep_is_planned(tmp_path):
    """The second arm maps the annotator to a column the data lacks: the plan fails naming the
    arm, the field and the column, before the reference or the first arm trains."""
    from badpo.experiment.backend import check_data, resolve_arm, resolve_reference

    config = load_config(ExperimentConfig, experiment_config_path("tiny"), [f"output_dir={tmp_path}"])
    config.arms[1].params["columns"] = {"annotator": "worker_id"}
    calls: list[str] = []
    fake = fake_backend(calls)
    backend = Backend(fake.build_corpus, resolve_reference, resolve_arm, fake.run_reference, fake.run_arm,
                    check_data=check_data)
    with pytest.raises(ConfigError, match=rf"^arms\[1\] \({re.escape(config.arms[1].name)}\): columns.annotator: "
                                          rf".*train.jsonl has no column 'worker_id'; it has \['builder'"):
        plan_experiment(config, backend, prepare_corpus(config, backend, tmp_path, quiet))
    assert calls == ["corpus"]


def test_a_jsonl_mapping_names_the_missing_column(world, cli_error):
    line = cli_error([*rm_argv(world, "rm-mapped"), "columns.annotator=worker_id"])
    assert "columns.annotator: " in line and "has no column 'worker_id'" in line


def test_audit_and_rm_refuse_an_annotator_in_two_classes_alike(world, tmp_path, cli_error):
    rows = judgment_rows()
    rows[5] = {**rows[5], "annotator": "ann0", "annotator_class": "B"}  # ann0 is in class A elsewhere
    data = write_jsonl(tmp_path / "two_classes.jsonl", rows)
    expected = f"{data} row 5: annotator 'ann0' has class 'B' here but 'A' earlier; an annotator is in one class"
    assert expected in cli_error(["audit", str(data), "-a", "given:signed"])
    assert expected in cli_error(rm_argv(world, "rm-two-classes", data=data))
    assert expected in cli_error(rm_argv(world, "rm-two-classes-plain", "variant=none", data=data))
    assert not (world / "rm-two-classes").exists() and not (world / "rm-two-classes-plain").exists()


@pytest.mark.parametrize("inside", ["", "rm-out"])
def test_rm_refuses_an_output_folder_in_its_backbones(world, cli_error, inside):
    before = sorted(p.name for p in (world / "model").iterdir())
    line = cli_error(rm_argv(world, f"model/{inside}".rstrip("/")))
    assert "the folder of model.name_or_path" in line and "which this run loads; choose another output_dir" in line
    assert sorted(p.name for p in (world / "model").iterdir()) == before


def test_a_refused_rm_leaves_no_folder(world, cli_error):
    assert "attributes" in cli_error(rm_argv(world, "rm-refused", "attributes=[]"))
    assert not (world / "rm-refused").exists()
    (world / "rm-user-folder").mkdir()
    (world / "rm-user-folder" / "notes.txt").write_text("mine")
    cli_error(rm_argv(world, "rm-user-folder", "attributes=[]"))
    assert [p.name for p in (world / "rm-user-folder").iterdir()] == ["notes.txt"]


def test_rm_names_itself_in_its_notices(world, tmp_path, capsys):
    rows = judgment_rows()
    data = write_jsonl(tmp_path / "duplicated.jsonl", [*rows, rows[0]])
    assert main(rm_argv(world, "rm-notices", data=data)) == 0
    err = capsys.readouterr().err
    assert "badpo rm: 1 exact duplicate judgment(s), kept" in err and "badpo train" not in err
