"""An arm: a method (a loss, a row of :data:`~badpo.methods.table.METHODS`) trained with a bias
variant (``bias.variant``) and, for the shuffled-ids control, ``bias.shuffled_ids``.

The two axes are settings of their own; the arm's *name* is made of them, once, here
(:func:`arm_name`): ``dpo`` (no bias), ``ba_dpo_<variant>``, ``ba_ipo_<variant>``,
``<method>_ba_<variant>``, ``ba_dpo_shuffled_ids``. Those names are what run folders, run keys and
committed records have always called an arm, so a run's identity is unchanged by the split
(:func:`badpo.run_folder.identity.identity` folds the two settings back into the name). The same
names given as ``method`` (the spelling before the split) still work for one release, with a
one-line notice (:func:`split_arm_name`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from badpo.core.bias import VARIANT_FACTS, VARIANTS
from badpo.core.config import ConfigError
from badpo.methods.table import METHODS, Method

__all__ = ["Arm", "LEARNED_VARIANTS", "arm", "arm_name", "arm_settings", "get_arm", "legacy_arm_names",
           "split_arm_name"]

LEARNED_VARIANTS = tuple(v.name for v in VARIANT_FACTS.values() if v.learns_theta)
# the methods whose arm names read ba_<method>_<variant> (the paper's BA-DPO and BA-IPO), not
# <method>_ba_<variant>
_BA_FIRST = ("dpo", "ipo")
_SHUFFLED = "ba_dpo_shuffled_ids"  # the paper's control: per_annotator theta, ids shuffled


@dataclass(frozen=True)
class Arm(Method):
    """A method row with the bias variant it trains with; what the engine and the TRL trainer read."""

    name: str = "dpo"  # the arm's name (:func:`arm_name`)
    method: str = "dpo"  # the METHODS key of its loss
    bias_variant: str = "none"  # a badpo.core.bias.VARIANTS entry; "none" learns no theta
    shuffle_annotators: bool = False  # reassign every judgment to a uniformly random annotator

    @property
    def learns_theta(self) -> bool:
        return VARIANT_FACTS[self.bias_variant].learns_theta


def arm_name(method: str, variant: str = "none", shuffled: bool = False) -> str:
    """The name of ``method`` trained with ``variant`` (module docstring)."""
    if variant == "none":
        return method
    base = f"ba_{method}_{variant}" if method in _BA_FIRST else f"{method}_ba_{variant}"
    if not shuffled:
        return base
    return _SHUFFLED if (method, variant) == ("dpo", "per_annotator") else f"{base}_shuffled_ids"


def legacy_arm_names() -> dict[str, tuple[str, str, bool]]:
    """{arm name: (method, variant, shuffled)} for every arm of a learned variant: the names that
    ``method`` took before the variant became a setting."""
    names = {}
    for method, row in METHODS.items():
        if not row.takes_bias:
            continue
        for variant in LEARNED_VARIANTS:
            names[arm_name(method, variant)] = (method, variant, False)
    names[_SHUFFLED] = ("dpo", "per_annotator", True)
    return names


def split_arm_name(name: str) -> tuple[str, str, bool] | None:
    """(method, variant, shuffled) of an arm name that is not a method's own name; None otherwise."""
    return None if name in METHODS else legacy_arm_names().get(name)


def arm_settings(name: str) -> dict[str, object]:
    """The settings (dotted keys) that train the arm called ``name``: ``{"method": name}`` for a
    method's own name, else its method, ``bias.variant`` and, for the control, ``bias.shuffled_ids``
    (how an experiment's arms, which are named, reach ``badpo train``)."""
    split = split_arm_name(name)
    if split is None:
        return {"method": name}
    method, variant, shuffled = split
    return {"method": method, "bias.variant": variant, **({"bias.shuffled_ids": True} if shuffled else {})}


def arm(method: str, variant: str = "none", shuffled: bool = False) -> Arm:
    """``method`` trained with ``variant``; one-line ConfigErrors for an unknown name or variant, a
    method that takes no bias, and a shuffled-ids control without a theta per annotator."""
    if method not in METHODS:
        hint = " (an arm's name: give method and bias.variant)" if split_arm_name(method) else ""
        raise ConfigError(f"method: unknown method {method!r}{hint}; choose one of {sorted(METHODS)}")
    if variant not in VARIANT_FACTS:
        raise ConfigError(f"bias.variant: unknown bias variant {variant!r}; choose one of {list(VARIANTS)}")
    row = METHODS[method]
    if variant != "none" and not row.takes_bias:
        raise ConfigError(f"bias.variant: method {method!r} takes no bias (its type policies would each "
                          f"need their own theta); use bias.variant: none")
    if shuffled and not VARIANT_FACTS[variant].per_annotator:
        raise ConfigError(f"bias.shuffled_ids: shuffles annotator ids, which bias.variant {variant!r} does not "
                          "read; use per_annotator, shared_mean or class_offsets")
    fields = {f.name: getattr(row, f.name) for f in dataclasses.fields(Method)}
    return Arm(**fields, name=arm_name(method, variant, shuffled), method=method, bias_variant=variant,
               shuffle_annotators=shuffled)


def get_arm(name: str) -> Arm:
    """The arm called ``name``: a method's own name (no bias) or an arm name (module docstring)."""
    split = split_arm_name(name)
    return arm(*split) if split else arm(name)
