"""The theta file: a bias channel written as readable JSON and read back exactly.

The file holds two views of one channel: the readable theta_k / theta_bar / deviations per
attribute name (what a person or a readout looks at) and the raw trainable parameters (what is
loaded). Reading checks that the two agree, so a hand edit of the readable part is an error
instead of being silently ignored. Floats are written as the shortest decimal that converts back
to the same value in the channel's dtype, so the round trip is exact and the file stays short.

The channel itself is :class:`badpo.core.bias.BiasChannel`, whose ``to_dict`` / ``from_dict`` /
``save`` / ``load`` call these functions. This module does not import it (the channel imports
this one), so a channel and its class are passed in.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from badpo.core.jsonio import dumps

__all__ = ["FILE_FORMAT", "channel_to_dict", "channel_from_dict", "channel_file_text"]

FILE_FORMAT = "badpo.core.bias/1"


def channel_to_dict(channel: nn.Module) -> dict[str, Any]:
    """A JSON-ready description of a BiasChannel: the readable theta_k / theta_bar / deviations
    and the raw parameters."""
    theta, deviations = channel.theta(), channel.deviations()
    classes = channel.annotator_classes or {}
    names = channel.attribute_names
    return {
        "format": FILE_FORMAT,
        "variant": channel.variant,
        "attribute_names": list(names),
        "declared": list(channel.declared),
        "dtype": str(channel.fixed_offset.dtype).removeprefix("torch."),
        "fixed_offset": _named(names, channel.fixed_offset),
        "theta_bar": _named(names, channel.mean()),
        "annotators": {
            a: {"class": classes.get(a), "theta": _named(names, theta[i]),
                "deviation": _named(names, deviations[i])}
            for i, a in enumerate(channel.annotators)
        },
        "parameters": _raw_parameters(channel),
    } | ({"trusted": {a: dict(zip(names, v)) for a, v in channel.trusted.items()}}
         if channel.trusted else {})


def channel_from_dict(channel_class: type[nn.Module], data: Mapping[str, Any]) -> nn.Module:
    """Rebuild a channel of ``channel_class`` from :func:`channel_to_dict`; forward() is
    reproduced exactly.

    The raw ``parameters`` are loaded; the readable ``theta``/``theta_bar``/``deviation`` must
    agree with them, so a hand edit of the readable part is an error instead of being ignored.
    """
    if data.get("format") != FILE_FORMAT:
        raise ValueError(f"format: expected {FILE_FORMAT!r}, got {data.get('format')!r}")
    missing = [k for k in ("variant", "attribute_names", "declared", "dtype", "fixed_offset",
                           "theta_bar", "annotators", "parameters") if k not in data]
    if missing:
        raise ValueError(f"bias file is missing the keys {missing}")
    names = list(data["attribute_names"])
    annotators = data["annotators"]
    classes = {a: entry["class"] for a, entry in annotators.items() if entry.get("class") is not None}
    trusted = {a: _entry(v, names, f"trusted.{a}") for a, v in data.get("trusted", {}).items()}
    channel = channel_class(data["variant"], names, list(annotators), classes or None, data["declared"],
                            trusted=trusted or None)
    dtype = getattr(torch, str(data["dtype"]), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype: {data['dtype']!r} is not a torch floating dtype")
    channel.to(dtype)
    with torch.no_grad():  # set after the cast so that a float64 offset keeps every digit
        offset = _entry(data["fixed_offset"], names, "fixed_offset")
        channel.fixed_offset.copy_(torch.tensor(offset, dtype=dtype))
    _load_raw(channel, data["parameters"])
    _check_readable(channel, data)
    return channel


def channel_file_text(channel: nn.Module) -> str:
    """The file's text: :func:`channel_to_dict` as indented JSON, one line per small entry."""
    return _dumps(channel_to_dict(channel)) + "\n"


# ------------------------------------------------------------------------------ raw parameters
def _raw_parameters(channel: nn.Module) -> dict[str, Any]:
    """The trainable parameters, declared coordinates only, keyed by attribute/annotator/class."""
    raw: dict[str, Any] = {}
    for name in channel.facts.parameters:
        value = getattr(channel, name)
        if value.dim() == 1:
            raw[name] = _named(channel.declared, value)
        else:
            raw[name] = {k: _named(channel.declared, r) for k, r in zip(_row_keys(channel, name), value)}
    return raw


def _row_keys(channel: nn.Module, parameter: str) -> tuple[str, ...]:
    """What the rows of a [rows, d] parameter stand for: classes or annotators."""
    return channel.classes if parameter == "class_offset" else channel.annotators


def _load_raw(channel: nn.Module, raw: Mapping[str, Any]) -> None:
    declared = list(channel.declared)
    expected = set(_raw_parameters(channel))
    if set(raw) != expected:
        raise ValueError(f"parameters: expected the keys {sorted(expected)}, got {sorted(raw)}")
    with torch.no_grad():
        for name, value in raw.items():
            target = getattr(channel, name)
            if target.dim() == 1:
                values = _entry(value, declared, f"parameters.{name}")
                target.copy_(torch.tensor(values, dtype=target.dtype))
                continue
            keys = _row_keys(channel, name)
            if set(value) != set(keys):
                raise ValueError(
                    f"parameters.{name}: expected entries for {list(keys)}, got {list(value)}"
                )
            rows = [_entry(value[k], declared, f"parameters.{name}.{k}") for k in keys]
            target.copy_(torch.tensor(rows, dtype=target.dtype).reshape(target.shape))


@torch.no_grad()
def _check_readable(channel: nn.Module, data: Mapping[str, Any]) -> None:
    """The readable values must be what the raw parameters give (theta exactly; means to rounding)."""
    names = list(channel.attribute_names)
    theta, mean, deviations = channel.theta(), channel.mean(), channel.deviations()

    def stored(values: Any, where: str) -> Tensor:
        return torch.tensor(_entry(values, names, where), dtype=theta.dtype)

    # The mean is a reduction whose rounding may differ across devices: compare to a few ulps.
    scale = 1.0 + float(torch.cat([theta.flatten(), mean]).abs().max())
    tolerance = 16 * torch.finfo(theta.dtype).eps * scale
    if not torch.allclose(stored(data["theta_bar"], "theta_bar"), mean, rtol=0.0, atol=tolerance):
        raise ValueError("theta_bar does not match the parameters; edit the 'parameters' section")
    for i, annotator in enumerate(channel.annotators):
        entry = data["annotators"][annotator]
        where = f"annotators.{annotator}"
        if not isinstance(entry, Mapping) or not {"theta", "deviation"} <= set(entry):
            raise ValueError(f"{where}: expected an object with 'theta' and 'deviation'")
        if not torch.equal(stored(entry["theta"], f"{where}.theta"), theta[i]):
            raise ValueError(
                f"{where}.theta does not match the parameters; edit the 'parameters' section"
            )
        if not torch.allclose(stored(entry["deviation"], f"{where}.deviation"), deviations[i],
                              rtol=0.0, atol=tolerance):
            raise ValueError(f"{where}.deviation does not match the parameters")


# ------------------------------------------------------------------------------------ numbers
def _named(names: Sequence[str], vector: Tensor) -> dict[str, float]:
    return dict(zip(names, _shortest_floats(vector)))


def _shortest_floats(vector: Tensor) -> list[float]:
    """Python floats that print short yet convert back to the same value in the tensor's dtype.

    A float32 0.1 is written 0.1, not 0.10000000149011612: numpy's float32 repr is the shortest
    decimal that round-trips in float32 (and likewise for float16); float64 is exact already.
    """
    values = vector.detach().cpu()
    numpy_type = {torch.float32: np.float32, torch.float16: np.float16}.get(values.dtype)
    if numpy_type is None:
        return values.tolist()
    return [float(str(numpy_type(v))) for v in values.tolist()]


def _dumps(value: Any, depth: int = 0) -> str:
    """JSON with one line per small entry (an annotator, a class), nested otherwise; a non-finite
    value (a diverged theta) is written as null and read back as NaN."""
    line = dumps(value)
    if len(line) <= 120 or not isinstance(value, dict):
        return line
    pad = "  " * (depth + 1)
    items = [f"{pad}{json.dumps(key)}: {_dumps(item, depth + 1)}" for key, item in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"


def _entry(values: Any, names: Sequence[str], where: str) -> list[float]:
    """Values of a {attribute name: float} mapping in ``names`` order; extra or missing keys are errors."""
    if not isinstance(values, Mapping) or set(values) != set(names):
        raise ValueError(f"{where}: expected the attributes {list(names)}, got {list(values)}")
    return [math.nan if values[name] is None else float(values[name]) for name in names]
