"""badpo.core.jsonio: the JSON the project writes is strict, an undefined readout is null."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from badpo.core.jsonio import dumps, json_ready


def strict_loads(text: str):
    """json.loads that refuses NaN / Infinity / -Infinity, as a reader other than Python's does."""
    def refuse(constant: str):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_become_null_at_any_depth():
    value = {"rate": math.nan, "shares": [0.5, math.inf, -math.inf], "pair": (1.0, math.nan),
             "n": 3, "ok": True, "name": "dpo", "none": None}
    assert json_ready(value) == {"rate": None, "shares": [0.5, None, None], "pair": [1.0, None],
                                 "n": 3, "ok": True, "name": "dpo", "none": None}


def test_numpy_and_torch_scalars_and_arrays_become_python_numbers():
    ready = json_ready({"i": np.int64(7), "f": np.float32(0.25), "t": torch.tensor(1.5),
                        "nan": np.float64("nan"), "array": np.array([1.0, np.nan]),
                        "tensor": torch.tensor([2, 3])})
    assert ready == {"i": 7, "f": 0.25, "t": 1.5, "nan": None, "array": [1.0, None], "tensor": [2, 3]}
    assert type(ready["i"]) is int and type(ready["f"]) is float


def test_dumps_is_strict_json_and_passes_keyword_arguments():
    text = dumps({"b": math.nan, "a": 1}, sort_keys=True)
    assert text == '{"a": 1, "b": null}'
    assert strict_loads(text) == {"a": 1, "b": None}
    with pytest.raises(ValueError, match="non-standard JSON constant NaN"):
        strict_loads(json.dumps({"b": math.nan}))  # what json.dumps alone writes


def test_what_json_cannot_hold_is_an_error_naming_its_type():
    with pytest.raises(TypeError, match="not JSON-serialisable: object"):
        dumps({"x": object()})


def test_the_atomic_writer_leaves_the_old_file_whole_when_a_write_fails(tmp_path):
    from badpo.core.jsonio import atomic_write_text, write_json

    path = tmp_path / "sub" / "record.json"
    write_json(path, {"b": 1, "a": [1.5]})
    assert path.read_text() == '{\n  "a": [\n    1.5\n  ],\n  "b": 1\n}\n'
    with pytest.raises(TypeError):
        atomic_write_text(path, None)  # fails inside the write
    assert path.read_text().startswith('{\n  "a"') and sorted(p.name for p in path.parent.iterdir()) == ["record.json"]
    with pytest.raises(ValueError):
        write_json(path, {"x": float("nan")})  # refused before anything is written
    assert '"b": 1' in path.read_text()
