"""Ties and strengths in the objective: the tie strength (Davidson's nu) and the gaps between
strength levels are learned beside theta, by theta's Adam, and start at their fit with the policy at
the reference.

Why Davidson's model for ties (:func:`badpo.core.losses.graded_loss`): a decisive vote follows
sigmoid(u + theta_k . dg) whatever nu, so theta keeps the meaning it has without ties (the audit's
theta_k, today's runs and a run with ties read on one scale), ties add what they say about |z|, and
leaving them out (``ties: drop``, the paper's setting) is conditioning on a decisive vote, not
another model. An ordered logit with a tie band (Rao-Kupper's threshold) would also take ties, but
shifts every decisive vote's logit by the band, so theta would change meaning with the tie rate.
The strength of a win is an ordered logit given the win, on the same logit: with one level it
is nothing, so with no tie and no strength the loss is BA-DPO's, the same expression. Both sides of
a pair are symmetric: a tie's likelihood does not depend on which side a file calls chosen.
docs/crowd_labels.md gives the argument with the data.

A judgment's grade: 0 a tie, 1..L its strength's rank among the strengths the data holds (dense
ranks: MultiPref's "slightly" and "clearly" are 1 and 2; HelpSteer3's 1..3 stay 1..3), 1 for a win
with no strength (L = 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from badpo.core.level_step import NoFiniteStart
from badpo.core.losses import graded_loss

__all__ = ["Grades", "LabelCuts", "fit_cuts", "grades_like", "grades_of"]


class Grades:
    """The grades of N judgments (``grade`` ``[N]`` long), how many strength levels (``levels``) and
    whether any is a tie; ``strengths``: the data's strength of each rank (for the record)."""

    def __init__(self, grade: Tensor, levels: int, ties: bool, strengths: tuple[int, ...]) -> None:
        self.grade, self.levels, self.ties, self.strengths = grade, levels, ties, strengths

    def counts(self) -> dict[str, int]:
        counts = {"ties": int((self.grade == 0).sum())}
        for rank, strength in enumerate(self.strengths or (None,), start=1):
            counts["wins" if strength is None else f"strength_{strength}"] = int((self.grade == rank).sum())
        return counts


def grades_of(judgments: Sequence) -> Grades | None:
    """The grades of validated judgments, or None when every one is a plain win (training is then
    exactly what it was without graded labels)."""
    ties = [bool(getattr(j, "tie", False)) for j in judgments]
    strengths = [getattr(j, "strength", None) for j in judgments]
    if not any(ties) and all(s is None for s in strengths):
        return None
    levels = tuple(sorted({s for s in strengths if s is not None}))
    rank = {s: r for r, s in enumerate(levels, start=1)}
    grade = torch.tensor([0 if tie else rank.get(s, 1) for tie, s in zip(ties, strengths)], dtype=torch.long)
    return Grades(grade, max(len(levels), 1), any(ties), levels)


def grades_like(judgments: Sequence, grades: Grades | None, what: str) -> Grades | None:
    """The grades of ``judgments`` (an evaluation set) on the scale of the training set's ``grades``:
    its strength ranks, a tie 0. A label the training scale has no place for (a tie or a strength
    where the training data holds none, a strength it never saw) is a ValueError naming the row."""
    rows = grades_of(judgments)
    if rows is None and (grades is None or grades.levels == 1):
        return None if grades is None else Grades(torch.ones(len(judgments), dtype=torch.long), 1, grades.ties,
                                                  grades.strengths)
    rank = {s: r for r, s in enumerate(grades.strengths, start=1)} if grades is not None else {}
    out = []
    for i, j in enumerate(judgments):
        strength = getattr(j, "strength", None)
        if getattr(j, "tie", False):
            if grades is None or not grades.ties:
                raise ValueError(f"{what} row {i}: a tie, and the training data holds none to learn a tie's odds from")
            out.append(0)
        elif strength is None and (grades is None or grades.levels == 1):
            out.append(1)
        elif strength in rank:
            out.append(rank[strength])
        else:
            raise ValueError(f"{what} row {i}: strength {strength}, which the training data's strengths "
                             f"{list(rank)} have no place for")
    return Grades(torch.tensor(out, dtype=torch.long), grades.levels, grades.ties, grades.strengths)


def _raw(value: float) -> float:
    """softplus^-1(value), value > 0."""
    return float(torch.log(torch.expm1(torch.tensor(value, dtype=torch.float64))))


class LabelCuts(nn.Module):
    """The graded labels' parameters: nu = softplus(raw_tie) when the data holds ties (else 0, not
    learned) and gaps_g = softplus(raw_gaps[g]) between the L strength levels; positive by
    construction. nu = 1 is a tie in a third of the votes at z = 0."""

    def __init__(self, ties: bool, levels: int, tie_strength: float = 1.0, gaps: Sequence[float] | None = None) -> None:
        super().__init__()
        self.has_ties, self.levels = ties, levels
        self.raw_tie = nn.Parameter(torch.tensor(_raw(tie_strength))) if ties else None
        gaps = list(gaps) if gaps is not None else [1.0] * (levels - 1)
        if len(gaps) != levels - 1:
            raise ValueError(f"LabelCuts: {levels} strength levels need {levels - 1} gaps, got {len(gaps)}")
        self.raw_gaps = nn.Parameter(torch.tensor([_raw(g) for g in gaps])) if levels > 1 else None

    def tie_strength(self) -> Tensor:
        if self.raw_tie is None:
            return torch.zeros(())
        return F.softplus(self.raw_tie)

    def gaps(self) -> Tensor | None:
        return None if self.raw_gaps is None else F.softplus(self.raw_gaps)

    def loss(self, logits: Tensor, grade: Tensor) -> Tensor:
        """``[J]`` the graded likelihood's loss of each judgment at its logit (bias included)."""
        gaps = self.gaps()
        return graded_loss(logits, grade.to(logits.device), self.tie_strength().to(logits),
                           None if gaps is None else gaps.to(logits))

    def record(self) -> dict:
        """The cut points, for run.json and the log."""
        with torch.no_grad():
            gaps = self.gaps()
            return {"tie_strength": float(self.tie_strength()),
                    "strength_gaps": [] if gaps is None else gaps.tolist()}


def fit_cuts(directions: Tensor | None, offsets: Tensor, grades: Grades, *, max_iter: int = 200
             ) -> tuple[list[float] | None, LabelCuts]:
    """The graded likelihood's fit with the policy at the reference: theta's shared level along
    ``directions`` ``[N, d]`` (None: theta held at 0, as for DPO or ``bias.init: zero``) jointly
    with nu and the strength gaps, each judgment's logit at the start being ``offsets`` ``[N]`` (the method's
    logit at the start plus any fixed offset). L-BFGS in float64 on the mean negative
    log-likelihood; a level past 30 logits, where the labels
    separate, is refused (:class:`badpo.core.level_step.NoFiniteStart` names the coordinate)."""
    d = 0 if directions is None else directions.shape[1]
    theta = torch.zeros(d, dtype=torch.float64, requires_grad=True)
    cuts = LabelCuts(grades.ties, grades.levels).double()
    params = [theta, *cuts.parameters()]
    if d == 0 and not list(cuts.parameters()):  # one strength level, no tie: nothing to fit
        return (None if directions is None else []), cuts.float()
    optimizer = torch.optim.LBFGS(params, lr=1.0, max_iter=max_iter, tolerance_grad=1e-10,
                                  tolerance_change=1e-14, line_search_fn="strong_wolfe")
    grade, offsets = grades.grade, offsets.double()

    def closure() -> Tensor:
        optimizer.zero_grad()
        logits = offsets if directions is None else offsets + directions.double() @ theta
        loss = cuts.loss(logits, grade).mean()
        loss.backward()
        return loss

    optimizer.step(closure)
    values = theta.detach()
    if not bool(torch.isfinite(values).all()) or bool((values.abs() > 30).any()):
        worst = int(values.abs().nan_to_num(float("inf")).argmax())
        raise NoFiniteStart([worst], "the labels' fit has no finite level (the attribute side won, or lost, "
                            "every cross-group judgment)")
    return (values.tolist() if directions is not None else None), cuts.float().requires_grad_(True)
