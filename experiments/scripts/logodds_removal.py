"""Removal of DPO's body-fixed shift read on two scales: the mean probability (the tables' column)
and log-odds (the policy's own lean, the scale theta * g lives on). Issue 51: DPO drives
p(long) | body from ~0.70 to ~0.98 on smol-multipref, where the probability scale saturates; the
same residual lean is then a larger share of DPO's probability shift than of its log-odds shift.

Log-odds are read exactly where a record holds the readout's ``long_log_odds`` /
``markdown_log_odds`` (the mean over prompts of each prompt's log-odds, records made from a2e13ca
on); older records hold only the mean probability, and their log-odds are the logit of that mean
(``"scale": "logit of the mean"``), which is not the mean of the logits (Jensen): an
approximation, said as one in the record.

    python experiments/scripts/logodds_removal.py --out results/level_rule/logodds_removal.json \\
        cpu=results/level_rule/cpu/smol_multipref held=results/level_rule/gpu/smol_multipref_held

Each FOLDER holds seedS/runs/*.json (one experiment per seed, its reference and DPO included) or
runs/*.json (every seed, one reference); ``LABEL=F1+F2+F3`` pools several such folders (a seed
each). Over two or more seeds the summary adds the 95% Student-t interval of the mean.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from badpo.comparing.over_seeds import mean_ci
from badpo.experiment.provenance import provenance

FLAGS = {"long": "p(long) | body", "markdown": "p(md) | body"}


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def lean(candidates: dict, flag: str) -> tuple[float, str]:
    """(log-odds of the flag, how it was read): the exact readout, else the logit of the mean."""
    exact = candidates.get(f"{flag}_log_odds")
    return (exact, "mean of the logits") if exact is not None else (logit(candidates[flag]), "logit of the mean")


def removal(reference: float, dpo: float, arm: float) -> float:
    """The share of DPO's shift from the reference that the arm does not make (1 = at the reference)."""
    return (dpo - arm) / (dpo - reference)


def runs_by_seed(folder: Path) -> dict[str, tuple[dict, dict, dict]]:
    """{seed: (reference's candidates, DPO's, {arm: candidates})} of an experiment folder: either
    seedS/runs/ (each seed with its own reference) or runs/ holding every seed (one reference)."""
    found: dict[str, tuple[dict, dict, dict]] = {}
    folders = sorted(folder.glob("seed*/runs")) or [folder / "runs"]
    for runs in folders:
        references, dpos, arms = [], {}, {}
        for path in sorted(runs.glob("*.json")):
            record = json.loads(path.read_text(encoding="utf-8"))
            candidates = record["readouts"].get("candidates")
            if candidates is None:
                continue
            if record["kind"] == "reference":
                references.append(candidates)
            elif record["arm"] == "DPO":
                dpos[str(record["seed"])] = candidates
            else:
                arms.setdefault(str(record["seed"]), {})[record["arm"]] = candidates
        if len(references) != 1:
            raise SystemExit(f"{runs}: {len(references)} reference records, expected one")
        for seed, dpo in dpos.items():
            found[seed] = (references[0], dpo, arms.get(seed, {}))
    return found


def seed_rows(reference: dict, dpo: dict, arms: dict) -> list[dict]:
    """One row per (arm, flag) of one seed: both scales' removal against its DPO."""
    rows = []
    for arm, candidates in sorted(arms.items()):
        for flag in FLAGS:
            if flag not in candidates:
                continue
            (ref_lo, scale), (dpo_lo, _), (arm_lo, _) = (lean(c, flag) for c in (reference, dpo, candidates))
            rows.append({"arm": arm, "readout": FLAGS[flag], "scale": scale,
                         "probability": {"reference": reference[flag], "dpo": dpo[flag], "arm": candidates[flag],
                                         "removed": removal(reference[flag], dpo[flag], candidates[flag])},
                         "log_odds": {"reference": ref_lo, "dpo": dpo_lo, "arm": arm_lo,
                                      "removed": removal(ref_lo, dpo_lo, arm_lo)}})
    return rows


def summary(per_seed: dict[str, list[dict]]) -> list[dict]:
    """Mean and range over the seeds of each (arm, readout), on both scales."""
    by_arm: dict[tuple[str, str], dict[str, list[float]]] = {}
    for rows in per_seed.values():
        for row in rows:
            cell = by_arm.setdefault((row["arm"], row["readout"]), {"probability": [], "log_odds": []})
            for scale in cell:
                cell[scale].append(row[scale]["removed"])
    return [{"arm": arm, "readout": readout, "seeds": len(cell["probability"]),
             **{scale: _over_seeds(v) for scale, v in cell.items()}}
            for (arm, readout), cell in sorted(by_arm.items())]


def _over_seeds(values: list[float]) -> dict[str, float]:
    """Mean, range and (from two seeds) the 95% Student-t interval of the mean."""
    out = {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}
    if len(values) > 1:
        ci = mean_ci(values)
        out.update(ci_low=ci["low"], ci_high=ci["high"])
    return out


def experiment_runs(folders: str) -> dict[str, tuple[dict, dict, dict]]:
    """:func:`runs_by_seed` of one folder, or of several joined by ``+`` (one seed each, say, run
    as separate experiments): a seed found twice is refused."""
    found: dict[str, tuple[dict, dict, dict]] = {}
    for folder in folders.split("+"):
        for seed, runs in runs_by_seed(Path(folder)).items():
            if seed in found:
                raise SystemExit(f"{folder}: seed {seed} is also in another folder of {folders}")
            found[seed] = runs
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", metavar="LABEL=FOLDER")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = {"provenance": provenance(), "experiments": {}}
    for item in args.folders:
        label, _, folder = item.partition("=")
        per_seed = {seed: seed_rows(*found) for seed, found in sorted(experiment_runs(folder).items())}
        if not per_seed:
            raise SystemExit(f"{folder}: no DPO run with its reference")
        result["experiments"][label] = {"folder": folder, "per_seed": per_seed, "summary": summary(per_seed)}
        for row in result["experiments"][label]["summary"]:
            p, lo = row["probability"], row["log_odds"]
            print(f"{label:6s} {row['arm'][:46]:46s} {row['readout']:15s} probability {p['mean']:6.1%} "
                  f"({p['min']:.0%}-{p['max']:.0%})  log-odds {lo['mean']:6.1%} ({lo['min']:.0%}-{lo['max']:.0%})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
