"""The trusted level's rate criterion, paired by seed (issue 25, item 1).

Reads the logged records of ``experiments/configs/experiment_tiny_trusted_seeds.yaml`` (or of any experiment
holding the arms named below) and prints, per attribute, the mean over seeds of
``|p(5 trusted) - p(reference)| - |p(none trusted) - p(reference)|`` on the first-name readout with
its 95% Student-t interval: below 0 means the trusted annotators bring the policy closer to the
reference. Pairing by seed removes the seed-to-seed variation the two arms share. With
``--against ARM`` the yardstick is that arm at the same seed instead of the reference (the policy
trained on the same world's labels without the planted bias, experiments/configs/experiment_tiny_trusted_oracle.yaml).

    python experiments/analyses/trusted_paired.py runs/tiny_trusted
    python experiments/analyses/trusted_paired.py runs/tiny_trusted_oracle --against "BA-DPO (θ̄+ε_k), oracle labels"
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy import stats

from badpo.experiment.records import read_records

NONE = "BA-DPO (θ̄+ε_k), none trusted"
FIVE = "BA-DPO (θ̄+ε_k), 5 trusted"


def first_names(out: Path) -> tuple[dict, dict[str, dict[int, dict]]]:
    """The reference's first-name rates and every arm's, by seed, from ``out/runs/*.json``."""
    reference, arms = None, {}
    for record in read_records(out / "runs").values():
        rates = record["readouts"]["names"]["first_name"]
        if record["kind"] == "reference":
            reference = rates
        else:
            arms.setdefault(record["arm"], {})[record["seed"]] = rates
    if reference is None:
        raise SystemExit(f"{out}/runs: no reference record")
    return reference, arms


def paired_gaps(arms: dict[str, dict[int, dict]], yardstick: dict[int, dict], attribute: str) -> np.ndarray:
    """|p(5 trusted) - yardstick| - |p(none) - yardstick| per seed the three share ({seed: rates})."""
    seeds = sorted(set(arms[NONE]) & set(arms[FIVE]) & set(yardstick))
    return np.array([abs(arms[FIVE][s][attribute] - yardstick[s][attribute])
                     - abs(arms[NONE][s][attribute] - yardstick[s][attribute]) for s in seeds])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the experiment's output_dir (holds runs/*.json)")
    parser.add_argument("--against", default=None, help="an arm to measure the distance to, seed by seed "
                        "(default: the reference)")
    args = parser.parse_args()
    reference, arms = first_names(args.out)
    if NONE not in arms or FIVE not in arms:
        raise SystemExit(f"{args.out}/runs: needs the arms {NONE!r} and {FIVE!r}")
    if args.against is not None and args.against not in arms:
        raise SystemExit(f"--against: no arm {args.against!r} in {args.out}/runs ({sorted(arms)})")
    yardstick = arms[args.against] if args.against else {s: reference for s in arms[NONE]}
    print(f"distance to {args.against or 'the reference'}; reference",
          {a: round(reference[a], 3) for a in ("woman_coded", "black_coded")})
    for attribute in ("woman_coded", "black_coded"):
        gaps = paired_gaps(arms, yardstick, attribute)
        half = stats.t.ppf(0.975, len(gaps) - 1) * gaps.std(ddof=1) / np.sqrt(len(gaps))
        print(f"{attribute}: |5 trusted - y| - |none - y| = {gaps.mean():+.4f} ± {half:.4f} "
              f"(95% t over {len(gaps)} seeds); 5 trusted closer at {int((gaps < 0).sum())} of {len(gaps)}")


if __name__ == "__main__":
    main()
