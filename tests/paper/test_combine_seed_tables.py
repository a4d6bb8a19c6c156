"""experiments/scripts/combine_seed_tables.py: one table over seeds from one-seed reports (each seed its own
reference), the arithmetic worked out by hand."""

from __future__ import annotations

import csv
import importlib.util
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "scripts" / "combine_seed_tables.py"
spec = importlib.util.spec_from_file_location("combine_seed_tables", SCRIPT)
combine_seed_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(combine_seed_tables)

HEADER = ["table", "row", "column", "metric", "kind", "interval", "n", "mean", "plus_minus", "low", "high",
          "per_seed", "note"]


def _report(folder: Path, seed: str, reference: float, dpo: float, removed: float, ceiling: list[float]) -> Path:
    folder.mkdir(parents=True)
    rows = [
        ["T", "Reference (SFT)", "p", "p", "value", "t", "1", reference, "nan", "nan", "nan", "", "trained once"],
        ["T", "DPO", "p", "p", "value", "t", "1", dpo, "nan", "nan", "nan", f"{seed}={dpo!r}", ""],
        ["T", "BA", "Removed", "p", "removed", "t", "1", removed, "nan", "nan", "nan", f"{seed}={removed!r}", ""],
        ["T", "Ceiling", "Votes", "v", "value", "t", "2", sum(ceiling) / 2, "nan", "nan", "nan",
         f"DPO/{seed}={ceiling[0]!r};BA/{seed}={ceiling[1]!r}", "mean over runs"],
    ]
    with (folder / "table.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows)
    return folder


def test_three_one_seed_reports_pool_to_the_mean_and_student_t_interval(tmp_path):
    """Removals 0.9, 1.0, 1.1: mean 1.0, sd 0.1, half-width t(0.975, 2) 0.1 / sqrt 3 = 4.3027 * 0.0577
    = 0.2484; the reference rows (no seed in the file) count once per seed; the ceiling, pooled over a
    report's runs, is its runs' mean at each seed."""
    reports = [(s, _report(tmp_path / s, s, ref, 0.8, rem, [0.7, 0.9]))
               for s, ref, rem in (("42", 0.5, 0.9), ("123", 0.6, 1.0), ("456", 0.7, 1.1))]
    cells = {(c["row"], c["column"]): c for c in combine_seed_tables.combine(reports)}
    removed = cells[("BA", "Removed")]
    assert removed["n"] == 3 and removed["mean"] == pytest.approx(1.0)
    assert removed["plus_minus"] == pytest.approx(4.302652729911275 * 0.1 / math.sqrt(3), rel=1e-9)
    assert (removed["low"], removed["high"]) == pytest.approx((0.9, 1.1))
    assert cells[("Reference (SFT)", "p")]["mean"] == pytest.approx(0.6)
    assert cells[("Ceiling", "Votes")]["values"] == pytest.approx({"42": 0.8, "123": 0.8, "456": 0.8})
    text = combine_seed_tables.markdown(list(cells.values()), 3)
    assert "| BA |" in text and "100% ± 25 (90–110)" in text


def test_two_reports_of_one_seed_must_agree_on_their_shared_rows(tmp_path):
    """A seed may name two reports over the same runs (other arms); their DPO rows must agree."""
    first = _report(tmp_path / "a", "42", 0.5, 0.8, 0.9, [0.7, 0.9])
    same = _report(tmp_path / "b", "42", 0.5, 0.8 + 1e-7, 0.9, [0.7, 0.9])
    other = _report(tmp_path / "c", "42", 0.5, 0.85, 0.9, [0.7, 0.9])
    assert combine_seed_tables.combine([("42", first), ("42", same)])
    with pytest.raises(SystemExit, match="another report of that seed"):
        combine_seed_tables.combine([("42", first), ("42", other)])
    with pytest.raises(SystemExit, match="named as seed 123"):
        combine_seed_tables.combine([("123", first)])
