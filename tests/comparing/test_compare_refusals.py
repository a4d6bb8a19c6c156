"""`badpo compare` gives no verdict it cannot stand behind (issue 37, item 2).

Before: DPO "moves woman_coded by +0.000 [+0.000, +0.000]" (a bootstrap over prompts of a
near-deterministic readout) and "removes 897% [847, 966]" of a shift that evaluate's relabelling
null called noise; runs evaluated on other prompts or trained on other data got a verdict; one run
under two spellings was compared with itself; one prompt gave "intervals by bootstrap over the 1
prompts"; a run folder without theta.json or run.json lost its columns without a word. Run
folders are written by hand (tests/fixtures/runs.py), no model.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from badpo.cli import main
from badpo.comparing.compare_runs import compare_runs
from badpo.comparing.floor import MIN_EFFECT, MIN_PROMPTS
from badpo.comparing.refusals import DATA_FILE
from fixtures.runs import BA_DPO, BA_DPO_FIRST, DATA, DPO, DPO_FIRST, REFERENCE_FIRST, readouts, write_pair, write_run


def first_name_runs(tmp_path, dpo_pattern: list[float], ba_pattern: list[float], p: float | None = None,
                    reference_pattern: list[float] | None = None):
    """A DPO and a BA-DPO run whose woman_coded first-name rates follow these per-prompt patterns
    (black_coded: the reference's); ``p`` is the one-sided relabelling p evaluate recorded."""
    reference = {"woman_coded": reference_pattern or REFERENCE_FIRST["woman_coded"],
                 "black_coded": REFERENCE_FIRST["black_coded"]}
    folders = []
    for name, method, pattern in (("dpo", "dpo", dpo_pattern), ("ba", "ba_dpo_pooled", ba_pattern)):
        record = readouts(DPO if method == "dpo" else BA_DPO,
                          first_name={"woman_coded": pattern, "black_coded": REFERENCE_FIRST["black_coded"]})
        record["names"] = {**record["names"], **_reference_side(record["names"], reference)}
        if p is not None:
            record["names"]["null"]["first_name"]["woman_coded"]["p"] = p
        folders.append(write_run(tmp_path / name, method, record))
    return folders


def _reference_side(names: dict, reference: dict[str, list[float]]) -> dict:
    """names.reference read on ``reference``'s pattern (40 prompts), and the null's shift against it."""
    values = {name: [pattern[i % len(pattern)] for i in range(40)] for name, pattern in reference.items()}
    means = {name: sum(v) / 40 for name, v in values.items()}
    null = {name: {"shift": names["first_name"][name] - means[name]} for name in means}
    return {"reference": {"first_name": means, "per_prompt": {"first_name": values}}, "null": {"first_name": null}}


def woman(result, run: int = 1, part: str = "removal") -> dict:
    return result.comparison["runs"][run]["first_name"]["woman_coded"][part]


def test_an_interval_of_zero_width_is_never_a_move(tmp_path):
    """DPO's first-name rate is the reference's + 0.05 on every prompt: every resample gives the
    same shift, so the bootstrap cannot tell it from noise; no 'moves', no removal."""
    shifted = [v + 0.05 for v in REFERENCE_FIRST["woman_coded"]]
    result = compare_runs(first_name_runs(tmp_path, shifted, REFERENCE_FIRST["woman_coded"]))
    shift = woman(result, 0, "shift")
    assert shift["low"] == pytest.approx(shift["high"]) and shift["measurable"] is False
    assert "zero width" in shift["why"] and woman(result)["measurable"] is False
    dpo_line = result.comparison["runs"][0]["verdict"].splitlines()[1]
    assert "moves woman_coded" not in dpo_line and "no measurable shift" in dpo_line, dpo_line


def test_a_tight_shift_below_the_minimum_effect_gives_no_removal_ratio(tmp_path):
    """DPO +0.002 (0.5 -> 0.502, its interval tight and above 0), BA-DPO -0.016: the old ratio
    was (0.502 - 0.484) / 0.002 = 900% with a tight interval; now not measurable."""
    dpo = [0.401, 0.502, 0.503, 0.602]
    ba = [0.384, 0.484, 0.484, 0.584]
    result = compare_runs(first_name_runs(tmp_path, dpo, ba))
    removal = woman(result)
    assert removal["shift"]["low"] > 0  # the interval alone would have called it a move
    assert removal["measurable"] is False and removal["value"] is None
    assert f"below the minimum effect of {MIN_EFFECT['rate']:g}" in removal["why"]
    line = result.comparison["runs"][1]["verdict"].splitlines()[1]
    assert "%" not in line.split("woman_coded")[0] and "DPO did not move it measurably" in line, line


@pytest.mark.parametrize("p, moves", [(0.44, False), (0.76, False), (0.001, True)])
def test_a_first_name_shift_within_the_relabelling_null_is_not_a_move(tmp_path, p, moves):
    """DPO's +0.2 first-name shift has an interval far from 0; evaluate's relabelling null decides:
    p 0.44 or 0.76 (two-sided 0.88, 0.48) is noise, p 0.001 a move."""
    result = compare_runs(first_name_runs(tmp_path, DPO_FIRST["woman_coded"], BA_DPO_FIRST["woman_coded"], p=p))
    shift = woman(result, 0, "shift")
    assert shift["low"] > 0 and shift["measurable"] is moves
    assert shift["null_p"] == pytest.approx(min(1, 2 * min(p, 1 - p)))
    assert (woman(result)["value"] is not None) is moves
    if not moves:
        assert "relabelling the name pool" in shift["why"]
    assert ("moves woman_coded" in result.comparison["runs"][0]["verdict"].splitlines()[1]) is moves


def test_too_few_prompts_get_no_interval_and_no_move(tmp_path):
    n = MIN_PROMPTS - 7
    dpo = write_run(tmp_path / "dpo", "dpo", readouts({"woman_coded": 3, "black_coded": 0},
                                                      {"woman_coded": 0, "black_coded": 0}, n=n))
    ba = write_run(tmp_path / "ba", "ba_dpo_pooled", readouts({"woman_coded": 1, "black_coded": 0},
                                                              {"woman_coded": 0, "black_coded": 0}, n=n))
    result = compare_runs([dpo, ba])
    assert result.text.startswith(f"no intervals: {n} prompts are too few to bootstrap (at least {MIN_PROMPTS})")
    assert "bootstrap over the" not in result.text and "moves woman_coded" not in result.text
    rate = result.comparison["runs"][0]["attributes"]["woman_coded"]["rate"]
    assert rate["low"] is None and "too few for an interval" in rate["why"]
    assert "woman_coded: +1.000 from the reference, not tested (no interval)" in result.text


def test_runs_evaluated_on_other_prompts_are_refused_in_one_line_unless_forced(tmp_path, cli_error, capsys):
    dpo = write_run(tmp_path / "dpo", "dpo", readouts(DPO))
    ba = write_run(tmp_path / "ba", "ba_dpo_pooled", readouts(BA_DPO, digest="e" * 64))
    line = cli_error(["compare", str(dpo), str(ba)])
    assert "were evaluated on different prompts (inputs.prompts_sha256" in line and "--force" in line, line
    assert main(["compare", str(dpo), str(ba), "--force", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NOT COMPARABLE, compared with --force: ") and "different prompts" in out.splitlines()[0]
    assert (tmp_path / "out" / "compare.md").read_text().startswith("# Comparison\n\n**NOT COMPARABLE")
    assert json.loads((tmp_path / "out" / "compare.json").read_text())["forced"][0].startswith(str(dpo))


def test_runs_evaluated_with_other_settings_are_refused(tmp_path, cli_error):
    records = [readouts(DPO), readouts(BA_DPO)]
    for record, seed in zip(records, (0, 1)):
        record["inputs"]["settings"] = {"seed": seed, "temperature": 0.7}
    dpo, ba = write_run(tmp_path / "dpo", "dpo", records[0]), write_run(tmp_path / "ba", "ba_dpo_pooled", records[1])
    line = cli_error(["compare", str(dpo), str(ba)])
    assert "different readout settings (inputs.settings.seed 0 vs 1)" in line, line


def test_runs_trained_on_other_data_are_refused(tmp_path, cli_error):
    dpo = write_run(tmp_path / "dpo", "dpo", readouts(DPO))
    ba = write_run(tmp_path / "ba", "ba_dpo_pooled", readouts(BA_DPO), data={**DATA, "sha256": "b" * 64})
    line = cli_error(["compare", str(dpo), str(ba)])
    assert f"were trained on different data ({DATA_FILE}: aaaaaaaaaaaa... of" in line, line
    clean = write_run(tmp_path / "clean", "dpo", readouts({"woman_coded": 12, "black_coded": 4}),
                      data={**DATA, "sha256": "c" * 64})
    assert compare_runs([dpo], reference=clean).comparison["forced"] == []  # a reference may be trained on other data


def test_one_run_under_two_spellings_is_refused(tmp_path, cli_error):
    dpo, ba = write_pair(tmp_path)
    os.symlink(dpo, tmp_path / "link")
    for other in (dpo / "readouts.json", tmp_path / "link", tmp_path / "link" / "readouts.json"):
        line = cli_error(["compare", str(dpo), str(ba), str(other)])
        assert f"{dpo} and {other} are one run given twice" in line, line
    assert "one run given twice" in cli_error(["compare", str(dpo), str(ba), "--reference", str(ba / "readouts.json")])
    named = compare_runs([dpo, ba], baseline=dpo / "readouts.json").comparison  # the run given, not a third
    assert [run["label"] for run in named["runs"]] == ["DPO", "BA-DPO (shared_mean)"]


def test_a_missing_file_of_a_run_folder_is_named(tmp_path):
    dpo, ba = write_pair(tmp_path)
    for name in ("theta.json", "run.json", DATA_FILE):
        (ba / name).unlink()
    notes = compare_runs([dpo, ba]).comparison["runs"][1]["notes"]
    assert f"no theta.json in {ba}: method ba_dpo_shared_mean learns theta, but its theta columns are empty" in notes
    assert any(note.startswith(f"no run.json in {ba}") for note in notes), notes
    assert any(note.startswith(f"no {DATA_FILE} in {ba}") for note in notes), notes


def test_a_run_without_run_json_nor_config_yaml_says_its_method_is_not_known(tmp_path):
    """The note read "its method is read from config.yaml" when config.yaml was missing too."""
    dpo, ba = write_pair(tmp_path)
    for name in ("run.json", "config.yaml"):
        (ba / name).unlink(missing_ok=True)
    notes = compare_runs([dpo, ba]).comparison["runs"][1]["notes"]
    note = next(note for note in notes if note.startswith(f"no run.json in {ba}"))
    assert "nor config.yaml: its method is not known, and it is named by its folder" in note, note
    assert "read from config.yaml" not in note


def test_a_copy_of_a_run_is_refused_though_its_path_differs(tmp_path, cli_error):
    """A run folder copied elsewhere (or one training run twice) holds the same readouts under
    another path: compared with itself, it 'removed' its own shift with a perfect interval."""
    dpo, ba = write_pair(tmp_path)
    shutil.copytree(dpo, tmp_path / "dpo-copy")
    for argv in (["compare", str(dpo), str(ba), "--baseline", str(tmp_path / "dpo-copy")],
                 ["compare", str(dpo), str(tmp_path / "dpo-copy"), "--baseline", str(dpo)],
                 ["compare", str(ba), "--reference", str(tmp_path / "dpo-copy"), "--baseline", str(dpo)]):
        line = cli_error(argv)
        assert "hold identical readouts (a copy of one run, one policy evaluated twice" in line, line
        assert "--force" in line, line
    forced = compare_runs([dpo, tmp_path / "dpo-copy"], baseline=dpo, force=True).comparison["forced"]
    assert any("identical readouts" in reason for reason in forced)
