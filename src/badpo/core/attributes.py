"""Declared attributes g: what the user says is bias rather than quality.

BA-DPO explains the labels with ``theta_k . (g(y_w) - g(y_l))``, so every method needs the
attribute vector of both sides of a judgment. An attribute is one of

- **response-level**: a function of (prompt, response), e.g. markdown present;
- **pair-level**: a function of the pair, e.g. length (the longer side is marked only when it
  has at least ``ratio`` times the words of the other, else both are 0), so it is not a
  function of one response;
- **given**: precomputed per row (``g_chosen[NAME]``/``g_rejected[NAME]`` in the data).

Spec strings (:func:`resolve_attributes`) are of the kinds in :data:`ATTRIBUTE_KINDS`: ``markdown``;
``names`` (``woman_coded`` and ``black_coded``, from the signature) or ``names.X``; ``length`` or
``length:RATIO`` (default 1.5); ``regex:PATTERN``; ``given:NAME``; a name of discover's library
(``exclamation``); ``package.module:function``, which imports that module and runs the function on
every response (resolve only specs you trust). ``NAME=SPEC`` names a one-coordinate spec everywhere
(:func:`split_name` gives the grammar). Only numpy and the standard library are imported.

:data:`STRIPPERS` says which attributes can be removed from a text alike for every arm (the
signature, the markup) for the judge's RM⁻ score; :func:`attribute_stripper` composes them.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import numbers
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from badpo.core.attribute_library import LIBRARY_SPECS
from badpo.core.constraints import FLOAT32_MAX
from badpo.core.judgments import Judgment, pair_key
from badpo.core.markdown import has_markdown, strip_markdown
from badpo.core.markdown_scan import SCANNED, ScannedPattern
from badpo.core.names import NAME_ATTRIBUTES, signature_attributes, strip_signature
from badpo.core.notices import BadpoWarning
from badpo.core.user_pattern import TimedPattern, compile_user_pattern

__all__ = [
    "ATTRIBUTE_KINDS",
    "ATTRIBUTE_NAME",
    "AttributeKind",
    "BUILTIN_SPECS",
    "AttributeNameNotice",
    "DEFAULT_LENGTH_RATIO",
    "STRIPPERS",
    "Attribute",
    "AttributeSet",
    "attribute_stripper",
    "imports_user_code",
    "kind_of",
    "length_values",
    "resolve_attributes",
    "split_name",
    "word_count",
    # documented here (docs/data-format.md) before badpo.core.markdown held them: still importable
    "has_markdown",
    "strip_markdown",
]

DEFAULT_LENGTH_RATIO = 1.5
Level = Literal["response", "pair", "given"]


# --- markdown, names, length, regex, given ----------------------------------------------------

def _markdown_value(prompt: str, response: str) -> float:
    return 1.0 if has_markdown(response) else 0.0


def _name_coordinate(index: int, prompt: str, response: str) -> float:
    """Coordinate ``index`` of the signature's (woman_coded, black_coded) vector."""
    return signature_attributes(response)[index]


@functools.lru_cache(maxsize=1 << 16)
def word_count(text: str) -> int:
    """Whitespace-separated tokens (``str.split()``), the whole response included."""
    return len(text.split())


def length_values(prompt: str, a: str, b: str, ratio: float = DEFAULT_LENGTH_RATIO
                  ) -> tuple[float, float]:
    """(1, 0) when ``a`` has at least ``ratio`` times the words of ``b``, (0, 1) the other way
    round, else (0, 0). A side with zero words is infinitely shorter than a non-empty one;
    two empty sides are (0, 0). Because ``ratio > 1``, both sides are never marked."""
    words_a, words_b = word_count(a), word_count(b)
    if words_a > 0 and (words_b == 0 or words_a / words_b >= ratio):
        return (1.0, 0.0)
    if words_b > 0 and (words_a == 0 or words_b / words_a >= ratio):
        return (0.0, 1.0)
    return (0.0, 0.0)


def _regex_value(pattern: TimedPattern | ScannedPattern, prompt: str, response: str) -> float:
    return 1.0 if pattern.search(response) else 0.0


def _without_matches(pattern: TimedPattern | ScannedPattern, response: str) -> str:
    """The response with every match of ``pattern`` deleted (a sign-off, an emoji), end trimmed."""
    return pattern.sub("", response).rstrip()


def _given_values(name: str, j: Judgment) -> tuple[float, float]:
    if j.g_chosen is None or j.g_rejected is None:
        raise ValueError(f"attribute 'given:{name}': judgment {pair_key(j)!r} "
                         f"(annotator {j.annotator!r}) has no precomputed g_chosen/g_rejected")
    if name not in j.g_chosen or name not in j.g_rejected:
        raise ValueError(f"attribute 'given:{name}': judgment {pair_key(j)!r} gives only "
                         f"{list(j.g_chosen)}")
    return (j.g_chosen[name], j.g_rejected[name])


# --- strippers: the attribute removed alike from every text (RM⁻) -----------------------------

def attribute_stripper(names: Sequence[str | Attribute]) -> Callable[[str], str] | None:
    """One transform removing every declared attribute that :data:`STRIPPERS` knows, each once,
    in that table's order (the signature, appended last, first); None when none of ``names``
    has one. Pass the :class:`Attribute` objects (``AttributeSet.attributes``) to find a renamed
    built-in (``fmt=markdown``) by its kind; a plain string is read as a built-in's name."""
    kinds = {item.kind if isinstance(item, Attribute) else item for item in names}
    strippers = list(dict.fromkeys(strip for kind, strip in STRIPPERS.items() if kind in kinds))
    if not strippers:
        return None

    def strip(text: str) -> str:
        for one in strippers:
            text = one(text)
        return text

    return strip


# --- Attribute, AttributeSet ------------------------------------------------------------------

@dataclass(frozen=True)
class Attribute:
    """One coordinate of g. ``fn`` is ``f(prompt, response) -> float`` (level ``response``),
    ``f(prompt, a, b) -> (float, float)`` (``pair``) or ``f(judgment) -> (float, float)``
    (``given``). Values must be finite reals; bools count as 0/1. ``kind`` says what the
    attribute is whatever it is called: a built-in coordinate's default name (``markdown``,
    ``woman_coded``, ``black_coded``, ``length``), else ``regex``, ``given`` or ``callable``;
    "" for one built by hand. ``remove`` (markdown, regex) is the edit a counterfactual pair is
    made with; a name coordinate's counterpart is a name swap instead (a reward model's tilt)."""

    name: str
    level: Level
    fn: Callable
    kind: str = ""
    # an edit of a response that removes the attribute and leaves the rest (the markup, the pattern's
    # matches), for counterfactual pairs; None where no edit removes it alone (length, given, callable)
    remove: Callable[[str], str] | None = None

    def values(self, prompt: str, a: str, b: str) -> tuple[float, float]:
        """(g(a), g(b)) for two responses to ``prompt``."""
        if self.level == "response":
            return (self._check(self.fn(prompt, a)), self._check(self.fn(prompt, b)))
        if self.level == "pair":
            out = self.fn(prompt, a, b)
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise ValueError(f"attribute {self.name!r}: a pair-level function must return "
                                 f"(value_a, value_b), got {out!r}")
            return (self._check(out[0]), self._check(out[1]))
        raise ValueError(f"attribute {self.name!r} is read from a judgment's precomputed values, "
                         "not from texts; use AttributeSet.judgment_values")

    def judgment_values(self, j: Judgment) -> tuple[float, float]:
        """(g(chosen), g(rejected)) of one judgment."""
        if self.level == "given":
            chosen, rejected = self.fn(j)
            return (self._check(chosen), self._check(rejected))
        return self.values(j.prompt, j.chosen, j.rejected)

    def _check(self, value: object) -> float:
        if type(value) is float and math.isfinite(value):  # the common case, checked fast
            return value
        if not isinstance(value, (bool, np.bool_, numbers.Real)):
            raise ValueError(f"attribute {self.name!r}: expected a real number, got "
                             f"{type(value).__name__} {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"attribute {self.name!r}: value {value!r} is not finite")
        return value


def difference(name: str, chosen: float, rejected: float, largest: float = sys.float_info.max) -> float:
    """``chosen - rejected``, refused (naming the attribute and both values) when it overflows: is
    not finite, or exceeds ``largest`` in size. Unnamed, an overflow read as "the side won every
    judgment, or none" (it had won half)."""
    value = float(chosen) - float(rejected)  # Python floats: an overflow is inf, not a numpy warning
    if not (math.isfinite(value) and abs(value) <= largest):
        raise ValueError(f"attribute {name!r}: g_chosen - g_rejected = {float(chosen)!r} - {float(rejected)!r} "
                         f"overflows (its size exceeds {largest:.4g}); give the values on a smaller scale")
    return value


@dataclass(frozen=True)
class AttributeSet:
    """The declared attributes, one per coordinate of g, in order."""

    attributes: tuple[Attribute, ...]

    def __post_init__(self) -> None:
        if not self.attributes:
            raise ValueError("an AttributeSet needs at least one attribute")
        names = [a.name for a in self.attributes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate attribute names {duplicates}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def kinds(self) -> tuple[str, ...]:
        """``Attribute.kind`` per coordinate: find a built-in by what it is, not by its name."""
        return tuple(a.kind for a in self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)

    def pair_values(self, prompt: str, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
        """(g(a) [q], g(b) [q]) as float64 arrays; ``given`` attributes cannot be computed here."""
        return self._stack([attr.values(prompt, a, b) for attr in self.attributes])

    def judgment_values(self, j: Judgment) -> tuple[np.ndarray, np.ndarray]:
        """(g_w [q], g_l [q]) of one judgment: ``given:NAME`` from the row, the rest from text."""
        return self._stack([attr.judgment_values(j) for attr in self.attributes])

    def judgment_differences(self, j: Judgment, largest: float = FLOAT32_MAX) -> np.ndarray:
        """g_w - g_l [q] of one judgment, each at most ``largest`` in size (training holds them in
        float32): an overflow is an error naming it (:func:`difference`)."""
        g_w, g_l = self.judgment_values(j)
        return np.array([difference(a.name, w, r, largest) for a, w, r in zip(self.attributes, g_w, g_l)])

    def differences(self, judgments: Sequence[Judgment]) -> np.ndarray:
        """g(y_w) - g(y_l) of every judgment, ``[N, q]`` float64, as :meth:`judgment_values` gives.

        Text attributes are computed once per distinct (prompt, chosen, rejected), so a pair
        judged by several annotators costs one evaluation (the functions must be pure, as the
        spec strings' are); an error names the row (0-based)."""
        columns = np.empty((len(self.attributes), len(judgments)), dtype=np.float64)
        for column, attribute in enumerate(self.attributes):
            seen: dict[tuple[str, str, str], float] = {}
            row = 0
            try:
                for row, j in enumerate(judgments):
                    if attribute.level == "given":
                        columns[column, row] = difference(attribute.name, *attribute.judgment_values(j))
                        continue
                    key = (j.prompt, j.chosen, j.rejected)
                    value = seen.get(key)
                    if value is None:
                        value = seen[key] = difference(attribute.name, *attribute.values(j.prompt, j.chosen,
                                                                                         j.rejected))
                    columns[column, row] = value
            except ValueError as error:
                raise ValueError(f"row {row}: {error}") from error
        return columns.T.copy()

    @staticmethod
    def _stack(pairs: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
        values = np.array(pairs, dtype=np.float64).reshape(-1, 2)
        return values[:, 0].copy(), values[:, 1].copy()


# --- spec strings: the kinds of attribute, as a table ----------------------------------------

_CALLABLE_SPEC = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
ATTRIBUTE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
"""What ``NAME`` in ``NAME=SPEC`` must fully match: safe in a JSON key, a tracker tag, a file name."""


@dataclass(frozen=True)
class AttributeKind:
    """One kind of attribute spec (a row of :data:`ATTRIBUTE_KINDS`): how a spec of it is written
    and recognised (:func:`kind_of`), and how it resolves into coordinates."""

    name: str
    forms: tuple[str, ...]  # how it is written, for the docs and the unknown-spec error
    build: Callable[[str, str | None], list[Attribute]]  # (the spec, its argument after ':') -> coordinates
    heads: tuple[str, ...] = ()
    argument: Literal["none", "optional", "required"] = "none"
    pattern: re.Pattern[str] | None = None
    coordinates: tuple[str, ...] = ()  # the built-in coordinates' names (no NAME= may take them)
    strip: Callable[[str], str] | None = None  # the edit removing it from any text alike (the judge's RM⁻)
    runs_user_code: bool = False  # resolving it imports a module and runs its code
    exact: bool = False  # its heads are whole specs: `unit:fn` is a user function, not `unit` with an argument

    def accepts(self, spec: str) -> bool:
        """Whether ``spec``, whose head is one of this kind's, has the argument the kind takes."""
        return {"none": ":" not in spec, "required": ":" in spec, "optional": True}[self.argument]


def _names_build(spec: str, argument: str | None) -> list[Attribute]:
    wanted = NAME_ATTRIBUTES if spec == "names" else (spec.split(".")[1],)
    return [Attribute(name, "response", functools.partial(_name_coordinate, NAME_ATTRIBUTES.index(name)), name)
            for name in wanted]


def _given_build(spec: str, argument: str | None) -> list[Attribute]:
    if not argument:
        raise ValueError(f"attribute spec {spec!r}: give the precomputed name, e.g. given:formatted")
    return [Attribute(argument, "given", functools.partial(_given_values, argument), "given")]


ATTRIBUTE_KINDS: tuple[AttributeKind, ...] = (
    AttributeKind("markdown", ("markdown",), lambda spec, arg: [
        Attribute("markdown", "response", _markdown_value, "markdown", remove=strip_markdown)],
        heads=("markdown",), coordinates=("markdown",), strip=strip_markdown),
    AttributeKind("names", ("names", *(f"names.{name}" for name in NAME_ATTRIBUTES)), _names_build,
                  heads=("names", *(f"names.{name}" for name in NAME_ATTRIBUTES)), coordinates=NAME_ATTRIBUTES,
                  strip=strip_signature),
    AttributeKind("length", ("length", "length:RATIO"), lambda spec, arg: [_length_attribute(spec, arg)],
                  heads=("length",), argument="optional", coordinates=("length",)),
    AttributeKind("regex", ("regex:PATTERN",), lambda spec, arg: [_regex_attribute(spec, arg or "")],
                  heads=("regex",), argument="required"),
    AttributeKind("given", ("given:NAME",), _given_build, heads=("given",), argument="required"),
    AttributeKind("library", ("exclamation, emoji, hedge, ... (discover's library)",),
                  lambda spec, arg: _resolve_named(LIBRARY_SPECS[spec]), heads=tuple(LIBRARY_SPECS), exact=True),
    AttributeKind("callable", ("package.module:function",), lambda spec, arg: [_user_attribute(spec)],
                  pattern=_CALLABLE_SPEC, runs_user_code=True),
)
"""Every kind of attribute spec; :func:`resolve_attributes` and everything that reads a spec's
shape go through it (a new kind is one row and its builder)."""
BUILTIN_SPECS: tuple[str, ...] = tuple(form for kind in ATTRIBUTE_KINDS for form in kind.forms)
_BUILTIN_NAMES = tuple(name for kind in ATTRIBUTE_KINDS for name in kind.coordinates)  # = their kind
STRIPPERS: dict[str, Callable[[str], str]] = {
    name: kind.strip for kind in ATTRIBUTE_KINDS if kind.strip is not None for name in kind.coordinates}
"""Built-in attribute (its ``Attribute.kind``) -> the transform that removes it from a response (the paper's RM⁻: the
signature under names, the markup under formatting). Length, regex, given and user attributes
have none: no transform removes them without changing the answer, so the judge scores raw."""


def kind_of(spec: str) -> AttributeKind | None:
    """The kind ``spec`` (without a name) is written as, or None: a built-in's head decides
    (``markdown:x`` is no user callable), else the first kind whose pattern it matches."""
    head = spec.partition(":")[0]
    for kind in (k for k in ATTRIBUTE_KINDS if not (k.exact and ":" in spec)):
        if head in kind.heads:
            return kind if kind.accepts(spec) else None
    return next((k for k in ATTRIBUTE_KINDS if k.pattern is not None and k.pattern.fullmatch(spec)), None)


class AttributeNameNotice(BadpoWarning):
    """A ``regex:`` attribute without ``NAME=`` is named by its whole pattern everywhere."""


def _has_spec_shape(text: str) -> bool:
    """True for text shaped as a spec without a name (which kind, not whether valid); a built-in's
    head with an argument it does not take counts, so its error can say so."""
    head, colon, _ = text.partition(":")
    return kind_of(text) is not None or bool(colon) and any(head in k.heads and not k.exact for k in ATTRIBUTE_KINDS)


def split_name(spec: str) -> tuple[str | None, str]:
    """``(NAME, SPEC)`` of ``NAME=SPEC``; ``(None, spec)`` for a spec without a name.

    The grammar: a spec that already has the shape of an unnamed spec (a kind of
    :data:`ATTRIBUTE_KINDS`: it starts with ``regex:``, ``given:`` or ``length:``, or is
    ``markdown``, ``names``, ``names.X``, ``length`` or ``module:function``) has no name, whatever
    ``=`` it holds. Otherwise it is named when the text after its first ``=`` has that shape; the
    text before must then match :data:`ATTRIBUTE_NAME` (else a ``ValueError`` naming the spec).
    The two readings cannot overlap, because a NAME holds no ``:``. So ``regex:a=b`` is the
    pattern ``a=b``, ``tag=regex:a=b`` is that pattern named ``tag``, and ``a=b`` is an unknown spec.
    """
    if _has_spec_shape(spec) or "=" not in spec:
        return None, spec
    name, _, body = spec.partition("=")
    if not _has_spec_shape(body):
        return None, spec
    if not ATTRIBUTE_NAME.fullmatch(name):
        raise ValueError(f"attribute spec {spec!r}: the name {name!r} must match "
                         f"{ATTRIBUTE_NAME.pattern} (a letter or _, then letters, digits, _ . -)")
    return name, body


def imports_user_code(spec: str) -> bool:
    """True when resolving ``spec`` would import a module and run its code (``module:function``,
    named or not): what a caller refuses to take from a file it did not write. ``regex:a:b``,
    ``given:x`` and ``length:2`` have that shape too but run no user code."""
    _, body = split_name(spec)
    kind = kind_of(body)
    return kind is not None and kind.runs_user_code


def resolve_attributes(specs: Sequence[str]) -> AttributeSet:
    """Turn spec strings (each ``SPEC`` or ``NAME=SPEC``) into an :class:`AttributeSet`; an
    unknown or malformed spec, a bad or repeated name raises ``ValueError`` naming the spec.

    An unnamed ``regex:`` spec keeps its whole spec as its name and raises an
    :class:`AttributeNameNotice` suggesting ``NAME=``; unnamed built-ins, ``given:NAME`` and
    ``module:function`` keep their readable default names silently.
    """
    if isinstance(specs, str):
        raise TypeError(f"resolve_attributes expects a sequence of specs, got the string {specs!r}; "
                        f"write [{specs!r}]")
    attributes: list[Attribute] = []
    taken: dict[str, str] = {}  # coordinate name -> the spec that declared it
    for spec in specs:
        for attribute in _resolve_named(spec):
            if attribute.name in taken:
                raise ValueError(f"attribute spec {spec!r}: the name {attribute.name!r} is already "
                                 f"declared by {taken[attribute.name]!r}; names must be unique")
            taken[attribute.name] = spec
            attributes.append(attribute)
    if not attributes:
        raise ValueError(f"no attribute declared; give at least one of {list(BUILTIN_SPECS)}")
    return AttributeSet(tuple(attributes))


def _resolve_named(spec: str) -> list[Attribute]:
    if not isinstance(spec, str):
        raise TypeError(f"attribute spec must be a string, got {type(spec).__name__} {spec!r}")
    name, body = split_name(spec)
    if name is None:
        found = _resolve_one(spec)
        if kind_of(spec).name == "regex":  # a library name (exclamation) is short already
            warnings.warn(f"attribute {spec!r} is named by its whole spec in theta.json, logs and "
                          f"plots; write NAME={spec} for a short name",
                          AttributeNameNotice, stacklevel=3)
        return found
    try:
        found = _resolve_one(body)
    except ValueError as error:
        raise ValueError(f"attribute {name!r}: {error}") from error
    if len(found) != 1:
        raise ValueError(f"attribute spec {spec!r}: {body!r} declares {len(found)} coordinates "
                         f"{[a.name for a in found]}; name one at a time, e.g. {name}={body}.{found[0].name}")
    if name in _BUILTIN_NAMES and name != found[0].kind:
        raise ValueError(f"attribute spec {spec!r}: {name!r} names a built-in attribute; "
                         "choose another name")
    return [dataclasses.replace(found[0], name=name)]


def _resolve_one(spec: str) -> list[Attribute]:
    """The coordinates of an unnamed spec, by its kind (:data:`ATTRIBUTE_KINDS`)."""
    head, colon, argument = spec.partition(":")
    kind = kind_of(spec)
    if kind is not None:
        return kind.build(spec, argument if colon else None)
    if any(head in k.heads and k.argument == "none" and not k.exact for k in ATTRIBUTE_KINDS) and colon:
        raise ValueError(f"attribute spec {spec!r}: {head!r} takes no argument")
    hint = "; a name goes first, NAME=SPEC" if "=" in spec else ""
    raise ValueError(f"unknown attribute spec {spec!r}; the built-ins are {list(BUILTIN_SPECS)}{hint}")


def _regex_attribute(spec: str, pattern: str) -> Attribute:
    if not pattern:
        raise ValueError(f"attribute spec {spec!r}: empty pattern (it would match every response)")
    try:  # a markdown construct's regex backtracks on a hostile row: its linear scan instead
        compiled = SCANNED.get(pattern) or compile_user_pattern(pattern)
    except re.error as error:
        raise ValueError(f"attribute spec {spec!r}: invalid regular expression ({error})") from error
    return Attribute(spec, "response", functools.partial(_regex_value, compiled), "regex",
                     remove=functools.partial(_without_matches, compiled))


def _length_attribute(spec: str, argument: str | None) -> Attribute:
    if argument is None:
        return Attribute("length", "pair", length_values, "length")
    try:
        ratio = float(argument)
    except ValueError:
        ratio = math.nan
    if not math.isfinite(ratio) or ratio <= 1.0:
        raise ValueError(f"attribute spec {spec!r}: the word-count ratio must be a number > 1, "
                         f"got {argument!r}")
    name = "length" if ratio == DEFAULT_LENGTH_RATIO else f"length:{ratio:g}"
    return Attribute(name, "pair", functools.partial(length_values, ratio=ratio), "length")


def _user_attribute(spec: str) -> Attribute:
    module_name, function_name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # ImportError, or any error raised while importing the module
        raise ValueError(f"attribute spec {spec!r}: cannot import module {module_name!r} "
                         f"({type(error).__name__}: {error})") from error
    fn = getattr(module, function_name, None)
    if fn is None:
        raise ValueError(f"attribute spec {spec!r}: module {module_name!r} has no {function_name!r}")
    if not callable(fn):
        raise ValueError(f"attribute spec {spec!r}: {function_name!r} is not callable")
    level = getattr(fn, "level", "response")
    if level not in ("response", "pair"):
        raise ValueError(f"attribute spec {spec!r}: level must be 'response' or 'pair', got {level!r}")
    return Attribute(spec, level, fn, "callable")
