"""``python -m experiments reproduce --plan`` and the report's header: the plan keys every run as the sweep does, so
what it says is logged, made by an earlier table or to run is what the sweep then trains; the
report's first line says what the sweep did (a fake backend: nothing trains).

The sweep: `first` (DPO at seeds 42 and 7, folder a), `second` (DPO and Other, folder b, reusing
first's runs) and `offset`, the fixed-offset cure of second's DPO with Other as a compare arm. Its
records: in a's chain the reference, DPO x 2 and Other x 2 (5); the cure's 2 source preparations,
3 calibration runs and 4 calibrated runs (t 0.5, 0.3, 0.7 at seed 42, 0.5 at seed 7): 9; 14 in all.
Measured: first 30 s for 3 runs, second 20 s for 2, offset 90 s for 9: 10 s a run everywhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from badpo.core.config import from_dict, load_config
from badpo.experiment.config import ExperimentConfig
from badpo.experiment.pipeline import run_experiment
from experiments.commands import main
from experiments.reproduce import ReproduceConfig, SweepTable, run_reproduce
from experiments.reproduce_plan import hms, plan_sweep
from fixtures.cure import fake_cure_backend, fake_source_backend

ROOT = Path(__file__).resolve().parents[2]
CURE = ROOT / "experiments" / "configs" / "experiment_tiny_offset.yaml"


def experiment_file(path: Path, out: Path, arms: list[str]) -> str:
    methods = {"DPO": "dpo", "Other": "ba_dpo_pooled"}
    path.write_text(yaml.safe_dump({
        "name": path.stem, "output_dir": str(out), "corpus": {"builder": "fake"}, "reference": {"lr": 1.0},
        "train": {}, "arms": [{"name": a, "method": methods[a]} for a in arms], "seeds": [42, 7],
        "tables": [{"title": path.stem, "columns": [{"header": "KL", "metric": "kl"}]}], "plots": {"rates": []}}))
    return str(path)


def cure_entry(tmp_path: Path, source: str, match: str = "key") -> dict:
    return {"table": "offset", "config": str(CURE), "measured": {"seconds": 90, "runs": 9}, "overrides": [
        f"output_dir={tmp_path / 'cure'}", f"source.experiment={source}", f"source.match={match}",
        "seeds=[42,7]", "calibration.scales=[1.0,1.5,2.0]", "compare_arms=[Other]"]}


@pytest.fixture
def sweep(tmp_path) -> ReproduceConfig:
    second = experiment_file(tmp_path / "second.yaml", tmp_path / "b", ["DPO", "Other"])
    return from_dict(ReproduceConfig, {
        "output_dir": str(tmp_path / "report"), "measured_on": "a test's fake clock", "tables": [
            {"table": "first", "config": experiment_file(tmp_path / "first.yaml", tmp_path / "a", ["DPO"]),
             "measured": {"seconds": 30, "runs": 3}},
            {"table": "second", "config": second, "reuse_runs_of": "first", "measured": {"seconds": 20, "runs": 2},
             "finding": "DPO moves the rate and BA-DPO takes it back."},
            cure_entry(tmp_path, second)]})


def plan(sweep):
    return plan_sweep(sweep, fake_source_backend(), fake_cure_backend([]))


def sweep_once(sweep, **kwargs) -> dict:
    return run_reproduce(sweep, fake_source_backend(), fake_cure_backend([]), log=lambda line: None, **kwargs)


def counts(planned) -> dict[str, tuple[int, int, int, int]]:
    """table -> (logged, made earlier, to run, missing)."""
    return {t.entry.table: (len(t.logged), len(t.made_earlier), len(t.to_run), len(t.missing))
            for t in planned.tables}


def test_a_fresh_plan_builds_nothing_and_the_sweep_trains_what_it_counted(sweep, tmp_path):
    fresh = plan(sweep)
    assert counts(fresh) == {"first": (0, 0, 3, 0), "second": (0, 3, 2, 0), "offset": (0, 5, 9, 0)}
    assert (fresh.to_run, fresh.logged, fresh.estimate_s) == (14, 0, 140.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.yaml", "second.yaml"]  # no folder made
    # a cure's later steps wait on earlier ones: planned without a key until those are logged
    offset = fresh.tables[2]
    assert [r.label for r in offset.to_run if r.key is None] == [
        "calibration x1.0 seed 42", "calibration x1.5 seed 42", "calibration x2.0 seed 42",
        "calibrated t=0.5 seed 42", "calibrated t=0.3 seed 42", "calibrated t=0.7 seed 42", "calibrated t=0.5 seed 7"]
    text = fresh.text()
    assert "- second (" in text and ": 5 runs: 0 logged, 3 made earlier by first, 2 to run, ~0:00:20" in text
    assert "    to run: reference; DPO seeds 42, 7\n" in text
    assert "In all: 14 runs to run, 0 logged; about 0:02:20.\n" in text
    assert "x its wall time per run in the sweep measured on a test's fake clock" in text
    assert f"Report: {tmp_path / 'report' / 'README.md'} " in text

    result = sweep_once(sweep)
    assert (result["trained"], result["logged"]) == (14, 0)
    assert [result["tables"][t]["trained"] for t in ("first", "second", "offset")] == [3, 2, 9]
    header = Path(result["report"]).read_text().splitlines()[2]
    assert re.fullmatch(r"Every table of this sweep, rebuilt from its logged runs\. This sweep trained 14 run\(s\) "
                        r"and skipped 0 already logged, in 0:00:\d\d wall time\.", header), header


def test_a_partly_logged_sweep_plans_exactly_the_missing_runs_by_their_keys(sweep, tmp_path):
    """Three records deleted after a whole sweep: first's DPO seed 7 (second's copy of it stays),
    second's Other seed 7 (which the cure reads), and the cure's t = 0.7 run. The plan names those
    three keys to run, and the sweep then trains those three and nothing else."""
    sweep_once(sweep)
    cure_runs = tmp_path / "cure" / "runs"
    t07 = next(r for r in plan(sweep).tables[2].records if r.label == "calibrated t=0.7 seed 42").key
    deleted = [next((tmp_path / "a" / "runs").glob("dpo-seed7-*.json")),
               next((tmp_path / "b" / "runs").glob("ba_dpo_pooled-seed7-*.json")), cure_runs / f"{t07}.json"]
    kept = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("runs/*.json") if p not in deleted}
    for path in deleted:
        path.unlink()

    partial = plan(sweep)
    assert counts(partial) == {"first": (2, 0, 1, 0), "second": (4, 0, 1, 0), "offset": (12, 1, 1, 0)}
    assert [r.key for t in partial.tables for r in t.to_run] == [p.stem for p in deleted]
    assert partial.tables[2].made_earlier[0][1] == "second"  # the compare arm's record, remade by second
    assert (partial.to_run, partial.logged, partial.estimate_s) == (3, 11, 30.0)
    assert "In all: 3 runs to run, 11 logged; about 0:00:30." in partial.text()

    result = sweep_once(sweep)
    assert (result["trained"], result["logged"]) == (3, 11)
    assert all(path.exists() for path in deleted)
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # nothing logged was run again
    assert "This sweep trained 3 run(s) and skipped 11 already logged" in Path(result["report"]).read_text()


@pytest.mark.parametrize("match", ["key", "arm_seed"])
def test_runs_logged_by_a_table_run_alone_count_as_logged_where_they_will_be_copied(sweep, tmp_path, match):
    """`badpo experiment first.yaml` alone logs the reference and DPO into folder a; second (folder
    b, reusing first's runs) and the cure (reading b) find them there, since the sweep copies them
    into b before second runs: 3 logged each, and only second's Other and the cure's 9 to run. The
    cure finds its source by planned key or by arm and seed alike."""
    sweep.tables[2] = from_dict(SweepTable, cure_entry(tmp_path, sweep.tables[1].config, match))
    run_experiment(load_config(ExperimentConfig, tmp_path / "first.yaml"), fake_source_backend(), log=lambda t: None)
    partial = plan(sweep)
    assert counts(partial) == {"first": (3, 0, 0, 0), "second": (3, 0, 2, 0), "offset": (3, 2, 9, 0)}
    assert (partial.to_run, partial.logged) == (11, 3)
    result = sweep_once(sweep)
    assert (result["trained"], result["logged"]) == (11, 3)
    assert [result["tables"][t]["trained"] for t in ("first", "second", "offset")] == [0, 2, 9]


def test_the_render_only_header_says_it_rendered_logged_runs_and_trained_nothing(sweep):
    sweep_once(sweep)
    report = Path(sweep_once(sweep, render_only=True)["report"]).read_text()
    assert re.search(r"Rendered with `--render-only` from the 14 logged runs its tables read; nothing was "
                     r"trained \(rendering took 0:00:\d\d\)\.", report)
    assert "(runs in `" in report and "; rendered from its 5 logged runs)" in report  # second: ref, DPO, Other x 2
    assert "runs, 0:00:" not in report and "trained in this sweep" not in report


def test_the_report_states_each_tables_finding_above_its_table(sweep):
    report = Path(sweep_once(sweep)["report"]).read_text()
    finding = report.index("**What counts as reproduced** (the paper's finding): DPO moves the rate and BA-DPO "
                           "takes it back.")
    assert report.index("## second") < finding < report.index("### second") < report.index("## offset")
    assert report.count("**What counts as reproduced**") == 1  # first and offset state none


def test_the_report_cites_the_records_and_the_paper_s_table_beside_the_figures(sweep, tmp_path):
    """Issue 74: every figure in the docs names its source, and this report is one of them."""
    import dataclasses

    paper = tmp_path / "paper_tables.md"
    paper.write_text("# tables\n\n## second\n\nThe caption. (paper, Table 7)\n\n| a |\n|---|\n| 1 |\n")
    cited = dataclasses.replace(sweep, records="results/fake_sweep/", paper_tables=str(paper))
    report = Path(sweep_once(cited)["report"]).read_text()
    assert "trained in this sweep, 0 s; records in `results/fake_sweep/`)" in report
    assert "(the paper's finding): DPO moves the rate and BA-DPO takes it back (paper, Table 7)." in report


def test_the_committed_tiny_report_states_the_findings_the_runner_writes():
    """docs/reproduce_tiny.md is the runner's output: each finding as the shipped sweep states it,
    with the source the runner adds (so a re-run does not drop what the docs test asks for)."""
    from experiments.reproduce import _cited, paper_sections

    root = Path(__file__).resolve().parents[2]
    config = load_config(ReproduceConfig, root / "experiments/configs/reproduce_tiny.yaml")
    report = (root / "docs/reproduce_tiny.md").read_text(encoding="utf-8")
    paper = paper_sections(root / config.paper_tables)
    assert config.records and (root / config.records).exists()
    for entry in config.tables:
        finding = _cited(entry.finding or "", paper.get(entry.table, ""))
        assert not entry.finding or f"(the paper's finding): {finding}\n" in report, entry.table
        command_line = report.split(f"## {entry.table}\n", 1)[1].lstrip("\n").split("\n\n", 1)[0]
        assert f"; records in `{config.records}`)" in command_line, entry.table


def test_a_source_no_table_makes_is_missing_and_the_sweep_refuses_at_once(tmp_path):
    source = experiment_file(tmp_path / "source.yaml", tmp_path / "s", ["DPO", "Other"])
    only_cure = from_dict(ReproduceConfig, {"output_dir": str(tmp_path / "report"), "tables": [
        {k: v for k, v in cure_entry(tmp_path, source).items() if k != "measured"}]})
    planned = plan(only_cure)
    assert counts(planned) == {"offset": (0, 0, 9, 5)}
    text = planned.text()
    assert "    missing (the sweep stops at this table): source: reference; source: DPO seeds 42, 7; " \
           "source: Other seeds 42, 7\n" in text
    assert "In all: 9 runs to run, 0 logged.\nEstimate: none (the sweep config has no measured times).\n" in text
    refused = r"^tables\[0\] \(offset\): needs runs that are not logged and that no earlier table makes: source: "
    with pytest.raises(FileNotFoundError, match=refused + r"reference, source: DPO seed 42, "):
        run_reproduce(only_cure, fake_source_backend(), fake_cure_backend([]), log=lambda line: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.yaml"]  # refused before anything ran


def test_the_command_plans_the_shipped_sweep_on_a_fresh_checkout(tmp_path, monkeypatch, capsys):
    """From a folder with no runs/: every run of experiments/configs/reproduce_tiny.yaml is to run, each table's
    count is the one its `measured` records, so the estimate is the measured sweep's time."""

    for name in ("configs", "docs", "experiments"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    shipped = load_config(ReproduceConfig, "experiments/configs/reproduce_tiny.yaml")
    assert main(["reproduce", "experiments/configs/reproduce_tiny.yaml", "--plan"]) == 0
    out = capsys.readouterr().out
    runs = sum(t.measured.runs for t in shipped.tables)
    seconds = sum(t.measured.seconds for t in shipped.tables)
    assert f"In all: {runs} runs to run, 0 logged; about {hms(seconds)}.\n" in out
    lines = {line.split(" (")[0][2:]: line for line in out.splitlines() if line.startswith("- ")}
    assert list(lines) == [entry.table for entry in shipped.tables]
    for entry in shipped.tables:
        assert f", {entry.measured.runs} to run, " in lines[entry.table], lines[entry.table]
    assert "Report: runs/reproduce_tiny/README.md" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs", "docs", "experiments"]  # nothing built or written
    with pytest.raises(SystemExit):
        main(["reproduce", "experiments/configs/reproduce_tiny.yaml", "--plan", "--render-only"])


def test_a_report_folder_that_is_a_file_is_refused_by_the_plan(tmp_path, cli_error):
    (tmp_path / "report").write_text("not a folder\n")
    line = cli_error(["reproduce", str(ROOT / "experiments" / "configs" / "reproduce_tiny.yaml"), "--plan",
                      f"output_dir={tmp_path / 'report'}"], program=main)
    assert f"output_dir: {tmp_path / 'report'} is a file" in line, line


def test_a_report_folder_under_a_file_is_refused_by_the_plan(tmp_path, cli_error):
    """``output_dir=afile/sub``: the plan printed "Report: afile/sub/README.md" and the run failed
    with [Errno 20]; the plan refuses it, naming the file in the way."""
    (tmp_path / "afile").write_text("not a folder\n")
    line = cli_error(["reproduce", str(ROOT / "experiments" / "configs" / "reproduce_tiny.yaml"), "--plan",
                      f"output_dir={tmp_path / 'afile' / 'sub'}"], program=main)
    assert f"output_dir: {tmp_path / 'afile' / 'sub'}: {tmp_path / 'afile'} is a file, not a folder" in line, line


def test_badpo_experiment_points_a_cure_config_to_the_experiments_beside_the_library(cli_error):
    """The cure left the library with the paper's experiments; badpo experiment said "unknown key(s):
    all_seed_targets, answers, ..." of a config that runs from the repository root."""
    line = cli_error(["experiment", str(CURE)])
    assert "kind: fixed_offset_cure is not a table of arms" in line
    assert f"python -m experiments experiment {CURE}" in line
