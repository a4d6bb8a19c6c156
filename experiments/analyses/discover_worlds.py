"""Recall and false discoveries of ``badpo audit --discover`` on worlds built for it (a simulation,
not a test): the tiny signed world (names), the tiny MultiPref world (length, markdown) and the
ending world (a bias on the last word "indeed", which no library candidate knows), each at
``--seeds`` data seeds with its planted biases and again with none (the null worlds:
tests/fixtures/discover_worlds.py).

Per world: the share of seeds on which each planted attribute is reported (recall), the reported
clusters that are not planted (false discoveries, with the seeds they came from), the share of null
seeds that report anything, and the seconds per seed.

``--worlds`` also takes harder variants of the ending world (:data:`VARIANTS`); ``--corpus DIR`` a
built real-model world (:func:`real_world`; ``--worlds`` none to run it alone).

    python experiments/analyses/discover_worlds.py [--seeds 20] [--worlds signed multipref ending ending-weak ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the worlds are a test fixture

from badpo.auditing.discover import discover  # noqa: E402
from badpo.experiment.provenance import provenance
from fixtures.discover_worlds import PLANTED, WORLDS  # noqa: E402

# harder variants of the ending world: (world, its keyword arguments)
VARIANTS = {
    "ending-weak": ("ending", {"mean": 0.3, "sigma": 0.0}),  # a small shared effect, no spread
    "ending-small": ("ending", {"n_pairs": 500}),  # the default bias on a quarter of the pairs
    "ending-spread-only": ("ending", {"mean": 0.0, "sigma": 1.0}),  # annotators disagree, no shared effect
}


def run_world(name: str, seeds: int) -> dict:
    world, options = VARIANTS.get(name, (name, {}))
    recall: Counter = Counter()
    false: Counter = Counter()
    null_any = []
    start = time.monotonic()
    for seed in range(seeds):
        found = {f.name for f in discover(WORLDS[world](seed, **options)).findings}
        recall.update(found & PLANTED[world])
        false.update(found - PLANTED[world])
        null_found = [f.name for f in discover(WORLDS[world](seed, null=True, **options)).findings]
        if null_found:
            null_any.append((seed, null_found))
    return {"recall": {a: recall[a] / seeds for a in sorted(PLANTED[world])}, "false": dict(false),
            "null_any": null_any, "seconds_per_seed": (time.monotonic() - start) / (2 * seeds)}


def real_world(folder: Path, seeds: int) -> dict:
    """A built smol-signed world (``badpo build smol-signed DIR``: SmolLM2's own answers, signed):
    its training judgments as built, and ``seeds`` null relabellings of them, in which side 1 of a
    pair wins with probability sigmoid(0.5 (s_1 - s_2)), s = 4 for an answer its checker accepts and
    0 otherwise (``answers.jsonl``), whoever the annotator: the same pairs, no bias."""
    from badpo.core.judgments import read_judgments
    from badpo.core.names import strip_signature

    judgments = read_judgments(str(folder / "train.jsonl"))
    right = {}
    for line in (folder / "answers.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        right[(row["prompt_id"], row["answer"])] = row["right"]
    found = sorted(f.name for f in discover(judgments).findings)
    null_any = []
    for seed in range(seeds):
        rng = np.random.default_rng([seed, 11])
        relabelled = []
        for j in judgments:
            score = [4.0 * right.get((j.prompt_id, strip_signature(t)), False) for t in (j.chosen, j.rejected)]
            keep = rng.random() < 1.0 / (1.0 + np.exp(-0.5 * (score[0] - score[1])))
            relabelled.append(j if keep else dataclasses.replace(j, chosen=j.rejected, rejected=j.chosen))
        reported = [f.name + (" (with the quality caution)" if f.caution else "")
                    for f in discover(relabelled).findings]
        if reported:
            null_any.append((seed, reported))
    return {"judgments": len(judgments), "found": found, "null_any": null_any}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--worlds", nargs="+", default=list(WORLDS), choices=[*WORLDS, *VARIANTS, "none"])
    parser.add_argument("--corpus", type=Path, help="also a built smol-signed world folder (real_world)")
    parser.add_argument("--out", type=Path, help="write the figures as a JSON record with its provenance")
    args = parser.parse_args()
    record = {"command": "OMP_NUM_THREADS=1 python experiments/analyses/discover_worlds.py " + " ".join(sys.argv[1:]),
              "seeds": args.seeds, "provenance": provenance(), "worlds": {}}
    if args.corpus is not None:
        out = real_world(args.corpus, args.seeds)
        record["real_world"] = {"corpus": str(args.corpus), **out}
        print(f"{args.corpus}: {out['judgments']} judgments; found {out['found']} (planted: black_coded, "
              f"woman_coded); null relabellings reporting anything: {len(out['null_any'])} / {args.seeds} "
              f"{out['null_any'] or ''}")
    print(f"| world | planted: recall over {args.seeds} seeds | unplanted findings (planted worlds) | "
          f"null seeds reporting anything | s / world |")
    print("|:--|:--|:--|:--|--:|")
    for name in [w for w in args.worlds if w != "none"]:
        out = run_world(name, args.seeds)
        recall = ", ".join(f"{a} {share:.0%}" for a, share in out["recall"].items())
        false = ", ".join(f"{a} ({n} seeds)" for a, n in sorted(out["false"].items())) or "none"
        null = f"{len(out['null_any'])} / {args.seeds}" + (f" {out['null_any']}" if out["null_any"] else "")
        print(f"| {name} | {recall} | {false} | {null} | {out['seconds_per_seed']:.2f} |", flush=True)
        record["worlds"][name] = out
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
