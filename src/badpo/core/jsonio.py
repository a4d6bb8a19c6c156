"""JSON text the project writes: strictly valid, so a readout that is undefined is ``null``.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which no other JSON reader accepts.
A readout that is undefined (a rate over zero cases, a log-odds over a one-sided count) is a
missing value, so every non-finite float becomes ``null`` here; torch / numpy scalars become
plain numbers. Core module: standard library only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def json_ready(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None, tuples by lists, and 0-d tensors /
    numpy scalars (anything with ``.item()``) by Python numbers."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return json_ready(value.item())
    if hasattr(value, "tolist"):
        return json_ready(value.tolist())
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`json_ready` (``value``), refusing NaN / inf if any slipped through."""
    return json.dumps(json_ready(value), allow_nan=False, **kwargs)
