"""Every key of a config dataclass with its default and its meaning, for a command's ``--help``.

One source of truth: a field's meaning is the comment written beside it in its dataclass
(``steps: int = 1000  # optimizer steps``), or on the comment lines right above it, read from the
class's source with ``ast`` (which field spans which lines) and ``tokenize`` (where the comments
are). Comments rather than ``field(metadata=...)``, because the config classes already carry
them, a reader of the source sees each meaning where its field is, and nothing is written twice;
``tests/house/test_config_help.py`` checks that every key a command takes has one. A class whose
source cannot be read (a frozen application) lists its keys and defaults without meanings.

A nested config (``model: ModelConfig``) is listed key by key under its dotted prefix
(``model.name_or_path``), and a list of configs (``arms: list[ArmSpec]``) under ``arms[].``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import shutil
import textwrap
import tokenize
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ConfigKey", "config_keys", "field_comments", "format_keys", "inherited_comments", "show_value"]

LONGEST_DEFAULT = 48  # a longer default (a list of 24 surnames) is cut, with " ..."


@dataclass(frozen=True)
class ConfigKey:
    """One line of the listing: a dotted key, its default as YAML writes it, and its meaning."""

    key: str
    default: str
    meaning: str


@functools.cache
def field_comments(cls: type) -> dict[str, str]:
    """{field: its comment} of a dataclass: the comment lines right above the field, then the
    comment at the end of its line(s), joined; {} when the source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments = {token.start[0]: token.string.lstrip("#").strip()
                for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT}
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        row = node.lineno - 1
        while row in comments and lines[row - 1].lstrip().startswith("#"):
            above.insert(0, comments[row])
            row -= 1
        trailing = [comments[r] for r in range(node.lineno, (node.end_lineno or node.lineno) + 1) if r in comments]
        found[node.target.id] = " ".join(above + trailing)
    return found


def inherited_comments(cls: type) -> dict[str, str]:
    """{field: its comment} of a dataclass and of the dataclasses it extends: a field's comment is
    the one of the last class that declares it with one (a stage's config re-declares a shared
    key to say what it means there)."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            found.update({name: text for name, text in field_comments(klass).items() if text})
    return found


def show_value(value: Any) -> str:
    """A default as a YAML config writes it: null, true, "", [0.9, 0.999], {}."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {show_value(v)}" for k, v in value.items()) + "}"
    if dataclasses.is_dataclass(value):
        return show_value(dataclasses.asdict(value))
    return str(value)


def _section(tp: Any) -> tuple[type | None, bool]:
    """(the config class a field holds, whether it holds a list of them); (None, False) for a value."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _section(options[0]) if len(options) == 1 else (None, False)
    if origin in (list, tuple) and typing.get_args(tp):
        inner = typing.get_args(tp)[0]
        return (inner, True) if dataclasses.is_dataclass(inner) else (None, False)
    return (tp, False) if dataclasses.is_dataclass(tp) else (None, False)


def _first_sentence(cls: type) -> str:
    doc = (inspect.getdoc(cls) or "").replace("``", "")
    return " ".join(doc.split("\n\n")[0].split()).split(". ")[0].rstrip(".")


def _choices(tp: Any) -> str:
    """" (one of: a, b)" for a Literal (or a list of them), from the type itself; "" otherwise."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return next((found for a in args if (found := _choices(a))), "")
    if origin in (list, tuple) and args:
        return _choices(args[0]).replace("one of", "each one of")
    if origin is typing.Literal:
        return f" (one of: {', '.join(show_value(a) for a in args)})"
    return ""


def _with_choices(meaning: str, tp: Any) -> str:
    """The meaning, with the type's choices appended unless the meaning names each of them."""
    choices = _choices(tp)
    names = choices.partition(": ")[2].rstrip(")").split(", ") if choices else []
    return meaning if all(name in meaning for name in names) else meaning + choices


def config_keys(cls: type, prefix: str = "") -> list[ConfigKey]:
    """Every key of the dataclass ``cls``, nested sections flattened (module docstring)."""
    hints = typing.get_type_hints(cls)
    comments = inherited_comments(cls)
    keys: list[ConfigKey] = []
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        key = f"{prefix}{item.name}"
        if item.default is not dataclasses.MISSING:
            default = show_value(item.default)
        elif item.default_factory is not dataclasses.MISSING:
            default = show_value(item.default_factory())
        else:
            default = "required"
        section, many = _section(hints[item.name])
        if section is None:
            keys.append(ConfigKey(key, default, _with_choices(comments.get(item.name, ""), hints[item.name])))
        elif many:
            each = _first_sentence(section)
            each = each[:1].lower() + each[1:] if each[1:2].islower() else each
            keys.append(ConfigKey(key, default, comments.get(item.name) or f"a list; each item is {each}"))
            keys += config_keys(section, f"{key}[].")
        else:
            keys.append(ConfigKey(f"{key}.*", "", comments.get(item.name) or _first_sentence(section)))
            keys += config_keys(section, f"{key}.")
    return keys


def format_keys(cls: type, title: str = "config keys", width: int | None = None,
                given: str = "-c FILE and/or KEY=VALUE") -> str:
    """The listing of :func:`config_keys`: key, default and meaning per line, the meaning wrapped
    to ``width`` (the terminal's by default); ``given``: how the command takes them."""
    width = width or min(shutil.get_terminal_size((100, 24)).columns, 120)
    cut = LONGEST_DEFAULT - 4
    keys = [k if len(k.default) <= LONGEST_DEFAULT else dataclasses.replace(k, default=k.default[:cut] + " ...")
            for k in config_keys(cls)]
    key_width = min(max(len(k.key) for k in keys), 34)
    default_width = min(max(len(k.default) for k in keys), 18)
    indent = 2 + key_width + 2 + default_width + 2
    wrap = max(width - indent, 30)
    lines = [f"{title} ({given}; key, default, meaning):"]
    for k in keys:
        head = f"  {k.key:<{key_width}}  {k.default:<{default_width}}  "
        parts = textwrap.wrap(k.meaning, wrap) or [""]
        if len(head) > indent:  # a long key or default: the meaning starts on the next line
            lines.append(head.rstrip())
            lines += [" " * indent + part for part in parts if part]
            continue
        lines.append((head + parts[0]).rstrip())
        lines += [" " * indent + part for part in parts[1:]]
    return "\n".join(lines) + "\n"
