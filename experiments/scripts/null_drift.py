"""How much of DPO's body-fixed shift on a world is not bias: the same world with no mean bias in its
labels (issue 51; ``experiments/configs/experiment_smol_multipref_null.yaml``), read beside the biased world.

For each seed both worlds ran, and each body-fixed readout, on the log-odds (the scale theta * g
lives on) and on the mean probability:

- ``dpo_shift``: DPO's shift from its reference on the biased world;
- ``null_drift``: DPO's shift from its own reference on the null world, which has the same answers,
  comparisons and quality and only the bias taken out of the votes: what preference training does
  to the readout without a bias;
- ``not_bias_share``: null_drift / dpo_shift;
- ``null_arms_minus_dpo``: each BA-DPO arm run on the null world, less DPO there (no bias to take
  out, so about 0: an arm that pushes the readout below DPO's there overshoots);
- per BA-DPO arm of the biased world, ``removed`` (the tables' figure: (DPO - arm) / dpo_shift) and
  ``removed_of_bias`` ((DPO - arm) / (dpo_shift - null_drift)): the arm's removal of the part of
  DPO's shift that the bias made, if training without it would have moved the readout by null_drift;
- where the arm ran on the null world too, ``removed_of_bias_effect``: 1 - (the arm's shift less
  its own null-world shift) / (dpo_shift - null_drift), the share of the bias's effect on DPO that
  does not reach the arm, each method read against itself without the bias (added after the seed-456
  null arms moved length where DPO did not; the other two stay beside it).

These readings assume the drift without bias is the same on both worlds (their references differ:
each is fine-tuned on its own world's majority choices). One seed of each is one draw.

    python experiments/scripts/null_drift.py --out results/level_rule/null_world/null_drift.json \\
        --biased 42=results/level_rule/smol_multipref_logodds_seed42 --null 42=NULL_FOLDER
"""

from __future__ import annotations

import argparse
from pathlib import Path

from logodds_removal import FLAGS, lean, runs_by_seed  # scripts/ is on sys.path when run as a script

from badpo.core.jsonio import write_json
from badpo.experiment.provenance import provenance


def _pairs(items: list[str]) -> dict[str, Path]:
    return {seed: Path(folder) for seed, _, folder in (item.partition("=") for item in items)}


def seed_reading(biased: tuple[dict, dict, dict], null: tuple[dict, dict, dict]) -> list[dict]:
    """One row per readout and scale for one seed: the shift, the drift and each arm's removals."""
    (reference, dpo, arms), (null_reference, null_dpo, null_arms) = biased, null
    rows = []
    for flag, readout in FLAGS.items():
        for scale in ("log_odds", "probability"):
            def read(candidates: dict, flag: str = flag, scale: str = scale) -> float:
                return lean(candidates, flag)[0] if scale == "log_odds" else candidates[flag]

            shift, drift = read(dpo) - read(reference), read(null_dpo) - read(null_reference)
            rows.append({"readout": readout, "scale": scale, "dpo_shift": shift, "null_drift": drift,
                         "not_bias_share": drift / shift,
                         "arms": {arm: {"removed": (read(dpo) - read(c)) / shift,
                                        "removed_of_bias": (read(dpo) - read(c)) / (shift - drift),
                                        **_effect_removed(read, reference, c, null_reference,
                                                          null_arms.get(arm, {}), flag, shift - drift)}
                                  for arm, c in sorted(arms.items()) if flag in c},
                         # on the null world there is no bias to take out: an arm should end where DPO does
                         "null_arms_minus_dpo": {arm: read(c) - read(null_dpo)
                                                 for arm, c in sorted(null_arms.items()) if flag in c}})
    return rows


def _effect_removed(read, reference, candidates, null_reference, null_arm, flag, dpo_effect) -> dict:
    """``removed_of_bias_effect``, where the arm also ran on the null world: 1 - (the arm's shift
    on the biased world less its own shift on the null world) / (DPO's shift less DPO's drift). The
    share of the bias's effect on DPO that does not reach the arm, each method read against itself
    without the bias, so no method's drift is assumed to be DPO's."""
    if flag not in null_arm:
        return {}
    arm_effect = (read(candidates) - read(reference)) - (read(null_arm) - read(null_reference))
    return {"removed_of_bias_effect": 1 - arm_effect / dpo_effect}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--biased", nargs="+", required=True, metavar="SEED=FOLDER")
    parser.add_argument("--null", nargs="+", required=True, metavar="SEED=FOLDER")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    biased, null = _pairs(args.biased), _pairs(args.null)
    result = {"provenance": provenance(), "biased": {s: str(f) for s, f in biased.items()},
              "null": {s: str(f) for s, f in null.items()}, "per_seed": {}}
    for seed in sorted(biased.keys() & null.keys()):
        rows = seed_reading(runs_by_seed(biased[seed])[seed], runs_by_seed(null[seed])[seed])
        result["per_seed"][seed] = rows
        for row in rows:
            arms = "  ".join(f"{arm[:22]}: {v['removed']:.0%} / {v['removed_of_bias']:.0%}"
                             + (f" / {v['removed_of_bias_effect']:.0%}" if "removed_of_bias_effect" in v else "")
                             for arm, v in row["arms"].items())
            offsets = "  ".join(f"{arm[:22]} {v:+.3f}" for arm, v in row["null_arms_minus_dpo"].items())
            print(f"seed {seed} {row['readout']:15s} {row['scale']:11s} DPO {row['dpo_shift']:+.3f} "
                  f"null {row['null_drift']:+.3f} ({row['not_bias_share']:.0%})  {arms}"
                  + (f"  | null world, arm - DPO: {offsets}" if offsets else ""))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, result)


if __name__ == "__main__":
    main()
