"""A state_dict as a JSON tree plus named tensors, so that state is saved without pickle.

A pickle runs code when it is loaded, so a checkpoint stored that way is a program. Here a nested
state (dicts, lists, tuples, None, bools, ints, floats, strings and tensors: what optimizers,
schedulers, modules and RNGs return from ``state_dict`` / ``getstate``) is split into a tree that
``json`` writes and a ``{name: tensor}`` dict that safetensors writes; reading them back runs no
code. What JSON cannot say by itself is tagged with an object of one ``$`` key:

* ``{"$tensor": name}``: a tensor (each a contiguous CPU copy, so no two share storage);
* ``{"$tuple": [...]}``: a tuple (``random.setstate`` and optimizer betas want tuples back);
* ``{"$dict": [[key, value], ...]}``: a dict whose keys are not all strings, or that has a key
  starting with ``$`` (an optimizer's ``state`` is keyed by int, which JSON would turn into strings);
* ``{"$float": "nan" | "inf" | "-inf"}``: a non-finite float (the JSON stays strictly valid).

Every other dict is a JSON object and every list a JSON array. Core module: torch only.
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch
from torch import Tensor

TENSOR, TUPLE, DICT, FLOAT = "$tensor", "$tuple", "$dict", "$float"
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def split_state(state: Any, prefix: str = "") -> tuple[Any, dict[str, Tensor]]:
    """``(tree, tensors)``: ``state`` as a JSON-ready tree whose tensors are ``{"$tensor": name}``
    references into ``tensors`` (names are the tensors' paths, after ``prefix``)."""
    tensors: dict[str, Tensor] = {}
    return _split(state, prefix, tensors), tensors


def _split(value: Any, path: str, tensors: dict[str, Tensor]) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {FLOAT: repr(value)}
    if isinstance(value, Tensor):
        name = path or "tensor"
        while name in tensors:  # keys 0 and "0" would share a path
            name += "'"
        tensors[name] = value.detach().to("cpu", memory_format=torch.contiguous_format, copy=True)
        return {TENSOR: name}
    if isinstance(value, tuple):
        return {TUPLE: [_split(v, _child(path, i), tensors) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_split(v, _child(path, i), tensors) for i, v in enumerate(value)]
    if isinstance(value, dict):
        plain = all(isinstance(k, str) and not k.startswith("$") for k in value)
        items = {k: _split(v, _child(path, k), tensors) for k, v in value.items()}
        if plain:
            return items
        for key in value:
            if key is not None and not isinstance(key, (bool, int, float, str)):
                raise TypeError(f"state {path or '/'}: a dict key of type {type(key).__name__}")
        return {DICT: [[_split(k, path, {}), v] for k, v in items.items()]}
    raise TypeError(f"state {path or '/'}: cannot save a {type(value).__name__} without pickle")


def _child(path: str, key: Any) -> str:
    return f"{path}/{key}" if path else str(key)


def join_state(tree: Any, tensors: dict[str, Tensor]) -> Any:
    """The state :func:`split_state` split into ``tree`` and ``tensors``; every tensor must be
    referred to exactly by name, and an unknown tag is an error (the tree is data, never code)."""
    used: set[str] = set()
    state = _join(tree, tensors, used, "")
    unused = sorted(set(tensors) - used)
    if unused:
        raise ValueError(f"state: tensors no entry refers to: {unused[:5]}")
    return state


def _join(node: Any, tensors: dict[str, Tensor], used: set[str], path: str) -> Any:
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_join(v, tensors, used, _child(path, i)) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        raise ValueError(f"state {path or '/'}: unexpected {type(node).__name__}")
    tags = [key for key in node if key.startswith("$")]
    if not tags:
        return {k: _join(v, tensors, used, _child(path, k)) for k, v in node.items()}
    if len(node) != 1 or tags[0] not in (TENSOR, TUPLE, DICT, FLOAT):
        raise ValueError(f"state {path or '/'}: unknown tag {sorted(node)}")
    tag, value = tags[0], node[tags[0]]
    if tag == TENSOR:
        if not isinstance(value, str) or value not in tensors:
            raise ValueError(f"state {path or '/'}: no tensor named {value!r}")
        used.add(value)
        return tensors[value]
    if tag == FLOAT:
        if value not in _NON_FINITE:
            raise ValueError(f"state {path or '/'}: {value!r} is not a non-finite float")
        return _NON_FINITE[value]
    if not isinstance(value, list):
        raise ValueError(f"state {path or '/'}: {tag} holds a {type(value).__name__}, not a list")
    if tag == TUPLE:
        return tuple(_join(v, tensors, used, _child(path, i)) for i, v in enumerate(value))
    if not all(isinstance(pair, list) and len(pair) == 2 for pair in value):
        raise ValueError(f"state {path or '/'}: {DICT} entries must be [key, value] pairs")
    state = {}
    for key, item in value:
        key = _join(key, {}, set(), path)
        if isinstance(key, (list, tuple, dict)):
            raise ValueError(f"state {path or '/'}: a {type(key).__name__} cannot be a dict key")
        state[key] = _join(item, tensors, used, _child(path, key))
    return state


def tree_text(tree: Any) -> str:
    """The JSON text of a tree from :func:`split_state` (strict JSON: no NaN, no Infinity)."""
    return json.dumps(tree, allow_nan=False, indent=1) + "\n"


def read_tree(text: str) -> Any:
    """A tree from :func:`tree_text`; NaN and Infinity literals are refused as not JSON."""

    def refuse(literal: str) -> Any:
        raise ValueError(f"state: {literal} is not JSON")

    return json.loads(text, parse_constant=refuse)


__all__ = ["split_state", "join_state", "tree_text", "read_tree"]
