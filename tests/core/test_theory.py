"""The theory of Section 4 as tests, on a tabular testbed (float64).

The "policy" is a free reward logit r(x, y) for every response of a finite set per prompt; its
log-probs are r / beta + log pi_ref, so the DPO margin u of ``ba_dpo_loss`` is exactly the
reward difference r(x, y_w) - r(x, y_l) (Proposition "prop:compat": log Z cancels). The bias
logits come from ``BiasChannel``. The loss is minimised by damped Newton with a pseudo-inverse
(the Hessian is singular along the null directions of Theorem "thm:identif"): the step stays
in the range of the Hessian, so each run converges to the minimiser whose null-space component
is that of its starting point, and different starts reach different minimisers. Only
identified quantities are compared across minimisers.

Existence of a minimiser: every (annotator, pair) that is judged is judged both ways (with
unequal counts), so no direction of the parameters can push every logit up.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.autograd.functional import hessian
from torch.func import functional_call

from badpo.auditing.estimates import BiasIdentifiabilityWarning, audit, offline_log_odds
from badpo.core.attributes import resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.core.losses import ba_dpo_loss
from badpo.corpora.signing import SigningConfig, sign_corpus
from badpo.corpora.tiny import TinyWorldConfig, tiny_base_pairs
from fixtures.theory import BETA, F64, World, newton, random_world


def world_with_groups(groups: list[list[int]], prompts_per_group: int, seed: int) -> World:
    """q = 1; each annotator group judges its own prompts (3 responses, both groups present).

    Every pair of a prompt is judged by two annotators of the group, each both ways with counts
    drawn from {1, 2, 3} (unequal counts, so the optimum is not at zero logits).
    """
    rng = np.random.default_rng(seed)
    g, judgments, prompt = [], [], 0
    for group in groups:
        for _ in range(prompts_per_group):
            g.append([[1.0], [0.0], [float(rng.integers(2))]])
            for w, l in ((0, 1), (0, 2), (1, 2)):
                for a in rng.choice(group, size=2, replace=False):
                    counts = rng.integers(1, 4, size=2)
                    judgments += [(int(a), prompt, w, l)] * int(counts[0])
                    judgments += [(int(a), prompt, l, w)] * int(counts[1])
            prompt += 1
    m = sum(len(group) for group in groups)
    return World(torch.tensor(g), judgments, m, seed)


def minimise(world: World, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(r [P, R], theta [m], judgment logits [B]) at a minimiser reached from a random start."""
    channel = world.channel("per_annotator")
    fn, unflatten = world.flat_loss(channel)
    n = world.P * world.R + len(world.annotators) * world.q
    start = 3.0 * torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=F64)
    best = newton(fn, start)
    r, params = unflatten(best)
    logits = -torch.log(torch.expm1(world.losses(r, channel, params)))  # loss = log(1 + e^-L)
    return r, params["annotator_theta"][:, 0], logits


# ------------------------------------------------------------------------------ convexity
@pytest.mark.parametrize("variant", ["per_annotator", "shared_mean"])
def test_loss_is_jointly_convex_in_rewards_and_theta(variant):
    """Hessian PSD at random points, and midpoint convexity on random pairs (float64)."""
    world = random_world(seed=1)
    fn, _ = world.flat_loss(world.channel(variant))
    n = world.P * world.R + sum(p.numel() for p in world.channel(variant).parameters())
    gen = torch.Generator().manual_seed(2)
    for _ in range(5):
        eigenvalues = torch.linalg.eigvalsh(hessian(fn, 2.0 * torch.randn(n, generator=gen, dtype=F64)))
        assert eigenvalues.min() >= -1e-12 * eigenvalues.max()
        assert eigenvalues.max() > 0
    for _ in range(50):
        a, b = (3.0 * torch.randn(n, generator=gen, dtype=F64) for _ in range(2))
        assert fn((a + b) / 2) <= (fn(a) + fn(b)) / 2 + 1e-12


# ---------------------------------------------------------------------- the degeneracy
def test_shifting_c_from_theta_into_the_reward_changes_no_judgment_probability():
    """(r + delta_g . c, theta_k - c) gives every judgment the same probability (Corollary prop:degeneracy).

    The control moves r alone by the same amount: cross-group probabilities then change.
    """
    world = random_world(seed=3)
    gen = torch.Generator().manual_seed(4)
    channel = world.channel("per_annotator")
    theta = torch.randn(len(world.annotators), world.q, generator=gen, dtype=F64)
    r = torch.randn(world.P, world.R, generator=gen, dtype=F64)
    c = torch.tensor([0.7, -1.3], dtype=F64)
    before = torch.exp(-world.losses(r, channel, {"annotator_theta": theta}))
    shifted_r = r + world.g @ c
    after = torch.exp(-world.losses(shifted_r, channel, {"annotator_theta": theta - c}))
    torch.testing.assert_close(after, before, rtol=0, atol=1e-12)
    reward_only = torch.exp(-world.losses(shifted_r, channel, {"annotator_theta": theta}))
    cross = world.attr_diff.abs().sum(dim=1) > 0
    assert cross.any() and (reward_only - before)[cross].abs().min() > 1e-3
    # The same holds through the shared-mean parameterisation: only theta_bar moves.
    shared = world.channel("shared_mean")
    params = {"shared_mean": theta.mean(0), "deviation": theta - theta.mean(0)}
    moved = {"shared_mean": theta.mean(0) - c, "deviation": theta - theta.mean(0)}
    torch.testing.assert_close(torch.exp(-world.losses(shifted_r, shared, moved)),
                               torch.exp(-world.losses(r, shared, params)), rtol=0, atol=1e-12)


# -------------------------------------------------------------------- identifiability
def test_connected_pool_identifies_theta_differences_at_every_minimiser():
    """Three random starts reach three minimisers; they differ by exactly (c delta_g + h, -c 1).

    Checked: |grad| < 1e-10 at each; the logits of all judgments agree; theta_k - theta_k' agree;
    d theta = -c 1, and dr - c delta_g is constant on the two responses of every compared pair.
    The starts give different theta_bar (so the comparison is not between identical points).
    """
    world = world_with_groups([[0, 1, 2, 3]], prompts_per_group=4, seed=5)
    result = audit(world.judgment_rows(), resolve_attributes(["given:g0"]))
    assert result.graph.connected and not result.unidentified
    runs = [minimise(world, seed) for seed in (10, 11, 12)]
    r0, theta0, logits0 = runs[0]
    for r, theta, logits in runs[1:]:
        torch.testing.assert_close(logits, logits0, rtol=0, atol=1e-6)
        torch.testing.assert_close(theta - theta[0], theta0 - theta0[0], rtol=0, atol=1e-6)
        c = -(theta - theta0)[0]
        assert abs(float(c)) > 0.1  # a different minimiser, not the same point
        residual = (r - r0) - c * world.g[..., 0]  # must be constant within every compared pair
        torch.testing.assert_close(residual[world.prompt, world.win], residual[world.prompt, world.lose],
                                   rtol=0, atol=1e-6)


def test_split_pool_leaves_differences_across_components_free():
    """Two annotator groups on disjoint prompts: the audit finds 2 components; differences within
    a component agree across minimisers, differences across components do not."""
    world = world_with_groups([[0, 1], [2, 3]], prompts_per_group=3, seed=6)
    with pytest.warns(BiasIdentifiabilityWarning) as record:
        result = audit(world.judgment_rows(), resolve_attributes(["given:g0"]))
    assert any("any attribute: the annotator graph has 2 connected components" in str(w.message)
               for w in record)
    assert result.graph.components == (("k0", "k1"), ("k2", "k3"))
    runs = [minimise(world, seed) for seed in (20, 21)]
    (_, theta_a, logits_a), (_, theta_b, logits_b) = runs
    torch.testing.assert_close(logits_a, logits_b, rtol=0, atol=1e-6)
    for k, k2 in ((0, 1), (2, 3)):
        assert abs(float((theta_a[k] - theta_a[k2]) - (theta_b[k] - theta_b[k2]))) < 1e-6
    across = (theta_a[0] - theta_a[2]) - (theta_b[0] - theta_b[2])
    assert abs(float(across)) > 0.1


def test_split_pool_can_still_be_tied_through_shared_responses():
    """The converse of the theorem fails: a disconnected graph does not always free the offsets.

    One prompt, responses with delta_g = (1, 0, 0). Group {k0, k1} judges the cross-group pair
    (y0, y1), group {k2, k3} the cross-group pair (y0, y2), and the same-group pair (y1, y2) is
    judged too. The null system gives dr0 - dr1 = c_A, dr0 - dr2 = c_B and dr1 = dr2, so
    c_A = c_B: theta_0 - theta_2 is identified although the audit (rightly, by the theorem's
    definition) reports two components: the warning is conservative when compared pairs share
    responses, as the theorem's connectedness is sufficient, not necessary.
    """
    counts = {(0, 1): [(0, 3, 1), (1, 1, 2)], (0, 2): [(2, 2, 1), (3, 1, 3)], (1, 2): [(0, 2, 1)]}
    judgments = [(a, 0, w, l) for (w, l), judges in counts.items() for a, n_wl, n_lw in judges
                 for _ in range(n_wl)]
    judgments += [(a, 0, l, w) for (w, l), judges in counts.items() for a, n_wl, n_lw in judges
                  for _ in range(n_lw)]
    world = World(torch.tensor([[[1.0], [0.0], [0.0]]]), judgments, m=4, seed=13)
    with pytest.warns(BiasIdentifiabilityWarning) as record:
        result = audit(world.judgment_rows(), resolve_attributes(["given:g0"]))
    assert any("any attribute: the annotator graph has 2 connected components" in str(w.message)
               for w in record)
    assert result.graph.components == (("k0", "k1"), ("k2", "k3"))
    (_, theta_a, _), (_, theta_b, _) = (minimise(world, seed) for seed in (30, 31))
    assert abs(float(theta_a.mean() - theta_b.mean())) > 0.1  # different minimisers
    torch.testing.assert_close(theta_a - theta_a[0], theta_b - theta_b[0], rtol=0, atol=1e-6)


# --------------------------------------------------------------- the offline estimate
@pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")  # small corpus
def test_pooled_theta_on_swap_pairs_at_the_reference_is_the_offline_log_odds():
    """On swap pairs with r = 0 the pooled theta's MLE is log(w / (n - w)) per attribute, exactly.

    Swap pairs differ on one coordinate, dg = +-e_i, so the loss separates per coordinate into
    w log(1 + e^-t) + (n - w) log(1 + e^t), minimised at t = log(w / (n - w)).
    """
    world = TinyWorldConfig(n_pairs=300, signing=SigningConfig(seed=7, heldout_share=0.0))
    swaps = [j for j in sign_corpus(tiny_base_pairs(world)[0], world.signing).train
             if j.pair_type == "swap"]
    attributes = resolve_attributes(["names"])
    names = list(attributes.names)
    expected = [audit(swaps, attributes).coordinate(name).overall for name in names]
    attr_diff = torch.tensor(np.array([g_w - g_l for g_w, g_l in map(attributes.judgment_values, swaps)]),
                             dtype=F64)
    zeros = torch.zeros(len(swaps), dtype=F64)  # policy = reference: u = 0
    channel = BiasChannel("pooled", names).to(F64)

    def loss(theta: torch.Tensor) -> torch.Tensor:
        bias = functional_call(channel, {"pooled_theta": theta}, (None, attr_diff))
        return ba_dpo_loss(zeros, zeros, zeros, zeros, bias, BETA)[0].sum()

    theta = newton(loss, torch.zeros(len(names), dtype=F64), tol=1e-12)
    for i, counts in enumerate(expected):
        assert 0 < counts.wins < counts.cross
        assert abs(float(theta[i]) - offline_log_odds(counts.wins, counts.cross)) < 1e-8
        assert abs(float(theta[i]) - counts.log_odds) < 1e-8


# ------------------------------------------------------------------ the speed of the mean
def test_one_sgd_step_moves_the_shared_mean_m_times_further():
    """Proposition prop:rate with m = 5 annotators, 6 judgments each, the loss averaged over
    judgments, one SGD step from the same theta_k in both parameterisations.

    Checked against the closed form: the naive mean moves by -(lr / m) G_bar with
    G_k = -mean over D_k of sigma(-u - b) dg; the shared parameter by -lr G_bar, m times more;
    theta_k - mean_k theta_k moves identically in both.
    """
    rng = np.random.default_rng(8)
    m, per_annotator, P, R, lr = 5, 6, 4, 3, 0.3
    g = torch.tensor(rng.integers(0, 2, size=(P, R, 2)), dtype=F64)
    judgments = [(a, int(rng.integers(P)), *map(int, rng.choice(R, size=2, replace=False)))
                 for a in range(m) for _ in range(per_annotator)]
    world = World(g, judgments, m, seed=8)
    r = torch.randn(P, R, generator=torch.Generator().manual_seed(9), dtype=F64)
    theta = torch.randn(m, 2, generator=torch.Generator().manual_seed(10), dtype=F64)
    naive, shared = world.channel("per_annotator"), world.channel("shared_mean")
    with torch.no_grad():
        naive.annotator_theta.copy_(theta)
        shared.shared_mean.copy_(theta.mean(0))
        shared.deviation.copy_(theta - theta.mean(0))
    moves = {}
    for name, channel in (("naive", naive), ("shared", shared)):
        before_theta, before_mean = channel.theta().detach().clone(), channel.theta().mean(0).detach()
        raw_before = channel.shared_parameter().detach().clone() if name == "shared" else before_mean
        optimizer = torch.optim.SGD(channel.parameters(), lr=lr)
        optimizer.zero_grad()
        world.losses(r, channel).mean().backward()
        optimizer.step()
        after_theta = channel.theta().detach()
        raw_after = channel.shared_parameter().detach() if name == "shared" else after_theta.mean(0)
        moves[name] = (raw_after - raw_before,
                       (after_theta - after_theta.mean(0)) - (before_theta - before_theta.mean(0)))
    # Closed form of the paper's proof.
    u = r[world.prompt, world.win] - r[world.prompt, world.lose]
    weight = torch.sigmoid(-u - (theta[world.annotator] * world.attr_diff).sum(1))
    G = torch.stack([-(weight[:, None] * world.attr_diff)[world.annotator == k].mean(0) for k in range(m)])
    torch.testing.assert_close(moves["naive"][0], -lr / m * G.mean(0), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(moves["shared"][0], -lr * G.mean(0), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(moves["shared"][0], m * moves["naive"][0], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(moves["shared"][1], moves["naive"][1], rtol=0, atol=1e-14)
    assert moves["naive"][0].abs().min() > 1e-6  # a real step on both coordinates, far above atol


# ----------------------------------------------------------------- trusted annotators
def population_world(groups: list[list[int]], seed: int, trusted: tuple[int, ...]):
    """(world, weights [B], planted r* [P, R], planted theta* [m]) for the *expected* loss: every
    (annotator, pair) cell of ``world_with_groups`` appears once in each orientation, weighted by
    its planted probability sigma(+-(r*_w - r*_l + theta*_k dg)); theta* is 0 for ``trusted``.
    The model is then well specified and its minimisers are exactly the planted values up to the
    null directions that the labels leave."""
    base = world_with_groups(groups, prompts_per_group=3, seed=seed)
    cells = sorted({(int(a), int(p), min(int(w), int(l)), max(int(w), int(l)))
                    for a, p, w, l in zip(base.annotator, base.prompt, base.win, base.lose)})
    judgments = [(a, p, w, l) for a, p, w, l in cells] + [(a, p, l, w) for a, p, w, l in cells]
    world = World(base.g, judgments, len(base.annotators), seed)
    gen = torch.Generator().manual_seed(seed + 1)
    r_star = torch.randn(world.P, world.R, generator=gen, dtype=F64)
    theta_star = 1.5 * torch.randn(len(world.annotators), generator=gen, dtype=F64)
    theta_star[list(trusted)] = 0.0
    margin = (r_star[world.prompt, world.win] - r_star[world.prompt, world.lose]
              + theta_star[world.annotator] * world.attr_diff[:, 0])
    return world, torch.sigmoid(margin), r_star, theta_star


def fit(world: World, channel: BiasChannel, seed: int, weights: torch.Tensor | None = None):
    """(r [P, R], effective theta [m], the weighted loss fn of one flat vector, the minimiser) from
    a random start, by the pseudo-inverse Newton of this module."""
    shapes = {name: p.shape for name, p in channel.named_parameters()}
    n = world.P * world.R + sum(s.numel() for s in shapes.values())

    def unflatten(flat):
        r, offset, params = flat[: world.P * world.R].view(world.P, world.R), world.P * world.R, {}
        for name, shape in shapes.items():
            params[name] = flat[offset: offset + shape.numel()].view(shape)
            offset += shape.numel()
        return r, params

    def total(flat):
        r, params = unflatten(flat)
        losses = world.losses(r, channel, params)
        return (losses if weights is None else weights * losses).sum()

    start = 3.0 * torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=F64)
    best = newton(total, start, tol=1e-11)
    r, params = unflatten(best)
    with torch.no_grad():
        for name, value in params.items():
            getattr(channel, name).copy_(value)
        theta = channel.theta()[:, 0].clone()
    return r, theta, total, best


def flat_direction(world: World, c: float = 1.0) -> torch.Tensor:
    """The flat direction of Corollary prop:degeneracy in (r, annotator_theta) coordinates: every
    reward moves by -c g(y), every raw theta_k (trusted rows included) by +c."""
    m = len(world.annotators)
    return torch.cat([-c * world.g[..., 0].flatten(), torch.full((m,), c, dtype=F64)])


def test_a_trusted_annotator_leaves_no_flat_direction_and_one_minimiser():
    """Connected pool of 4 annotators, k0 trusted at 0 (channel ``trusted=["k0"]``).

    Without it, v = (-c g on r, +c on every theta_k) is flat: v' H v = 0 at the minimiser. With it,
    theta_k0 cannot move, so v changes k0's logits (by -c dg) and v' H v > 0: the loss curves along
    the former flat direction. Two random starts then reach the same theta_k for every k (1e-6),
    where without a trusted annotator they differ by a shared c (test above).
    """
    world = world_with_groups([[0, 1, 2, 3]], prompts_per_group=4, seed=5)
    v = flat_direction(world)
    free = world.channel("per_annotator")
    _, _, total, best = fit(world, free, seed=40)
    assert abs(float(v @ hessian(total, best) @ v)) < 1e-10
    runs = []
    for seed in (41, 42):
        channel = BiasChannel("per_annotator", ["g0"], world.annotators, trusted=["k0"]).to(F64)
        _, theta, total, best = fit(world, channel, seed)
        assert float(v @ hessian(total, best) @ v) > 0.1
        runs.append(theta)
    assert runs[0][0] == 0.0
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant", ["per_annotator", "shared_mean"])
def test_with_exact_probabilities_a_trusted_annotator_recovers_every_absolute_theta(variant):
    """The expected loss (each cell weighted by its planted probability) of a connected pool with
    k2 trusted at its planted 0: every theta_k equals the planted theta*_k absolutely, to 1e-6,
    and r equals r* up to one constant per prompt (compared within each prompt). Under
    shared_mean the trusted row replaces theta_bar + eps_k2, and theta_bar is learned."""
    world, weights, r_star, theta_star = population_world([[0, 1, 2, 3]], seed=7, trusted=(2,))
    channel = BiasChannel(variant, ["g0"], world.annotators, trusted=["k2"]).to(F64)
    r, theta, _, _ = fit(world, channel, seed=50, weights=weights)
    torch.testing.assert_close(theta, theta_star, rtol=0, atol=1e-6)
    torch.testing.assert_close(r - r[:, :1], r_star - r_star[:, :1], rtol=0, atol=1e-6)
    assert (theta_star[[0, 1, 3]].abs() > 0.05).all()  # absolute values, far from the trusted 0


def test_a_trusted_annotator_pins_only_its_own_component():
    """Two components {k0, k1} and {k2, k3} on disjoint prompts, k0 trusted, exact probabilities.

    Component A is pinned: theta_k1 = theta*_k1 from both starts (1e-6). Component B keeps a free
    offset: theta_k2 - theta_k3 is the planted difference at both starts, while theta_k2 itself
    differs between the starts. The audit with ``trusted=["k0"]`` names {k2, k3} as unpinned.
    """
    world, weights, _, theta_star = population_world([[0, 1], [2, 3]], seed=8, trusted=(0,))
    thetas = []
    for seed in (60, 61):
        channel = BiasChannel("per_annotator", ["g0"], world.annotators, trusted=["k0"]).to(F64)
        thetas.append(fit(world, channel, seed, weights=weights)[1])
    for theta in thetas:
        assert abs(float(theta[1] - theta_star[1])) < 1e-6
        assert abs(float((theta[2] - theta[3]) - (theta_star[2] - theta_star[3]))) < 1e-6
    assert abs(float(thetas[0][2] - thetas[1][2])) > 0.1
    with pytest.warns(BiasIdentifiabilityWarning) as record:
        result = audit(world.judgment_rows(), resolve_attributes(["given:g0"]), trusted=["k0"])
    assert result.unpinned() == (("k2", "k3"),)
    assert any("1 of 2 connected component(s) hold no trusted annotator" in str(w.message) for w in record)
