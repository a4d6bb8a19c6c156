"""How far the demo's readouts move between two sets of its runs (another thread count, another
precision): the largest absolute difference of each headline readout over the runs both sets hold
(issue 49 item 2; record and table: results/demo_threads/).

    python experiments/scripts/demo_threads.py --pair "fp64, one thread against two" results/demo_threads/fp64_t1/runs \
        results/demo_threads/fp64_t2/runs --out results/demo_threads/compare.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

HEADLINE = ("names.first_name.woman_coded", "names.first_name.black_coded",
            "names.whole_signature.woman_coded", "names.whole_signature.black_coded", "kl")


def numbers(record, prefix: str = "") -> dict[str, float]:
    """Every number of a nested record, by its dotted path."""
    if isinstance(record, dict):
        return {path: number for key, value in record.items()
                for path, number in numbers(value, f"{prefix}.{key}" if prefix else key).items()}
    if isinstance(record, (int, float)) and not isinstance(record, bool):
        return {prefix: float(record)}
    return {}


def runs(folder: Path, by_key: bool) -> dict[str, dict[str, float]]:
    """Each run's numbers by its key, or by its method and seed (``dpo-seed42``; ``reference``)
    where the keys' digests differ (another precision); a folder with two runs of one method and
    seed is refused then."""
    found: dict[str, dict[str, float]] = {}
    for path in sorted(folder.glob("*.json")):
        name = path.stem if by_key else path.stem.rsplit("-", 1)[0]
        if name in found:
            raise SystemExit(f"{folder}: two runs of {name}; compare by key")
        found[name] = numbers(json.loads(path.read_text(encoding="utf-8"))["readouts"])
    return found


def compared(a: Path, b: Path) -> dict:
    by_key = bool({p.name for p in a.glob("*.json")} & {p.name for p in b.glob("*.json")})
    first, second = runs(a, by_key), runs(b, by_key)
    shared = sorted(set(first) & set(second))
    if not shared:
        raise SystemExit(f"{a} and {b} hold no run of the same method and seed")
    largest = {head: max(abs(first[k][head] - second[k][head])
                         for k in shared if head in first[k] and head in second[k]) for head in HEADLINE}
    any_readout = {k: max(abs(first[k][p] - second[k][p]) for p in set(first[k]) & set(second[k])
                          if not (math.isnan(first[k][p]) or math.isnan(second[k][p]))) for k in shared}
    return {"a": str(a), "b": str(b), "matched_by": "key" if by_key else "method and seed", "runs": len(shared),
            "max_abs_difference": largest, "max_abs_difference_any_readout": any_readout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", nargs=3, action="append", metavar=("LABEL", "A", "B"), required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = {label: compared(Path(a), Path(b)) for label, a, b in args.pair}
    text = json.dumps(result, indent=1)
    print(json.dumps({k: v["max_abs_difference"] for k, v in result.items()}, indent=1))
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
