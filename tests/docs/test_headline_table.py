"""README.md's headline table is what experiments/scripts/headline_table.py renders from the committed
run records (issue 74 item 4): a figure edited by hand, or one whose record changed or went away,
fails here. One row is worked out again straight from the records' JSON, and one from the derived
record logodds_removal.json, by paths that share no code with the script."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.benchmarks import load_script

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
script = load_script("headline_table")


def readme_row(*starts: str) -> list[str]:
    """The cells of the README's table row whose first cells are ``starts``."""
    for line in script.between(README.read_text(encoding="utf-8")).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if cells[:len(starts)] == list(starts):
            return cells
    raise AssertionError(f"README.md: no headline row {starts}")


def test_the_readme_table_is_the_one_the_records_render():
    assert script.between(README.read_text(encoding="utf-8")) == script.render()


def test_a_figure_edited_by_hand_is_caught_and_write_puts_the_records_back(tmp_path):
    readme = README.read_text(encoding="utf-8")
    edited = readme.replace("| 88–103% |", "| 90–103% |", 1)
    assert edited != readme
    copy = tmp_path / "README.md"
    copy.write_text(edited, encoding="utf-8")
    assert script.main(["--check", "--readme", str(copy)]) == 1
    assert script.main(["--write", "--readme", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == readme  # and nothing outside the markers moved


def test_the_demo_row_worked_by_hand_from_the_run_records():
    """Per seed: DPO's first-name rate less the reference's, and (DPO - arm) / (DPO - reference)
    for both BA-DPO arms; the cells are min–max of those, not of the means over seeds (the lowest
    arm's mean, 96%, would read higher than its seed 42's 94.86%)."""
    reference, dpo, arms = {}, {}, []
    for path in sorted((ROOT / "results" / "demo" / "runs").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        rates = record["readouts"]["names"]["first_name"]
        if record["kind"] == "reference":
            reference = rates
        elif record["arm"] == "DPO":
            dpo[record["seed"]] = rates
        else:
            arms.append((record["seed"], rates))
    assert sorted(dpo) == [42, 123, 456] and len(arms) == 6
    names = ("woman_coded", "black_coded")
    shifts = [dpo[seed][name] - reference[name] for seed in dpo for name in names]
    removed = [(dpo[seed][name] - rates[name]) / (dpo[seed][name] - reference[name])
               for seed, rates in arms for name in names]
    assert round(min(shifts), 4) == 0.2143 and round(max(shifts), 4) == 0.2929
    assert round(min(removed), 4) == 0.9486 and round(max(removed), 4) == 1.0323
    cells = readme_row("First-name rates (woman- and black-coded)", "the demo: tiny model, tiny signed world")
    assert cells[2:5] == ["42, 123, 456", "+0.21 to +0.29", "95–103%"]


def test_the_log_odds_row_agrees_with_logodds_removal_json():
    """The same four seeds read by experiments/scripts/logodds_removal.py, one experiment a seed."""
    record = json.loads((ROOT / "results" / "level_rule" / "logodds_removal.json").read_text(encoding="utf-8"))
    shifts, removed = [], []
    for seed in ("42", "123", "456", "789"):
        rows = record["experiments"][f"seed{seed}_exact"]["per_seed"][seed]
        for row in rows:
            if row["readout"] == "p(long) | body":
                assert row["scale"] == "mean of the logits"  # each prompt's log-odds, not the logit of a mean
                shifts.append(row["log_odds"]["dpo"] - row["log_odds"]["reference"])
                removed.append(row["log_odds"]["removed"])
    assert len(removed) == 8
    cells = readme_row("Length, body fixed: log-odds of the long candidates (mean over prompts)")
    assert cells[2:5] == ["42, 123, 456, 789", f"{min(shifts):+.1f} to {max(shifts):+.1f}",
                          f"{min(removed) * 100:.0f}–{max(removed) * 100:.0f}%"]
