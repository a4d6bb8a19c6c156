"""theta's part of a checkpoint, named once for ``badpo train``/``rm`` and BADPOTrainer.

Both save the same parts under the same names, each an object with ``state_dict`` and
``load_state_dict``: ``theta`` and ``theta_optimizer`` (its Adam) when theta learns, ``cuts`` (the
graded labels' cut points, stepped by theta's Adam) and ``weighting`` (a method's loss weights).
A channel with nothing to learn is not saved: the settings rebuild it. The engine writes them among
its checkpoint's states (:mod:`badpo.engine.checkpoint`), BADPOTrainer beside TRL's checkpoint
(:mod:`badpo.integrations.trl_files`); a resume refuses a checkpoint whose parts are not the run's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["THETA_PARTS", "check_same_parts", "theta_parts"]

THETA_PARTS = ("theta", "theta_optimizer", "cuts", "weighting")


def theta_parts(bias, optimizer, cuts=None, weighting=None) -> dict[str, Any]:
    """{name: object} of the parts this run trains (module docstring); ``bias`` is None where the
    run reads no attribute and only the cut points learn."""
    parts: dict[str, Any] = {}
    if optimizer is not None:
        parts["theta_optimizer"] = optimizer
        if bias is not None:
            parts["theta"] = bias
    if cuts is not None:
        parts["cuts"] = cuts
    if weighting is not None:
        parts["weighting"] = weighting
    return parts


def check_same_parts(saved: Mapping[str, Any], parts: Mapping[str, Any], where: str) -> None:
    """A saved checkpoint holds exactly the theta parts of this run (a value None is a part not
    saved); else one line naming ``where``, what it holds and what the run trains."""
    held = sorted(name for name in THETA_PARTS if saved.get(name) is not None)
    if held != sorted(parts):
        raise ValueError(f"{where}: holds theta's parts {held}, this run trains {sorted(parts)} (another "
                         "variant, method, or data with or without ties and strengths)")
