"""Rules for theta's level on a linear toy whose policy lean is one number (issue 51).

The real model cannot say *why* a rule leaves a share of the bias: its lean along an attribute is
read on other prompts than it trained on (docs/theta.md, "What theta does after the start"). On
this toy the policy's margin of pair p is u_p = w . x_p + s * dg_p: w carries quality (the truth
is q_p = v . x_p, sd ``--quality-sd`` logits), s is the policy's lean along the declared
attribute, and the body-fixed readout *is* s. So the toy isolates the training dynamics: a rule
that fails here fails on the training pairs, and one that succeeds here leaves the real model's
shortfall to what the training pairs do not show.

Labels: ``--judgments-per-pair`` annotators a pair, each choosing the first side with probability
sigma(q_p + theta* dg_p + s_q), dg_p ~ N(0, 1) + ``--correlation`` * q_p / sd (quality with the
attribute when positive). Every rule trains w and s by Adam on minibatches of judgments for a
fixed number of steps from the reference (w = 0, s = 0) and differs only in theta:

- ``dpo``: no theta.
- ``adam``: the library's default: theta starts at the labels' fit at u = 0
  (:func:`badpo.core.level_step.offset_mle`) and is learned by its own Adam.
- ``profile``: after every step theta is set to the labels' best level given each judgment's
  margin as last seen, unseen ones at the reference's 0 (the level step's cache), no Adam.
- ``oracle``: theta held at theta*.
- ``effect_held`` / ``effect_adam``: theta starts at the conditional level, and the loss is the
  labels' likelihood with the pair's unexplained quality integrated out,
  -log E_v sigma(z + tau_t v), v ~ N(0, 1), where tau_t^2 = tau_0^2 - var(w . x) over the step's
  judgments (tau_0 the conditional fit's spread, :func:`badpo.core.pair_level.pair_effect_level`):
  the quality the policy has learned leaves the link. Theta held, or learned by its Adam.

Readout: removal = 1 - s / s_dpo of the same seed and world.

    python experiments/analyses/level_rules_toy.py --out results/level_rule/toy/rules.json
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from badpo.core.jsonio import write_json
from badpo.core.level_step import LOGISTIC, offset_mle
from badpo.core.pair_level import pair_effect_level
from badpo.experiment.provenance import provenance

RULES = ("dpo", "adam", "profile", "oracle", "effect_held", "effect_adam")
NODES = torch.linspace(-8.0, 8.0, 129, dtype=torch.float64)  # quadrature of v ~ N(0, 1)
LOG_WEIGHTS = math.log(16.0 / 128) - NODES ** 2 / 2 - 0.5 * math.log(2 * math.pi)


@dataclass(frozen=True)
class World:
    features: Tensor  # [P, D] x_p
    quality: Tensor  # [P] q_p
    difference: Tensor  # [P] dg_p
    pair: Tensor  # [n] each judgment's pair
    side: Tensor  # [n] +1 where it chose the pair's first side


def make_world(seed: int, args: argparse.Namespace, theta: float) -> World:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(args.pairs, args.features, generator=g, dtype=torch.float64)
    v = torch.randn(args.features, generator=g, dtype=torch.float64)
    q = x @ (v / v.norm() * args.quality_sd)
    dg = torch.randn(args.pairs, generator=g, dtype=torch.float64) + args.correlation * q / args.quality_sd
    pair = torch.arange(args.pairs).repeat_interleave(args.judgments_per_pair)
    first = torch.rand(len(pair), generator=g, dtype=torch.float64) < torch.sigmoid(q[pair] + theta * dg[pair])
    return World(x, q, dg, pair, first.double() * 2 - 1)


def quality_marginal_loss(z: Tensor, spread: float) -> Tensor:
    """-log E_v sigma(z + spread * v), v ~ N(0, 1), per element; the plain -log sigma(z) at 0."""
    if spread <= 0:
        return -F.logsigmoid(z)
    return -torch.logsumexp(F.logsigmoid(z[:, None] + spread * NODES) + LOG_WEIGHTS, dim=1)


def train(rule: str, world: World, args: argparse.Namespace, seed: int, theta_true: float) -> dict:
    """One rule's run; returns the lean s, theta and the link's spread at the end."""
    n = len(world.pair)
    a_all = (world.side * world.difference[world.pair])[:, None]
    w = torch.zeros(world.features.shape[1], dtype=torch.float64, requires_grad=True)
    s = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    start, spread0 = 0.0, 0.0
    if rule in ("adam", "profile"):
        start = float(offset_mle(torch.zeros(n, dtype=torch.float64), a_all, LOGISTIC)[0])
    elif rule == "oracle":
        start = theta_true
    elif rule.startswith("effect"):
        fit = pair_effect_level(a_all, world.pair, world.side)
        start, spread0 = fit.level[0], fit.spread
    theta = torch.tensor([start], dtype=torch.float64, requires_grad=True)
    policy_opt = torch.optim.Adam([w, s], lr=args.lr)
    theta_opt = torch.optim.Adam([theta], lr=args.theta_lr)
    seen = torch.zeros(n, dtype=torch.float64)  # each judgment's margin as last seen (profile)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 7))
    spread = 0.0
    for step in range(args.steps):
        begin = (step * args.batch) % n
        rows = order[begin:begin + args.batch]
        p = world.pair[rows]
        u = world.features[p] @ w + s * world.difference[p]
        z = world.side[rows] * u
        if rule.startswith("effect"):
            learned = (world.features[p] @ w).detach()
            spread = math.sqrt(max(0.0, spread0 ** 2 - float(learned.var())))
        bias = 0.0 if rule == "dpo" else theta * world.side[rows] * world.difference[p]
        loss = quality_marginal_loss(z + bias, spread).mean()
        policy_opt.zero_grad()
        theta_opt.zero_grad()
        loss.backward()
        policy_opt.step()
        if rule in ("adam", "effect_adam"):
            theta_opt.step()
        seen[rows] = z.detach()
        if rule == "profile":
            level = offset_mle(seen, a_all, LOGISTIC)  # NaN: no finite fit, the level stays (as the engine's)
            with torch.no_grad():
                theta.copy_(torch.where(level.isfinite(), level, theta))
    learned = (world.features @ w).detach()
    return {"lean": float(s.detach()), "theta": float(theta.detach()), "spread": spread,
            "quality_corr": float(torch.corrcoef(torch.stack([learned, world.quality]))[0, 1])}


def run_setting(args: argparse.Namespace, lr: float, theta_true: float, correlation: float) -> list[dict]:
    setting = argparse.Namespace(**{**vars(args), "lr": lr, "correlation": correlation})
    rows = []
    for seed in args.seeds:
        world = make_world(seed, setting, theta_true)
        ends = {rule: train(rule, world, setting, seed, theta_true) for rule in args.rules}
        dpo = ends["dpo"]["lean"] if "dpo" in ends else float("nan")
        for end in ends.values():
            end["removal"] = 1 - end["lean"] / dpo if abs(theta_true) > 0 else None
        rows.append({"lr": lr, "theta": theta_true, "correlation": correlation, "seed": seed, "rules": ends})
        print(f"lr {lr} theta* {theta_true} corr {correlation} seed {seed}: " + "  ".join(
            f"{r} s={e['lean']:+.3f} th={e['theta']:.2f}" for r, e in ends.items()), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--judgments-per-pair", type=int, default=4)
    parser.add_argument("--quality-sd", type=float, default=2.0)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--theta-lr", type=float, default=0.05)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--rules", nargs="+", default=list(RULES), choices=RULES)
    parser.add_argument("--settings", nargs="+", default=["0.02,1,0", "0.005,1,0", "0.002,1,0", "0.005,0,0",
                                                          "0.005,1,0.5", "0.005,1,-0.5"],
                        help="policy lr, planted theta, quality-attribute correlation; one run per setting")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for setting in args.settings:
        lr, theta_true, correlation = (float(v) for v in setting.split(","))
        rows += run_setting(args, lr, theta_true, correlation)
    write_json(args.out, {"settings": {k: v for k, v in vars(args).items() if k != "out"},
                          "runs": rows, "provenance": provenance()})


if __name__ == "__main__":
    main()
