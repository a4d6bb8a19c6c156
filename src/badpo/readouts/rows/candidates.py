"""The candidates row: length and markdown from probabilities with the answer body fixed, when
every evaluation prompt carries its ``candidates`` (the tiny and the real-model
length-and-format worlds: :func:`badpo.readouts.model.format_readout`)."""

from __future__ import annotations

from badpo.readouts.model import format_readout
from badpo.readouts.reading import Need, Reading, Readout

__all__ = ["CANDIDATES"]

CANDIDATES_GIVEN = Need("candidates on every evaluation prompt",
                        lambda r: bool(r.rows) and all("candidates" in row for row in r.rows))


def _read_candidates(reading: Reading) -> dict:
    return {"candidates": format_readout(reading.policy, reading.tokenizer, reading.rows, reading.tokenization,
                                         reading.config.batch_size)}


CANDIDATES = Readout("candidates", ("candidates",), (CANDIDATES_GIVEN,), _read_candidates)
