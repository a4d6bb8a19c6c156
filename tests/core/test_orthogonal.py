"""bias.level: orthogonal's projection (badpo.core.orthogonal): worked by hand, its identity
directions.T @ gradient == 0, and on a linear policy the lean along the attribute that the
BA-DPO loss cannot tell from theta stays exactly where it started while quality is learned."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from badpo.core.orthogonal import orthogonal_to, project_out


def test_project_out_worked_by_hand():
    """g = (1, 2, 3) on the one direction (1, 1, 0): the fit is 1.5 (1, 1, 0), the rest (-0.5, 0.5, 3)."""
    out = project_out(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([[1.0], [1.0], [0.0]]))
    assert torch.allclose(out, torch.tensor([-0.5, 0.5, 3.0]), atol=1e-7)


def test_project_out_leaves_nothing_along_any_direction_and_keeps_the_dtype():
    g = torch.Generator().manual_seed(0)
    directions = torch.randn(24, 3, generator=g)
    directions[:, 2] = 2 * directions[:, 0]  # a repeated direction: the pseudo-inverse, not a singular solve
    gradient = torch.randn(24, generator=g)
    out = project_out(gradient, directions)
    assert out.dtype == torch.float32
    assert torch.allclose(directions.T.double() @ out.double(), torch.zeros(3, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(project_out(out, directions), out, atol=1e-6)  # a projection: twice is once


def test_a_gradient_already_orthogonal_and_zero_directions_pass_unchanged():
    gradient = torch.tensor([1.0, -1.0, 2.0])
    assert torch.equal(project_out(gradient, torch.zeros(3, 2)), gradient)
    assert torch.allclose(project_out(gradient, torch.tensor([[1.0], [1.0], [0.0]])), gradient)


def test_orthogonal_to_is_the_identity_forward_and_projects_backward():
    values = torch.tensor([0.3, -0.2, 0.5], requires_grad=True)
    directions = torch.tensor([[1.0], [1.0], [0.0]], requires_grad=True)
    out = orthogonal_to(values, directions)
    assert torch.equal(out, values)
    (out * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert torch.allclose(values.grad, torch.tensor([-0.5, 0.5, 3.0]), atol=1e-7)
    assert directions.grad is None
    with pytest.raises(ValueError, match="3 values against 2 rows"):
        orthogonal_to(values, directions[:2])


@pytest.mark.parametrize("orthogonal", [True, False])
def test_on_a_linear_policy_the_lean_theta_cannot_be_told_from_stays_put(orthogonal):
    """u_i = w . x_i + c * a_i, labels from quality and a planted theta of 1, the BA-DPO loss
    -log sigma(u + theta a) with theta learned beside the policy. The loss depends on c + theta
    only, so plain gradient descent moves c too; with the policy's step orthogonal to a, c's
    gradient is 0 at every step (to rounding) while w still learns quality."""
    g = torch.Generator().manual_seed(1)
    x, a = torch.randn(256, 8, generator=g), torch.randn(256, generator=g)
    truth = x @ torch.randn(8, generator=g)
    labels = torch.where(torch.rand(256, generator=g) < torch.sigmoid(truth + a), 1.0, -1.0)
    w = torch.zeros(8, requires_grad=True)
    c, theta = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([w, c, theta], lr=0.5)
    for step in range(60):
        rows = torch.arange(step * 32, step * 32 + 32) % 256
        margin = x[rows] @ w + c * a[rows]
        if orthogonal:
            margin = orthogonal_to(margin, a[rows][:, None])
        loss = -F.logsigmoid(labels[rows] * (margin + theta * a[rows])).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    learned = torch.corrcoef(torch.stack([(x @ w).detach(), truth]))[0, 1]
    assert learned > 0.8 and float(theta) > 0.3
    if orthogonal:  # c's gradient is 0 up to float32 rounding of the projection
        assert abs(float(c)) < 1e-6
    else:  # plain descent moves c with theta
        assert float(c) > 0.1
