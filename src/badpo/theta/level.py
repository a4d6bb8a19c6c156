"""theta's rules after the start (``bias.level``) and the level step (``bias.trusted_level``; the maths:
:mod:`badpo.core.level_step`).

Two anchors, one step. ``trusted``: the trusted annotators' judgments say where the level is
(trusted anchoring). ``tilt`` (``bias.level: tilt``, every step, no trusted annotator): the policy's
own lean along the attributes is taken back to the reference's, 0 (reference anchoring held during
training instead of hoped for from theta's Adam; docs/theta.md, "What theta does after the start").
``bias.level: orthogonal`` takes no step: theta keeps its Adam, and the policy's gradient is kept
orthogonal to the declared attributes on every micro-batch (:mod:`badpo.core.orthogonal`), so the
policy's lean along them stays the reference's (:data:`LEVEL_RULES`).

The step needs every judgment's pre-bias logit z_i (the loss's logit minus its bias logit, from
``LossTerms.logits``). Two modes:

* ``final`` (the default): after the last optimizer step, one no-grad pass over every judgment
  computes z_i under the trained policy (or reward model), and the untrusted theta_k are moved
  once, before ``theta.json`` is written. Training is exactly that of ``gradient``: the policy
  keeps the reference anchoring, and the saved theta_k are counted from the trusted annotators'
  zero. The policy was fitted against theta before the step, and a shift of theta alone is not
  the degenerate direction (that moves the policy's tilt by the opposite amount): so that theta
  is saved too, as ``theta_trained.json``, and vote prediction reads it.
* ``every_step``: :class:`LevelStep` keeps the z_i each judgment had the last time it was in a
  batch (no extra forward; a margin is at most one pass over the data old) and, after each
  optimizer step (theta's Adam included), moves the untrusted theta_k on the judgments seen so far.
  The policy's gradient then pulls it to the trusted annotators' zero (trusted anchoring), their
  sampling noise included. The cache is checkpointed, so a resumed run takes the same steps.

A coordinate whose level cannot be estimated (no cross-group trusted judgment, or a separable set)
keeps its level. With several processes each sees its own micro-batches: the new margins and
the times each judgment was seen are summed over processes before the solve, and a judgment's
margin is their mean (a step that wraps the epoch can hold a judgment twice, on two processes), so
every process holds the same cache and computes the same shift as one process would. The solve
weighs every judgment alike, also under a method's loss weights (Group-DRO, Crowd-PrefRL): the
level is a property of the labels, not of the weighting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import torch
from torch import Tensor

from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError
from badpo.core.level_step import Link, level_shift, tilt_shift
from badpo.run_folder.layout import THETA_FILE, TRAINED_THETA_FILE
from badpo.theta.labels import ThetaLabels
from badpo.theta.options import ENGINE, LEVEL_RULES, Front, check_orthogonal
from badpo.theta.start import labels_quality

__all__ = ["LEVEL_RULES", "TILT_QUALITY", "LevelStep", "build_level_step", "orthogonal_step", "save_theta"]


class LevelStep:
    """The cached pre-bias logits of the judgments and the level step (module docstring)."""

    def __init__(self, link: Link, n_judgments: int, every_step: bool, anchor: str = "trusted",
                 pair: Tensor | None = None, side: Tensor | None = None, quality: Tensor | None = None) -> None:
        self.link, self.every_step, self.anchor = link, every_step, anchor
        self.pair, self.side = pair, side  # the tilt anchor's pair index and orientation of each judgment
        self.quality = quality  # and the labels' quality of each judgment's pair (tilt_given_quality)
        self.logits = torch.zeros(n_judgments, dtype=torch.float64)  # z_i, the last one seen
        self.seen = torch.zeros(n_judgments, dtype=torch.bool)
        self._new = torch.zeros(n_judgments, dtype=torch.float64)  # this step's summed z_i, scratch
        self._new_seen = torch.zeros(n_judgments, dtype=torch.float64)  # and how often each was seen
        self.last: dict = {}  # the latest shift, for the log and run.json
        self.trained: BiasChannel | None = None  # final: theta before the step, as the policy was trained

    def observe(self, judgments: Tensor, logits: Tensor | None, bias_logits: Tensor) -> None:
        """Record one micro-batch: ``logits`` (bias included, ``LossTerms.logits``) minus
        ``bias_logits`` is each judgment's z_i."""
        if logits is None:
            raise RuntimeError("bias.trusted_level: the method's loss returned no LossTerms.logits")
        rows = judgments.cpu()
        self._new.index_add_(0, rows, (logits.detach() - bias_logits.detach()).double().cpu())
        self._new_seen.index_add_(0, rows, torch.ones(len(rows), dtype=torch.float64))

    def apply(self, bias: BiasChannel, annotator_index: Tensor, attr_diff: Tensor,
              reduce: Callable[[Tensor], Tensor]) -> dict:
        """Merge the observed margins (``reduce`` sums over processes; a judgment seen more than
        once has the mean of its margins), solve for the level on every judgment seen, move every
        untrusted theta_k; returns what to log: the shift (``level_shift``) and the trusted
        judgments' own shift of the margins (``trusted_shift``)."""
        summed, counts = reduce(torch.stack([self._new, self._new_seen])).double()
        new_seen = counts > 0
        self.logits[new_seen] = summed[new_seen] / counts[new_seen]
        self.seen |= new_seen
        self._new.zero_()
        self._new_seen.zero_()
        rows = self.seen.nonzero().flatten()
        index, diff = annotator_index[rows.to(annotator_index.device)], attr_diff[rows.to(attr_diff.device)]
        with torch.no_grad():
            current = bias(index, diff).double().cpu()
        directions = diff[:, bias.declared_index].double().cpu()
        if self.anchor == "tilt":
            quality = None if self.quality is None else self.quality[rows]
            delta, tilt = tilt_shift(self.logits[rows] + current, self.logits[rows], directions,
                                     self.pair[rows], self.side[rows], self.link, quality)
            bias.shift_level(delta.nan_to_num(0.0))
            self.last = {"level_shift": _named(bias.declared, delta), "policy_tilt": _named(bias.declared, tilt)}
            return self.last
        trusted = bias.trusted_mask[index].cpu()
        delta, s_hat = level_shift(self.logits[rows] + current, directions, trusted, self.link)
        bias.shift_untrusted(delta.nan_to_num(0.0))
        self.last = {"level_shift": _named(bias.declared, delta), "trusted_shift": _named(bias.declared, s_hat)}
        return self.last

    def state_dict(self) -> dict[str, Tensor]:
        return {"logits": self.logits.clone(), "seen": self.seen.clone()}

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        logits, seen = state["logits"].to(torch.float64), state["seen"].to(torch.bool)
        if logits.shape != self.logits.shape or seen.shape != self.seen.shape:
            raise ValueError(f"level: the checkpoint holds margins of {len(logits)} judgments, this run "
                             f"has {len(self.logits)}")
        self.logits, self.seen = logits.clone(), seen.clone()


def save_theta(bias: BiasChannel, level: LevelStep | None, folder: Path) -> None:
    """``theta.json`` and, when the final step moved theta after training, ``theta_trained.json``
    (:data:`badpo.run_folder.layout.TRAINED_THETA_FILE`: the theta the policy was trained against)."""
    bias.save(folder / THETA_FILE)
    if level is not None and level.trained is not None:
        level.trained.save(folder / TRAINED_THETA_FILE)


def _named(names: tuple[str, ...], values: Tensor) -> dict[str, float | None]:
    """{attribute: value} for the log; an unestimated coordinate is None."""
    return {name: (float(v) if torch.isfinite(v) else None) for name, v in zip(names, values)}


def _no_quality(labels: ThetaLabels, bias: BiasChannel) -> None:
    return None


def _labels_quality(labels: ThetaLabels, bias: BiasChannel) -> Tensor:
    return labels_quality(labels, bias.declared_index.tolist(), bias.fixed_offset.double().cpu())


# what the tilt anchor holds fixed when it reads the policy's lean (a LevelRule's ``tilt``)
TILT_QUALITY: dict[str, Callable[[ThetaLabels, BiasChannel], Tensor | None]] = {
    "lean": _no_quality, "lean_given_quality": _labels_quality}


def orthogonal_step(level: str, bias: BiasChannel | None, method, micro_batch: int, front: Front = ENGINE) -> bool:
    """Whether the run keeps the policy's step orthogonal to the declared attributes (``level``: its
    ``bias.level``; ``method`` its Method; ``micro_batch`` its items per forward). A method that
    learns no theta never gets here with a rule other than ``adam`` (``build_bias`` refuses it)."""
    if bias is None or not method.learns_theta or not LEVEL_RULES[level].orthogonal:
        return False
    check_orthogonal(bool(bias.trusted), method, micro_batch, len(bias.declared), front)
    return True


def build_level_step(settings, bias: BiasChannel | None, link: Link, labels: ThetaLabels) -> LevelStep | None:
    """The level step of a run (``settings``: its ``BiasSettings``): with a tilt rule of
    ``bias.level``, the tilt anchor every step (each judgment's pair and orientation from ``labels``);
    else only with trusted annotators and ``bias.trusted_level`` other than ``gradient``; None
    otherwise."""
    if bias is None:
        return None
    tilt = LEVEL_RULES[settings.level].tilt
    if tilt is not None:
        if bias.trusted:
            raise ConfigError(f"bias.level: {settings.level} anchors the level on the policy's own lean, "
                              "bias.trusted on the trusted annotators: choose one (bias.level: adam keeps "
                              "the trusted anchor)")
        return LevelStep(link, len(labels), every_step=True, anchor="tilt", pair=labels.pair,
                         side=labels.side, quality=TILT_QUALITY[tilt](labels, bias))
    if not bias.trusted or settings.trusted_level == "gradient":
        return None
    return LevelStep(link, len(labels), every_step=settings.trusted_level == "every_step")
