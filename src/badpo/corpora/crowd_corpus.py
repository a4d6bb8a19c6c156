"""The folder a crowd-label builder writes (:mod:`badpo.corpora.helpsteer3`, :mod:`badpo.corpora.prism`):
its judgments, ties and strengths as the raters gave them, split into training and held-out by prompt.

A builder turns its source rows into judgments (a pure function, tested on a fixture with the
published schema) and hands them here with the counts of what it read and left out. Here the
prompts are split as MultiPref's are (:func:`badpo.corpora.multipref.split_prompt_ids`: a seeded
permutation of the sorted prompt ids), and ``train.jsonl``, ``heldout.jsonl``, ``stats.json`` (the
counts, and the labels of each side: ties, wins at each strength) and ``config.yaml`` are written.
The same rows and config give the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from badpo.core.config import dump_yaml
from badpo.core.jsonio import write_json
from badpo.core.judgments import Judgment, write_judgments
from badpo.core.label_counts import label_counts
from badpo.corpora.multipref import split_prompt_ids

__all__ = ["OUTPUT_FILES", "summary_text", "write_crowd_corpus"]

OUTPUT_FILES = ("train.jsonl", "heldout.jsonl", "stats.json", "config.yaml")


def write_crowd_corpus(judgments: Sequence[Judgment], counts: Mapping[str, Any], config: Any, outdir: str | Path,
                       corpus_name: str) -> dict[str, Any]:
    """Split ``judgments`` by prompt id (``config.heldout_fraction``, ``config.seed``), write the
    files of the module docstring into ``outdir`` and return what ``stats.json`` holds."""
    if not judgments:
        raise ValueError(f"{config.source}: no judgments to write (the counts: {dict(counts)})")
    heldout_ids = split_prompt_ids([j.prompt_id for j in judgments], config.heldout_fraction, config.seed)
    train = [j for j in judgments if j.prompt_id not in heldout_ids]
    heldout = [j for j in judgments if j.prompt_id in heldout_ids]
    stats = {"corpus": corpus_name, "source": config.source, **counts,
             "judgments": len(judgments), "judgments_train": len(train), "judgments_heldout": len(heldout),
             "prompts_train": len({j.prompt_id for j in train}), "prompts_heldout": len(heldout_ids),
             "annotators": len({j.annotator for j in judgments}),
             "labels": {"train": label_counts(train).to_dict(), "heldout": label_counts(heldout).to_dict()}}
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    write_judgments(out / "train.jsonl", train)
    write_judgments(out / "heldout.jsonl", heldout)
    write_json(out / "stats.json", stats)
    dump_yaml(config, out / "config.yaml")
    return stats


def summary_text(stats: Mapping[str, Any]) -> str:
    """What ``badpo build`` prints: what was read, what was left out and why, the labels written."""
    left_out = {key: value for key, value in stats.items() if key.startswith("left_out_") and value}
    lines = [f"{stats['corpus']} from {stats['source']}: {stats['judgments']} judgments "
             f"({stats['judgments_train']} train / {stats['judgments_heldout']} held-out) over "
             f"{stats['prompts_train'] + stats['prompts_heldout']} prompts, {stats['annotators']} annotator ids"]
    for side in ("train", "heldout"):
        labels = stats["labels"][side]
        levels = ", ".join(f"strength {level}: {n}" for level, n in labels["strengths"].items())
        lines.append(f"  {side}: {labels['ties']} ties, {labels['plain_wins']} plain wins"
                     + (f", {levels}" if levels else ""))
    lines.append("  left out: " + (", ".join(f"{key.removeprefix('left_out_')} {value}"
                                            for key, value in left_out.items()) or "nothing"))
    return "\n".join(lines)
