"""Where the first-name mass goes, by how many tokens a name takes (issue 23, item 6; issue 25, item 1).

In the tiny tokenizer before issue 35 (``name_pieces: true`` builds it) 43 of the 46 white-coded
first names are one token and 39 of the 43 black-coded ones two or more. A training that moves
mass toward one-token names lowers p(black) with no bias planted at all
(experiments/configs/experiment_tiny_null_world.yaml). Since then every pool first name is one token: on a
world built so, every name falls in a one-token column. This prints, per
arm, the mean over seeds of the first-name mass on one-token and on longer names, split by the
race-coded attribute, and the perplexity of the 89-name distribution (exp of its entropy):

    python experiments/analyses/name_tokens.py runs/tiny_null_world
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from badpo.core.names import NAME_POOL
from badpo.experiment.records import read_records

COLUMNS = ("one-token, black", "longer, black", "one-token, white", "longer, white", "perplexity")


def cell_of(name: str, tokens: Callable[[str], int]) -> str:
    """The column of a pool first name: one token or longer, and its race coding."""
    return f"{'one-token' if tokens(name) == 1 else 'longer'}, {'black' if NAME_POOL[name][1] == 1 else 'white'}"


def mass_by_length(shares: Mapping[str, float], tokens: Callable[[str], int]) -> dict[str, float]:
    """The first-name shares (name -> probability over the pool) summed by race-coded cell and by
    one token against more, with the perplexity of the whole distribution."""
    out = dict.fromkeys(COLUMNS, 0.0)
    for name, share in shares.items():
        out[cell_of(name, tokens)] += share
    out["perplexity"] = math.exp(-sum(p * math.log(p) for p in shares.values() if p > 0))
    return out


def readout_label(record: Mapping, records: list[Mapping]) -> str:
    """The readout settings that tell this record from the folder's others (the same runs read out
    under another evaluation.body are other records of the same seed): "" when all agree."""
    settings = [r.get("evaluation", {}) for r in records]
    differing = sorted({k for s in settings for k in s if any(t.get(k) != s.get(k) for t in settings)})
    own = record.get("evaluation", {})
    return f" [{', '.join(f'{k}={own.get(k)}' for k in differing)}]" if differing else ""


def main() -> None:
    from transformers import AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the experiment's output_dir (holds runs/*.json)")
    out = parser.parse_args().out
    records = list(read_records(out / "runs").values())
    reference = next((r for r in records if r["kind"] == "reference"), None)
    if reference is None:
        raise SystemExit(f"{out}/runs: no reference record")
    tokenizer = AutoTokenizer.from_pretrained(out / reference["artifacts"]["model"])

    def tokens(name: str) -> int:
        return len(tokenizer(" " + name, add_special_tokens=False)["input_ids"])

    rows: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        label = (record.get("arm") if record["kind"] == "arm" else "Reference") + readout_label(record, records)
        rows[label].append(mass_by_length(record["readouts"]["names"]["per_name"]["first_name"], tokens))
    counts = dict.fromkeys(COLUMNS[:4], 0)
    for name in NAME_POOL:
        counts[cell_of(name, tokens)] += 1
    print("names per cell: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print("| Arm | seeds | " + " | ".join(COLUMNS) + " |")
    print("|:--|--:|" + "--:|" * len(COLUMNS))
    for label, values in rows.items():
        means = [np.mean([v[c] for v in values]) for c in COLUMNS]
        print(f"| {label} | {len(values)} | " + " | ".join(f"{m:.3f}" if c != "perplexity" else f"{m:.1f}"
                                                          for c, m in zip(COLUMNS, means)) + " |")


if __name__ == "__main__":
    main()
