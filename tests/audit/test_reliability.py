"""Annotator reliability (issue 72, item 3): each rater's scale s_k on the pair's leave-one-annotator-out
consensus logit, its interval and tests, the Benjamini-Hochberg flag, and the training weights. Hand
worked on tiny cases; on synthetic crowds (no model) the random voters are flagged and nobody else."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from badpo.auditing.reliability import (
    MIN_SHARED,
    Reliability,
    annotator_reliability,
    consensus_logits,
    reliability_weights,
    scale_fits,
)
from badpo.core.pair_level import pair_effect_level

NOISY = (3, 9, 15)  # the random voters of the crowd
NAMES = [f"a{k:02d}" for k in range(20)]


def crowd(seed: int, noisy=NOISY, pairs: int = 1800, spread: float = 2.0, theta: float = 1.0):
    """20 annotators; each pair judged by 4 or 5 of them, quality ~ N(0, spread^2), one 0/1 attribute
    per response with a shared bias ``theta``; the ``noisy`` annotators' votes are fair coins.
    Returns (vertex, pair, side, differences [N, 1]): side +1 where the vote chose the first response."""
    rng = np.random.default_rng(seed)
    per = rng.integers(4, 6, size=pairs)
    pair = np.repeat(np.arange(pairs), per)
    vertex = np.concatenate([rng.choice(20, size=m, replace=False) for m in per])
    quality = rng.normal(0.0, spread, size=pairs)
    attribute = rng.integers(0, 2, size=(pairs, 2)).astype(np.float64)
    d = attribute[:, 0] - attribute[:, 1]  # first response minus second
    first = 1 / (1 + np.exp(-(quality + theta * d)))[pair]
    chance = np.where(np.isin(vertex, noisy), 0.5, first)
    side = np.where(rng.random(len(pair)) < chance, 1.0, -1.0)
    return vertex, pair, side, (side * d[pair])[:, None]


def reliability_in(world) -> Reliability:
    """The audit's path on arrays: the pooled fit with a per-pair quality effect, then the scales."""
    vertex, pair, side, differences = world
    fit = pair_effect_level(torch.from_numpy(differences), torch.from_numpy(pair), torch.from_numpy(side))
    assert fit.identified and fit.spread > 0
    return annotator_reliability(NAMES, vertex, pair, side, differences, fit.level, fit.spread)


# ------------------------------------------------------------------------------- hand worked
def test_the_scale_fit_on_three_votes_by_hand():
    """Consensus logits log 3 toward the side chosen twice, log 3 against it once: without a prior
    the score 2 log3 sigmoid(-s log3) - log3 sigmoid(s log3) is 0 at sigmoid(s log3) = 2/3, so
    s = log 2 / log 3; l(s) = log(4/27) there and 3 log(1/2) at 0, a statistic 2 log(32/27)."""
    x = np.array([math.log(3), math.log(3), -math.log(3)])
    estimate, low, high, p, noise_p = scale_fits(x, np.zeros(3, dtype=np.int64), 1, prior_sd=math.inf)
    assert estimate[0] == pytest.approx(math.log(2) / math.log(3), abs=1e-9)
    assert noise_p[0] == pytest.approx(math.erfc(math.sqrt(math.log(32 / 27))), abs=1e-9)

    def loglik(s: float) -> float:
        return 2 * -math.log1p(math.exp(-s * math.log(3))) - math.log1p(math.exp(s * math.log(3)))

    assert loglik(estimate[0]) == pytest.approx(math.log(4 / 27), abs=1e-12)
    for bound in (low[0], high[0]):  # the profile interval: 1.96^2 / 2 below the top
        assert loglik(estimate[0]) - loglik(bound) == pytest.approx(1.959964 ** 2 / 2, abs=1e-6)
    root = math.sqrt(2 * (loglik(estimate[0]) - loglik(0.5)))  # above the floor: p = Phi(+root) > 1/2
    assert p[0] == pytest.approx(0.5 * math.erfc(-root / math.sqrt(2)), abs=1e-9) and p[0] > 0.5
    # with the prior N(1, 1): the mode solves 2 log3 sigmoid(-s log3) - log3 sigmoid(s log3) = s - 1
    shrunk = scale_fits(x, np.zeros(3, dtype=np.int64), 1)[0][0]
    sig = 1 / (1 + math.exp(-shrunk * math.log(3)))
    assert 2 * math.log(3) * (1 - sig) - math.log(3) * sig == pytest.approx(shrunk - 1, abs=1e-9)
    assert estimate[0] < shrunk < 1  # toward a typical rater, never away from one


def test_a_rater_who_always_agrees_stays_finite_and_is_not_flagged():
    x = np.full(12, 2.0)  # every vote went where the consensus said, at logit 2
    estimate, low, high, p, noise_p = scale_fits(x, np.zeros(12, dtype=np.int64), 1)
    assert math.isfinite(estimate[0]) and estimate[0] > 1 and low[0] < estimate[0] < high[0]
    assert p[0] > 0.99 and noise_p[0] < 1e-3


def test_the_consensus_by_hand():
    """At spread 0 the consensus is the attribute term alone. With spread tau, theta 0 and one other
    vote for the first side, P(first) = E[sigmoid(tau v)^2] / E[sigmoid(tau v)] = 2 E[sigmoid(tau v)^2];
    with sigmoid(x)^2 = 1/4 + x/4 + x^2/16 - x^3/48 - x^4/96 + O(x^5), E v^2 = 1 and E v^4 = 3 that is
    1/2 + tau^2/8 - tau^4/16 + O(tau^6), whose logit is tau^2/2 - tau^4/4 + O(tau^6)."""
    pair, cell = np.array([0, 0, 1]), np.array([0, 1, 2])
    side, offset = np.array([1.0, -1.0, 1.0]), np.array([0.7, 0.7, -0.2])
    assert consensus_logits(pair, cell, side, offset, 0.0) == pytest.approx(offset, abs=1e-12)
    z = consensus_logits(np.array([0, 0]), np.array([0, 1]), np.array([1.0, 1.0]), np.zeros(2), 0.1)
    assert z == pytest.approx([0.01 / 2 - 0.0001 / 4] * 2, abs=1e-6)


def test_the_consensus_against_a_dense_integral_and_leaving_the_whole_annotator_out():
    """One pair: annotator A voted twice (first, second), B and C for the first side, D for the second;
    tau 2, offset 0.5. A's consensus reads B, C and D only (neither of A's votes); B's reads A's two."""
    spread, offset = 2.0, 0.5
    pair, cell = np.zeros(5, dtype=np.int64), np.array([0, 0, 1, 2, 3])
    side = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    z = consensus_logits(pair, cell, side, np.full(5, offset), spread)
    v = np.linspace(-12, 12, 200001)
    density = np.exp(-v * v / 2)
    t = spread * v + offset
    first = 1 / (1 + np.exp(-t))

    def logit_given(votes):  # votes: +1 / -1 of the other annotators
        weight = density * np.prod([1 / (1 + np.exp(-s * t)) for s in votes], axis=0)
        chance = np.sum(weight * first) / np.sum(weight)
        return math.log(chance / (1 - chance))

    assert z[0] == pytest.approx(logit_given([1, 1, -1]), abs=1e-9) and z[0] == z[1]
    assert z[2] == pytest.approx(logit_given([1, -1, 1, -1]), abs=1e-9)
    assert z[4] == pytest.approx(logit_given([1, -1, 1, 1]), abs=1e-9)


def test_too_few_shared_votes_give_no_estimate_and_unshared_votes_are_not_read():
    """Annotator 2 judged 30 pairs nobody else judged and 5 shared ones: under MIN_SHARED, no estimate."""
    rng = np.random.default_rng(1)
    vertex, pair, side = [], [], []
    for p in range(60):  # annotators 0 and 1 share 60 pairs
        vertex += [0, 1]
        pair += [p, p]
        side += [1.0, 1.0] if rng.random() < 0.8 else [1.0, -1.0]
    for p in range(60, 90):
        vertex, pair, side = vertex + [2], pair + [p], side + [1.0]
    for p in range(5):
        vertex, pair, side = vertex + [2], pair + [p], side + [1.0]
    found = annotator_reliability(["x", "y", "z"], vertex, pair, side, np.zeros((len(pair), 1)), [0.0], 2.0)
    assert found.shared.tolist() == [60, 60, 5] and 5 < MIN_SHARED
    assert math.isnan(found.estimate[2]) and not found.unreliable[2]
    assert np.isfinite(found.estimate[:2]).all()
    assert found.to_dict()["annotators"]["z"]["reliability_note"].startswith("5 votes on pairs another")
    with pytest.raises(ValueError, match="side be"):
        annotator_reliability(["x"], [0], [0], [0.5], np.zeros((1, 1)), [0.0], 2.0)


# ---------------------------------------------------------------------------- synthetic crowds
def test_random_voters_in_a_crowd_are_flagged_and_the_others_are_not():
    """20 annotators, 3 voting by fair coin, ~400 votes each on pairs judged by 4-5 (quality sd 2,
    a shared bias of 1 on one attribute). The coins read s near 0 and are flagged (Benjamini-Hochberg,
    FDR 0.1); the 17 others read near 1 (a little above: the coins dilute the pooled fit) and none
    is flagged (at most one false flag is the bar). A constant estimate would flag nobody, or everybody.
    Over seeds 0-39: all three coins flagged in 38, two of them in 2; no false flag in any."""
    found = reliability_in(crowd(seed=0))
    noisy = np.isin(np.arange(20), NOISY)
    assert found.flagged == tuple(NAMES[k] for k in NOISY)
    assert np.all(np.abs(found.estimate[noisy]) < 0.3) and np.all(found.high[noisy] < 0.5)
    assert np.all(found.estimate[~noisy] > 0.7) and np.all(found.low[~noisy] > 0.5)
    assert np.all(found.p[noisy] < 1e-3) and np.all(found.noise_p[noisy] > 0.05)
    weights = reliability_weights(found)
    assert [weights[NAMES[k]] for k in NOISY] == [0.0, 0.0, 0.0]
    assert all(weights[NAMES[k]] > 0.7 for k in range(20) if k not in NOISY)


def test_no_flag_in_a_crowd_without_random_voters():
    """Every rater at s = 1 is far inside the flag's null (s >= 1/2): each p-value is stochastically
    much larger than uniform (BH's FDR bound is reached only by raters at the boundary), so we assert
    no flag at all rather than BH's expected count (0.1 x flags at most, in expectation); over seeds 0-39
    of this world none flagged anyone and the smallest p was 0.99."""
    found = reliability_in(crowd(seed=0, noisy=()))
    assert found.flagged == ()
    assert np.all(found.p > 0.5) and np.all(found.low < 1) and np.all(found.estimate > 0.6)


def test_a_rater_against_the_task_reads_below_zero():
    world = crowd(seed=2, noisy=())
    vertex, pair, side, differences = world
    against = vertex == 5
    flipped = np.where(against, -side, side)
    found = reliability_in((vertex, pair, flipped, np.where(against[:, None], -differences, differences)))
    assert found.estimate[5] < -0.5 and found.flagged == ("a05",) and found.noise_p[5] < 1e-6
    assert reliability_weights(found)["a05"] == 0.0


def test_the_weights():
    nan = math.nan
    found = Reliability(("a", "b", "c", "d"), np.array([50, 50, 50, 3]), np.array([0.1, 0.6, 1.4, nan]),
                        np.array([-0.2, 0.3, 1.0, nan]), np.array([0.4, 0.9, 1.8, nan]),
                        np.array([0.001, 0.7, 1.0, nan]), np.array([0.5, 1e-4, 1e-9, nan]),
                        np.array([True, False, False, False]))
    assert reliability_weights(found) == {"a": 0.0, "b": 0.6, "c": 1.0, "d": 1.0}


# ------------------------------------------------------------------------------ everywhere the audit reports
NOISE_ID = '=HYPERLINK("http://x","<b>noise</b>")'  # a formula for a spreadsheet, markup for a page


def crowd_rows(seed: int = 0) -> list[dict]:
    """400 pairs, each judged by 4 of 10 annotators (quality sd 2, bias 1 on ``flag``); NOISE_ID votes
    by fair coin, and one rater judges only 6 shared pairs (no estimate)."""
    rng = np.random.default_rng(seed)
    ids = [NOISE_ID] + [f"r{k}" for k in range(1, 10)]
    rows = []
    for p in range(400):
        quality, flags = rng.normal(0.0, 2.0), rng.integers(0, 2, size=2)
        judges = [ids[k] for k in rng.choice(10, size=4, replace=False)] + (["few"] if p < 6 else [])
        for annotator in judges:
            chance = 0.5 if annotator == NOISE_ID else 1 / (1 + math.exp(-(quality + flags[0] - flags[1])))
            first = rng.random() < chance
            rows.append({"prompt": f"q{p}", "chosen": f"first {p}" if first else f"second {p}",
                         "rejected": f"second {p}" if first else f"first {p}", "annotator": annotator,
                         "pair_id": f"p{p}", "g_chosen": {"flag": float(flags[0 if first else 1])},
                         "g_rejected": {"flag": float(flags[1 if first else 0])}})
    return rows


def test_the_terminal_json_csv_readme_and_page_carry_reliability(tmp_path, capsys):
    import csv
    import json

    from badpo.cli import main
    from badpo.core.judgments import validate_judgments, write_judgments

    data, out, saved = tmp_path / "crowd.jsonl", tmp_path / "report", tmp_path / "audit.json"
    write_judgments(data, validate_judgments(crowd_rows()))
    assert main(["audit", str(data), "-a", "tag=given:flag", "--report", str(out), "--json", str(saved)]) == 0
    printed = capsys.readouterr().out
    assert "annotator reliability s" in printed and "10 of 11 annotators estimated, 1 with under 10" in printed
    assert f"FDR 0.1): 1: {NOISE_ID} " in printed
    document = json.loads(saved.read_text())["reliability"]
    noise, few = document["annotators"][NOISE_ID], document["annotators"]["few"]
    assert noise["unreliable"] is True and noise["reliability_high"] < 0.5 and noise["reliability_p"] < 0.01
    assert noise["reliability_low"] < noise["reliability"] < noise["reliability_high"]
    assert few["reliability"] is None and few["unreliable"] is False and few["shared_votes"] == 6
    assert document["flagged"] == [NOISE_ID] and document["weights"][NOISE_ID] == 0.0
    with open(out / "annotators.csv", encoding="utf-8", newline="") as handle:
        rows = {r["annotator"]: r for r in csv.DictReader(handle)}
    row = rows["'" + NOISE_ID]  # the formula is quoted, the numbers are not
    assert row["unreliable"] == "1" and float(row["reliability"]) == pytest.approx(noise["reliability"], abs=1e-5)
    assert float(row["reliability_low"]) < float(row["reliability_high"]) < 0.5
    assert rows["r1"]["unreliable"] == "0" and float(rows["r1"]["reliability"]) > 0.5
    assert rows["few"]["reliability"] == "" and rows["few"]["unreliable"] == "0"
    assert "## Annotator reliability" in (out / "README.md").read_text(encoding="utf-8")
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<th>reliability</th>" in page and "<th>unreliable</th>" in page
    assert "<b>noise" not in page and "&lt;b&gt;noise" in page


def test_nobody_is_estimated_says_the_fits_own_reason():
    """Past the pair fit's attribute cap the spread is not fitted; the reliability said '600 of 600
    pairs were judged twice or more, too few...' (the other reason), and reliability: weight then
    weighted everyone 1 without a word (engine/preference.py warns now)."""
    from types import SimpleNamespace

    from badpo.auditing.reliability import reliability_of
    from badpo.core.pair_level import MAX_CONDITIONAL_ATTRIBUTES

    for note, said in ((f"{MAX_CONDITIONAL_ATTRIBUTES + 1} attributes are more than the "
                        f"{MAX_CONDITIONAL_ATTRIBUTES} the quality spread is fitted with: the level is ...",
                        "attributes are more than"),
                       ("only 3 pairs (1% of the judgments) were judged twice or more, so the quality spread is "
                        "not identified: the level is ...", "only 3 pairs")):
        fit = SimpleNamespace(identified=False, note=note, repeated_pairs=600, pairs=600, spread=0.0)
        found = reliability_of([], np.zeros((0, 1)), fit, NAMES)
        assert said in found.note and "600 of 600" not in found.note and np.isnan(found.estimate).all()
        assert reliability_weights(found) == dict.fromkeys(NAMES, 1.0)


def test_the_terminal_lists_a_64_kb_id_cut():
    """The re-trial's 60 ids of 64 KB printed 791 KB of terminal lines; a flagged id is shown cut,
    as the plots show it (the CSV and JSON keep it whole)."""
    from badpo.auditing.reliability import format_reliability

    found = reliability_in(crowd(seed=0))
    long = tuple(("q" * 65_536 + name) if k in NOISY else name for k, name in enumerate(found.annotators))
    lines = format_reliability(dataclasses.replace(found, annotators=long))
    assert max(map(len, lines)) < 1_000 and "(65,539 chars)" in lines[-1]
