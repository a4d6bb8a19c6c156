"""``python -m experiments reproduce``: a sweep of experiments, one progress view, one report folder (a fake
backend: nothing trains)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from badpo.core.config import ConfigError, from_dict
from badpo.experiment.runner import Backend
from experiments.reproduce import ReproduceConfig, SweepProgress, paper_sections, run_reproduce

RATES = {("dpo", 42): 0.9, ("dpo", 123): 0.8, ("ba_dpo_pooled", 42): 0.55, ("ba_dpo_pooled", 123): 0.5}


def fake_backend(calls: list[str]) -> Backend:
    def build_corpus(builder, config, outdir: Path):
        outdir.mkdir(parents=True)
        (outdir / "train.jsonl").write_text(json.dumps({"builder": builder}) + "\n")
        calls.append("corpus")

    def run_reference(task):
        calls.append(task.key)
        return {"readouts": {"rate": 0.5}, "artifacts": {"model": task.work_dir / "model"}}

    def run_arm(task):
        calls.append(task.key)
        return {"readouts": {"rate": RATES[(task.method, task.seed)]}}

    return Backend(build_corpus, dict, dict, run_reference, run_arm)


def experiment_file(path: Path, out: Path, arms: list[dict]) -> str:
    path.write_text(yaml.safe_dump({
        "name": path.stem, "output_dir": str(out), "corpus": {"builder": "fake"},
        "reference": {"steps": 1}, "train": {"model": "{reference}"}, "arms": arms, "seeds": [42, 123],
        "tables": [{"title": path.stem, "columns": [{"header": "rate", "metric": "rate"}]}],
        "plots": {"rates": []}}))
    return str(path)


@pytest.fixture
def sweep(tmp_path) -> ReproduceConfig:
    """Two tables in one experiment folder: `first` runs DPO, `second` DPO and BA-DPO, so the
    reference and DPO's two seeds are shared: 1 + 2 + 2 = 5 runs in all, not 1 + 2 + 1 + 4 = 8."""
    out = tmp_path / "shared"
    dpo = {"name": "DPO", "method": "dpo"}
    pooled = {"name": "BA-DPO (pooled)", "method": "ba_dpo_pooled"}
    paper = tmp_path / "paper.md"
    paper.write_text("# The paper's tables\n\n## second\n\n| Method | p |\n|--|--|\n| DPO | 0.96 |\n\n## other\nx\n")
    return from_dict(ReproduceConfig, {
        "output_dir": str(tmp_path / "report"), "paper_tables": str(paper),
        "tables": [{"table": "first", "config": experiment_file(tmp_path / "first.yaml", out, [dpo])},
                   {"table": "second", "config": experiment_file(tmp_path / "second.yaml", out, [dpo, pooled])}]})


def test_a_sweep_counts_shared_runs_once_and_writes_one_report(sweep, tmp_path):
    calls, lines = [], []
    ticks = iter(range(0, 1000, 10))  # each clock reading 10 s after the last
    result = run_reproduce(sweep, fake_backend(calls), None, log=lines.append, clock=lambda: next(ticks))
    assert calls.count("corpus") == 1 and len(calls) == 1 + 5
    assert lines[0].startswith("[sweep 0/5 runs, 0:00:")
    assert "no estimate until a run finishes" in lines[0]
    finished = [line for line in lines if ": done in " in line]
    assert len(finished) == 5
    assert finished[-1].startswith("[sweep 5/5 runs,") and "nothing left" in finished[-1]
    report = Path(result["report"]).read_text()
    assert report.index("## first") < report.index("## second") < report.index("### The paper's table")
    assert "| DPO | 0.96 |" in report and "## other" not in report
    assert "\n### second\n" in report and "\n#### second\n" in report  # table.md's title and table, nested
    assert "| BA-DPO (pooled) | 0.525" in report  # (0.55 + 0.5) / 2, from the logged records
    for table in ("first", "second"):
        assert (tmp_path / "report" / table / "table.md").exists()
        assert (tmp_path / "report" / table / "table.csv").exists()

    again: list[str] = []
    run_reproduce(sweep, fake_backend(again), None, log=lambda line: None)
    assert again == []  # everything logged: nothing trains, the corpus is reused


def test_a_table_with_a_report_dir_is_gathered_from_it(tmp_path):
    """`variant` shares `first`'s folder and renders into OUT/variant (report_dir): the report
    holds the variant's table (with BA-DPO), not the one `first` wrote in OUT."""
    out = tmp_path / "shared"
    dpo = {"name": "DPO", "method": "dpo"}
    pooled = {"name": "BA-DPO (pooled)", "method": "ba_dpo_pooled"}
    variant = tmp_path / "variant.yaml"
    experiment_file(variant, out, [dpo, pooled])
    variant.write_text(variant.read_text() + "report_dir: variant\n")
    sweep = from_dict(ReproduceConfig, {"output_dir": str(tmp_path / "report"), "tables": [
        {"table": "first", "config": experiment_file(tmp_path / "first.yaml", out, [dpo])},
        {"table": "variant", "config": str(variant)}]})
    result = run_reproduce(sweep, fake_backend([]), None, log=lambda line: None)
    gathered = (tmp_path / "report" / "variant" / "table.md").read_text()
    assert gathered == (out / "variant" / "table.md").read_text()
    assert "| BA-DPO (pooled) | 0.525" in gathered
    assert "BA-DPO" not in (tmp_path / "report" / "first" / "table.md").read_text()
    assert result["tables"]["variant"]["files"][0] == str(tmp_path / "report" / "variant" / "table.md")


def test_the_estimate_is_the_mean_run_time_times_the_runs_left():
    """3 runs planned; one finished in 120 s: 2 left x 120 s = 4 min."""
    now = [0.0]
    progress = SweepProgress(lambda: now[0])
    progress.planned(3)
    now[0] = 125.0
    progress.finished(120.0)
    assert progress.status() == "1/3 runs, 0:02:05 elapsed, ~0:04:00 left"


def test_paper_sections_by_heading(tmp_path):
    path = tmp_path / "p.md"
    path.write_text("intro\n## names_v3\n| a |\n\n## votes\nb\n")
    assert paper_sections(path) == {"names_v3": "| a |", "votes": "b"}


def test_bad_sweeps_are_named(tmp_path):
    with pytest.raises(ConfigError, match="tables: list at least one"):
        from_dict(ReproduceConfig, {"tables": []})
    with pytest.raises(ConfigError, match=r"repeated: \['a'\]"):
        from_dict(ReproduceConfig, {"tables": [{"table": "a", "config": "x"}, {"table": "a", "config": "y"}]})
    with pytest.raises(ConfigError, match=r"tables\[0\].table: '../a' must be a plain folder name"):
        from_dict(ReproduceConfig, {"tables": [{"table": "../a", "config": "x"}]})
    config = from_dict(ReproduceConfig, {"output_dir": str(tmp_path / "r"),
                                         "tables": [{"table": "a", "config": str(tmp_path / "no.yaml")}]})
    with pytest.raises(ConfigError, match=r"tables\[0\].config: no experiment config at .*no.yaml"):
        run_reproduce(config, fake_backend([]), None, log=lambda line: None)


def test_the_command_names_a_missing_experiment_config_in_one_line(tmp_path, capsys):
    """`python -m experiments reproduce SWEEP`: a table whose experiment config does not exist is refused before
    anything runs, with the sweep key that names it."""
    from experiments.commands import main

    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "report"),
                                          "tables": [{"table": "names_v3", "config": "configs/nothing.yaml"}]}))
    assert main(["reproduce", str(sweep_file)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("python -m experiments reproduce: tables[0].config: no experiment config at")
    assert "configs/nothing.yaml" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "report").exists()


def test_a_table_reusing_an_earlier_tables_runs_rescores_them_without_training(tmp_path):
    """`second` (own folder) reuses `first`'s runs: the reference and DPO's two seeds are copied
    into its folder before it runs, so only BA-DPO's two seeds train there: 1 + 2 + 2 = 5 runs
    planned and trained in all, as if the two tables shared one folder."""
    dpo = {"name": "DPO", "method": "dpo"}
    pooled = {"name": "BA-DPO (pooled)", "method": "ba_dpo_pooled"}
    sweep = from_dict(ReproduceConfig, {"output_dir": str(tmp_path / "report"), "tables": [
        {"table": "first", "config": experiment_file(tmp_path / "first.yaml", tmp_path / "a", [dpo])},
        {"table": "second", "config": experiment_file(tmp_path / "second.yaml", tmp_path / "b", [dpo, pooled]),
         "reuse_runs_of": "first"}]})
    calls, lines = [], []
    run_reproduce(sweep, fake_backend(calls), None, log=lines.append)
    trained = [call for call in calls if call != "corpus"]
    assert len(trained) == len(set(trained)) == 5
    assert lines[0].startswith("[sweep 0/5 runs,")
    assert sorted(p.name for p in (tmp_path / "a" / "runs").glob("*.json")) == sorted(
        p.name for p in (tmp_path / "b" / "runs").glob("*.json") if not p.name.startswith("ba_dpo"))
    assert "| BA-DPO (pooled) | 0.525" in (tmp_path / "report" / "second" / "table.md").read_text()

    with pytest.raises(ConfigError, match=r"tables\[0\].reuse_runs_of: 'second' is not a table listed before"):
        from_dict(ReproduceConfig, {"tables": [{"table": "first", "config": "x", "reuse_runs_of": "second"},
                                               {"table": "second", "config": "y"}]})


def test_the_shipped_tiny_sweep_names_configs_that_load():
    """experiments/configs/reproduce_tiny.yaml: every table's experiment config exists and validates, the
    paper's tables file has a section for each table of the sweep, and each table states the
    paper's finding and its measured time."""
    from badpo.core.config import load_config
    from badpo.experiment.config import ExperimentConfig
    from experiments.cure.config import is_cure_config, load_cure_config

    root = Path(__file__).resolve().parents[2]
    sweep = load_config(ReproduceConfig, root / "experiments" / "configs" / "reproduce_tiny.yaml")
    sections = paper_sections(root / sweep.paper_tables)
    for entry in sweep.tables:
        path = root / entry.config
        if is_cure_config(path):
            load_cure_config(path, entry.overrides)
        else:
            load_config(ExperimentConfig, path, entry.overrides)
        assert entry.table in sections, entry.table
        assert entry.finding and entry.measured is not None, entry.table  # what counts, what it took
