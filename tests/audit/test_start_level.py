"""The audit shows where ``train`` starts theta (issue 51): ``start_level`` in ``--json``, the
conditional level beside the marginal one on the screen, the same numbers the engine starts at."""

from __future__ import annotations

import json
import math
import random

from badpo.auditing.start_level import judgment_pairs
from badpo.cli import main
from badpo.core.judgments import Judgment, write_judgments
from badpo.engine.settings import BiasSettings


def _pool(theta: float, spread: float, pairs: int = 600, per: int = 4, seed: int = 0) -> list[Judgment]:
    """``pairs`` prompts, each a short and a long answer (a 2x word ratio: length differs) or two
    answers of one length, judged by ``per`` of 12 annotators who share the pair's quality."""
    rng = random.Random(seed)
    rows = []
    for p in range(pairs):
        differs = p % 3 != 0
        a = "alpha beta" if differs else "alpha beta gamma"
        b = "alpha beta gamma delta epsilon" if differs else "delta epsilon zeta"
        quality = rng.gauss(0.0, spread)  # a minus b
        logit = quality - theta * differs  # b is the long side where they differ
        for k in rng.sample(range(12), per):
            a_won = rng.random() < 1 / (1 + math.exp(-logit))
            chosen, rejected = (a, b) if a_won else (b, a)
            rows.append(Judgment(prompt=f"question {p}", chosen=chosen, rejected=rejected, annotator=f"r{k}"))
    return rows


def test_json_holds_the_start_level_and_the_screen_shows_it_beside_the_marginal(tmp_path, capsys):
    data = tmp_path / "pool.jsonl"
    write_judgments(data, _pool(theta=1.0, spread=2.0))
    assert main(["audit", str(data), "-a", "length", "--json", str(tmp_path / "audit.json")]) == 0
    screen = capsys.readouterr().out
    document = json.loads((tmp_path / "audit.json").read_text())
    start, fit = document["start_level"]["length"], document["start_level_fit"]
    assert fit["identified"] and abs(start - 1.0) < 3 * fit["se"][0]
    assert fit["marginal"][0] < 0.8 * start  # the shrinkage the start undoes
    assert "where train starts theta" in screen
    default = BiasSettings().init  # the screen names the start train uses unasked, and its column
    assert f"the default, bias.init: {default}, at 'marginal'" in screen and default == "reference"
    assert f"{start:+.3f}" in screen and f"{fit['marginal'][0]:+.3f}" in screen


def test_the_audit_reads_pairs_as_the_engine_does():
    """Pair index and orientation from the judgments alone: a pair's first judgment sets +1."""
    rows = [Judgment("p", "x", "y", "a"), Judgment("p", "y", "x", "b"), Judgment("q", "x", "y", "a"),
            Judgment("p", "x", "y", "c")]
    pair, side = judgment_pairs(rows)
    assert pair.tolist() == [0, 0, 1, 0] and side.tolist() == [1, -1, 1, 1]


def test_one_judgment_a_pair_says_the_level_may_be_shrunk(tmp_path, capsys):
    data = tmp_path / "single.jsonl"
    write_judgments(data, _pool(theta=1.0, spread=2.0, per=1))
    assert main(["audit", str(data), "-a", "length", "--json", str(tmp_path / "a.json")]) == 0
    assert "quality spread is not identified" in capsys.readouterr().out
    fit = json.loads((tmp_path / "a.json").read_text())["start_level_fit"]
    assert not fit["identified"] and fit["level"] == fit["marginal"]


def test_a_null_pool_starts_near_zero(tmp_path):
    data = tmp_path / "null.jsonl"
    write_judgments(data, _pool(theta=0.0, spread=2.0, seed=3))
    assert main(["audit", str(data), "-a", "length", "--json", str(tmp_path / "a.json")]) == 0
    document = json.loads((tmp_path / "a.json").read_text())
    assert abs(document["start_level"]["length"]) < 3 * document["start_level_fit"]["se"][0]
