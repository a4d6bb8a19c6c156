"""What ``badpo evaluate`` reads besides the run: the evaluation prompts and held-out judgments,
named by the user (:class:`EvalData`), or a corpus folder, or the files beside the run's training
data; read with the run's column mapping into a :class:`badpo.readouts.reading.Corpus`."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from badpo.core.config import ConfigError
from badpo.core.label_counts import decisive_votes
from badpo.data.sources import ColumnMap, read_judgment_source, read_prompt_source
from badpo.readouts import table
from badpo.readouts.reading import Corpus
from badpo.readouts.rows.heldout import HELDOUT_JUDGMENTS

__all__ = ["CORPUS_FILES", "EvalData", "NO_HELDOUT", "data_folder", "load_data", "unread_without_heldout"]

CORPUS_FILES = {"prompts": "eval_prompts.jsonl", "heldout": "heldout.jsonl", "planted": "planted.json"}
NO_HELDOUT = "no held-out judgments: give --heldout FILE (judgments the run did not train on)"


def unread_without_heldout() -> dict[str, str]:
    """What no held-out judgments leave unread, said as the command line says it: the paths each
    row that needs them records under ``skipped`` (its ``skipped_as``), with :data:`NO_HELDOUT`."""
    return {path: NO_HELDOUT for row in table.READOUTS if HELDOUT_JUDGMENTS in row.needs for path in row.skipped_as}


@dataclass(frozen=True)
class EvalData:
    """What an evaluation reads (paths or Hub ids; None: not given)."""

    prompts: str | None = None  # evaluation prompts; None: the held-out judgments' prompts
    heldout: str | None = None  # held-out judgments, any format `badpo train` reads
    corpus: str | None = None  # a folder holding CORPUS_FILES; instead of the two above
    columns: ColumnMap | None = None  # fields set here replace the run's column mapping


def data_folder(data: str) -> Path | None:
    """The folder of the run's training data, when it is a local file or folder."""
    path = Path(data).expanduser()
    return path.parent if data and path.exists() else None


def _paths(data: EvalData, default_folder: Path | None) -> dict[str, Path | str | None]:
    """The prompts, held-out and planted sources that ``data`` names (module docstring)."""
    if data.corpus is not None and (data.prompts is not None or data.heldout is not None):
        raise ConfigError("--corpus DIR stands for --prompts DIR/eval_prompts.jsonl --heldout "
                          "DIR/heldout.jsonl; give the folder or the files, not both")
    if data.prompts is not None or data.heldout is not None:
        return {"prompts": data.prompts, "heldout": data.heldout, "planted": None}
    folder = Path(data.corpus) if data.corpus is not None else default_folder
    if data.corpus is not None and not folder.is_dir():
        raise FileNotFoundError(f"--corpus: no folder at {str(folder)!r}")
    found = {key: folder / name if folder is not None and (folder / name).exists() else None
             for key, name in CORPUS_FILES.items()}
    if found["prompts"] is None and found["heldout"] is None:
        which = "--corpus" if data.corpus is not None else "the folder of the run's training data"
        where = (f"; {which} {str(folder)!r} holds neither {CORPUS_FILES['prompts']} nor "
                 f"{CORPUS_FILES['heldout']}" if folder is not None else "")
        raise ValueError(f"no evaluation data: give --heldout FILE (judgments the run did not train on) "
                         f"and/or --prompts FILE (rows with a 'prompt'){where}")
    return found


def load_data(data: EvalData, default_folder: Path | None, columns: ColumnMap, tokenizer
              ) -> tuple[Corpus, dict, dict, bool]:
    """(the evaluation data as a Corpus, what was read, {readout: why it is skipped}, whether its
    prompts were chat messages, rendered with the tokenizer's template). The run's column mapping
    ``columns`` applies to the user's files (those named, or those beside the training data); a
    ``--corpus`` folder holds badpo's own field names, as ``badpo build`` writes."""
    paths = _paths(data, default_folder)
    if data.corpus is not None:
        columns = ColumnMap()
    if data.columns is not None:
        columns = dataclasses.replace(columns, **{k: v for k, v in dataclasses.asdict(data.columns).items()
                                                  if v is not None})
    heldout = prompts = None
    if paths["heldout"] is not None:
        heldout = read_judgment_source(str(paths["heldout"]), columns=columns, tokenizer=tokenizer)
        heldout = dataclasses.replace(heldout, rows=decisive_votes(heldout.rows, "the held-out readouts",
                                                                   heldout.origin))  # a tie has no chosen side
    if paths["prompts"] is not None:
        prompts = read_prompt_source(str(paths["prompts"]), columns=columns, tokenizer=tokenizer)
    read = [loaded for loaded in (heldout, prompts) if loaded is not None]
    rendered = any(loaded.rendered_prompts for loaded in read)
    if rendered and not all(loaded.rendered_prompts for loaded in read):
        chat, text = sorted(read, key=lambda loaded: not loaded.rendered_prompts)
        raise ValueError(f"{chat.origin} gives its prompts as chat messages and {text.origin} as text; "
                         "give both in one form, so that every prompt is encoded alike")
    judgments = heldout.rows if heldout is not None else []
    rows = prompts.rows if prompts is not None else [{"prompt": p} for p in dict.fromkeys(j.prompt for j in judgments)]
    planted = json.loads(Path(paths["planted"]).read_text(encoding="utf-8")) if paths["planted"] else None
    inputs = {"prompts": prompts.origin if prompts is not None else "the held-out judgments' distinct prompts",
              "heldout": heldout.origin if heldout is not None else None, "n_heldout": len(judgments),
              "planted": str(paths["planted"]) if planted is not None else None, "chat_prompts": rendered}
    skipped = unread_without_heldout() if heldout is None else {}
    return Corpus(rows, judgments, planted), inputs, skipped, rendered
