"""How far each tiny run drifted from its reference, seed by seed (issue 35, item 3).

The tiny tables give means over seeds; some of their differences from the paper are a split
between seeds. For every run of an experiment's output folder (the runs its ``layout.json`` lists,
under the experiment's own arm names; every record in ``runs/`` when there is no layout) this
prints one row per arm and seed: beta, the answers the policy signs (of those it samples), the
share that end (EOS), the mean token count, KL to the reference, and the last training step's
chosen reward ``beta * log pi/pi_ref(y_w)`` with the log-ratio it stands for (divided by the run's
beta). A negative log-ratio is a policy that lowered the likelihood of the answers it was told to prefer.

With ``--temperature T`` it also prints, for every run, the woman- and black-coded first-name rates
that sampling at temperature T would give if every prompt had the run's mean per-name
distribution, p_i^(1/T) renormalised (top-p left out), beside the sampled shares it recorded:

    python experiments/analyses/tiny_drift.py runs/tiny_names_samples --temperature 0.7

With ``--cells`` it prints where each run's first-name mass sits: the woman-coded share within the
black-coded names and within the white-coded ones, the black-woman cell, and the share of the three
likeliest names. The paper reads its gender-only arm by these (tab:abl_names_v3: the undeclared race
bias concentrates the policy in the black-woman cell and carries the declared gender with it):

    python experiments/analyses/tiny_drift.py runs/tiny_abl_names_v3 --cells
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from pathlib import Path

from badpo.core.names import NAME_POOL
from badpo.experiment.records import read_records

COLUMNS = ("beta", "signed", "n", "eos", "tokens", "kl", "chosen reward", "log-ratio")


def drift_row(record: Mapping) -> dict:
    """One run's drift readouts (None where its record has no such readout)."""
    readouts = record["readouts"]
    sampled, text = readouts.get("sampled") or {}, readouts.get("sampled_text") or {}
    chosen = (readouts.get("training") or {}).get("chosen_reward")
    beta = (record.get("settings") or {}).get("beta")
    ratio = chosen / beta if isinstance(chosen, (int, float)) and beta else None
    return {"beta": beta, "signed": sampled.get("signed_pool"), "n": sampled.get("n", text.get("n")),
            "eos": text.get("eos_rate"), "tokens": readouts.get("tokens"), "kl": readouts.get("kl"),
            "chosen reward": chosen, "log-ratio": ratio}


def tempered_rates(per_name: Mapping[str, float], temperature: float) -> dict[str, float]:
    """The woman- and black-coded shares of a first-name distribution (name -> probability over
    the pool) sharpened to temperature T: q_i = p_i^(1/T) / sum_j p_j^(1/T). Example: two names,
    a woman-coded one at 0.6 and a man-coded one at 0.4, T = 0.5: q = 0.36 / 0.52 = 0.692."""
    if temperature <= 0:
        raise ValueError(f"--temperature must be positive, got {temperature}")
    weights = {name: p ** (1.0 / temperature) for name, p in per_name.items() if p > 0}
    total = math.fsum(weights.values())
    return {attribute: math.fsum(w for name, w in weights.items() if NAME_POOL[name][a] == 1) / total
            for a, attribute in enumerate(("woman_coded", "black_coded"))}


def labelled_records(out: Path) -> list[tuple[str, Mapping]]:
    """(label, record) of the reference and every run of the folder, by its layout.json when it
    has one (reused records keep the arm name of the config that first logged them)."""
    runs = out / "runs"
    layout_path = out / "layout.json"
    if not layout_path.is_file():
        records = list(read_records(runs).values())
        records.sort(key=lambda r: (r["kind"] != "reference", str(r.get("arm")), r.get("seed") or 0))
        return [(r.get("arm") if r["kind"] == "arm" else "Reference", r) for r in records]
    layout = json.loads(layout_path.read_text(encoding="utf-8"))
    keys = [("Reference", layout["reference_key"])]
    keys += [(arm["name"], run["key"]) for arm in layout["arms"] for run in arm["runs"]]
    records = read_records(runs)
    return [(label, records[key]) for label, key in keys if key in records]


def shown(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def print_tempered(labelled: list[tuple[str, Mapping]], temperature: float) -> None:
    """Each run's first-name rates (probabilities), the same tempered to T, and its sampled
    shares with how many answers they count."""
    print(f"\n| Arm | seed | p(woman) | p(black) | tempered to T {temperature}, woman | black | sampled woman | "
          "black | signed |")
    print("|:--|--:|--:|--:|--:|--:|--:|--:|--:|")
    for label, record in labelled:
        names, sampled = record["readouts"].get("names") or {}, record["readouts"].get("sampled") or {}
        if "per_name" not in names:
            continue
        tempered = tempered_rates(names["per_name"]["first_name"], temperature)
        cells = [names["first_name"]["woman_coded"], names["first_name"]["black_coded"], tempered["woman_coded"],
                 tempered["black_coded"], sampled.get("woman_share"), sampled.get("black_share"),
                 sampled.get("signed_pool")]
        print(f"| {label} | {record.get('seed') or '-'} | " + " | ".join(shown(c) for c in cells) + " |")


def cell_shares(names: Mapping) -> dict[str, float]:
    """Where a names readout's first-name mass sits. Example: cells black-woman 0.4, black-man 0.1,
    white-woman 0.25, white-man 0.25 give p(woman | black) 0.8 and p(woman | white) 0.5."""
    cells = names["cells"]["first_name"]
    top = sorted(names["per_name"]["first_name"].values(), reverse=True)[:3]
    return {"woman share of black-coded": cells["black_woman"] / (cells["black_woman"] + cells["black_man"]),
            "woman share of white-coded": cells["white_woman"] / (cells["white_woman"] + cells["white_man"]),
            "black-woman cell": cells["black_woman"], "top 3 names": math.fsum(top)}


def print_cells(labelled: list[tuple[str, Mapping]]) -> None:
    """Each run's cell shares (runs without per-cell readouts are left out)."""
    columns = ("woman share of black-coded", "woman share of white-coded", "black-woman cell", "top 3 names")
    print("\n| Arm | seed | " + " | ".join(columns) + " |")
    print("|:--|--:|" + "--:|" * len(columns))
    for label, record in labelled:
        names = record["readouts"].get("names") or {}
        if "cells" not in names or "per_name" not in names:
            continue
        shares = cell_shares(names)
        print(f"| {label} | {record.get('seed') or '-'} | " + " | ".join(shown(shares[c]) for c in columns) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the experiment's output_dir (holds runs/*.json)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="also print every run's first-name rates tempered to T beside its sampled shares")
    parser.add_argument("--cells", action="store_true",
                        help="also print where every run's first-name mass sits (woman share by race, top names)")
    args = parser.parse_args()
    labelled = labelled_records(args.out)
    if not labelled:
        raise SystemExit(f"{args.out}/runs: no run records")
    print("| Arm | seed | " + " | ".join(COLUMNS) + " |")
    print("|:--|--:|" + "--:|" * len(COLUMNS))
    for label, record in labelled:
        row = drift_row(record)
        print(f"| {label} | {record.get('seed') or '-'} | " + " | ".join(shown(row[c]) for c in COLUMNS) + " |")
    if args.temperature is not None:
        print_tempered(labelled, args.temperature)
    if args.cells:
        print_cells(labelled)


if __name__ == "__main__":
    main()
