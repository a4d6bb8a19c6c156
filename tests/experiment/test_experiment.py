"""The experiment runner and its tables, on a fake backend (no model trains here; the fake world is
in fixtures/experiment.py, so every number in a rendered table can be worked out by hand)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from badpo.core.config import ConfigError, from_dict
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from badpo.experiment.pipeline import run_experiment
from badpo.experiment.records import read_records
from badpo.experiment.runner import Backend
from badpo.experiment.tables import render_from_disk, render_tables
from fixtures.experiment import (
    RATES,
    T_975_2,
    cells,
    config_dict,
    fake_backend,
    make_config,
    quiet,
)


# ------------------------------------------------------------------------------------ the tables
def _t_interval(values: list[float]) -> tuple[float, float]:
    """Mean and Student-t half-width worked out here: sd with n - 1, t_{0.975, 2} = 4.302653."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, T_975_2 * sd / math.sqrt(n)


@pytest.mark.parametrize("level", [0.0, 1.0, math.nan])
def test_the_interval_level_lies_strictly_between_0_and_1(level):
    with pytest.raises(ConfigError, match=r"^level: must lie in \(0, 1\), got "):
        from_dict(ExperimentConfig, {"arms": [{"name": "DPO", "method": "dpo"}], "level": level})
    from_dict(ExperimentConfig, {"arms": [{"name": "DPO", "method": "dpo"}], "level": 0.999})


def test_table_numbers_equal_a_hand_computation(tmp_path):
    result = run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    table = cells(result["csv"])
    # Rates: DPO woman 0.90 / 0.70 / 0.80 -> mean 0.80, sd 0.1, half-width 4.302653 * 0.1 / sqrt 3
    dpo = table[("DPO", "p(woman):rate.woman")]
    assert float(dpo["mean"]) == pytest.approx(0.80, abs=1e-12)
    assert float(dpo["plus_minus"]) == pytest.approx(T_975_2 * 0.1 / math.sqrt(3), rel=1e-6)
    assert "| DPO | 0.800 ± 0.248 | — | 0.970 ± 0.025 | — | 0.038 ± 0.005 |" in result["markdown"]
    # Removal per seed against DPO of the same seed, reference 0.50:
    #   (0.9-0.6)/(0.9-0.5) = 0.75, (0.7-0.5)/(0.7-0.5) = 1, (0.8-0.55)/(0.8-0.5) = 0.8333
    per_seed = [0.75, 1.0, 0.25 / 0.30]
    mean, half = _t_interval(per_seed)
    pooled = table[("BA-DPO (pooled)", "Removed:rate.woman")]
    assert float(pooled["mean"]) == pytest.approx(mean, rel=1e-12)  # 0.8611
    assert float(pooled["plus_minus"]) == pytest.approx(half, rel=1e-6)  # 0.3162
    logged = dict(item.split("=") for item in pooled["per_seed"].split(";"))
    assert {int(s): float(v) for s, v in logged.items()} == pytest.approx(dict(zip((42, 123, 456), per_seed)))
    # ... which is not the removal of the means, (0.80 - 0.55) / (0.80 - 0.50) = 0.8333
    removal_of_means = (0.80 - 0.55) / (0.80 - 0.50)
    assert abs(mean - removal_of_means) > 0.02
    assert f"| BA-DPO (pooled) | 0.550 ± 0.124 | {mean * 100:.0f} ± {half * 100:.0f}% |" in result["markdown"]
    # the reference row: the value alone, no interval; no removal, no KL
    assert "| Reference (SFT) | 0.500 | — | 0.520 | — | — |" in result["markdown"]
    assert table[("Reference (SFT)", "p(woman):rate.woman")]["plus_minus"] == "nan"
    assert table[("DPO", "Removed:rate.woman")]["note"] == "the baseline"
    assert ("Removed = (rate_DPO − rate_arm) / (rate_DPO − rate_ref), per seed against DPO of the same "
            "seed, then averaged") in result["markdown"]


def test_a_baseline_named_with_a_comma_reads_as_one_name_in_the_footnote(tmp_path):
    config = config_dict(tmp_path)
    config["arms"][0]["name"] = "LoRA 2e-3, DPO"
    markdown = run_experiment(from_dict(ExperimentConfig, {**config, "baseline": "LoRA 2e-3, DPO"}),
                              fake_backend([]), log=quiet)["markdown"]
    assert ("Removed = (rate[LoRA 2e-3, DPO] − rate_arm) / (rate[LoRA 2e-3, DPO] − rate_ref), per seed "
            "against “LoRA 2e-3, DPO” of the same seed") in markdown


def test_removal_uses_the_t_interval_and_sd_when_asked(tmp_path):
    columns = [{"header": "Removed", "metric": "rate.black", "kind": "removed", "digits": 1}]
    tables = [{"title": "t", "columns": columns}, {"title": "sd", "columns": columns, "interval": "sd"},
              {"title": "none", "columns": columns, "interval": "none"}]
    result = run_experiment(make_config(tmp_path, tables=tables), fake_backend([]), log=quiet)
    # black: reference 0.52, DPO 0.98 / 0.96 / 0.97, pooled 0.60 / 0.62 / 0.58
    per_seed = [(0.98 - 0.60) / (0.98 - 0.52), (0.96 - 0.62) / (0.96 - 0.52), (0.97 - 0.58) / (0.97 - 0.52)]
    mean, half = _t_interval(per_seed)
    sd = half * math.sqrt(3) / T_975_2
    parsed = cells_by_table(result["csv"])
    assert float(parsed[("t", "BA-DPO (pooled)")]["plus_minus"]) == pytest.approx(half, rel=1e-6)
    assert float(parsed[("sd", "BA-DPO (pooled)")]["plus_minus"]) == pytest.approx(sd, rel=1e-9)
    assert parsed[("none", "BA-DPO (pooled)")]["plus_minus"] == "nan"
    assert f"| BA-DPO (pooled) | {mean * 100:.1f} ± {sd * 100:.1f}% |" in result["markdown"]
    assert f"| BA-DPO (pooled) | {mean * 100:.1f}% |" in result["markdown"]


def cells_by_table(csv_text: str) -> dict[tuple[str, str], dict]:
    import csv
    import io

    return {(r["table"], r["row"]): r for r in csv.DictReader(io.StringIO(csv_text))}


def test_the_table_is_a_function_of_the_json_files(tmp_path):
    result = run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    written_md = (tmp_path / "table.md").read_bytes()
    written_csv = (tmp_path / "table.csv").read_bytes()
    assert written_md == result["markdown"].encode() and written_csv == result["csv"].encode()
    del result
    # a stale record of an older config lies beside the others; the layout does not name it
    stale = json.loads(next((tmp_path / "runs").glob("dpo-seed42-*.json")).read_text())
    stale["key"] = "dpo-seed42-000000000000"
    stale["readouts"]["rate"]["woman"] = 0.1
    (tmp_path / "runs" / "dpo-seed42-000000000000.json").write_text(json.dumps(stale))
    markdown, csv_text = render_from_disk(tmp_path)
    assert markdown.encode() == written_md and csv_text.encode() == written_csv
    # and the records are what the table reads: change one on disk, the table follows
    path = next((tmp_path / "runs").glob("ba_dpo_pooled-seed42-*.json"))
    record = json.loads(path.read_text())
    record["readouts"]["kl"] = 0.5
    path.write_text(json.dumps(record))
    assert render_from_disk(tmp_path)[0] != markdown


def test_render_only_runs_nothing_and_needs_every_record(tmp_path):
    run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    calls: list[str] = []
    result = run_experiment(make_config(tmp_path), fake_backend(calls), log=quiet, render_only=True)
    assert calls == [] and (tmp_path / "table.md").read_text() == result["markdown"]
    next((tmp_path / "runs").glob("dpo-seed123-*.json")).unlink()
    with pytest.raises(FileNotFoundError, match="no record for"):
        run_experiment(make_config(tmp_path), fake_backend(calls), log=quiet, render_only=True)


def test_a_variant_reuses_the_runs_and_renders_into_its_own_report_dir(tmp_path):
    run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    main_table = (tmp_path / "table.md").read_text()
    calls: list[str] = []
    arms = [{"name": "DPO", "method": "dpo"}, {"name": "BA-DPO (pooled)", "method": "ba_dpo_pooled"}]
    config = make_config(tmp_path, report_dir="variant", arms=arms)
    result = run_experiment(config, fake_backend(calls), log=quiet)
    assert calls == []  # the corpus, the reference and the DPO runs are logged already
    assert (tmp_path / "table.md").read_text() == main_table  # the main table is not replaced
    assert (tmp_path / "variant" / "table.md").read_text() == result["markdown"] != main_table


def test_a_table_note_is_printed_under_its_table_as_one_paragraph(tmp_path):
    import dataclasses

    records, layout = _records_and_layout(tmp_path)
    table = dataclasses.replace(layout.tables[0], note="What the\n  columns   measure.")
    markdown, _ = render_tables(records, dataclasses.replace(layout, tables=[table]))
    footnote_then_note = markdown.split("then averaged.\n\n", 1)[1]
    assert footnote_then_note.startswith("What the columns measure.\n")


def _records_and_layout(tmp_path):
    from badpo.experiment.tables import read_layout

    run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    return read_records(tmp_path / "runs"), read_layout(tmp_path / "layout.json")


def test_missing_readouts_dash_partial_errors_typo_errors(tmp_path):
    import dataclasses

    from badpo.experiment.config import ColumnSpec, TableSpec

    records, layout = _records_and_layout(tmp_path)
    theta_column = ColumnSpec("r(woman)", "theta_recovery.woman")
    with_theta = {k: v for k, v in records.items()}
    for key, record in records.items():
        if record["method"] == "ba_dpo_shared_mean":
            with_theta[key] = {**record, "readouts": {**record["readouts"], "theta_recovery": {"woman": 0.9}}}
    table = TableSpec("theta", [theta_column], reference_row=True)
    markdown, _ = render_tables(with_theta, dataclasses.replace(layout, tables=[table]))
    assert "| DPO | — |" in markdown and "| BA-DPO (θ̄+ε_k) | 0.900 ± <0.001 |" in markdown
    one_seed = dict(with_theta)
    key = next(k for k, r in records.items() if r["method"] == "ba_dpo_shared_mean" and r["seed"] == 123)
    one_seed[key] = records[key]
    with pytest.raises(ValueError, match=rf"readout 'theta_recovery.woman' is missing from runs \['{key}'\]"):
        render_tables(one_seed, dataclasses.replace(layout, tables=[table]))
    typo = TableSpec("typo", [ColumnSpec("KL", "kl_divergence")])
    with pytest.raises(ValueError, match="no row has the readout 'kl_divergence'"):
        render_tables(records, dataclasses.replace(layout, tables=[typo]))
    missing = {k: v for k, v in records.items() if k != key}
    with pytest.raises(ValueError, match=f"no logged run {key}"):
        render_tables(missing, layout)


def test_ceiling_row_is_the_mean_over_every_run_of_the_table(tmp_path):
    import dataclasses

    from badpo.experiment.config import ColumnSpec, TableSpec

    records, layout = _records_and_layout(tmp_path)
    votes = {}
    for key, record in records.items():
        if record["kind"] == "arm":
            own = 0.6 + 0.01 * (record["seed"] % 7)
            readouts = {**record["readouts"], "votes": {"own": own, "planted": own + 0.1}}
            votes[key] = {**record, "readouts": readouts}
        else:
            votes[key] = record
    column = ColumnSpec("Race, all", "votes.own", ceiling="votes.planted")
    table = TableSpec("votes", [column], interval="none", reference_row=False,
                      ceiling_row="Ceiling (planted θ_k)", arms=["BA-DPO (pooled)", "DPO"])
    markdown, csv_text = render_tables(votes, dataclasses.replace(layout, tables=[table]))
    seeds_own = [0.6 + 0.01 * (s % 7) for s in (42, 123, 456)]  # 0.60, 0.64, 0.65
    ceiling = sum(seeds_own) / 3 + 0.1
    assert f"| Ceiling (planted θ_k) | {ceiling:.3f} |" in markdown
    lines = markdown.splitlines()
    assert lines.index(f"| Ceiling (planted θ_k) | {ceiling:.3f} |") < lines.index(
        f"| BA-DPO (pooled) | {sum(seeds_own) / 3:.3f} |") < lines.index(f"| DPO | {sum(seeds_own) / 3:.3f} |")
    assert "BA-DPO (θ̄+ε_k)" not in markdown
    assert cells_by_table(csv_text)[("votes", "Ceiling (planted θ_k)")]["n"] == "6"


def test_amplification_in_sd_units_and_a_corpus_statistic_on_the_reference_row(tmp_path):
    """DPO woman 0.90 / 0.70 / 0.80 over a reference at 0.50: mean 0.80, shift +0.30, per-seed sd
    0.1, so +0.300 (3.0σ); BA-DPO pooled 0.60 / 0.50 / 0.55: +0.050, sd 0.05, (1.0σ). The share
    of cross-group judgments, 0.587, is read from the corpus statistics onto the reference row."""
    import dataclasses

    from badpo.experiment.config import ColumnSpec, TableSpec

    records, layout = _records_and_layout(tmp_path)
    table = TableSpec("attributes", [ColumnSpec("Cross-group", "audit.length.share_cross", kind="corpus"),
                                     ColumnSpec("Amplification", "rate.woman", kind="amplification")],
                      interval="sd", arms=["DPO", "BA-DPO (pooled)"])
    stats = {"audit": {"length": {"share_cross": 0.587}}}
    markdown, csv_text = render_tables(records, dataclasses.replace(layout, tables=[table], corpus_stats=stats))
    assert "| Reference (SFT) | 0.587 | — |" in markdown
    assert "| DPO | — | +0.300 (3.0σ) |" in markdown
    assert "| BA-DPO (pooled) | — | +0.050 (1.0σ) |" in markdown
    cell = cells_by_table(csv_text)[("attributes", "DPO")]
    assert float(cell["mean"]) == pytest.approx(0.30, abs=1e-12) and float(cell["plus_minus"]) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="corpus/stats.json has no 'audit.markdown.share_cross'"):
        render_tables(records, dataclasses.replace(layout, corpus_stats=stats, tables=[dataclasses.replace(
            table, columns=[ColumnSpec("Md", "audit.markdown.share_cross", kind="corpus")])]))
    with pytest.raises(ConfigError, match=r"tables\[0\].columns\[0\].kind: a corpus statistic"):
        make_config(tmp_path, tables=[{"title": "x", "reference_row": False, "columns": [
            {"header": "c", "metric": "audit.x", "kind": "corpus"}]}])


def _signed(counts: dict[str, int], n: int = 100) -> dict:
    from badpo.core.names import POOL_NAMES

    return {"sampled": {"n": n, "per_name": {name: counts.get(name, 0) for name in POOL_NAMES}}}


def test_a_pooled_column_reads_names_null_with_the_arm_s_seeds_pooled(tmp_path):
    """The reference signs 50 Emily, 50 Jamal of 100 answers (black-coded share 0.5); DPO 100
    Latisha at seed 42, 60 Latisha and 40 Emily at 123, 100 Jamal at 456: shifts +0.5, +0.1, +0.5,
    pooled +0.3667. The pooled null is that of the mean shares, p - r = +0.5333 on Latisha,
    -0.3667 on Emily, -0.1667 on Jamal: a relabelling reaches 0.3667 when it codes Latisha and not
    Emily, p = 43/89 * 46/88 = 0.2526 (not the mean of the seeds' own p)."""
    import csv
    import dataclasses
    import io

    from badpo.experiment.config import ColumnSpec, TableSpec
    from badpo.readouts.names_analyses import names_null_readouts

    records, layout = _records_and_layout(tmp_path)
    signed = {42: _signed({"Latisha": 100}), 123: _signed({"Latisha": 60, "Emily": 40}), 456: _signed({"Jamal": 100})}
    reference = _signed({"Emily": 50, "Jamal": 50})
    with_names = {}
    for key, record in records.items():
        readouts = dict(record["readouts"])
        if record["kind"] == "reference":
            readouts.update(reference)
        elif record["method"] == "dpo":
            run = signed[record["seed"]]
            readouts.update(run, names={"null": names_null_readouts(run, reference)})
        with_names[key] = {**record, "readouts": readouts}
    table = TableSpec("null", [ColumnSpec("shift", "names.null.sampled.black_coded.shift", digits=4),
                               ColumnSpec("pooled shift", "names.null.sampled.black_coded.shift", kind="pooled",
                                          digits=4),
                               ColumnSpec("pooled p", "names.null.sampled.black_coded.p", kind="pooled")],
                      interval="none")
    markdown, csv_text = render_tables(with_names, dataclasses.replace(layout, tables=[table]))
    assert "| Reference (SFT) | — | — | — |" in markdown and "| BA-DPO (pooled) | — | — | — |" in markdown
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(csv_text))}
    pooled_shift, pooled_p = (float(rows[("DPO", c)]["mean"]) for c in ("pooled shift", "pooled p"))
    assert pooled_shift == pytest.approx(1.1 / 3) == float(rows[("DPO", "shift")]["mean"])  # linear: the mean
    per_seed = dict(part.split("=") for part in rows[("DPO", "pooled shift")]["per_seed"].split(";"))
    assert {int(seed): float(v) for seed, v in per_seed.items()} == pytest.approx({42: 0.5, 123: 0.1, 456: 0.5})
    assert pooled_p == pytest.approx(43 / 89 * 46 / 88, abs=0.045)
    seeds_p = [names_null_readouts(signed[seed], reference)["sampled"]["black_coded"]["p"] for seed in signed]
    assert abs(pooled_p - sum(seeds_p) / 3) > 0.05
    assert "Pooled = the seeds' mean shift from the reference" in markdown
    with pytest.raises(ConfigError, match=r"tables\[0\].columns\[0\].kind: pooled reads a names.null"):
        make_config(tmp_path, tables=[{"title": "x", "columns": [{"header": "c", "metric": "kl", "kind": "pooled"}]}])


# ------------------------------------------------------------------------------- records, plots
def test_record_holds_the_run_and_plots_are_pngs(tmp_path):
    result = run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    record = next(r for r in result["records"].values() if r["method"] == "ba_dpo_shared_mean")
    assert record["readouts"]["rate"]["woman"] == RATES[("ba_dpo_shared_mean", record["seed"])][0]
    extras = {k: record["readouts"][k] for k in ("tokens", "loss", "margin")}
    assert extras == {"tokens": 7, "loss": 0.25, "margin": 1.5}  # numpy / torch scalars, as numbers
    assert type(extras["tokens"]) is int
    assert record["settings"]["optim"]["lr"] == 5e-7 and record["settings"]["model"] == "{reference}"
    assert record["theta"]["per_annotator"]["a1"] == [0.9, 1.7000000000000002]
    assert record["wall_time_s"] >= 0 and record["reference"].startswith("reference-")
    made = record["provenance"]  # what made it: commit, versions, device, threads
    assert made["device"]["kind"] in ("cpu", "cuda") and made["packages"]["torch"] == torch.__version__
    assert made["source"] is None or len(made["source"]["commit"]) == 40
    assert made["torch_threads"] == torch.get_num_threads()
    reference = result["records"][record["reference"]]
    assert reference["artifacts"] == {"model": f"work/{reference['training_key']}/model"}  # relative to OUT
    for name in ("rates.png", "theta.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_theta_plot_draws_each_arm_in_the_panels_of_the_attributes_it_declared(tmp_path, monkeypatch):
    """Two planted attributes (length, markdown); arm A declared both, arm B only length. The
    plot has two panels: length with A and B, markdown with A alone (B used to raise)."""
    from types import SimpleNamespace

    from badpo.experiment.plots import plot_theta

    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({"attribute_names": ["length", "markdown"], "annotators": [
        {"annotator": "a", "theta": [1.0, 0.5]}, {"annotator": "b", "theta": [2.0, -0.5]},
        {"annotator": "c", "theta": [3.0, 0.0]}]}))
    both = {"key": "A", "theta": {"attribute_names": ["markdown", "length"],
                                  "per_annotator": {"a": [0.4, 1.1], "b": [-0.6, 2.2], "c": [0.1, 2.9]}}}
    length = {"key": "B", "theta": {"attribute_names": ["length"],
                                    "per_annotator": {"a": [0.9], "b": [2.1], "c": [3.3]}}}
    layout = SimpleNamespace(title="t", arms=[
        SimpleNamespace(name="A", runs=[SimpleNamespace(key="A")]),
        SimpleNamespace(name="B", runs=[SimpleNamespace(key="B")])])
    import matplotlib.figure
    drawn = []
    savefig = matplotlib.figure.Figure.savefig

    def record_axes(figure, path, *args, **kwargs):
        drawn.extend((axes.get_xlabel(), sorted(text.get_text()[0] for text in axes.get_legend().get_texts()))
                     for axes in figure.axes)
        return savefig(figure, path, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record_axes)
    assert plot_theta(layout, {"A": both, "B": length}, planted, tmp_path / "theta.png")
    assert drawn == [("planted theta_k (length)", ["A", "B"]), ("planted theta_k (markdown)", ["A"])]
    assert (tmp_path / "theta.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_undefined_readout_is_null_on_disk_and_nan_in_the_table(tmp_path):
    """DPO's p(black) is undefined (NaN) at seed 123. Its record holds null and parses as strict
    JSON; the cell reads nan and its note names the seed; the plot leaves DPO's point out.
    BA-DPO (pooled) is untouched: 0.60 / 0.62 / 0.58 -> mean 0.600, sd 0.02, half-width
    4.302653 * 0.02 / sqrt 3 = 0.0497."""
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    backend = fake_backend([])

    def run_arm(task):
        result = backend.run_arm(task)
        if (task.method, task.seed) == ("dpo", 123):
            result["readouts"]["rate"]["black"] = math.nan
        return result

    columns = [{"header": "p(black)", "metric": "rate.black"}, {"header": "KL", "metric": "kl"}]
    result = run_experiment(make_config(tmp_path, tables=[{"title": "t", "columns": columns}]),
                            Backend(backend.build_corpus, backend.resolve_reference, backend.resolve_arm,
                                   backend.run_reference, run_arm), log=quiet)
    for path in (tmp_path / "runs").glob("*.json"):
        record = json.loads(path.read_text(), parse_constant=refuse)
        if (record["method"], record["seed"]) == ("dpo", 123):
            assert record["readouts"]["rate"]["black"] is None
    dpo = cells(result["csv"])[("DPO", "p(black):rate.black")]
    assert dpo["mean"] == "nan" and dpo["note"] == "nan at seed(s) 123"
    assert "| DPO | nan | 0.038 ± 0.005 |" in result["markdown"]
    assert "| BA-DPO (pooled) | 0.600 ± 0.050 | 0.026 ± 0.002 |" in result["markdown"]
    assert (tmp_path / "rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_stage_result_that_is_not_json_is_an_error_naming_it(tmp_path):
    backend = fake_backend([])

    def bad_arm(task):
        return {"readouts": {"rate": {"woman": object()}}}

    with pytest.raises(TypeError, match=r"readouts.rate.woman: object is not a JSON value"):
        run_experiment(make_config(tmp_path), Backend(backend.build_corpus, backend.resolve_reference,
                                                     backend.resolve_arm, backend.run_reference, bad_arm),
                       log=quiet)
    assert len(read_records(tmp_path / "runs")) == 1  # the reference only


def test_cli_reports_config_errors_and_render_only_on_an_empty_folder(tmp_path, cli_error):
    tiny = str(experiment_config_path("tiny"))
    assert cli_error(["experiment", tiny, f"output_dir={tmp_path}", "seeds=[]"]).startswith(
        "badpo experiment: seeds: list at least one seed")
    assert "arms[0].params.runtime.seed: set by the runner" in cli_error(
        ["experiment", tiny, f"output_dir={tmp_path}",
         "arms=[{name: DPO, method: dpo, params: {runtime.seed: 1}}]"])
    assert "has not been built; nothing is logged" in cli_error(
        ["experiment", tiny, f"output_dir={tmp_path}", "--render-only"])
    assert not (tmp_path / "corpus").exists()


def test_each_finished_arm_run_prints_what_is_left_and_an_eta(tmp_path):
    from badpo.experiment.runner import eta_note

    assert eta_note([], 3) == "" and eta_note([600.0], 0) == ""
    assert eta_note([600.0, 1200.0], 4) == "; 4 arm run(s) left, ETA 60 min"  # 4 x 900 s
    lines: list[str] = []
    run_experiment(make_config(tmp_path), fake_backend([]), log=lines.append)
    done = [line for line in lines if ": done in " in line]
    assert "ETA" not in done[0]  # the reference is trained once: not an arm's cost
    lefts = [int(line.split("; ")[1].split()[0]) for line in done[1:-1]]
    assert lefts == list(range(len(done) - 2, 0, -1)) and "ETA" not in done[-1]


def test_a_removal_where_dpo_did_not_move_the_rate_reads_not_measurable(tmp_path):
    """DPO at seed 123 logged with the reference's woman rate (0.50): the Removed cells of woman read
    "not measurable" and name that seed, instead of failing the whole table after every run trained;
    the black columns are untouched."""
    run_experiment(make_config(tmp_path), fake_backend([]), log=quiet)
    path = next((tmp_path / "runs").glob("dpo-seed123-*.json"))
    record = json.loads(path.read_text())
    record["readouts"]["rate"]["woman"] = 0.50
    path.write_text(json.dumps(record))
    markdown, csv_text = render_from_disk(tmp_path)
    cell = cells(csv_text)[("BA-DPO (pooled)", "Removed:rate.woman")]
    assert "DPO did not move rate.woman at seed(s) 123" in cell["note"] and cell["mean"] in ("", "nan")
    assert "not measurable" in markdown
    assert cells(csv_text)[("BA-DPO (pooled)", "Removed:rate.black")]["mean"] not in ("", "nan")


def test_an_arm_the_engine_refuses_fails_before_the_corpus_is_built_and_leaves_no_folder(tmp_path, cli_error):
    """Issue 49's retry: an unknown method in an arm was refused only after the corpus was built
    (minutes with a real model's builder), and OUT/corpus stayed behind."""
    out = tmp_path / "new"
    line = cli_error(["experiment", str(experiment_config_path("tiny")), f"output_dir={out}",
                      "arms=[{name: DPO, method: dpoo}]"])
    assert line.startswith("badpo experiment: arms[0] (DPO): method: unknown method 'dpoo'")
    assert not out.exists()


def test_a_rule_for_theta_on_an_arm_without_theta_fails_when_planned(tmp_path, cli_error):
    """A DPO arm under bias.level: orthogonal was refused only when the arm started (after the
    corpus, the reference and every arm before it); the runner's planning now refuses it."""
    out = tmp_path / "new"
    line = cli_error(["experiment", str(experiment_config_path("tiny")), f"output_dir={out}",
                      "arms=[{name: DPO, method: dpo, params: {bias.level: orthogonal}}]"])
    assert line.startswith("badpo experiment: arms[0] (DPO): bias.level: orthogonal needs a theta")
    assert "method 'dpo' learns none" in line and not out.exists()
