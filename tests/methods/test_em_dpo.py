"""EM-DPO with MinMax-DPO: the pure maths by hand (halves, E-step, utilities, minimax, M-step
weights), then the arm on the real engine: K = 1 is DPO, K = 2 writes every output, and a stopped
or killed arm resumes to the uninterrupted result."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import badpo.engine.loop as loop_module
from badpo.core.config import ConfigError
from badpo.engine.batches import build_preference_data
from badpo.engine.mixture import arm_parts
from badpo.engine.train import train
from badpo.methods import (
    EMParams,
    TypeWeights,
    annotator_loglik,
    get_arm,
    initial_type_probabilities,
    minimax_weights,
    type_log_posterior,
    type_utilities,
    vote_halves,
)
from fixtures.engine import judgment_rows, log_records, make_config, write_jsonl


# ------------------------------------------------------------------------------- pure maths
def _close(actual: torch.Tensor, expected, atol: float) -> None:
    np.testing.assert_allclose(actual.numpy(), np.array(expected), rtol=0, atol=atol)


def test_vote_halves_split_every_annotators_votes_in_two_by_seed():
    index = torch.tensor([0, 1, 0, 0, 2, 1, 0, 0, 1])  # annotator 0: 5 votes, 1: 3, 2: 1
    half = vote_halves(index, 3, seed=7)
    for a, (first, second) in {0: (3, 2), 1: (2, 1), 2: (1, 0)}.items():
        assert int((half[index == a] == 0).sum()) == first and int((half[index == a] == 1).sum()) == second
    assert torch.equal(half, vote_halves(index, 3, seed=7))
    assert any(not torch.equal(half, vote_halves(index, 3, seed=s)) for s in range(8, 20))


def test_initial_probabilities_are_seeded_dirichlet_draws_and_one_type_is_certain():
    gamma = initial_type_probabilities(50, 3, seed=1)
    assert gamma.shape == (50, 3) and torch.allclose(gamma.sum(1), torch.ones(50, dtype=torch.float64))
    assert gamma.std(dim=0).min() > 0.1  # spread, not uniform: the types start apart
    assert torch.equal(gamma, initial_type_probabilities(50, 3, seed=1))
    assert torch.equal(initial_type_probabilities(4, 1, seed=1), torch.ones(4, 1, dtype=torch.float64))


def test_annotator_loglik_sums_log_sigmoid_of_each_annotators_margins():
    """Votes of annotators (0, 1, 0) with margins u_0 = (0, ln 3, ln 3), u_1 = (ln 3, 0, 0):
    log sigmoid(0) = -ln 2, log sigmoid(ln 3) = ln 3/4."""
    ln3 = math.log(3)
    margins = torch.tensor([[0.0, ln3], [ln3, 0.0], [ln3, 0.0]])
    loglik, votes = annotator_loglik(margins, torch.tensor([0, 1, 0]), annotators=3)
    half, three_quarters = -math.log(2), math.log(0.75)
    _close(loglik, [[half + three_quarters, three_quarters + half], [three_quarters, half], [0.0, 0.0]], 1e-7)
    assert votes.tolist() == [2.0, 1.0, 0.0]


def test_e_step_posterior_by_hand_and_without_underflow():
    """Prior (1/2, 1/2), log-likelihoods (0, -ln 3): gamma = (1, 1/3) / (4/3) = (3/4, 1/4).
    Prior (0.2, 0.8), likelihoods (4, 1): (0.8, 0.8) -> (1/2, 1/2). Log-likelihoods (-1000, -1001)
    underflow exp() but not the posterior: (e, 1) / (1 + e). A type with prior 0 keeps finite logs."""
    log_gamma = type_log_posterior(torch.tensor([[0.0, -math.log(3)], [-1000.0, -1001.0]], dtype=torch.float64),
                                   torch.tensor([0.5, 0.5]))
    e = math.e
    _close(log_gamma.exp(), [[0.75, 0.25], [e / (1 + e), 1 / (1 + e)]], 1e-12)
    skewed = type_log_posterior(torch.tensor([[math.log(4), 0.0]], dtype=torch.float64),
                                torch.tensor([0.2, 0.8], dtype=torch.float64))
    _close(skewed.exp(), [[0.5, 0.5]], 1e-12)
    dead = type_log_posterior(torch.tensor([[-5.0, -1.0]]), torch.tensor([0.0, 1.0]))
    assert torch.isfinite(dead).all() and float(dead[0, 1]) == 0.0


def test_type_utilities_are_gamma_weighted_mean_vote_logliks():
    """Annotator 0 (2 votes) is type 0, annotator 1 (1 vote) half and half:
    U[0] = (loglik_0 + 0.5 loglik_1) / (2 + 0.5), U[1] = 0.5 loglik_1 / 0.5; a type nobody holds: 0."""
    loglik = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.25, -1.0]], dtype=torch.float64)
    gamma = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]], dtype=torch.float64)
    utilities = type_utilities(loglik, torch.tensor([2.0, 1.0]), gamma)
    _close(utilities, [[-1.25 / 2.5, -2.125 / 2.5, -3.5 / 2.5], [-0.5, -0.25, -1.0], [0.0, 0.0, 0.0]], 1e-12)


@pytest.mark.parametrize("utilities, weights, max_regret", [
    ([[0.0, -1.0], [-1.0, 0.0]], [0.5, 0.5], 0.5),  # symmetric: regrets w_2 and w_1
    ([[0.0, -2.0], [-1.0, 0.0]], [2 / 3, 1 / 3], 2 / 3),  # regrets 2 w_2 = w_1 at w_2 = 1/3
    ([[0.0, -1.0, -2.0], [-1.0, 0.0, -2.0], [-1.0, -1.0, -3.0]], [0.5, 0.5, 0.0], 0.5),  # policy 3 dominated
    ([[0.0, -1.0], [0.0, -3.0]], [1.0, 0.0], 0.0),  # policy 1 is best for both types
    ([[-0.7, -0.7], [-0.2, -0.2]], [0.5, 0.5], 0.0),  # every w optimal: the optimal vertices averaged
    ([[-1.5]], [1.0], 0.0),  # one type
])
def test_minimax_weights_by_hand(utilities, weights, max_regret):
    w, regrets = minimax_weights(utilities)
    assert w.tolist() == pytest.approx(weights, abs=1e-12)
    assert float(regrets.max()) == pytest.approx(max_regret, abs=1e-12)
    u = np.array(utilities)
    assert regrets.tolist() == pytest.approx((u.max(axis=1) - u @ w).tolist(), abs=1e-12)


def test_minimax_weights_match_linprog_and_a_grid():
    from scipy.optimize import linprog

    rng = np.random.default_rng(0)
    for trial in range(40):
        k = 2 + trial % 4
        u = -rng.exponential(size=(k, k)) * (rng.random((k, k)) < 0.8)
        w, regrets = minimax_weights(u)
        assert w.min() >= 0 and w.sum() == pytest.approx(1.0, abs=1e-12)
        # linprog: minimise r s.t. max_j U[k, j] - U[k] . w <= r, sum w = 1, w >= 0
        a_ub = np.hstack([-u, -np.ones((k, 1))])
        result = linprog(np.r_[np.zeros(k), 1.0], A_ub=a_ub, b_ub=-u.max(axis=1),
                         A_eq=np.r_[np.ones(k), 0.0][None], b_eq=[1.0],
                         bounds=[(0, None)] * k + [(None, None)], method="highs")
        assert float(regrets.max()) == pytest.approx(result.fun, abs=1e-9)
    u = -rng.exponential(size=(3, 3))
    w, regrets = minimax_weights(u)
    grid = [np.array([i, j, 200 - i - j]) / 200
            for i, j in itertools.product(range(201), repeat=2) if i + j <= 200]
    assert float(regrets.max()) <= min(float((u.max(axis=1) - u @ g).max()) for g in grid) + 1e-12


def test_type_weights_renormalise_gammas_over_the_step():
    """Step of 4 votes with gammas (0.5, 0.25, 0.25, 1.0) (sum 2): weights 4 gamma / 2 =
    (1, 0.5, 0.5, 2), summing to 4; a micro-batch reads its slice. Gammas e^-2000 and e^-2001
    underflow, their ratio does not: (2e, 2) / (1 + e)."""
    weights = TypeWeights(torch.tensor([0.5, 0.25, 0.25, 1.0]).log())
    step = torch.arange(4)
    assert weights.weights(step, step).tolist() == pytest.approx([1.0, 0.5, 0.5, 2.0])
    assert weights.weights(torch.tensor([3, 0]), step).tolist() == pytest.approx([2.0, 1.0])
    assert weights.update(lambda t: t) == {}
    tiny = TypeWeights(torch.tensor([-2000.0, -2001.0], dtype=torch.float64))
    e = math.e
    expected = [2 * e / (1 + e), 2 / (1 + e)]
    assert tiny.weights(torch.arange(2), torch.arange(2)).tolist() == pytest.approx(expected)
    one_type = TypeWeights(torch.zeros(7, dtype=torch.float64))
    assert torch.equal(one_type.weights(torch.arange(7), torch.arange(7)), torch.ones(7))
    restored = TypeWeights(torch.zeros(4))
    restored.load_state_dict(weights.state_dict())
    assert torch.equal(restored.log_probability, weights.log_probability)


def test_em_params_are_typed_and_checked():
    params = get_arm("em_dpo").parse_params({})
    assert params == EMParams(types=3, rounds=4, round_steps=200)
    assert params.total_steps(1000) == 5400  # 3 x (4 x 200 + 1000): the paper's "five times"
    for key, value in (("types", 0), ("types", 11), ("rounds", 0), ("round_steps", 0)):
        with pytest.raises(ConfigError, match=f"method_params.{key}: must be"):
            get_arm("em_dpo").parse_params({key: value})
    assert params.policies == "continue" and params.continues
    with pytest.raises(ConfigError, match="method_params.policies"):
        get_arm("em_dpo").parse_params({"policies": "resume"})
    with pytest.raises(ConfigError, match="unknown key.*method_params.eta"):
        get_arm("em_dpo").parse_params({"eta": 0.5})
    offsets = [(p.folder, p.offset) for p in arm_parts(EMParams(2, 1, 5), 7)]
    assert offsets == [("em/round-0/type-0", 0), ("em/round-0/type-1", 5), ("types/type-0", 10),
                       ("types/type-1", 17)]


# ---------------------------------------------------------------------------- on the engine
@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("em_dpo")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


ARM = ("method=em_dpo", "method_params={types: 2, rounds: 2, round_steps: 3}", "steps=3")


@pytest.fixture(scope="module")
def whole(world) -> Path:
    return train(make_config(world, "em-whole", *ARM))


def _same_arm(a: Path, b: Path) -> None:
    """Bit for bit: the mixture, every E-step, and each final policy with its step log."""
    assert json.loads((a / "mixture.json").read_text()) == json.loads((b / "mixture.json").read_text())
    for r in range(2):
        estep = Path("em", f"round-{r}", "estep.json")
        assert (a / estep).read_text() == (b / estep).read_text()
    for k in range(2):
        part = Path("types", f"type-{k}")
        assert [(x["loss"], x["grad_norm"]) for x in log_records(a / part)] == \
               [(x["loss"], x["grad_norm"]) for x in log_records(b / part)]
        wa, wb = (load_file(out / part / "policy" / "model.safetensors") for out in (a, b))
        assert all(torch.equal(wa[name], wb[name]) for name in wa)


def test_one_type_and_one_round_is_dpo_bit_for_bit(world):
    """Under ``policies: restart`` the final phase is a DPO run from the reference."""
    dpo = train(make_config(world, "dpo", "method=dpo", "steps=3"))
    em = train(make_config(world, "em-one", "method=em_dpo", "steps=3",
                           "method_params={types: 1, rounds: 1, round_steps: 2, policies: restart}"))
    assert json.loads((em / "mixture.json").read_text())["weights"] == [1.0]
    part = em / "types" / "type-0"
    for x, y in zip(log_records(dpo), log_records(part), strict=True):
        for key in ("loss", "grad_norm", "reward_margin"):
            assert x[key] == y[key], (key, x["step"])
    wa, wb = load_file(dpo / "policy" / "model.safetensors"), load_file(part / "policy" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[name], wb[name]) for name in wa)


def test_two_types_write_every_output(world, whole):
    mixture = json.loads((whole / "mixture.json").read_text())
    assert mixture["types"] == 2 and sum(mixture["weights"]) == pytest.approx(1.0)
    assert mixture["max_regret"] == pytest.approx(max(mixture["regrets"])) and mixture["max_regret"] >= 0
    assert sorted(mixture["type_probabilities"]) == [f"ann{i}" for i in range(5)]
    assert all(sum(p) == pytest.approx(1.0) for p in mixture["type_probabilities"].values())
    assert mixture["policies"] == ["types/type-0/policy", "types/type-1/policy"]
    weights = [load_file(whole / p / "model.safetensors") for p in mixture["policies"]]
    assert any(not torch.equal(weights[0][n], weights[1][n]) for n in weights[0])  # the types differ
    run = json.loads((whole / "run.json").read_text())
    assert run["total_steps"] == 2 * (2 * 3 + 3) and len(run["parts_wall_s"]) == 6
    assert (whole / "config.yaml").exists() and not (whole / "policy").exists()
    records = log_records(whole)
    assert [r.get("round") for r in records] == [0, 1, None] and records[-1]["step"] == 18
    for r in range(2):
        estep = json.loads((whole / "em" / f"round-{r}" / "estep.json").read_text())
        assert estep["trained_on_half"] == r % 2 and sum(estep["heldout_votes"]) > 0
        rounds = whole / "em" / f"round-{r}"
        assert not (rounds / "type-0" / "policy").exists() and not (rounds / "type-0" / "checkpoints").exists()
    # the round's part trained on its half only: 3 steps of 8 of the 12 half-0 judgments
    assert log_records(whole / "em" / "round-0" / "type-0")[0]["judgments"] == 8
    again = train(make_config(world, "em-whole", *ARM))  # a finished arm is left as it is
    assert json.loads((again / "run.json").read_text()) == run


def test_round_parts_train_on_their_half_only(world):
    """The item table of a round holds the judgments of its half, once each."""
    from badpo.core.judgments import read_judgments
    from badpo.engine.tokenize import TokenizationConfig
    from fixtures.engine import build_tokenizer

    data = build_preference_data(read_judgments(world / "judgments.jsonl"), None, build_tokenizer(),
                                 TokenizationConfig())
    half = vote_halves(data.annotator_index, len(data.annotators), 42)
    for batching in ("per_judgment", "pair_grouped"):
        items = data.items(batching).restrict(half == 0)
        kept = items.judgments_of(torch.arange(len(items)))
        assert sorted(kept.tolist()) == torch.nonzero(half == 0).flatten().tolist()
        micro = items.micro_batch(torch.arange(len(items)))
        rows = micro.sequence_rows
        assert torch.equal(rows[micro.chosen_slot], data.chosen_row[micro.judgments])
        assert torch.equal(rows[micro.rejected_slot], data.rejected_row[micro.judgments])


def test_stop_and_resume_equals_the_uninterrupted_arm(world, whole):
    with pytest.raises(ConfigError, match=r"stop_after_steps: must lie in \[1, the arm's total steps=18\]"):
        train(make_config(world, "em-split", *ARM, "stop_after_steps=19"))
    stopped = train(make_config(world, "em-split", *ARM, "stop_after_steps=4"))  # in round 0, type 1
    assert not (stopped / "run.json").exists()
    checkpoints = stopped / "em" / "round-0" / "type-1" / "checkpoints"
    assert [p.name for p in checkpoints.iterdir()] == ["step-000001"]
    with pytest.raises(ConfigError, match="unfinished run of this config; set resume_from=latest"):
        train(make_config(world, "em-split", *ARM))
    resumed = train(make_config(world, "em-split", *ARM, "resume_from=latest"))
    _same_arm(whole, resumed)


class Killed(Exception):
    pass


def _kill_at(monkeypatch, call: int) -> None:
    """Make the call-th optimizer step of this process die (as a kill would, mid-step)."""
    real, calls = loop_module.train_step, []

    def dying(run, step):
        calls.append(step)
        if len(calls) == call:
            raise Killed
        return real(run, step)

    monkeypatch.setattr(loop_module, "train_step", dying)


def test_a_killed_arm_resumes_to_the_uninterrupted_result(world, whole, monkeypatch):
    # killed in round 0, type 1 after one step, with a checkpoint every step
    _kill_at(monkeypatch, 5)
    with pytest.raises(Killed):
        train(make_config(world, "em-killed", *ARM, "save_every=1"))
    # resumed from that checkpoint, then killed in round 1, type 0 before any checkpoint
    _kill_at(monkeypatch, 4)
    with pytest.raises(Killed):
        train(make_config(world, "em-killed", *ARM, "resume_from=latest"))
    killed = world / "em-killed"
    assert (killed / "em" / "round-0" / "estep.json").exists()
    assert (killed / "em" / "round-1" / "type-0" / "log.jsonl").exists()
    assert not (killed / "em" / "round-1" / "type-0" / "checkpoints").exists()
    monkeypatch.undo()
    done = train(make_config(world, "em-killed", *ARM, "resume_from=latest"))
    _same_arm(whole, done)
    # killed after the last part, before mixture.json and run.json were committed
    copy = world / "em-uncommitted"
    shutil.copytree(done, copy)
    for name in ("mixture.json", "run.json"):
        (copy / name).unlink()
    _same_arm(whole, train(make_config(world, "em-uncommitted", *ARM, "resume_from=latest")))
