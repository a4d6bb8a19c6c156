"""PRISM's rated opening turns (``HannahRoseKirk/prism-alignment``, ``conversations``) as judgments
by real participant ids, ties kept.

**Why PRISM** (of PRISM and Community Alignment): its card names a stable participant id on every
conversation (``user_id``, matched to the survey), and each opening turn holds several responses
that one participant rated; Community Alignment's card gives its columns only through a codebook in
the paper's appendix, which the search tool could not read.

**The schema, as the card and its readers give it** (the card, read with the search tool: 1,500
participants; each conversation opens with a prompt the participant writes, answered by four
models chosen at random; the participant rates each response "on a sliding cardinal scale between
Terrible (1) and Perfect (100)" and the conversation goes on with the highest-rated one; later turns
compare an A and a B response of that one model. The field names are those of ``conversations.jsonl``
as public code that reads it names them): a row is one conversation, ``conversation_id``,
``user_id``, ``conversation_type`` (unguided, values guided, controversy guided) and
``conversation_history``, a list of turns ``{turn, role, content, model_provider, model_name, score,
if_chosen, within_turn_id}``, ``role`` ``user`` or ``model``, ``turn`` 0 for the opening.

**The judgments.** For each conversation, the response the participant chose at the opening turn
(``if_chosen``) against each other opening response: a win of the chosen one when its score is the
higher, a tie when the two scores are equal (``keep_ties``; false: left out and counted). The
scores grade the responses, not the preference, so no strength is written. annotator = ``user_id``,
prompt_id = ``conversation_id`` (each opening prompt is the participant's own), pair_type =
``conversation_type``, pair_id = ``<conversation_id>/0/<chosen within_turn_id>-<other's>``.

Left out, and counted in ``stats.json`` (``left_out_*``): the later turns (their prompt is the
conversation so far, which a corpus folder cannot hold as one text without the model's chat
template), an opening turn without exactly one chosen response, an empty prompt or response, a pair
of identical texts, and a pair whose chosen response scored below the other (the card says the
chosen one is the highest-rated; such a pair contradicts it, and is not read either way). A row that
does not fit the schema is a one-line error naming the row and the field.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from badpo.core.judgments import Judgment
from badpo.corpora.crowd_corpus import OUTPUT_FILES, summary_text, write_crowd_corpus
from badpo.data.hub import CorpusSchemaError, load_split, require_columns

__all__ = ["OUTPUT_FILES", "PrismConfig", "build_prism", "prism_judgments", "summary_text"]

REQUIRED_COLUMNS = ("conversation_id", "user_id", "conversation_type", "conversation_history")
ROLES = ("user", "model")


@dataclass(frozen=True)
class PrismConfig:
    source: str = "HannahRoseKirk/prism-alignment"  # Hub id, or a local copy of conversations.jsonl
    split: str = "train"  # the source split (PRISM has only train)
    subset: str | None = "conversations"  # Hub configuration name
    keep_ties: bool = True  # write equal scores as a tie row (false: left out and counted)
    heldout_fraction: float = 0.1  # share of distinct prompts (conversations) held out
    seed: int = 0  # data seed: the held-out prompts


def _fail(where: str, name: str, problem: str) -> CorpusSchemaError:
    return CorpusSchemaError(f"{where}, field {name!r}: {problem}")


def _id(row: Mapping[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, name, f"expected a non-empty string, got {value!r}")
    return value


def _turn(entry: Any, k: int, where: str) -> Mapping[str, Any]:
    """One entry of ``conversation_history``, its fields checked."""
    name = f"conversation_history[{k}]"
    if not isinstance(entry, Mapping):
        raise _fail(where, name, f"expected a turn mapping, got {entry!r}")
    if isinstance(entry.get("turn"), bool) or not isinstance(entry.get("turn"), int) or entry["turn"] < 0:
        raise _fail(where, f"{name}.turn", f"expected a turn number 0, 1, ..., got {entry.get('turn')!r}")
    if entry.get("role") not in ROLES:
        raise _fail(where, f"{name}.role", f"expected one of {list(ROLES)}, got {entry.get('role')!r}")
    if not isinstance(entry.get("content"), str):
        raise _fail(where, f"{name}.content", f"expected a string, got {entry.get('content')!r}")
    if entry["role"] == "model":
        score = entry.get("score")
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not 1 <= score <= 100:
            raise _fail(where, f"{name}.score", f"expected a rating from 1 to 100, got {score!r}")
        if not isinstance(entry.get("if_chosen"), bool):
            raise _fail(where, f"{name}.if_chosen", f"expected true/false, got {entry.get('if_chosen')!r}")
        if entry.get("within_turn_id") is None:
            raise _fail(where, f"{name}.within_turn_id", "missing: it tells the turn's responses apart")
    return entry


def _opening(row: Mapping[str, Any], where: str, counts: dict[str, int]) -> tuple[Any, list] | None:
    """(the user's opening entry, the opening's model entries), or None when the conversation has no
    usable opening (counted); the later turns are counted as left out."""
    history = row.get("conversation_history")
    if not isinstance(history, list):
        raise _fail(where, "conversation_history", f"expected a list of turns, got {history!r}")
    entries = [_turn(entry, k, where) for k, entry in enumerate(history)]
    counts["left_out_later_turns"] += len({e["turn"] for e in entries if e["turn"] > 0})
    users = [e for e in entries if e["turn"] == 0 and e["role"] == "user"]
    models = [e for e in entries if e["turn"] == 0 and e["role"] == "model"]
    if len(users) != 1:
        raise _fail(where, "conversation_history", f"the opening turn (turn 0) has {len(users)} user prompts, not one")
    if sum(e["if_chosen"] for e in models) != 1:
        counts["left_out_openings_without_one_choice"] += 1
        return None
    if not users[0]["content"].strip():
        counts["left_out_empty_prompts"] += 1
        return None
    return users[0], models


def prism_judgments(rows: Sequence[Mapping[str, Any]], config: PrismConfig,
                    source: str = "source") -> tuple[list[Judgment], dict[str, int]]:
    """The judgments of PRISM conversation rows and the counts of what was read and left out (pure;
    the module docstring says how)."""
    counts = {"conversations": len(rows), "left_out_later_turns": 0, "left_out_openings_without_one_choice": 0,
              "left_out_empty_prompts": 0, "left_out_empty_responses": 0, "left_out_identical_pairs": 0,
              "left_out_chosen_scored_lower": 0, "left_out_ties": 0}
    judgments = []
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise CorpusSchemaError(f"{source} row {index}: expected a row mapping, got {type(row).__name__}")
        where = f"{source} row {index} (conversation_id {row.get('conversation_id')!r})"
        conversation, user = _id(row, "conversation_id", where), _id(row, "user_id", where)
        kind = row.get("conversation_type")
        if kind is not None and not isinstance(kind, str):
            raise _fail(where, "conversation_type", f"expected a string, got {kind!r}")
        opening = _opening(row, where, counts)
        if opening is None:
            continue
        prompt, models = opening[0]["content"], opening[1]
        chosen = next(e for e in models if e["if_chosen"])
        for other in (e for e in models if not e["if_chosen"]):
            key = _pair_problem(chosen, other, config)
            if key is not None:
                counts[key] += 1
                continue
            label = {"tie": True} if other["score"] == chosen["score"] else {}
            judgments.append(Judgment(prompt, chosen["content"], other["content"], user, prompt_id=conversation,
                                      pair_id=f"{conversation}/0/{chosen['within_turn_id']}-{other['within_turn_id']}",
                                      pair_type=kind or None, **label))
    return judgments, counts


def _pair_problem(chosen: Mapping[str, Any], other: Mapping[str, Any], config: PrismConfig) -> str | None:
    """The count a (chosen, other) pair is left out under, or None when it is a judgment."""
    if not (chosen["content"].strip() and other["content"].strip()):
        return "left_out_empty_responses"
    if chosen["content"] == other["content"]:
        return "left_out_identical_pairs"
    if other["score"] > chosen["score"]:
        return "left_out_chosen_scored_lower"
    if other["score"] == chosen["score"] and not config.keep_ties:
        return "left_out_ties"
    return None


def build_prism(config: PrismConfig, outdir: str | Path) -> dict[str, Any]:
    """Read the source, write the corpus folder (:mod:`badpo.corpora.crowd_corpus`), return its stats."""
    rows = load_split(config.source, config.split, config.subset)
    require_columns(rows, REQUIRED_COLUMNS, config.source, config.split)
    judgments, counts = prism_judgments(rows, config, config.source)
    return write_crowd_corpus(judgments, counts, config, outdir, "prism")
