"""A run that diverges stops at the step it diverges.

A non-finite loss or gradient (checked before the optimizer steps, so the weights stay the last
good ones), a non-finite weight, or a bias logit theta_k . (g_w - g_l) beyond
:data:`LOGIT_LIMIT` (checked after it, before any checkpoint can save it) raises
:class:`TrainingDiverged`, naming the step and what went wrong. Every process takes the same
decision (the flags are summed over processes), so none waits on a collective the others left.
:func:`stop_message` turns it into the one line a user reads: the step, what, and the last good
checkpoint the run folder keeps (every checkpoint was saved from finite weights).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torch import Tensor

# A bias logit of 1e4 is a log-odds: a probability within e^-10000 of 0 or 1, which no finite set
# of labels supports, and float32 keeps no gradient to bring it back. Only a blown-up theta gets
# there (Adam moves it by about bias.lr a step), so it stops the run as a non-finite one does. The
# logit, not theta, is bounded: an attribute on a small scale may need a large theta.
LOGIT_LIMIT = 1e4
LOGIT_BREACH = f"a bias logit of theta is beyond ±{LOGIT_LIMIT:g} (a log-odds no label supports)"


class TrainingDiverged(ValueError):
    """A non-finite loss, gradient or weight, or a blown-up theta, at 1-based ``step``; ``what``
    says it (``a weight of the policy is not finite``)."""

    def __init__(self, step: int, what: str, message: str | None = None) -> None:
        super().__init__(message or f"step {step}: {what}")
        self.step, self.what = step, what


def _all_finite(tensors: Iterable[Tensor | None]) -> Tensor:
    """One boolean tensor: every value of every tensor is finite (no synchronisation). Read as the
    largest |value| over all of them, which is NaN or inf exactly when one is (no sum that a large
    finite value could overflow): on a GPU a few multi-tensor kernels instead of two per tensor,
    the launches a host-bound step waits on. A sharded tensor (an FSDP2 DTensor) is read in this
    process's shard: the flags are summed over processes."""
    local = [t.to_local() if hasattr(t, "to_local") else t for t in tensors if t is not None]
    local = [t for t in local if t.numel() and t.is_floating_point()]  # an integer is always finite
    if not local:
        return torch.tensor(True)
    return torch.isfinite(_largest_abs(local))


def _largest_abs(tensors: list[Tensor]) -> Tensor:
    """max |value| over ``tensors`` (NaN if any is NaN): torch's multi-tensor reduction from 2.6,
    one norm per tensor before it (the project supports torch 2.1 on)."""
    try:
        from torch.nn.utils import get_total_norm
    except ImportError:
        device = tensors[0].device
        return torch.stack([torch.linalg.vector_norm(t, math.inf).to(device) for t in tensors]).max()
    return get_total_norm(tensors, norm_type=math.inf)


def _raise_if_any(accelerator, step: int, checks: dict[str, Tensor]) -> None:
    """Raise for the first check whose flag is False on any process (one synchronisation)."""
    device = accelerator.device
    bad = torch.stack([(~flag.to(device)).float() for flag in checks.values()])
    if accelerator.num_processes > 1:
        bad = accelerator.reduce(bad, reduction="sum")
    for what, count in zip(checks, bad.tolist()):
        if count:
            raise TrainingDiverged(step + 1, what)


def check_loss_and_gradients(accelerator, step: int, loss: Tensor, policy, theta=None) -> None:
    """Before the optimizer step of 0-based ``step``: the summed loss of this process, every
    gradient of the policy and of theta (``theta``: the bias channel, None without one)."""
    checks = {"the loss is not finite": torch.isfinite(loss.detach()).all(),
              "a gradient of the policy is not finite": _all_finite(p.grad for p in policy.parameters())}
    if theta is not None:
        checks["a gradient of theta is not finite"] = _all_finite(p.grad for p in theta.parameters())
    _raise_if_any(accelerator, step, checks)


def check_weights(accelerator, step: int, policy, theta=None,
                  largest_logit: Callable[[], Tensor] | None = None) -> None:
    """After the optimizer step of 0-based ``step``: every trainable weight and theta, and
    ``largest_logit()``, the largest |theta_k . (g_w - g_l)| over the training judgments."""
    checks = {"a weight of the policy is not finite": _all_finite(p.detach() for p in policy.parameters()
                                                                  if p.requires_grad)}
    if theta is not None:
        checks["theta is not finite"] = _all_finite(p.detach() for p in theta.parameters())
    if theta is not None and largest_logit is not None:
        checks[LOGIT_BREACH] = ~(largest_logit() > LOGIT_LIMIT)
    _raise_if_any(accelerator, step, checks)


def optimizer_step(optimizer, step: int, what: str) -> None:
    """``optimizer.step()`` of 0-based ``step``; an update past the float32 range (torch: "value
    cannot be converted to type float without overflow", a learning rate that Adam's first-step
    bias correction scales past it) stops the run as a non-finite one does. ``what``: the policy
    or theta."""
    try:
        optimizer.step()
    except RuntimeError as error:
        if "without overflow" not in str(error):
            raise
        raise TrainingDiverged(step + 1, f"the update of {what} overflows float32") from None


def stop_message(error: TrainingDiverged, output: Path, checkpoints: list[Path],
                 largest_difference: str | None = None) -> str:
    """The one line for a run stopped by ``error``: the step, what, what the folder keeps, and
    what to change. A bias logit past the limit grows with g's scale as much as with theta, so
    ``largest_difference`` (where the data's largest |g(y_w) - g(y_l)| is) is named beside bias.lr."""
    kept = f"log.jsonl up to step {error.step - 1}" if error.step > 1 else "no log line (it stopped at its first step)"
    if checkpoints:
        last = f"the last good checkpoint is {checkpoints[-1]}"
    else:
        last = "no checkpoint was saved (save_every=0 or none reached)"
    rate = "bias.lr" if "theta" in error.what else "optim.lr"  # the optimizer of what diverged
    change = f"lower {rate}"
    if error.what == LOGIT_BREACH and largest_difference is not None:
        change = f"{largest_difference}: give that attribute on a smaller scale, or lower {rate},"
    return (f"training diverged at step {error.step}: {error.what}, so the run stopped "
            f"there; {output} keeps {kept}; {last}; {change} and "
            "train again with overwrite=true")


__all__ = ["LOGIT_BREACH", "LOGIT_LIMIT", "TrainingDiverged", "check_loss_and_gradients", "check_weights",
           "optimizer_step", "stop_message"]
