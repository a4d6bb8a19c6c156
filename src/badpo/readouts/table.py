"""The readout table: every readout of a policy as a row (:class:`badpo.readouts.reading.Readout`),
in the order a record holds them; :func:`read_run` reads one run by iterating it,
:func:`readout_unavailable` plans a table column by it, :func:`summary_lines` shows a record by it,
:func:`compared_readouts` gives ``badpo compare`` the readouts it puts side by side and
:func:`beside_readouts` those it shows beside them as training effects.

A row is read when all its needs are present; a need that is absent with a reason
(:class:`badpo.readouts.reading.Need` ``skip``) names the row's paths under ``skipped``. Adding a
readout is one row (a module under :mod:`badpo.readouts.rows`) put here, and its test.
"""

from __future__ import annotations

from collections.abc import Mapping

from badpo.core.attributes import resolve_attributes
from badpo.readouts.compared import Beside, Compared
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.reading import Reading, Readout
from badpo.readouts.rows.candidates import CANDIDATES
from badpo.readouts.rows.generated import ATTRIBUTE_RATES, CHECKED, KL, MARKDOWN, SAMPLED_TEXT, TOKENS
from badpo.readouts.rows.heldout import HELDOUT, THETA, TILT, TYPES
from badpo.readouts.rows.judge import JUDGE
from badpo.readouts.rows.names import AGAINST_REFERENCE, NAMES, SAMPLED

__all__ = ["READOUTS", "beside_readouts", "compared_heads", "compared_readouts", "read_run", "readout_unavailable",
           "relative_to_reference", "row_of", "summary_lines"]

READOUTS: tuple[Readout, ...] = (NAMES, CANDIDATES, HELDOUT, TILT, THETA, KL, SAMPLED, TOKENS, SAMPLED_TEXT,
                                 CHECKED, MARKDOWN, ATTRIBUTE_RATES, JUDGE, AGAINST_REFERENCE, TYPES)


def read_run(reading: Reading) -> dict:
    """Every row of :data:`READOUTS` that reads a run of the reading's kind (a policy, or a reward
    model: :meth:`badpo.readouts.reading.Readout.reader`) and whose needs are present, read in order
    into one flat, JSON-ready record (``skipped`` last, when anything was)."""
    for row in READOUTS:
        read = row.reader(reading.kind)
        if read is None:
            continue
        absent = [need for need in row.needs if not need.present(reading)]
        if absent:
            reasons = [need.skip for need in absent if need.skip is not None]
            if reasons:
                reading.skipped.update(dict.fromkeys(row.skipped_as, reasons[0]))
            continue
        reading.result.update(read(reading))
    if reading.skipped:
        reading.result["skipped"] = reading.skipped
    return reading.result


def relative_to_reference(key: str) -> bool:
    """Whether the record entry ``key`` (``kl``, ``votes/black_coded``) measures the policy against
    the reference (a row's ``relative_to_reference``): nothing to report for the reference itself."""
    head = key.partition(".")[0].partition("/")[0]
    return any(head in row.relative_to_reference for row in READOUTS)


def row_of(head: str) -> Readout | None:
    """The row that writes paths starting with ``head``."""
    return next((row for row in READOUTS if head in row.writes), None)


def readout_unavailable(config: EvalConfig, metric: str) -> str | None:
    """Why a run read under ``config`` holds no readout at ``metric`` (a dotted path such as
    ``names.whole_signature.black_coded`` or ``votes/black_coded.accuracy``), or None when it
    may: its row's needs that the settings can tell, then the declared attribute of a
    per-attribute path, then the row's own check. An experiment refuses such a table column
    when it is planned, not after training."""
    head, _, rest = metric.partition(".")
    head, _, attribute = head.partition("/")
    row = row_of(head)
    if row is None:
        return None
    attributes = resolve_attributes(config.attributes)
    for need in row.needs:
        if need.planned is not None and not need.planned(config, attributes):
            return need.missing.format(head=head)
    if head in row.per_attribute:
        name = attribute or rest.partition(".")[0]
        if name not in attributes.names:
            return f"{name!r} is not a declared attribute ({list(attributes.names)}) of evaluation.attributes"
    return row.check(config, attributes, head, rest) if row.check is not None else None


def compared_readouts() -> list[Compared]:
    """How ``badpo compare`` puts runs side by side, for every row that says (``compared``), in
    the rows' ``shown_order``."""
    shown = sorted((row for row in READOUTS if row.compared is not None), key=lambda row: row.shown_order)
    return [row.compared for row in shown]


def compared_heads() -> tuple[set[str], set[str]]:
    """What ``badpo compare`` reads of a record: the heads of the paths every row it compares or
    shows beside writes (a record holding none of them is not ``badpo evaluate``'s), and of those
    the heads of the compared rows' sources, which must be objects."""
    read = {head for row in READOUTS if row.compared is not None or row.beside is not None for head in row.writes}
    objects = {row.compared.source.partition(".")[0] for row in READOUTS if row.compared is not None}
    return read, objects


def beside_readouts() -> list[Beside]:
    """What ``badpo compare`` shows beside the rates (KL, held-out accuracy, theta_bar), for every
    row that says (``beside``), in their ``order``."""
    return sorted((row.beside for row in READOUTS if row.beside is not None), key=lambda beside: beside.order)


def summary_lines(record: Mapping) -> list[str]:
    """The readable lines of every row that has them, in the rows' ``shown_order``."""
    shown = sorted((row for row in READOUTS if row.summary is not None), key=lambda row: row.shown_order)
    return [line for row in shown for line in row.summary(record)]
