"""A corpus from the user's own judgments: what ``badpo experiment`` reads (``corpus.builder:
own-data``; ``badpo build own-data OUTDIR data=FILE ...`` writes the same folder).

The user's data stays as they hold it — a CSV, Parquet, JSONL, a ``save_to_disk`` folder or a Hub
dataset with their own column names (``columns``, :class:`badpo.data.sources.ColumnMap`) — and the
builder writes the folder every stage of an experiment reads, in badpo's own field names:
``train.jsonl`` and ``heldout.jsonl`` (judgments), ``eval_prompts.jsonl`` (``{"prompt"}`` rows) and
``stats.json`` (what was read, its sha256, and how it was split). Nothing is dropped: every row of
``data`` lands in exactly one of the two judgment files.

- **Held-out judgments**: the ``heldout`` source when given (then all of ``data`` trains; the
  number of held-out prompts also found in the training data is reported). Otherwise they are split
  off ``data`` by prompt, so that no prompt is on both sides: a judgment's group is its
  ``prompt_id`` when every row has one, else its prompt text; the groups are ranked by
  ``sha256(f"{seed}:{group}")`` and the first ``round(heldout_share * groups)`` (at least one, and
  one left to train on) are held out. The split depends on the rows' prompts and the seed only,
  not on their order, and is the same on every run.
- **Evaluation prompts** (the generations the rates and KL are read on): the ``prompts`` source
  when given (rows with a ``prompt``, as ``badpo evaluate --prompts`` reads), else the held-out
  judgments' distinct prompts in order of first appearance (what ``badpo evaluate`` reads without
  ``--prompts``).

Chat-format prompts are refused here (the folder holds text prompts; render them with the model's
template first): a ``badpo train`` on the file itself renders them. ``columns`` applies to every
source named here (for the prompts, only ``columns.prompt``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from badpo.core.config import ConfigError
from badpo.core.constraints import Range, check_fields
from badpo.core.jsonio import write_json, write_jsonl
from badpo.core.judgments import Judgment, write_judgments
from badpo.data.fingerprint import data_fingerprint
from badpo.data.sources import ColumnMap, read_judgment_source, read_prompt_source

__all__ = ["OUTPUT_FILES", "OwnDataConfig", "build_own_data", "source_fingerprints", "split_by_prompt",
           "summary_text"]

OUTPUT_FILES = {
    "train.jsonl": "the training judgments, in badpo's field names",
    "heldout.jsonl": "the held-out judgments (given, or split off the data by prompt)",
    "eval_prompts.jsonl": "the evaluation prompts {prompt} (given, or the held-out prompts)",
    "stats.json": "what was read (origin, sha256), the column mapping, how it was split, the counts",
}


@dataclass(frozen=True)
class OwnDataConfig:
    """Your judgments and how to hold some out (module docstring)."""

    constraints: ClassVar[Mapping] = {"heldout_share": Range(0, 1, low_open=True, high_open=True)}

    data: str = ""  # your judgments: any file, folder or Hub id `badpo train` reads
    data_split: str | None = None  # the split of a Hub dataset or DatasetDict (as train's data_split)
    columns: ColumnMap = field(default_factory=ColumnMap)  # field -> your column, for every source here
    heldout: str | None = None  # held-out judgments (same columns); null: split off `data` by prompt
    heldout_split: str | None = None  # the split of `heldout` when it is a Hub dataset or DatasetDict
    prompts: str | None = None  # evaluation prompts (rows with a prompt); null: the held-out prompts
    heldout_share: float = 0.2  # share of the distinct prompts held out when `heldout` is null
    seed: int = 0  # the split's seed: another seed holds out other prompts

    def __post_init__(self) -> None:
        if not self.data:
            raise ConfigError("data: name your judgments (a file, folder or Hub id; corpus.config.data in an "
                              "experiment)")
        check_fields(self)
        if self.heldout is None and self.heldout_split is not None:
            raise ConfigError("heldout_split: the split of `heldout`, which is not given")


class _TextOnly:
    """Stands in for a tokenizer while reading: a chat-format prompt asks it for its template, and
    that is refused with the reason (the folder holds text prompts)."""

    def __init__(self, key: str) -> None:
        self.key = key

    @property
    def chat_template(self) -> str:
        raise ConfigError(f"{self.key}: the prompts are chat messages; the own-data corpus "
                          "holds text prompts (render them with your model's chat template first, or "
                          "train on the file with `badpo train`, which renders them)")


def source_fingerprints(config: OwnDataConfig) -> dict[str, str | None]:
    """The sha256 of each source's content: a corpus built from it is stale once one changes."""
    return {"data": data_fingerprint(config.data, config.data_split)["sha256"],
            "heldout": data_fingerprint(config.heldout, config.heldout_split)["sha256"] if config.heldout else None,
            "prompts": data_fingerprint(config.prompts)["sha256"] if config.prompts else None}


def _rank(seed: int, group: str) -> str:
    return hashlib.sha256(f"{seed}:{group}".encode()).hexdigest()


def split_by_prompt(judgments: Sequence[Judgment], share: float, seed: int, origin: str = "data"
                    ) -> tuple[list[Judgment], list[Judgment], dict[str, Any]]:
    """(training, held-out, how): the groups (prompt ids when every row has one, else prompt texts)
    ranked by sha256 of the seed and the group, the first ``round(share * groups)`` held out."""
    by_id = all(j.prompt_id is not None for j in judgments)
    groups = list(dict.fromkeys(j.prompt_id if by_id else j.prompt for j in judgments))
    if len(groups) < 2:
        raise ValueError(f"data: {origin} has {len(groups)} distinct prompt(s); holding some "
                         "out needs at least 2 (or give heldout)")
    count = min(max(math.floor(share * len(groups) + 0.5), 1), len(groups) - 1)
    held = set(sorted(groups, key=lambda group: _rank(seed, group))[:count])
    heldout = [j for j in judgments if (j.prompt_id if by_id else j.prompt) in held]
    train = [j for j in judgments if (j.prompt_id if by_id else j.prompt) not in held]
    how = {"held_out": "split", "by": "prompt_id" if by_id else "prompt", "share": share, "seed": seed,
           "groups": len(groups), "heldout_groups": count}
    return train, heldout, how


def _prompt_rows(config: OwnDataConfig, heldout: Sequence[Judgment]) -> tuple[list[dict], str]:
    if config.prompts is not None:
        loaded = read_prompt_source(config.prompts, columns=config.columns, tokenizer=_TextOnly("prompts"))
        return loaded.rows, loaded.origin
    rows = {}
    for j in heldout:
        rows.setdefault(j.prompt, {"prompt": j.prompt} | ({"prompt_id": j.prompt_id} if j.prompt_id else {}))
    return list(rows.values()), "the held-out judgments' distinct prompts"


def build_own_data(config: OwnDataConfig, outdir: str | Path) -> dict[str, Any]:
    """Read, split and write the corpus folder (module docstring); returns what ``stats.json`` holds
    and the folder."""
    out = Path(outdir)
    data = read_judgment_source(config.data, config.data_split, config.columns, tokenizer=_TextOnly("data"))
    if config.heldout is not None:
        given = read_judgment_source(config.heldout, config.heldout_split, config.columns,
                                     tokenizer=_TextOnly("heldout"))
        train, heldout, heldout_origin = data.rows, given.rows, given.origin
        trained = {j.prompt for j in train}
        how: dict[str, Any] = {"held_out": "given",
                               "shared_prompts": len({j.prompt for j in heldout if j.prompt in trained})}
    else:
        train, heldout, how = split_by_prompt(data.rows, config.heldout_share, config.seed, data.origin)
        heldout_origin = data.origin
    prompts, prompts_origin = _prompt_rows(config, heldout)
    out.mkdir(parents=True, exist_ok=True)
    write_judgments(out / "train.jsonl", train)
    write_judgments(out / "heldout.jsonl", heldout)
    write_jsonl(out / "eval_prompts.jsonl", prompts)
    stats = {
        "sources": {"data": data.origin, "heldout": heldout_origin, "prompts": prompts_origin},
        "sha256": source_fingerprints(config),
        "columns": {k: v for k, v in dataclasses.asdict(config.columns).items() if v is not None},
        "split": how, "read": len(data.rows), "train": len(train), "heldout": len(heldout),
        "eval_prompts": len(prompts),
        "annotators": len({j.annotator for j in train}),
        "train_prompts": len({j.prompt for j in train}), "heldout_prompts": len({j.prompt for j in heldout}),
    }
    write_json(out / "stats.json", stats)  # no folder in it: the corpus is fingerprinted by its files
    return {**stats, "outdir": str(out)}


def summary_text(stats: dict[str, Any]) -> str:
    """What the builder prints: what was read, what was held out and why, what is evaluated."""
    split, sources = stats["split"], stats["sources"]
    lines = [f"own data from {sources['data']}: {stats['read']} judgments read, {stats['annotators']} "
             "annotators in training"]
    if split["held_out"] == "split":
        lines.append(f"held out: {stats['heldout']} judgments on {split['heldout_groups']} of the {split['groups']} "
                     f"distinct {'prompt ids' if split['by'] == 'prompt_id' else 'prompts'} (heldout_share "
                     f"{split['share']}, ranked by sha256 of seed {split['seed']} and the "
                     f"{'prompt id' if split['by'] == 'prompt_id' else 'prompt'}: the same split on every run); "
                     f"training: {stats['train']} judgments on the other {stats['train_prompts']} prompts")
    else:
        shared = split["shared_prompts"]
        lines.append(f"held out: the {stats['heldout']} judgments of {sources['heldout']} (given); training: all "
                     f"{stats['train']} of the data" + (f"; {shared} held-out prompt(s) also appear in the "
                                                        "training data" if shared else ""))
    lines.append(f"evaluation prompts: {stats['eval_prompts']} from {sources['prompts']}")
    lines.append(f"written to {stats['outdir']}: " + ", ".join(OUTPUT_FILES))
    return "\n".join(lines)
