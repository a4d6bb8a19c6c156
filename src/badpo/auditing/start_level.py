"""Where ``badpo train`` starts theta, shown by the audit before any training (``start_level``: the
conditional start; the default ``bias.init: reference`` starts at the marginal level beside it).

The level is :func:`badpo.core.pair_level.pair_effect_level` on the judgments' attribute
differences: the labels' fit with a per-pair random effect for quality (the conditional level,
``bias.init: conditional``), beside the fit with quality left out (the marginal level,
``bias.init: reference``). Pairs are :func:`badpo.core.judgments.pair_key`'s, each read in the
orientation of its first judgment, as the engine reads them. Trusted annotators are left out, as
training leaves them out of its start.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from badpo.core.judgments import Judgment, pair_key

__all__ = ["judgment_pairs", "start_level", "format_start_level"]


def judgment_pairs(judgments: Sequence[Judgment]) -> tuple[np.ndarray, np.ndarray]:
    """(pair index [N], side [N]): each judgment's pair, and +1 where it chose the side its pair's
    first judgment chose, -1 where it chose the other."""
    first: dict[str, tuple[int, str]] = {}
    keys: dict[tuple, str] = {}  # a pair's judgments repeat its texts: hash each orientation once
    pair, side = np.empty(len(judgments), dtype=np.int64), np.empty(len(judgments), dtype=np.float64)
    for row, judgment in enumerate(judgments):
        seen = (judgment.pair_id, judgment.prompt, judgment.chosen, judgment.rejected)
        key = keys[seen] if seen in keys else keys.setdefault(seen, pair_key(judgment))
        index, chosen = first.setdefault(key, (len(first), judgment.chosen))
        pair[row], side[row] = index, 1.0 if judgment.chosen == chosen else -1.0
    return pair, side


def start_level(judgments: Sequence[Judgment], differences: np.ndarray, trusted: Sequence[str] = ()):
    """The :class:`badpo.core.pair_level.PairEffectFit` of the untrusted judgments, or None when
    no judgment is left or the fit has no finite value (the audit's own warnings name why)."""
    import torch  # the fit is the engine's own; torch loads only when the audit asks for it

    from badpo.core.pair_level import pair_effect_level

    known = set(trusted)
    keep = np.array([j.annotator not in known for j in judgments], dtype=bool)
    if not keep.any():
        return None
    pair, side = judgment_pairs(judgments)
    try:
        return pair_effect_level(torch.from_numpy(differences[keep]), torch.from_numpy(pair[keep]),
                                 torch.from_numpy(side[keep]))
    except ValueError:
        return None


def format_start_level(names: Sequence[str], fit) -> list[str]:
    """The audit's lines on where training starts theta."""
    if fit is None:
        return ["bias.init: conditional's level: no finite fit (see the warnings); the default start, "
                "bias.init: reference, does not need it"]
    lines = ["where train starts theta: bias.init: conditional at 'start' (the level quality does not shrink);",
             "the default, bias.init: reference, at 'marginal' (quality left out of the fit shrinks it toward 0):"]
    width = max(len("attribute"), *(len(n) for n in names))
    lines.append(f"  {'attribute':<{width}}  {'start':>7}  {'s.e.':>6}  {'marginal':>8}")
    for name, level, se, marginal in zip(names, fit.level, fit.se, fit.marginal):
        shown_se = "-" if not np.isfinite(se) else f"{se:.3f}"
        lines.append(f"  {name:<{width}}  {level:>+7.3f}  {shown_se:>6}  {marginal:>+8.3f}")
    if fit.identified:
        lines.append(f"  quality spread between a pair's two sides: {fit.spread:.2f} logits (sd), from "
                     f"{fit.repeated_pairs} of {fit.pairs} pairs judged twice or more")
    else:
        lines.append(f"  {fit.note}")
    return lines
