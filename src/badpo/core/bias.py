"""The bias channel: (annotator, attribute difference) -> bias logit b_k = theta_k . (g_w - g_l).

One module covers every parameterisation of theta_k in the paper (Section 3, "Per-annotator,
pooled, and shared-mean"; Appendix "Arms"):

===============  ====================================  =======================================
variant          theta_k                               trainable parameters
===============  ====================================  =======================================
none             0 (DPO)                               none
pooled           theta (annotator ids ignored)         ``pooled_theta`` [d]
per_annotator    theta_k (the original BARP model)     ``annotator_theta`` [m, d]
shared_mean      theta_bar + eps_k                     ``shared_mean`` [d], ``deviation`` [m, d]
class_offsets    theta_bar + delta_c(k) + eps_k        ``shared_mean``, ``class_offset`` [C, d],
                                                       ``deviation``
===============  ====================================  =======================================

What the rest of the library needs to know of a variant (does it learn theta, does theta differ
by annotator, does it need annotator classes, ...) is read from :data:`VARIANT_FACTS`, never
from its name.

q is the number of attributes (binary or continuous); d <= q the number *declared*: undeclared
coordinates have no parameter at all, so theta is 0 there and nothing can move it. A
``fixed_offset`` [q] is a non-trainable buffer added to every theta_k (target anchoring and the
fixed-offset cure, Appendix "Target anchoring"); it also applies to ``none``.

Trusted annotators (``trusted``: ids, or id -> [q] values): annotators known to be unbiased, whose
theta_k is fixed at 0 (or at the given value) instead of learned. The labels fix every theta_k only
up to one shared constant per connected component of the annotator graph (Theorem "thm:identif");
a trusted annotator removes that constant for its component, so the shared level is learned from
the data instead of chosen. For ``per_annotator`` the trusted rows are fixed; for ``shared_mean``
and ``class_offsets`` theta_bar (+ delta_c) + eps_k is replaced by the value for them, so theta_bar
is learned from the others' judgments only. ``pooled`` refuses trusted annotators: one theta for
every judgment cannot hold a fixed value for some annotators without becoming per-annotator
(use ``shared_mean``); ``none`` has no theta to fix. The trusted rows get no gradient (their
raw parameters never move), ``theta()`` reports the fixed values, and ``fixed_offset`` still adds
to every theta_k. Trusted values are configuration, not state: they are buffers outside
``state_dict`` and are written to the JSON file under ``trusted``. ``shift_untrusted(delta)`` moves
every other theta_k by delta at once: the level step of :mod:`badpo.core.level_step`.

Reported mean. The paper's theta_bar is the mean of the theta_k (Corollary "Reward-bias
degeneracy": theta_bar := (1/m) sum_k theta_k), and ``mean()`` returns exactly that for every
variant, with ``deviations()`` = theta_k - mean(). Under ``shared_mean`` the decomposition is not
constrained in training (sum_k eps_k = 0 is not enforced, Appendix "The speed of the mean"), so
the raw shared parameter can differ from ``mean()`` by mean_k(eps_k); ``shared_parameter()``
returns the raw one (the quantity Proposition "prop:rate" speaks of).

The channel's file (``to_dict`` / ``save`` and back, readable theta beside the raw parameters) is
written and checked by :mod:`badpo.core.bias_file`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor, nn

from badpo.core.bias_file import channel_file_text, channel_from_dict, channel_to_dict
from badpo.core.jsonio import atomic_write_text

__all__ = ["VARIANTS", "VARIANT_FACTS", "Variant", "variant_facts",
           "BiasChannel"]

@dataclass(frozen=True)
class Variant:
    """What a bias variant is, so that no code elsewhere branches on its name."""

    name: str
    learns_theta: bool  # False: theta is 0 (DPO); only a fixed offset applies
    per_annotator: bool  # theta_k differs by annotator: needs annotator ids and reads them in forward
    separate_mean: bool  # theta_bar is its own parameter, with a deviation eps_k per annotator
    class_offsets: bool  # a delta_c per annotator class: needs a class for every annotator
    parameters: tuple[str, ...]  # the trainable parameters (attribute names), in file order
    shared_parameter: str | None  # the raw shared theta (pooled theta or theta_bar), if any


VARIANT_FACTS: Mapping[str, Variant] = MappingProxyType({v.name: v for v in (
    Variant("none", learns_theta=False, per_annotator=False, separate_mean=False, class_offsets=False,
            parameters=(), shared_parameter=None),
    Variant("pooled", learns_theta=True, per_annotator=False, separate_mean=False, class_offsets=False,
            parameters=("pooled_theta",), shared_parameter="pooled_theta"),
    Variant("per_annotator", learns_theta=True, per_annotator=True, separate_mean=False, class_offsets=False,
            parameters=("annotator_theta",), shared_parameter=None),
    Variant("shared_mean", learns_theta=True, per_annotator=True, separate_mean=True, class_offsets=False,
            parameters=("shared_mean", "deviation"), shared_parameter="shared_mean"),
    Variant("class_offsets", learns_theta=True, per_annotator=True, separate_mean=True, class_offsets=True,
            parameters=("shared_mean", "class_offset", "deviation"), shared_parameter="shared_mean"),
)})
VARIANTS = tuple(VARIANT_FACTS)


def variant_facts(variant: str) -> Variant:
    """The :class:`Variant` of a variant name; an unknown name is a ValueError listing the known ones."""
    if variant not in VARIANT_FACTS:
        raise ValueError(f"variant: unknown bias variant {variant!r}; choose one of {VARIANTS}")
    return VARIANT_FACTS[variant]


def _names(values: Sequence[str], option: str) -> tuple[str, ...]:
    """A tuple of distinct non-empty strings; a bare string is refused (it would split to chars)."""
    if isinstance(values, str):
        raise ValueError(f"{option} must be a sequence of strings, not the single string {values!r}")
    names = tuple(values)
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{option}: every entry must be a non-empty string, got {name!r}")
        if name in seen:
            raise ValueError(f"{option}: {name!r} appears twice")
        seen.add(name)
    return names


class BiasChannel(nn.Module):
    """Bias logits for a batch of judgments; see the module docstring for the variants."""

    def __init__(
        self,
        variant: str,
        attribute_names: Sequence[str],
        annotators: Sequence[str] = (),
        annotator_classes: Mapping[str, str] | None = None,
        declared: Sequence[str] | None = None,
        init_mean: Sequence[float] | None = None,
        fixed_offset: Sequence[float] | None = None,
        trusted: Mapping[str, Sequence[float]] | Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.facts = variant_facts(variant)
        self.variant = variant
        self.attribute_names = _names(attribute_names, "attribute_names")
        if not self.attribute_names:
            raise ValueError("attribute_names: the bias channel needs at least one attribute")
        self.annotators = _names(annotators, "annotators")
        if self.facts.per_annotator and not self.annotators:
            raise ValueError(f"annotators: variant {variant!r} needs at least one annotator id")
        self._position = {name: i for i, name in enumerate(self.annotators)}
        self.declared = self._resolve_declared(declared)
        self.annotator_classes, self.classes = self._resolve_classes(annotator_classes)

        q = len(self.attribute_names)
        declared_index = [self.attribute_names.index(name) for name in self.declared]
        self.register_buffer("declared_index", torch.tensor(declared_index, dtype=torch.long))
        offset = self._vector(fixed_offset, "fixed_offset")
        self.register_buffer("fixed_offset", offset if offset is not None else torch.zeros(q))
        class_row = {label: i for i, label in enumerate(self.classes)}
        class_of = [class_row[label] for label in (self.annotator_classes or {}).values()]
        self.register_buffer("class_index", torch.tensor(class_of, dtype=torch.long))  # [m] or [0]

        start = self._initial_mean(init_mean)  # [d]
        m, d = len(self.annotators), len(self.declared)
        self.trusted, trusted_theta = self._resolve_trusted(trusted)
        self.register_buffer("trusted_mask", torch.tensor([a in self.trusted for a in self.annotators],
                                                          dtype=torch.bool), persistent=False)
        self.register_buffer("trusted_theta", trusted_theta, persistent=False)  # [m, d]
        facts = self.facts
        if facts.learns_theta and not facts.per_annotator:
            self.pooled_theta = nn.Parameter(start)
        elif facts.per_annotator and not facts.separate_mean:
            rows = torch.where(self.trusted_mask[:, None], trusted_theta, start.repeat(m, 1))
            self.annotator_theta = nn.Parameter(rows)  # trusted rows hold their fixed value
        elif facts.separate_mean:
            self.shared_mean = nn.Parameter(start)
            self.deviation = nn.Parameter(torch.zeros(m, d))
            if facts.class_offsets:
                self.class_offset = nn.Parameter(torch.zeros(len(self.classes), d))

    # ----------------------------------------------------------------------------- construction
    def _resolve_declared(self, declared: Sequence[str] | None) -> tuple[str, ...]:
        if declared is None:
            return self.attribute_names
        names = _names(declared, "declared")
        if not names:
            raise ValueError("declared: empty; declare at least one attribute or use variant 'none'")
        for name in names:
            if name not in self.attribute_names:
                raise ValueError(
                    f"declared: {name!r} is not among attribute_names {list(self.attribute_names)}"
                )
        # Keep attribute order so that parameters and files list coordinates consistently.
        return tuple(name for name in self.attribute_names if name in names)

    def _resolve_classes(
        self, annotator_classes: Mapping[str, str] | None
    ) -> tuple[dict[str, str] | None, tuple[str, ...]]:
        if annotator_classes is None:
            if self.facts.class_offsets:
                raise ValueError("annotator_classes: variant 'class_offsets' needs a class per annotator")
            return None, ()
        for annotator in annotator_classes:
            if annotator not in self._position:
                raise ValueError(f"annotator_classes: {annotator!r} is not among the annotators")
        classes: list[str] = []
        for annotator in self.annotators:
            if annotator not in annotator_classes:
                raise ValueError(f"annotator_classes: annotator {annotator!r} has no class")
            label = annotator_classes[annotator]
            if not isinstance(label, str) or not label:
                raise ValueError(
                    f"annotator_classes: class of {annotator!r} must be a non-empty string, got {label!r}"
                )
            if label not in classes:
                classes.append(label)
        return {a: annotator_classes[a] for a in self.annotators}, tuple(classes)

    def _vector(self, values: Sequence[float] | None, option: str) -> Tensor | None:
        """A [q] float32 tensor, one value per attribute; None passes through."""
        if values is None:
            return None
        vector = torch.tensor([float(v) for v in values], dtype=torch.float32)
        if vector.shape != (len(self.attribute_names),):
            raise ValueError(
                f"{option}: expected {len(self.attribute_names)} values, one per attribute "
                f"{list(self.attribute_names)}, got {len(vector)}"
            )
        if not torch.isfinite(vector).all():
            raise ValueError(f"{option}: values must be finite, got {vector.tolist()}")
        return vector

    def _resolve_trusted(
        self, trusted: Mapping[str, Sequence[float]] | Sequence[str] | None
    ) -> tuple[dict[str, tuple[float, ...]], Tensor]:
        """({id: [q] fixed theta}, [m, d] fixed theta on the declared coordinates, 0 elsewhere)."""
        m, d = len(self.annotators), len(self.declared)
        if trusted is None or len(trusted) == 0:
            return {}, torch.zeros(m, d)
        if not (self.facts.learns_theta and self.facts.per_annotator):
            reason = ("learns no theta" if not self.facts.learns_theta else
                      "has one theta for every judgment, so no annotator can be fixed apart from the "
                      "others; use shared_mean (theta_bar + eps_k)")
            raise ValueError(f"trusted: variant {self.variant!r} {reason}")
        if isinstance(trusted, Mapping):
            ids = _names(list(trusted), "trusted")
            values = {a: self._vector(trusted[a], f"trusted.{a}") for a in ids}
        else:
            ids = _names(trusted, "trusted")
            values = {a: torch.zeros(len(self.attribute_names)) for a in ids}
        rows = torch.zeros(m, d)
        for annotator, vector in values.items():
            if annotator not in self._position:
                raise ValueError(f"trusted: annotator {annotator!r} is not among the annotators")
            for name, value in zip(self.attribute_names, vector.tolist()):
                if name not in self.declared and value != 0.0:
                    raise ValueError(f"trusted.{annotator}: {name!r} is undeclared (fixed at 0) but "
                                     f"the trusted value gives it {value}")
            rows[self._position[annotator]] = vector[self.declared_index]
        return {a: tuple(values[a].tolist()) for a in ids}, rows

    def _initial_mean(self, init_mean: Sequence[float] | None) -> Tensor:
        """The warm start of theta_bar / pooled theta / every theta_k, on the declared coordinates."""
        vector = self._vector(init_mean, "init_mean")
        if vector is None:
            return torch.zeros(len(self.declared))
        if not self.facts.learns_theta:
            raise ValueError(f"init_mean: variant {self.variant!r} has no trainable theta to warm-start")
        for name, value in zip(self.attribute_names, vector.tolist()):
            if name not in self.declared and value != 0.0:
                raise ValueError(
                    f"init_mean: {name!r} is undeclared (fixed at 0) but init_mean gives it {value}"
                )
        return vector[self.declared_index].clone()

    # ------------------------------------------------------------------------------- theta views
    def _scatter(self, declared_values: Tensor) -> Tensor:
        """[..., d] values on the declared coordinates -> [..., q] with zeros elsewhere."""
        full = declared_values.new_zeros(*declared_values.shape[:-1], len(self.attribute_names))
        return full.index_copy(-1, self.declared_index, declared_values)

    def _declared_theta(self) -> Tensor:
        """Effective theta_k on the declared coordinates, [m, d]."""
        m, d = len(self.annotators), len(self.declared)
        if not self.facts.learns_theta:
            return self.fixed_offset.new_zeros(m, d)
        if not self.facts.per_annotator:
            return self.pooled_theta.expand(m, d)
        if not self.facts.separate_mean:
            learned = self.annotator_theta
        elif self.facts.class_offsets:
            learned = self.shared_mean + self.class_offset[self.class_index] + self.deviation
        else:
            learned = self.shared_mean + self.deviation
        if not self.trusted:
            return learned
        # where() passes no gradient to the trusted rows: their raw parameters never move
        return torch.where(self.trusted_mask[:, None], self.trusted_theta.to(learned.dtype), learned)

    def theta(self) -> Tensor:
        """Effective theta_k without the fixed offset, [m, q], rows in ``annotators`` order."""
        return self._scatter(self._declared_theta())

    def mean(self) -> Tensor:
        """theta_bar = mean of the effective theta_k, [q] (pooled: theta; none: 0)."""
        if not self.facts.learns_theta:
            return self.fixed_offset.new_zeros(len(self.attribute_names))
        if not self.facts.per_annotator:
            return self._scatter(self.pooled_theta)
        return self.theta().mean(dim=0)

    def deviations(self) -> Tensor:
        """theta_k - mean(), [m, q]; under shared_mean these are the eps_k recentred to sum 0."""
        return self.theta() - self.mean()

    def shared_parameter(self) -> Tensor:
        """The raw shared parameter, [q]: theta_bar of shared_mean/class_offsets, theta of pooled."""
        if self.facts.shared_parameter is None:
            raise ValueError(f"variant {self.variant!r} has no shared parameter")
        return self._scatter(getattr(self, self.facts.shared_parameter))

    def class_offsets(self) -> dict[str, Tensor]:
        """delta_c per class, [q] each (variant class_offsets only)."""
        if not self.facts.class_offsets:
            raise ValueError(f"variant {self.variant!r} has no class offsets")
        return {c: self._scatter(self.class_offset[i]) for i, c in enumerate(self.classes)}

    @torch.no_grad()
    def shift_untrusted(self, delta: Tensor) -> None:
        """Add ``delta`` (``[d]``, the declared coordinates) to theta_k of every annotator that is
        not trusted, through the shared parameter where there is one (theta_bar) and the free rows
        otherwise: the level moves, the deviations and the trusted values stay
        (:mod:`badpo.core.level_step`). A channel without trusted annotators has no level to set."""
        if not self.trusted:
            raise ValueError(f"shift_untrusted: variant {self.variant!r} has no trusted annotator, so "
                             "its level cannot be set apart from the policy")
        self.shift_level(delta)

    def shift_level(self, delta: Tensor) -> None:
        """Add ``delta`` (``[d]``) to the shared level of every learned theta_k, trusted ones kept:
        :meth:`shift_untrusted` without the trusted anchor (``bias.level: tilt`` anchors on the
        policy's own lean instead)."""
        delta = delta.to(device=self.trusted_mask.device, dtype=self.trusted_theta.dtype)
        if delta.shape != (len(self.declared),):
            raise ValueError(f"shift_level: expected {len(self.declared)} values, one per declared "
                             f"attribute {list(self.declared)}, got shape {tuple(delta.shape)}")
        with torch.no_grad():  # a set level, not a gradient step
            if self.facts.separate_mean:
                self.shared_mean.add_(delta)
            elif self.facts.per_annotator:
                self.annotator_theta[~self.trusted_mask] += delta
            else:  # pooled: one theta, and no trusted annotator
                self.pooled_theta.add_(delta)

    # ----------------------------------------------------------------------------------- forward
    def annotator_index(self, annotators: Sequence[str]) -> Tensor:
        """Original annotator ids -> row indices (LongTensor [B]); an unknown id is a KeyError."""
        rows = []
        for annotator in annotators:
            if annotator not in self._position:
                raise KeyError(f"annotator {annotator!r} is not known to this bias channel")
            rows.append(self._position[annotator])
        return torch.tensor(rows, dtype=torch.long, device=self.fixed_offset.device)

    def forward(self, annotator_index: Tensor | None, attr_diff: Tensor) -> Tensor:
        """Bias logits b = (theta_k + fixed_offset) . attr_diff, [B].

        ``attr_diff`` is g(y_w) - g(y_l), [B, q]; ``annotator_index`` is [B] (from
        :meth:`annotator_index`); ``none`` and ``pooled`` ignore it and accept None.
        """
        q = len(self.attribute_names)
        if attr_diff.dim() != 2 or attr_diff.shape[1] != q:
            raise ValueError(
                f"attr_diff must have shape [B, {q}] for attributes {list(self.attribute_names)}, "
                f"got {tuple(attr_diff.shape)}"
            )
        if not self.facts.per_annotator:
            per_example = self.mean() + self.fixed_offset  # [q], same for every judgment
        else:
            if annotator_index is None or annotator_index.shape != attr_diff.shape[:1]:
                shape = None if annotator_index is None else tuple(annotator_index.shape)
                raise ValueError(
                    f"annotator_index must have shape [{attr_diff.shape[0]}] for variant "
                    f"{self.variant!r}, got {shape}"
                )
            per_example = (self.theta() + self.fixed_offset)[annotator_index]  # [B, q]
        return (per_example * attr_diff).sum(dim=-1)

    def extra_repr(self) -> str:
        return (
            f"variant={self.variant!r}, attributes={list(self.attribute_names)}, "
            f"declared={list(self.declared)}, annotators={len(self.annotators)}"
        )

    # --------------------------------------------------------------------------------- save/load
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: the readable theta_k / theta_bar / deviations and the raw
        parameters (:mod:`badpo.core.bias_file`)."""
        return channel_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BiasChannel:
        """Rebuild a channel from :meth:`to_dict`; forward() is reproduced exactly, and readable
        values that disagree with the raw parameters are an error."""
        return channel_from_dict(cls, data)

    def save(self, path: str | Path) -> None:
        """Write :meth:`to_dict` as indented JSON."""
        atomic_write_text(path, channel_file_text(self))

    @classmethod
    def load(cls, path: str | Path) -> BiasChannel:
        """Read a file written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
