"""The checker's accuracy of sampled answers: whether the policy still answers its questions.

An evaluation prompt of a world whose questions have a checker (:mod:`badpo.corpora.tasks`; the
real-model length-and-format world writes them) carries the question's ``kind`` and its
``expected`` answer. A method that "removes" a length or markdown bias by breaking the answers
reads well on the bias alone; this readout shows it: the share of the policy's sampled answers that
:func:`badpo.corpora.tasks.check` accepts, overall and per kind. Prompts without both fields give
no readout (every other world).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from badpo.corpora.tasks import KINDS, Task, check

__all__ = ["checked_accuracy", "checked_readout"]


def checked_accuracy(rows: Sequence[Mapping], texts: Sequence[str]) -> dict:
    """{"n", "accuracy", "by_kind": {kind: accuracy}} of ``texts[i]`` answering ``rows[i]``
    (``prompt``, ``kind``, ``expected``), kinds in sorted order. Example: "2 + 3 = 5" to "What is
    2 + 3?" (add, 5) is right, "It is 6." to the same is wrong, "nedrag" to "Spell the word
    "garden" backwards." (reverse, nedrag) is right: n 3, accuracy 2/3, by_kind add 1/2, reverse 1."""
    if len(rows) != len(texts) or not rows:
        raise ValueError(f"checked_accuracy: need one sampled answer per prompt and at least one, got "
                         f"{len(texts)} answers to {len(rows)} prompts")
    by_kind: dict[str, list[bool]] = {}
    for row, text in zip(rows, texts):
        task = Task(str(row["kind"]), str(row["prompt"]), str(row["expected"]))
        by_kind.setdefault(task.kind, []).append(check(task, text))
    every = [x for values in by_kind.values() for x in values]
    return {"n": len(every), "accuracy": float(np.mean(every)),
            "by_kind": {kind: float(np.mean(values)) for kind, values in sorted(by_kind.items())}}


def checked_readout(rows: Sequence[Mapping], texts: Sequence[str]) -> dict:
    """``{"checked": checked_accuracy(rows, texts)}`` when every row carries ``kind`` and
    ``expected``; ``{}`` when none does (the prompts have no checker). Some rows with a checker
    and some without, or a kind the checker does not know, is an error naming the first such row:
    an accuracy over a part of the prompts would read as one over all of them."""
    carrying = ["kind" in row and "expected" in row for row in rows]
    if not any(carrying):
        return {}
    if not all(carrying):
        raise ValueError(f"eval prompts: row {carrying.index(False)} has no kind and expected answer, "
                         f"where {sum(carrying)} of {len(rows)} rows have them; give them on every row or none")
    unknown = next((i for i, row in enumerate(rows) if row["kind"] not in KINDS), None)
    if unknown is not None:
        raise ValueError(f"eval prompts: row {unknown}: kind {rows[unknown]['kind']!r} has no checker; "
                         f"known: {', '.join(KINDS)}")
    return {"checked": checked_accuracy(rows, texts)}
