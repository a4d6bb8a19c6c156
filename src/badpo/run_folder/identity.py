"""A run's identity: what makes a run folder this run's, so that training into a folder holding
another run is refused and a checkpoint is resumed only by the run that wrote it.

The identity is the resolved config without :data:`RUN_CONTROL_KEYS` (where it reports, how it
stops and resumes) and the content of its data (:func:`badpo.data.fingerprint.data_fingerprint`: a
config names its data by path, and a file changed in place is other data). ``config.yaml`` in the
folder records the config, and every checkpoint carries its own copy; ``data_fingerprint.json``
records the data (:mod:`badpo.run_folder.layout`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from badpo.core.config import ConfigError, load_config, to_dict
from badpo.methods.arms import arm_name
from badpo.run_folder.layout import CONFIG_FILE, DATA_FILE

__all__ = ["KEYED_WHEN_SET", "RUN_CONTROL_KEYS", "data_mismatch", "folded_arm", "identity", "identity_mismatch",
           "keyed_when_set", "read_data_record", "recorded_identity"]

# Keys that only say where a run reports, how it stops and resumes: they are not part of what a
# run *is*, so a run resumed with other values of them is the same run (:func:`identity`).
RUN_CONTROL_KEYS = ("output_dir", "cache_dir", "resume_from", "stop_after_steps", "save_every",
                    "keep_checkpoints", "overwrite", "report", "runtime.num_threads")
# Keys added after runs were recorded: part of a run's identity (and of an experiment's run key)
# only when set away from this default, so that every run made before them keeps its identity.
# A dotted key names a key inside a section (bias.level: the rule of issue 51, after every run of
# theta's Adam alone was recorded). A tuple lists every value that counts as unset: model.compile
# was false before its null (on a CUDA GPU), and runs recorded with either keep their identity.
# ties, strength and the A/B form's columns came with crowd labels as they come (issue 72).
KEYED_WHEN_SET: Mapping[str, Any] = {"duplicates": "keep", "fsdp": False, "bias.level": "adam",
                                      "ties": "keep", "strength": "keep", "reliability": "off",
                                      "columns.strength": None, "columns.weight": None,
                                      "columns.response_a": None, "columns.response_b": None,
                                      "columns.preference": None, "columns.g_a": None, "columns.g_b": None,
                                      "model.compile": (None, False), "runtime.length_groups": None,
                                      "model.selective_checkpointing": None}


def folded_arm(settings: Mapping[str, Any], default_variant: str = "none") -> dict:
    """``settings`` with ``bias.variant`` and ``bias.shuffled_ids`` folded back into the arm's name
    (``method: dpo`` + ``bias.variant: pooled`` is ``method: ba_dpo_pooled``; a reward model's into
    ``variant``), the form every run was keyed in before the variant became a setting
    (:mod:`badpo.methods.arms`), so that both spellings of one arm are one run."""
    bias = settings.get("bias")
    if not isinstance(bias, Mapping) or "variant" not in bias:
        return dict(settings)
    bias = dict(bias)
    variant, shuffled = bias.pop("variant") or default_variant, bias.pop("shuffled_ids", False)
    kept = {**settings, "bias": bias}
    if "method" in kept:
        kept["method"] = arm_name(kept["method"], variant, shuffled)
    else:
        kept["variant"] = variant
    return kept


def keyed_when_set(settings: Mapping[str, Any], default_variant: str = "none") -> dict:
    """``settings`` (a config as a plain dict) with the arm folded into one name (:func:`folded_arm`)
    and less the :data:`KEYED_WHEN_SET` keys at their default (a section is copied before a key is
    left out of it, so ``settings`` is not changed)."""
    kept = folded_arm(settings, default_variant)
    for dotted, default in KEYED_WHEN_SET.items():
        *sections, key = dotted.split(".")
        holder = kept
        for section in sections:
            if not isinstance(holder.get(section), Mapping):
                break
            holder[section] = dict(holder[section])
            holder = holder[section]
        else:
            unset = default if isinstance(default, tuple) else (default,)
            if key in holder and holder[key] in unset:
                del holder[key]
    return kept


def identity(config: Any) -> dict:
    """The resolved config as a plain dict without the run-control keys."""
    plain = to_dict(config)
    for dotted in RUN_CONTROL_KEYS:
        *parents, leaf = dotted.split(".")
        node = plain
        for part in parents:
            node = node[part]
        node.pop(leaf, None)  # a stage without the key (a reward model has no cache_dir)
    # keys newer than recorded runs count only when set; the arm as one name
    return keyed_when_set(plain, getattr(config, "default_variant", "none"))


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ, as ``key: old -> new``."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new), key=str):
            found += _differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return found
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} -> {new!r}"]


def recorded_identity(folder: Path, config_class: type) -> dict | str:
    """The identity recorded in ``folder/config.yaml``, or why it cannot be read."""
    path = folder / CONFIG_FILE
    if not path.exists():
        return f"{folder} holds run files but no {CONFIG_FILE} saying which run wrote them"
    try:
        return identity(load_config(config_class, path))
    except (ConfigError, yaml.YAMLError, UnicodeDecodeError) as error:
        return f"{path} is not a readable run config ({error})"


def identity_mismatch(recorded: dict | str, current: dict, what: Path) -> str | None:
    """A one-line reason why ``what`` (holding ``recorded``) is not this run, or None."""
    if isinstance(recorded, str):
        return recorded
    differences = _differences(recorded, current)
    if not differences:
        return None
    shown = "; ".join(differences[:4]) + (f"; ... {len(differences) - 4} more" if len(differences) > 4 else "")
    return f"{what} belongs to another run ({shown})"


def read_data_record(folder: Path) -> dict | None:
    """The data fingerprint recorded in ``folder`` (None when there is none; an unreadable record
    matches no data)."""
    try:
        record = json.loads((folder / DATA_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):
        record = None
    return record if isinstance(record, dict) else {"sha256": None}


def data_mismatch(recorded: dict | None, current: dict, what: Path) -> str | None:
    """A one-line reason why ``what`` (holding a run on ``recorded`` data) is not a run on the
    ``current`` data, or None (also when nothing was recorded)."""
    if recorded is None or recorded.get("sha256") == current["sha256"]:
        return None
    was = recorded.get("sha256") if isinstance(recorded.get("sha256"), str) else "unreadable"
    return (f"{what} holds a run on other data: the content of {current['data']} changed since that run "
            f"read it (sha256 {was[:12]} -> {current['sha256'][:12]})")
