"""Typed configuration: frozen dataclasses filled from YAML and ``a.b=value`` overrides.

Every key is checked against the dataclass: an unknown key, or a value of the wrong type, is a
``ConfigError`` that names the dotted key. Nothing is coerced except an int where a float is
expected (YAML writes ``1`` for ``1.0``).
"""

from __future__ import annotations

import dataclasses
import re
import reprlib
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import yaml

from badpo.core.jsonio import atomic_write_text

T = TypeVar("T")


EXPANDED_LIMIT = 100_000  # the values a YAML document may hold once its aliases are expanded


class _Expansion(yaml.YAMLError):
    """A document whose aliases expand it past :data:`EXPANDED_LIMIT` values, or refer to itself."""


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads ``5e-7`` as a string; learning rates are written that way, so accept it. A
    key given twice in one mapping is an error naming it and its lines (PyYAML keeps the last).
    Aliases are bounded (:func:`_check_expansion`): 343 bytes of them made 4.7 GB."""

    def construct_document(self, node):
        _check_expansion(node)
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *anchor": its keys may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = key in first
                except TypeError:  # an unhashable key: the base class names it
                    break
                if seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice (lines {first[key] + 1} and "
                        f"{key_node.start_mark.line + 1}); give it once", key_node.start_mark)
                first[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document that holds more than :data:`EXPANDED_LIMIT` values with every alias
    expanded (a "billion laughs": nine lines of aliases expand to 10^9 strings), or an alias
    inside the value it names; counted over the node graph, each shared node once."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # being counted: an alias to one of them is a loop
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, counted = stack.pop()
        if counted:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in _children(node))
            open_nodes.discard(id(node))
            if sizes[id(node)] > EXPANDED_LIMIT:
                line = node.start_mark.line + 1
                if sizes[id(node)] <= len(sizes):  # no node counted twice: the values are written out
                    raise _Expansion(f"it holds more than {EXPANDED_LIMIT:,} values (line {line}); a config "
                                     "holds far fewer: is it the file you meant? (data goes in data files)")
                raise _Expansion(f"its aliases expand it to more than {EXPANDED_LIMIT:,} values (line "
                                 f"{line}); a config holds far fewer: is it the file you meant?")
        elif id(node) in open_nodes:
            raise _Expansion(f"line {node.start_mark.line + 1}: an alias inside the value it names (a loop)")
        elif id(node) not in sizes:
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."),
)


def _parse_yaml(text: str, where: str) -> Any:
    """Parse YAML; a syntax error is a ConfigError naming ``where`` and the line."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except _Expansion as error:
        raise ConfigError(f"{where}: {error}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deep to read") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"{where}: YAML syntax error{at}: {problem}") from None


def read_yaml(path: str | Path) -> Any:
    """A YAML file's value, with the checks of every config read (UTF-8, keys once, aliases bounded)."""
    return _parse_yaml(read_text(path), str(path))


def read_text(path: str | Path) -> str:
    """A UTF-8 file's text; invalid bytes are an error naming the file, line and byte."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(f"{path} line {line}: not UTF-8 text (byte {data[error.start]:#04x} "
                          f"at offset {error.start})") from None


class ConfigError(ValueError):
    """A configuration key is unknown, missing or of the wrong type."""


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 80
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 8
_SHOWN.maxlevel = 3


def _key(key: Any) -> str:
    """A key as an error line names it: a string as it is, cut short past 80 characters."""
    return (key if len(key) <= 80 else key[:77] + "...") if isinstance(key, str) else shown(key)


def shown(value: Any) -> str:
    """``repr(value)`` cut short (long strings, long or deep lists and mappings end in ``...``), so
    that an error line quotes a bad value without printing all of it (at most 160 characters)."""
    text = _SHOWN.repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def _describe(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(tp: Any, value: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp`` and build nested dataclasses."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:  # `X | None`: X's own message says what is wrong (a number, not 'inf')
            return _convert(options[0], value, key)
        for option in options:
            try:
                return _convert(option, value, key)
            except ConfigError:
                continue
        raise ConfigError(f"{key}: {shown(value)} matches none of {_describe(tp)}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{key}: {shown(value)} is not one of {list(args)}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping for {tp.__name__}, got {shown(value)}")
        return from_dict(tp, value, prefix=key)
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {shown(value)}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ConfigError(f"{key}: expected {len(args)} items, got {len(value)}")
            items = [_convert(a, v, f"{key}[{i}]") for i, (a, v) in enumerate(zip(args, value))]
        else:
            item_tp = args[0] if args else Any
            items = [_convert(item_tp, v, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple or tp is tuple else items
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping, got {shown(value)}")
        key_tp, val_tp = args if args else (str, Any)
        return {_convert(key_tp, k, key): _convert(val_tp, v, f"{key}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {shown(value)}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {shown(value)}")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise ConfigError(f"{key}: expected {tp.__name__}, got {shown(value)}")
        return value
    raise ConfigError(f"{key}: unsupported field type {_describe(tp)}")


def _section_class(tp: Any) -> type | None:
    """The dataclass a field holds (``X`` or ``X | None``), else None."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = options[0] if len(options) == 1 else None
    return tp if dataclasses.is_dataclass(tp) else None


def _unknown_by_section(cls: type, data: Mapping[str, Any], prefix: str) -> list[tuple[str, list, list]]:
    """Every section of ``data`` that holds keys ``cls`` does not know (renamed keys aside: they
    have their own message), as (section, its unknown keys, its known keys), nested sections too
    (a list of sections, like ``arms``, item by item)."""
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls) if f.init]
    renamed = getattr(cls, "RENAMED", {})
    unknown = sorted((k for k in set(data) - set(fields) if k not in renamed), key=str)
    found = [(prefix, unknown, fields)] if unknown else []
    for name in fields:
        value, tp = data.get(name), hints[name]
        sections = [(f"{prefix}.{name}" if prefix else name, value)]
        item_types = [tp]
        args = typing.get_args(tp)
        if typing.get_origin(tp) in (list, tuple, Sequence) and args and isinstance(value, (list, tuple)):
            fixed = typing.get_origin(tp) is tuple and args[-1] is not Ellipsis  # tuple[A, B]: item i is args[i]
            item_types = list(args) if fixed else [args[0]] * len(value)
            sections = [(f"{sections[0][0]}[{i}]", item) for i, item in enumerate(value)]
        for (key, item), item_tp in zip(sections, item_types):
            inner = _section_class(item_tp)
            if inner is not None and isinstance(item, Mapping):
                found += _unknown_by_section(inner, item, key)
    return found


def _refuse_unknown_in_several_sections(cls: type, data: Mapping[str, Any]) -> None:
    """A config with unknown keys in more than one section names them all in one line (each
    section stops at its first otherwise, so a user fixing one typo meets the next run after)."""
    sections = _unknown_by_section(cls, data, "")
    if len(sections) < 2:
        return
    parts = [f"{', '.join(f'{where}.{_key(k)}' if where else _key(k) for k in names)} "
             f"(known{' in ' + where if where else ''}: {', '.join(known)})" for where, names, known in sections]
    raise ConfigError(f"unknown key(s): {'; '.join(parts)}")


def from_dict(cls: type[T], data: Mapping[str, Any], prefix: str = "") -> T:
    """Build the dataclass ``cls`` from ``data``; unknown or ill-typed keys raise ConfigError
    (unknown keys in several sections all in one line)."""
    if not prefix and isinstance(data, Mapping):
        _refuse_unknown_in_several_sections(cls, data)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    renamed = getattr(cls, "RENAMED", {})  # {old key: what replaced it}, a class attribute
    for name in unknown:
        if name in renamed:
            key = f"{prefix}.{name}" if prefix else name
            raise ConfigError(f"{key}: no longer a key; {renamed[name]}")
    if unknown:
        names = ", ".join(f"{prefix}.{_key(k)}" if prefix else _key(k) for k in unknown)
        raise ConfigError(f"unknown key(s): {names} (known: {', '.join(fields)})")
    kwargs = {}
    for name, field in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], key)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{key}: required key is missing")
    return cls(**kwargs)


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``a.b=value`` overrides (value parsed as YAML) to a nested dict, in place."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        dotted, raw = item.split("=", 1)
        parts = dotted.strip().split(".")
        node = data
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {dotted!r}: {part!r} is not a section")
        node[parts[-1]] = _parse_yaml(raw, f"override {item!r}")
    return data


def read_settings(path: str | Path | None = None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The keys of a YAML file (optional) with dotted command-line overrides on top, not yet
    checked against a dataclass: for a caller that must know which keys the user set."""
    data = _read_with_bases(Path(path), ()) if path is not None else {}
    return apply_overrides(data, overrides)


def _read_with_bases(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """A YAML mapping; with a top-level ``extends: BASE.yaml`` (relative to the file), the base's
    keys with this file's merged on top (mappings merge key by key; lists and values replace), so
    that a variant of an experiment states only what differs."""
    loaded = _parse_yaml(read_text(path), str(path))
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    data = loaded or {}
    if "extends" not in data:
        return data
    base = data.pop("extends")
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: extends must be the path of a YAML file, not {shown(base)}")
    base_path = (path.parent / base).resolve()
    if base_path in seen or base_path == path.resolve():
        raise ConfigError(f"{path}: extends {base!r} makes a cycle")
    if not base_path.is_file():
        raise ConfigError(f"{path}: extends {base!r}: no such file {base_path}")
    return merge_mappings(_read_with_bases(base_path, (*seen, path.resolve())), data)


def merge_mappings(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``: mappings merge recursively, anything else in ``top`` replaces."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_mappings(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(cls: type[T], path: str | Path | None = None, overrides: Sequence[str] = ()) -> T:
    """Read ``cls`` from a YAML file (optional) with dotted command-line overrides on top."""
    return from_dict(cls, read_settings(path, overrides))


def to_dict(obj: Any) -> Any:
    """Plain (YAML/JSON-ready) form of a config: dataclasses to dicts, tuples to lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def dump_yaml(obj: Any, path: str | Path) -> None:
    """Write the resolved config, so that a run folder says exactly what produced it."""
    atomic_write_text(path, yaml.safe_dump(to_dict(obj), sort_keys=False))
