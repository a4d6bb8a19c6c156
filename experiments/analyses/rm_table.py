"""The reward-model table of docs/reward_models.md from logged runs: each RUNS/rm_<variant>-seed<seed>/
readouts.json (written by `badpo evaluate`), mean and 95% t-interval over the seeds; "removed" is
1 - tilt(arm) / tilt(plain) on the mean reward difference, per seed against the plain (variant none)
model of the same seed, then averaged.

    python experiments/analyses/rm_table.py runs/tiny_quality 42 123 456
"""

from __future__ import annotations

import sys
from pathlib import Path

from badpo.comparing.over_seeds import mean_ci
from badpo.run_folder.layout import READOUTS_FILE
from badpo.run_folder.saved import read_json_object

ATTRIBUTES = ("woman_coded", "black_coded")
VARIANTS = ("none", "shared_mean", "pooled")
HEAD = ["variant", "tilt woman (Δr)", "share higher, woman", "removed woman", "tilt black (Δr)",
        "share higher, black", "removed black", "same acc (woman split)", "same acc (black split)",
        "same acc (same name or none)", "θ̄ woman", "θ̄ black"]


def interval(values: list[float], scale: float = 1.0, digits: int = 3, unit: str = "") -> str:
    ci = mean_ci(values)
    if len(values) == 1:
        return f"{scale * ci['mean']:.{digits}f}{unit}"
    return f"{scale * ci['mean']:.{digits}f} ± {scale * ci['half_width']:.{digits}f}{unit}"


def row(runs: Path, variant: str, seeds: list[int]) -> list[str]:
    read = {(v, s): read_json_object(runs / f"rm_{v}-seed{s}" / READOUTS_FILE, "its readouts")
            for v in {variant, "none"} for s in seeds}
    cells = ["none (plain BT)" if variant == "none" else variant]
    for a in ATTRIBUTES:
        tilt = [read[variant, s]["tilt"][a] for s in seeds]
        cells += [interval([t["mean_difference"] for t in tilt]), interval([t["share_higher"] for t in tilt])]
        removed = [1 - read[variant, s]["tilt"][a]["mean_difference"] / read["none", s]["tilt"][a]["mean_difference"]
                   for s in seeds]
        cells.append("—" if variant == "none" else interval(removed, 100, 0, "%"))
    cells += [interval([read[variant, s]["heldout"][a]["same_accuracy"] for s in seeds]) for a in ATTRIBUTES]
    cells.append(interval([read[variant, s]["heldout_any"]["same_accuracy"] for s in seeds]))
    cells += ["—" if variant == "none" else interval([read[variant, s]["theta_mean"][a] for s in seeds])
              for a in ATTRIBUTES]
    return cells


def main(argv: list[str]) -> None:
    runs, seeds = Path(argv[0]), [int(s) for s in argv[1:]]
    print("| " + " | ".join(HEAD) + " |")
    print("|" + "---|" * len(HEAD))
    for variant in VARIANTS:
        print("| " + " | ".join(row(runs, variant, seeds)) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
