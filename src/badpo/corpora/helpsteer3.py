"""HelpSteer3's per-annotator preferences (``nvidia/HelpSteer3``, subset ``preference``) as judgments,
their ties and strengths kept.

**The schema, as the dataset card gives it** (read with the search tool: the card's configs name
``preference/train.jsonl.gz`` and ``preference/validation.jsonl.gz``; its "Preference" section and
the ``dataset_info`` features of copies of it list the fields): each row holds ``domain``,
``language``, ``context`` (a list of ``{role, content}`` turns, the user's last), ``response1``,
``response2``, ``overall_preference`` (an integer from -3, "Response 1 is much better than Response
2", through -1 "slightly better" and 0 "about the same", to 3, "Response 2 is much better") and
``individual_preference``, the preferences of up to three annotators, each ``{score, reasoning,
feedback1, feedback2}`` with ``score`` on the same scale.

**No annotator id.** The card gives no id of the person behind an individual preference, and the
position in the list is not one either (the first vote of two rows need not be one person's). So
``annotators`` decides, and says it: ``vote`` (the default) gives each vote an id of its own,
``<pair_id>/<position>``, which is honest and leaves every per-annotator estimate unidentified (one
vote each; the pooled level and pooled training stand); ``position`` uses ``hs3-position-<k>``, a
stable name for the k-th slot that is **not a person**: read its per-annotator figures as per-slot
figures at most.

One judgment per individual preference: response1 is A, response2 is B; a negative score is a win of
A, a positive one of B, with strength ``|score|`` (``keep_strength``; false: plain wins), 0 a tie
(``keep_ties``; false: left out and counted). ``overall_preference`` is checked, not used (it is the
annotators' aggregate). ``pair_type`` is the row's ``domain`` (general, stem, code, multilingual:
the audit reports per type); ``prompt_id`` and ``pair_id`` hash the prompt and the pair (``hs3:``
and 16 hex digits), so they do not depend on the rows' order.

Left out, and counted in ``stats.json`` (``left_out_*``): a row whose context has more than one turn
(a judgment's prompt is one text; the conversation would need the model's chat template, which a
corpus folder does not hold), a row with an empty prompt or response, a row whose two responses are
the same text. A row that does not fit the schema is a one-line error naming the row and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from badpo.core.judgments import Judgment
from badpo.corpora.crowd_corpus import OUTPUT_FILES, summary_text, write_crowd_corpus
from badpo.data.hub import CorpusSchemaError, load_split, require_columns

__all__ = ["OUTPUT_FILES", "HelpSteer3Config", "build_helpsteer3", "helpsteer3_judgments", "summary_text"]

REQUIRED_COLUMNS = ("domain", "context", "response1", "response2", "overall_preference", "individual_preference")


@dataclass(frozen=True)
class HelpSteer3Config:
    source: str = "nvidia/HelpSteer3"  # Hub id, or a local copy (preference/train.jsonl.gz, a jsonl/parquet file)
    split: str = "train"  # the source split (train or validation)
    subset: str | None = "preference"  # Hub configuration name
    annotators: Literal["vote", "position"] = "vote"  # vote: an id per vote (no person id is given); position: per slot
    keep_ties: bool = True  # write a score of 0 as a tie row (false: left out and counted)
    keep_strength: bool = True  # write |score| as the win's strength (false: plain wins)
    heldout_fraction: float = 0.1  # share of distinct prompts held out
    seed: int = 0  # data seed: the held-out prompts


def _fail(where: str, name: str, problem: str) -> CorpusSchemaError:
    return CorpusSchemaError(f"{where}, field {name!r}: {problem}")


def _score(value: Any, where: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -3 <= value <= 3:
        raise _fail(where, name, f"expected an integer from -3 to 3, got {value!r}")
    return value


def _text(row: Mapping[str, Any], name: str, where: str) -> str:
    if not isinstance(row.get(name), str):
        raise _fail(where, name, f"expected a string, got {row.get(name)!r}")
    return row[name]


def _prompt(context: Any, where: str) -> str | None:
    """The user's text of a one-turn context; None for a longer conversation."""
    if not isinstance(context, list) or not context:
        raise _fail(where, "context", f"expected a non-empty list of {{role, content}} turns, got {context!r}")
    for k, turn in enumerate(context):
        if not (isinstance(turn, Mapping) and isinstance(turn.get("role"), str)
                and isinstance(turn.get("content"), str)):
            raise _fail(where, f"context[{k}]", f"expected {{'role': str, 'content': str}}, got {turn!r}")
    if context[-1]["role"] != "user":
        raise _fail(where, f"context[{len(context) - 1}].role", f"the last turn is the {context[-1]['role']!r}'s, "
                    "not the user's")
    return context[0]["content"] if len(context) == 1 else None


def _hash(*texts: str) -> str:
    return "hs3:" + hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def _votes(row: Mapping[str, Any], where: str) -> list[int]:
    """The scores of the row's individual preferences (``overall_preference`` checked on the way)."""
    _score(row.get("overall_preference"), where, "overall_preference")
    votes = row.get("individual_preference")
    if not isinstance(votes, list):
        raise _fail(where, "individual_preference", f"expected a list of preferences, got {votes!r}")
    scores = []
    for k, vote in enumerate(votes):
        if not isinstance(vote, Mapping):
            raise _fail(where, f"individual_preference[{k}]", f"expected a {{score, reasoning}} mapping, got {vote!r}")
        scores.append(_score(vote.get("score"), where, f"individual_preference[{k}].score"))
    return scores


def helpsteer3_judgments(rows: Sequence[Mapping[str, Any]], config: HelpSteer3Config,
                         source: str = "source") -> tuple[list[Judgment], dict[str, int]]:
    """The judgments of HelpSteer3 preference rows and the counts of what was read and left out (pure;
    the module docstring says how)."""
    counts = {"rows": len(rows), "votes": 0, "left_out_multi_turn_rows": 0, "left_out_empty_rows": 0,
              "left_out_identical_rows": 0, "left_out_ties": 0}
    judgments = []
    for index, row in enumerate(rows):
        where = f"{source} row {index}"
        if not isinstance(row, Mapping):
            raise CorpusSchemaError(f"{where}: expected a row mapping, got {type(row).__name__}")
        prompt = _prompt(row.get("context"), where)
        a, b, domain = (_text(row, name, where) for name in ("response1", "response2", "domain"))
        scores = _votes(row, where)
        counts["votes"] += len(scores)
        if prompt is None:
            counts["left_out_multi_turn_rows"] += 1
        elif not (prompt.strip() and a.strip() and b.strip()):
            counts["left_out_empty_rows"] += 1
        elif a == b:
            counts["left_out_identical_rows"] += 1
        else:
            pair_id = _hash(prompt, a, b)
            for k, score in enumerate(scores):
                if score == 0 and not config.keep_ties:
                    counts["left_out_ties"] += 1
                    continue
                annotator = f"{pair_id}/{k}" if config.annotators == "vote" else f"hs3-position-{k}"
                label = ({"tie": True} if score == 0 else {"strength": abs(score)} if config.keep_strength else {})
                chosen, rejected = (b, a) if score > 0 else (a, b)
                judgments.append(Judgment(prompt, chosen, rejected, annotator, prompt_id=_hash(prompt), pair_id=pair_id,
                                          pair_type=domain or None, **label))
    return judgments, counts


def build_helpsteer3(config: HelpSteer3Config, outdir: str | Path) -> dict[str, Any]:
    """Read the source, write the corpus folder (:mod:`badpo.corpora.crowd_corpus`), return its stats."""
    if config.annotators not in ("vote", "position"):
        raise CorpusSchemaError(f"annotators: {config.annotators!r} is not 'vote' or 'position'")
    rows = load_split(config.source, config.split, config.subset)
    require_columns(rows, REQUIRED_COLUMNS, config.source, config.split)
    judgments, counts = helpsteer3_judgments(rows, config, config.source)
    return write_crowd_corpus(judgments, counts, config, outdir, "helpsteer3")
