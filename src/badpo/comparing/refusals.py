"""What ``badpo compare`` refuses before it computes a verdict.

A verdict says how much of one run's shift another run removed; it means that only when the runs
differ in their method alone. So compare refuses, each in one line naming the runs and the key:

* the same run twice, under any spelling (``runs/dpo`` and ``runs/dpo/readouts.json``, a symlink,
  ``--baseline`` or ``--reference`` naming a run already given): it would be compared with itself
  (not even with ``--force``);
* two runs, or a run and the ``--reference`` run, with identical readouts, every per-prompt value
  included: a run folder copied elsewhere, or one policy evaluated twice, which the path cannot
  show (or, with a readouts file holding little, two policies it cannot tell apart);
* runs evaluated on other prompts or with other readout settings (``inputs`` of their
  ``readouts.json``: the prompts' digest and number, ``max_new_tokens``, chat prompts, and the
  settings evaluate records under ``inputs.settings``), the ``--reference`` run included;
* runs trained on other data: the data fingerprints their folders record (``data_fingerprint.json``,
  written by the training stage; a ``--reference`` run may be trained on other data, such as clean
  labels, and is not checked).

``--force`` compares them anyway, all but the first kind (one run given twice), and the comparison
then says so at its top.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from badpo.comparing.comparison import RunRecord
from badpo.run_folder.layout import DATA_FILE  # read by badpo.run_folder.saved.SavedRun.data

__all__ = ["DATA_FILE", "INPUTS_COMPARED", "refuse_same_run", "reasons_not_comparable"]

# inputs of readouts.json that two evaluations must share: key -> what it is, in a message
INPUTS_COMPARED = {"prompts_sha256": "prompts", "n_prompts": "number of prompts",
                   "max_new_tokens": "max_new_tokens", "chat_prompts": "prompt form (chat or text)"}


def refuse_same_run(records: Sequence[RunRecord]) -> None:
    """One readouts file read twice (resolved: symlinks and ``RUN`` vs ``RUN/readouts.json``)."""
    seen: dict[Path, RunRecord] = {}
    for record in records:
        source = Path(record.source).expanduser().resolve()
        if source in seen:
            raise ValueError(f"{seen[source].path} and {record.path} are one run given twice (both are {source}); "
                             "name each run once")
        seen[source] = record


def _short(value) -> str:
    text = str(value)
    return f"{text[:12]}..." if len(text) > 16 else text


def _inputs_reason(first: RunRecord, other: RunRecord) -> str | None:
    a, b = first.readouts.get("inputs", {}), other.readouts.get("inputs", {})
    missing = "(not recorded)"  # a key one run records and the other does not cannot be checked alike
    for key, what in INPUTS_COMPARED.items():
        if (key in a or key in b) and a.get(key, missing) != b.get(key, missing):
            return (f"{first.path} and {other.path} were evaluated on different {what} (inputs.{key} "
                    f"{_short(a.get(key, missing))} vs {_short(b.get(key, missing))}): evaluate them alike")
    settings_a, settings_b = a.get("settings"), b.get("settings")
    if isinstance(settings_a, Mapping) and isinstance(settings_b, Mapping):
        for key in sorted(set(settings_a) | set(settings_b)):
            if settings_a.get(key, missing) != settings_b.get(key, missing):
                return (f"{first.path} and {other.path} were evaluated with different readout settings "
                        f"(inputs.settings.{key} {settings_a.get(key, missing)!r} vs "
                        f"{settings_b.get(key, missing)!r}): evaluate them alike")
    return None


def _data_reason(first: RunRecord, other: RunRecord) -> str | None:
    a, b = first.data, other.data
    if a is None or b is None or (a.get("sha256") is not None and a.get("sha256") == b.get("sha256")):
        return None
    return (f"{first.path} and {other.path} were trained on different data ({DATA_FILE}: "
            f"{_short(a.get('sha256'))} of {a.get('data')!r} vs {_short(b.get('sha256'))} of {b.get('data')!r})")


def reasons_not_comparable(runs: Sequence[RunRecord], reference: RunRecord | None) -> list[str]:
    """Why these runs are not comparable (empty when they are): identical readouts between any two
    of them, then each run's inputs and data against the first run's."""
    reasons = []
    first, others = runs[0], [*runs[1:], *([reference] if reference is not None else [])]
    for other in others:
        reason = _inputs_reason(first, other)
        if reason is not None:
            reasons.append(reason)
    for other in runs[1:]:
        reason = _data_reason(first, other)
        if reason is not None:
            reasons.append(reason)
    return _same_readouts(runs, reference) + reasons


def _same_readouts(runs: Sequence[RunRecord], reference: RunRecord | None) -> list[str]:
    """Two of the runs (or a run and ``--reference``) whose readouts are identical, every per-prompt
    value included: a copy of one run folder (which the path check cannot see), or one policy
    evaluated twice. Compared, the one would "remove" nothing of the other with a perfect interval."""
    everyone = [*runs, *([reference] if reference is not None else [])]
    for i, first in enumerate(everyone):
        for other in everyone[i + 1:]:
            if first.readouts == other.readouts:
                return [f"{first.path} and {other.path} hold identical readouts (a copy of one run, one policy "
                        "evaluated twice, or readouts too coarse to tell two policies apart): name each run once"]
    return []
