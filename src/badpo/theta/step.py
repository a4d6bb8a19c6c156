"""theta's own optimiser and its step, the same for the engine's loop and the TRL callback.

theta trains on its own ``torch.optim.Adam`` at a constant rate with no weight decay (the paper's
"Models and training" appendix): the policy's schedule, clipping and weight decay never touch it.
theta is outside DDP, so after the policy's backward passes its gradient is averaged over the
processes as DDP averages the policy's; then one Adam step, and the gradient is cleared.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from badpo.core.bias import BiasChannel

__all__ = ["theta_adam", "reduce_theta_gradients", "step_theta"]


def _learned(*modules: nn.Module | None) -> list[nn.Parameter]:
    return [p for module in modules if module is not None for p in module.parameters() if p.requires_grad]


def theta_adam(bias: BiasChannel | None, lr: float, device, cuts: nn.Module | None = None
               ) -> torch.optim.Optimizer | None:
    """theta's Adam, over the channel and the graded labels' cut points ``cuts``
    (:class:`badpo.theta.graded.LabelCuts`), None when neither has anything to learn; moves both to
    ``device``. Parameters with ``requires_grad=False`` (a frozen channel's) stay out of it."""
    for module in (bias, cuts):
        if module is not None:
            module.to(device)
    params = _learned(bias, cuts)
    return torch.optim.Adam(params, lr=lr, weight_decay=0.0) if params else None


def reduce_theta_gradients(bias: BiasChannel | None, accelerator, cuts: nn.Module | None = None) -> dict:
    """theta's (and the cut points') gradients averaged over ``accelerator``'s processes (a
    parameter with none gets zeros, so every process steps the same Adam); their norm, for the log."""
    grads = []
    for param in _learned(bias, cuts):
        grad = param.grad if param.grad is not None else torch.zeros_like(param)
        if accelerator.num_processes > 1:
            grad = accelerator.reduce(grad, reduction="mean")
        param.grad = grad
        grads.append(grad.reshape(-1))
    if not grads:
        return {}
    return {"theta_grad_norm": torch.linalg.vector_norm(torch.cat(grads))}


def step_theta(optimizer: torch.optim.Optimizer, step: Callable[[torch.optim.Optimizer], None] | None = None) -> None:
    """One Adam step of theta (``step``: the caller's way of stepping, e.g. one that names an
    overflow), then its gradient cleared."""
    if step is None:
        optimizer.step()
    else:
        step(optimizer)
    optimizer.zero_grad(set_to_none=True)
