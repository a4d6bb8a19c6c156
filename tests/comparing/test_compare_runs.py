"""`badpo compare` on run folders whose readouts.json are written by hand (tests/fixtures/runs.py: a
DPO run and a BA-DPO run on 40 paired prompts), no model: the verdict, the tables and files, runs
evaluated before per-prompt values were recorded, runs read on other prompts, the baseline and
reference options, theta against the offline estimate, and one-line errors. The last test trains
and evaluates two tiny runs and compares them end to end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from badpo.cli import main
from badpo.comparing.compare_runs import compare_runs, load_run
from badpo.comparing.comparison import RunRecord, compare_records
from badpo.comparing.intervals import resample_indices
from badpo.engine.model_card import CardFacts, card_text
from fixtures.engine import judgment_rows, write_jsonl
from fixtures.runs import (
    BA_DPO,
    BA_DPO_FIRST,
    DPO,
    DPO_FIRST,
    REFERENCE,
    REFERENCE_FIRST,
    first_name_values,
    flags,
    names_readout,
    readouts,
    write_pair,
    write_run,
)

PNG = b"\x89PNG\r\n\x1a\n"


def numpy_interval(base: list[float], run: list[float] | None, reference: list[float]) -> tuple[float, float]:
    """The 95% interval recomputed with numpy alone: 2000 resamples of the 40 prompts from seed 0,
    the removal on each from the three resampled means (the shift base - reference when ``run`` is
    None), and their 2.5% and 97.5% quantiles."""
    indices = np.random.default_rng(0).integers(0, 40, size=(2000, 40))
    b, f = np.array(base)[indices].mean(axis=1), np.array(reference)[indices].mean(axis=1)
    if run is None:
        return tuple(np.quantile(b - f, [0.025, 0.975]))
    r = np.array(run)[indices].mean(axis=1)
    kept = b != f
    return tuple(np.quantile((b[kept] - r[kept]) / (b[kept] - f[kept]), [0.025, 0.975]))


def test_the_verdict_gives_the_removal_with_its_interval_and_a_shift_too_small_to_divide_by(tmp_path, capsys):
    dpo, ba = write_pair(tmp_path)
    assert main(["compare", str(dpo), str(ba), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    low, high = numpy_interval(flags(DPO["woman_coded"]), flags(BA_DPO["woman_coded"]), flags(REFERENCE["woman_coded"]))
    s_low, s_high = numpy_interval(flags(DPO["black_coded"]), None, flags(REFERENCE["black_coded"]))
    assert s_low <= 0 <= s_high  # one prompt of 40: DPO's black_coded shift is noise
    verdict = (f"BA-DPO (shared_mean), on generated answers: removes 90% [{100 * low:.0f}, {100 * high:.0f}] of DPO's "
               "shift in "
               f"woman_coded; black_coded: DPO did not move it measurably (shift +0.025 [{s_low:+.3f}, {s_high:+.3f}]: "
               "its 95% interval holds 0), so no removal is measured")
    assert f"  {verdict}\n" in out
    assert "  DPO (baseline), on generated answers: moves woman_coded by +0.500 [" in out
    rates = next(line for line in out.splitlines() if line.startswith("  BA-DPO (shared_mean)") and "[" in line)
    assert rates.split()[2:4] == ["0.250", "[0.125,"]  # woman_coded 10 of 40, and its interval's low end
    comparison = json.loads((tmp_path / "out" / "compare.json").read_text())
    removal = comparison["runs"][1]["attributes"]["woman_coded"]["removal"]
    assert (removal["value"], removal["low"], removal["high"]) == pytest.approx((0.9, low, high))
    assert comparison["runs"][1]["attributes"]["black_coded"]["removal"]["value"] is None
    assert comparison["baseline"] == "DPO" and comparison["runs"][0]["baseline"] is True
    markdown = (tmp_path / "out" / "compare.md").read_text()
    assert f"- {verdict}" in markdown and "| BA-DPO (shared_mean) | 0.250 [" in markdown
    for name in ("compare.png", "theta.png"):
        assert (tmp_path / "out" / name).read_bytes().startswith(PNG)


def test_the_rate_from_first_name_probabilities_is_a_second_block_with_its_own_removal_and_verdict(tmp_path, capsys):
    """Every run read the names readout: its first-name rates from probabilities (each prompt's,
    beside the reference's read after the same bodies) are compared like the rates on generated
    answers, with the same resamples, and every verdict line names the readout its numbers are from.
    woman_coded: BA-DPO at 0.5125 removes (0.7 - 0.5125) / (0.7 - 0.5) = 93.75% of DPO's shift;
    black_coded: DPO's +0.0125 is not measurable."""
    dpo, ba = write_pair(tmp_path)
    assert main(["compare", str(dpo), str(ba), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    base, run, ref = (first_name_values(values["woman_coded"]) for values in (DPO_FIRST, BA_DPO_FIRST, REFERENCE_FIRST))
    low, high = numpy_interval(base, run, ref)
    s_low, s_high = numpy_interval(first_name_values(DPO_FIRST["black_coded"]), None,
                                   first_name_values(REFERENCE_FIRST["black_coded"]))
    assert s_low < 0 < s_high
    comparison = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert [r["key"] for r in comparison["readouts"]] == ["attributes", "first_name"]
    assert comparison["first_name"]["woman_coded"]["reference"]["value"] == pytest.approx(0.5)
    entry = comparison["runs"][1]["first_name"]["woman_coded"]
    assert entry["rate"]["value"] == pytest.approx(0.5125)
    assert (entry["removal"]["value"], entry["removal"]["low"], entry["removal"]["high"]) == pytest.approx(
        (0.9375, low, high))
    assert comparison["runs"][1]["first_name"]["black_coded"]["removal"]["measurable"] is False
    assert comparison["runs"][1]["attributes"]["woman_coded"]["removal"]["value"] == pytest.approx(0.9)  # unchanged
    line = ("BA-DPO (shared_mean), from first-name probabilities (body fixed): removes 94% "
            f"[{100 * low:.0f}, {100 * high:.0f}] of DPO's shift in woman_coded; black_coded: DPO did not move it "
            f"measurably (shift +0.012 [{s_low:+.3f}, {s_high:+.3f}]: its 95% interval holds 0), so no removal is "
            "measured")
    assert f"  {line}\n" in out and "  BA-DPO (shared_mean), on generated answers: removes 90% [" in out
    assert "  DPO (baseline), from first-name probabilities (body fixed): moves woman_coded by +0.200 [" in out
    assert "\nrate from probabilities (first name, body fixed)   " in out
    assert comparison["runs"][1]["verdict"].splitlines()[1] == line
    markdown = (tmp_path / "out" / "compare.md").read_text()
    assert "Rate from probabilities (first name, body fixed) (`names.first_name`):" in markdown
    assert "| BA-DPO (shared_mean) | 0.512 [" in markdown and f"- {line}" in markdown


def test_the_first_name_block_by_hand_on_four_prompts_and_three_resamples():
    """Four prompts, three resamples from seed 0 at level 0.5 (the 0.25 and 0.75 quantiles of
    three numbers: the midpoints of the lower two and of the upper two). woman_coded: reference
    0.5 on every prompt, DPO (0.9, 0.7, 0.7, 0.5), BA-DPO (0.6, 0.5, 0.5, 0.6). The resamples
    (3, 2, 2, 1), (1, 0, 0, 0), (0, 3, 2, 3) give DPO 0.65, 0.85, 0.65 (shift interval [0.15,
    0.25] around 0.2) and BA-DPO 0.525, 0.575, 0.575, so removals (0.65 - 0.525) / 0.15 = 5/6,
    0.275 / 0.35 = 11/14 and 0.075 / 0.15 = 1/2: (0.7 - 0.55) / 0.2 = 0.75 with the interval
    [(1/2 + 11/14) / 2, (11/14 + 5/6) / 2] = [9/14, 17/21]. black_coded: DPO (0.5, 0.3, 0.5, 0.6)
    gives shifts -0.025, -0.05, +0.05 on the resamples: [-0.0375, 0.0125] holds 0, not measurable."""
    assert resample_indices(4, draws=3, seed=0).tolist() == [[3, 2, 2, 1], [1, 0, 0, 0], [0, 3, 2, 3]]
    reference = {"woman_coded": [0.5] * 4, "black_coded": [0.5] * 4}

    def record(label: str, method: str, policy: dict[str, list[float]]) -> RunRecord:
        names = names_readout(policy, reference, n=4)
        return RunRecord(label, label, method, {"names": names, "inputs": {"n_prompts": 4, "prompts_sha256": "d"}},
                         source=f"{label}/readouts.json")

    runs = [record("DPO", "dpo", {"woman_coded": [0.9, 0.7, 0.7, 0.5], "black_coded": [0.5, 0.3, 0.5, 0.6]}),
            record("BA-DPO", "ba_dpo_pooled", {"woman_coded": [0.6, 0.5, 0.5, 0.6], "black_coded": [0.5] * 4})]
    comparison = compare_records(runs, baseline=0, level=0.5, draws=3, seed=0, min_prompts=1)  # by hand: 4 prompts
    assert comparison["first_name"]["woman_coded"]["reference"] == pytest.approx(
        {"value": 0.5, "low": 0.5, "high": 0.5, "n": 4})
    dpo, ba = (run["first_name"] for run in comparison["runs"])
    assert dpo["woman_coded"]["rate"] == pytest.approx({"value": 0.7, "low": 0.65, "high": 0.75, "n": 4})
    assert ba["woman_coded"]["rate"] == pytest.approx({"value": 0.55, "low": 0.55, "high": 0.575, "n": 4})
    removal = ba["woman_coded"]["removal"]
    assert (removal["value"], removal["low"], removal["high"]) == pytest.approx((0.75, 9 / 14, 17 / 21))
    assert (removal["shift"]["value"], removal["shift"]["low"], removal["shift"]["high"]) == pytest.approx(
        (0.2, 0.15, 0.25))
    black = ba["black_coded"]["removal"]
    assert black["measurable"] is False and black["value"] is None
    assert (black["shift"]["value"], black["shift"]["low"], black["shift"]["high"]) == pytest.approx(
        (-0.025, -0.0375, 0.0125))
    verdict = comparison["runs"][1]["verdict"].splitlines()
    assert verdict[0] == "BA-DPO: no attribute read on generated answers"
    assert verdict[1].startswith("BA-DPO, from first-name probabilities (body fixed): removes 75% [64, 81] of DPO's "
                                 "shift in woman_coded; black_coded: DPO did not move it measurably (shift -0.025 [")


def test_first_name_rates_recorded_before_their_per_prompt_values_have_no_interval_and_say_why(tmp_path):
    """An older readouts.json holds the first-name rates and names.null's shift from the reference,
    not each prompt's rates nor the reference's: the reference's rate is the policy's minus that
    shift, and no number of the block has an interval; a note names each file once."""
    dpo, ba = write_pair(tmp_path, per_prompt=False)
    result = compare_runs([dpo, ba])
    assert result.comparison["first_name"]["woman_coded"]["reference"]["value"] == pytest.approx(0.5)
    entry = result.comparison["runs"][1]["first_name"]["woman_coded"]
    assert entry["rate"]["low"] is None and entry["removal"]["low"] is None
    assert entry["removal"]["value"] == pytest.approx(0.9375)
    assert "from first-name probabilities (body fixed): removes 94% of DPO's shift in woman_coded (no interval)" in (
        result.text)
    for run in (dpo, ba):
        assert result.text.count(f"({run / 'readouts.json'} has no names.per_prompt.first_name)") == 1


def test_a_run_whose_evaluation_read_another_reference_first_name_rate_is_told(tmp_path):
    dpo = write_run(tmp_path / "dpo", "dpo", readouts(DPO, first_name=DPO_FIRST))
    record = readouts(BA_DPO, first_name=BA_DPO_FIRST)
    record["names"]["reference"]["first_name"]["woman_coded"] = 0.55
    ba = write_run(tmp_path / "ba", "ba_dpo_pooled", record)
    text = compare_runs([dpo, ba]).text
    assert "its own evaluation read the reference's woman_coded (first-name probability) at 0.55, not 0.5 as" in text


def test_theta_bar_is_read_beside_the_offline_estimate_and_a_moving_theta_is_said(tmp_path):
    result = compare_runs(write_pair(tmp_path))
    theta = result.comparison["runs"][1]["theta"]["woman_coded"]
    assert theta["theta_bar"] == 1.2 and theta["offline"] == 1.5 and theta["converged"] is False
    assert theta["theta_k"] == pytest.approx({"A0": 0.9, "A1": 1.2, "A2": 1.5})
    assert theta["offline_k"] == {"A0": 1.1, "A1": 1.5, "A2": 1.9}
    assert result.comparison["runs"][0]["theta"] is None  # DPO learns no theta
    assert "+1.200 (offline +1.500, moving)" in result.text
    assert "BA-DPO (shared_mean): theta_bar woman_coded was still moving at the end of training" in result.text
    assert "0.0150" in result.text and "0.600 / 0.700 (+0.100)" in result.text  # KL and held-out
    assert "files: none written" in result.text


def test_runs_evaluated_before_per_prompt_values_have_no_interval_and_say_why(tmp_path):
    dpo, ba = write_pair(tmp_path, per_prompt=False)
    result = compare_runs([dpo, ba])
    removal = result.comparison["runs"][1]["attributes"]["woman_coded"]["removal"]
    assert removal["value"] == pytest.approx(0.9) and removal["low"] is None and removal["measurable"] is None
    assert "removes 90% of DPO's shift in woman_coded (no interval)" in result.text
    assert re.search(r"no interval: evaluated before badpo recorded per-prompt values \(\S*dpo/readouts.json has no "
                     r"attribute_rates.NAME.per_prompt\): run `badpo evaluate` on it again", result.text)
    assert result.text.count("evaluated before badpo recorded per-prompt values") == 2  # once per run, not per number


def test_runs_read_on_other_prompts_are_not_paired(tmp_path):
    dpo = write_run(tmp_path / "dpo", "dpo", readouts(DPO))
    ba = write_run(tmp_path / "ba", "ba_dpo_pooled", readouts(BA_DPO, digest="e" * 64))
    entry = compare_runs([dpo, ba], force=True).comparison["runs"][1]["attributes"]["woman_coded"]
    assert entry["rate"]["low"] is not None  # its own rate keeps its interval
    assert entry["removal"]["low"] is None and "evaluated on different prompts" in entry["removal"]["why"]


def test_the_baseline_is_the_dpo_run_unless_named(tmp_path, cli_error):
    dpo, ba = write_pair(tmp_path)
    other = write_run(tmp_path / "dpo-seed2", "dpo", readouts({"woman_coded": 26, "black_coded": 6}))
    line = cli_error(["compare", str(dpo), str(other), str(ba)])
    assert "are both DPO runs" in line and "--baseline RUN" in line
    named = compare_runs([dpo, other, ba], baseline=other).comparison
    assert named["baseline"] == "DPO [dpo-seed2]" and named["runs"][1]["baseline"] is True
    assert named["runs"][2]["attributes"]["woman_coded"]["removal"]["value"] == pytest.approx((0.65 - 0.25) / 0.45)
    alone = compare_runs([ba], baseline=dpo).comparison  # a baseline not among RUN comes first
    assert [run["label"] for run in alone["runs"]] == ["DPO", "BA-DPO (shared_mean)"]
    without = compare_runs([ba, tmp_path / "dpo-seed2" / "readouts.json"], baseline=None)
    assert "no run is DPO" not in without.text  # the readouts file inside a run folder knows its method
    lone = compare_runs([ba, write_run(tmp_path / "pooled", "ba_dpo_pooled", readouts(BA_DPO))])
    assert "no run is DPO (method dpo)" in lone.text and "removed of" not in lone.text


def test_a_reference_run_stands_for_the_reference(tmp_path):
    dpo, ba = write_pair(tmp_path)
    clean = write_run(tmp_path / "clean", "dpo", readouts({"woman_coded": 12, "black_coded": 4}))
    comparison = compare_runs([dpo, ba], reference=clean).comparison
    assert comparison["reference"]["label"] == "reference (clean)"
    assert "first_name" not in comparison  # the clean run read no names: that readout has no reference here
    assert comparison["notes"] == [f"the rate from first-name probabilities is not compared: {clean / 'readouts.json'} "
                                   "holds no names.first_name (no names attribute declared, or another readout)"]
    assert comparison["attributes"]["woman_coded"]["reference"]["value"] == 0.3
    removal = comparison["runs"][1]["attributes"]["woman_coded"]["removal"]
    assert removal["value"] == pytest.approx((0.7 - 0.25) / (0.7 - 0.3))


def test_a_run_whose_evaluation_read_another_reference_is_told(tmp_path):
    dpo = write_run(tmp_path / "dpo", "dpo", readouts(DPO))
    ba = write_run(tmp_path / "ba", "ba_dpo_pooled", readouts(BA_DPO, reference={"woman_coded": 9, "black_coded": 4}))
    text = compare_runs([dpo, ba]).text
    assert "its own evaluation read the reference's woman_coded at 0.225, not 0.2 as DPO's did" in text


def test_bad_input_is_one_line_naming_the_run_the_file_or_the_key(tmp_path, cli_error):
    dpo, ba = write_pair(tmp_path)
    assert "no such run folder or readouts file" in cli_error(["compare", str(tmp_path / "missing")])
    bare = tmp_path / "bare"
    bare.mkdir()
    assert f"{bare}: no readouts.json; run `badpo evaluate {bare}` first" in cli_error(["compare", str(bare)])
    (ba / "readouts.json").write_text("{not json")
    assert f"{ba / 'readouts.json'}: cannot read the run's readouts" in cli_error(["compare", str(dpo), str(ba)])
    record = readouts(BA_DPO)
    record["attribute_rates"]["woman_coded"]["per_prompt"]["policy"] = [1, 0]
    (ba / "readouts.json").write_text(json.dumps(record))
    line = cli_error(["compare", str(dpo), str(ba)])
    assert "attribute_rates.woman_coded.per_prompt.policy holds 2 values, but n is 40" in line and str(ba) in line
    assert "inside the run folder" in cli_error(["compare", str(dpo), "--out", str(dpo / "cmp")])


def test_the_compare_files_are_replaced_only_with_overwrite(tmp_path, cli_error, capsys):
    dpo, ba = write_pair(tmp_path)
    out = tmp_path / "out"
    assert main(["compare", str(dpo), str(ba), "--out", str(out)]) == 0
    assert "holds compare.json, compare.md, compare.png, theta.png, report.html already" in cli_error(
        ["compare", str(dpo), str(ba), "--out", str(out)])
    (ba / "theta.json").unlink()  # no theta_k any more: the old theta.png goes
    assert main(["compare", str(dpo), str(ba), "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["compare.json", "compare.md", "compare.png", "report.html"]
    capsys.readouterr()


def test_load_run_reads_a_readouts_file_outside_its_run_folder(tmp_path):
    path = tmp_path / "elsewhere.json"
    path.write_text(json.dumps(readouts(DPO)))
    record = load_run(path)
    assert record.method is None and record.label == "elsewhere" and record.theta is None
    assert "outside its run folder" in record.notes[0]


@pytest.mark.parametrize("record, message", [
    ({"tokens": {"mean": 40.0}}, "holds none of the readouts badpo compare reads"),
    ({"attribute_rates": [0.5]}, "attribute_rates is not an object"),
    ({"names": 0.5, "kl": 0.1}, "names is not an object"),
    ({"kl": 0.1, "inputs": "prompts"}, "inputs is not an object"),
])
def test_load_run_refuses_a_file_that_is_not_an_evaluation_naming_it(tmp_path, record, message):
    """What compare reads of a record is what the readout rows it compares or shows beside write
    (readouts.table.compared_heads): a file with none of them, or a compared source that is not an
    object, is a one-line error naming the file."""
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=re.escape(f"{path}: {message}")):
        load_run(path)


def test_load_run_takes_a_record_with_first_name_rates_alone(tmp_path):
    """A run evaluated with no generations and no held-out judgments still holds the names row's
    first-name rates, which compare reads (a record once refused for lacking attribute_rates and
    heldout)."""
    path = tmp_path / "names_only.json"
    record = readouts(DPO, first_name=DPO_FIRST)
    path.write_text(json.dumps({"names": record["names"], "inputs": record["inputs"]}))
    assert load_run(path).readouts["names"] == record["names"]


def test_two_trained_runs_evaluated_on_the_same_prompts_compare_end_to_end(tmp_path, save_model_dir, cli_training,
                                                                           capsys):
    """`badpo train` DPO and BA-DPO (shared_mean) for two steps on a 64-position model with a regex
    attribute, `badpo evaluate` both on the same prompts, then `badpo compare`: every rate has an
    interval, both evaluations read the same reference, BA-DPO's theta_bar stands beside its
    audit's offline estimate, and each run has its verdict line."""
    save_model_dir(tmp_path / "model", n_positions=64)
    rows = judgment_rows(n_pairs=8, judgments_per_pair=4)
    write_jsonl(tmp_path / "judgments.jsonl", rows[:24])
    write_jsonl(tmp_path / "heldout.jsonl", rows[24:])
    prompts = ("write code", "what is good", "sign your name", "try this first", "write a short answer",
               "what is the best way to learn", "what is the best way to cook", "write a long answer", "sign it",
               "learn to cook")  # 10: the fewest compare gives an interval
    write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": p} for p in prompts])
    runs = []
    for method in ("dpo", "ba_dpo_shared_mean"):
        runs.append(str(tmp_path / method))
        assert cli_training(["train", f"data={tmp_path}/judgments.jsonl", "attributes=[signed=regex:emily|greg]",
                             f"method={method}", f"model.name_or_path={tmp_path}/model", f"output_dir={runs[-1]}",
                             f"cache_dir={tmp_path}/cache", "steps=2", "batch_size=8", "micro_batch_size=8",
                             "tokenization.max_prompt_tokens=16", "tokenization.max_length=64", "optim.lr=1e-3",
                             "runtime.num_threads=1", "report.progress_bar=false"]) == 0
        assert cli_training(["evaluate", runs[-1], "--heldout", f"{tmp_path}/heldout.jsonl", "--prompts",
                             f"{tmp_path}/prompts.jsonl", "max_new_tokens=12"]) == 0
    capsys.readouterr()
    assert cli_training(["compare", *runs, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    comparison = json.loads((tmp_path / "out" / "compare.json").read_text())
    recorded = json.loads((tmp_path / "dpo" / "readouts.json").read_text())["attribute_rates"]["signed"]
    assert comparison["attributes"]["signed"]["reference"]["value"] == recorded["reference"]
    for run in comparison["runs"]:
        rate = run["attributes"]["signed"]["rate"]
        assert rate["n"] == 10 and rate["low"] <= rate["value"] <= rate["high"]
    removal = comparison["runs"][1]["attributes"]["signed"]["removal"]
    assert removal["measurable"] is not None  # paired: an interval, or 'not measurable'
    theta = comparison["runs"][1]["theta"]["signed"]
    assert theta["offline"] is not None and theta["theta_bar"] != 0
    assert "its own evaluation read the reference" not in out  # one reference, sampled alike for both
    assert out.count("\n  DPO (baseline), on generated answers: ") == 1
    assert "\n  BA-DPO (shared_mean), on generated answers: " in out
    assert "first-name" not in out  # no names attribute: no names readout to compare
    assert (tmp_path / "out" / "compare.png").read_bytes().startswith(PNG)
    ba_card = (tmp_path / "ba_dpo_shared_mean" / "policy" / "README.md").read_text()
    assert "`badpo compare` against DPO, intervals at 95% over prompts" in ba_card
    assert "- BA-DPO (shared_mean), on generated answers: " in ba_card and "Not evaluated yet" not in ba_card
    assert "Not evaluated yet" in (tmp_path / "dpo" / "policy" / "README.md").read_text()  # the baseline's


def test_compare_fills_badpo_model_cards_and_leaves_other_readmes_alone(tmp_path):
    dpo, ba = write_pair(tmp_path)
    facts = CardFacts("ba_dpo_shared_mean", "BA-DPO", "org/model", False, False, ["names"], 80, 40, 4, "ab", 0.1, 2,
                      0, {"woman_coded": (0.5, 0.1)})
    for run, text in ((ba, card_text(facts)), (dpo, "# my own notes\n")):
        (Path(run) / "policy").mkdir()
        (Path(run) / "policy" / "README.md").write_text(text)
    printed = compare_runs([dpo, ba]).text
    card = (Path(ba) / "policy" / "README.md").read_text()
    assert f"model cards updated: {Path(ba) / 'policy' / 'README.md'}" in printed
    assert card.startswith(card_text(facts).split("<!-- badpo:evaluation -->")[0])  # the rest kept as written
    verdict = next(line for line in printed.splitlines() if line.startswith("  BA-DPO (shared_mean), on generated"))
    assert f"- {verdict.strip()}" in card
    assert (Path(dpo) / "policy" / "README.md").read_text() == "# my own notes\n"


def test_a_model_card_that_cannot_be_written_leaves_the_comparison_written(tmp_path, monkeypatch):
    """Runs on a read-only disk (root ignores chmod, so the write itself is made to fail): the output
    folder is written, compare returns, and the card it could not update is named with why."""
    import errno

    from badpo.comparing import compare_runs as module

    dpo, ba = write_pair(tmp_path)
    facts = CardFacts("ba_dpo_shared_mean", "BA-DPO", "org/model", False, False, ["names"], 80, 40, 4, "ab", 0.1, 2,
                      0, {"woman_coded": (0.5, 0.1)})
    (Path(ba) / "policy").mkdir()
    (Path(ba) / "policy" / "README.md").write_text(card_text(facts))
    written = module.atomic_write_text

    def read_only_runs(path, text):
        if Path(path).name == "README.md":
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        written(path, text)

    monkeypatch.setattr(module, "atomic_write_text", read_only_runs)
    result = compare_runs([dpo, ba], out=tmp_path / "cmp")
    assert (tmp_path / "cmp" / "compare.json").exists() and (tmp_path / "cmp" / "report.html").exists()
    page = (tmp_path / "cmp" / "report.html").read_text(encoding="utf-8")
    assert "none written" not in page and "compare.json" in page  # the page lists the files beside it
    card = Path(ba) / "policy" / "README.md"
    assert f"model card not updated (the comparison stands): {card} (Read-only file system)" in result.text
    assert "model cards updated" not in result.text


def test_the_output_shown_in_docs_verdict_is_what_the_fixture_runs_print(tmp_path):
    """docs/verdict.md shows `badpo compare` on the runs of tests/fixtures/runs.py: the same lines,
    but for the folder the files were written to."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "verdict.md").read_text(encoding="utf-8")
    shown = re.search(r"it prints:\n\n```\n(.*?)```", text, re.S).group(1).splitlines()
    printed = compare_runs(write_pair(tmp_path), out=tmp_path / "cmp").text.replace(str(tmp_path), "runs")
    assert printed.replace("runs/cmp/", "runs/compare/").splitlines() == shown


def test_a_pair_level_attribute_is_compared_by_its_mean_token_count(tmp_path):
    """length is defined on the policy's answer against the reference's; compare reads it by the
    mean token count of each side, per prompt (policy_tokens / reference_tokens), to one decimal."""
    def record(tokens: list[int]) -> dict:
        reference, tokens = [10, 12, 14, 16] * 3, tokens * 3  # 12 prompts: enough for an interval
        entry = {"policy": 0.5, "reference": 0.0, "n": 12, "policy_tokens": sum(tokens) / 12, "reference_tokens": 13.0,
                 "per_prompt": {"policy": [1, 1, 0, 0] * 3, "reference": [0] * 12, "policy_tokens": tokens,
                                "reference_tokens": reference}}
        return {"attribute_rates": {"length": entry}, "inputs": {"attributes": ["length"], "prompts_sha256": "d"}}

    # the shifts differ from prompt to prompt: a shift the same on every prompt has an interval of zero width
    dpo = write_run(tmp_path / "dpo", "dpo", record([30, 32, 35, 35]))
    ba = write_run(tmp_path / "ba", "ba_dpo_pooled", record([16, 18, 21, 21]))
    result = compare_runs([dpo, ba])
    assert result.comparison["attributes"]["length"]["unit"] == "tokens"
    assert result.comparison["attributes"]["length"]["reference"]["value"] == 13.0
    removal = result.comparison["runs"][1]["attributes"]["length"]["removal"]
    assert removal["value"] == pytest.approx((33 - 19) / (33 - 13))
    assert "  DPO (baseline), on generated answers: moves length by +20.0 [" in result.text  # tokens, one decimal
    assert "13.0 [" in result.text
    with pytest.raises(ValueError, match="given twice"):
        compare_runs([dpo, ba, tmp_path / "dpo"])


def test_a_reference_read_apart_in_the_fifth_digit_shows_the_digit_that_differs(tmp_path):
    """The note read "at 0.4857, not 0.4857" for rates that differ beyond four digits."""
    dpo = write_run(tmp_path / "dpo", "dpo", readouts(DPO, first_name=DPO_FIRST))
    record = readouts(BA_DPO, first_name=BA_DPO_FIRST)
    record["names"]["reference"]["first_name"]["woman_coded"] = 0.50004
    ba = write_run(tmp_path / "ba", "ba_dpo_pooled", record)
    text = compare_runs([dpo, ba]).text
    assert "woman_coded (first-name probability) at 0.50004, not 0.5 as" in text, text
