"""The joint audit: every attribute of one annotator estimated together (a confound the marginal
estimate gets wrong-signed, the fit checked against a brute-force search), and the robust pool
level (hand-worked, and staying with the unbiased raters when a third are biased)."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from badpo.auditing.estimates import penalised_log_odds
from badpo.auditing.joint import fit_annotator, fit_joint, prior_precision, robust_level, two_sided_p
from badpo.cli import main
from badpo.core.judgments import validate_judgments, write_judgments

SIGNOFF, EMOJI = "signoff=regex:-- cheers$", "emoji=regex:🙂"


def _sigmoid(t: float) -> float:
    return 1.0 / (1.0 + math.exp(-t))


def _confounded_rows(signoff_only: tuple[int, int], emoji_only: tuple[int, int],
                     both: tuple[int, int]) -> list[tuple[int, int]]:
    """dg rows (sign-off, emoji) of one annotator: (wins, losses) of the attribute side on pairs that
    differ in the sign-off only, in the emoji only, and on pairs whose one side has the sign-off
    and the other the emoji (wins: the sign-off side)."""
    return ([(1, 0)] * signoff_only[0] + [(-1, 0)] * signoff_only[1] + [(0, 1)] * emoji_only[0]
            + [(0, -1)] * emoji_only[1] + [(1, -1)] * both[0] + [(-1, 1)] * both[1])


def test_the_joint_estimate_undoes_a_confound_that_the_marginal_gets_wrong_signed():
    """An annotator who mildly likes the sign-off (theta log 2) and strongly likes emoji (log 8),
    judging mostly pairs where one side has the sign-off and the other the emoji. Counts chosen so
    that each pair type's log-odds are exact: sign-off only 20 of 30 (log 2), emoji only 32 of 36
    (log 8), sign-off vs emoji 8 of 40 for the sign-off side (log 1/4 = log 2 - log 8). Every term
    of the likelihood is then maximal at (log 2, log 8): the unpenalised joint fit is exactly that.
    The marginal estimate of the sign-off pools its 70 cross-group judgments, 28 won:
    log(28.5 / 42.5) = -0.40, the wrong sign. With the default prior (precision 1/2.5^2 for a 0/1
    attribute) the fit moves a little toward 0 and keeps both signs."""
    x = np.array(_confounded_rows((20, 10), (32, 4), (8, 32)), dtype=float)
    exact, _ = fit_annotator(x, np.zeros(2))
    assert exact == pytest.approx([math.log(2), math.log(8)], abs=1e-9)
    marginal, _, high = penalised_log_odds(28, 70)
    assert marginal == pytest.approx(math.log(28.5 / 42.5)) and high < 0.25  # wrong-signed
    assert prior_precision(x).tolist() == pytest.approx([1 / 6.25, 1 / 6.25])
    penalised, se = fit_annotator(x, prior_precision(x))
    assert 0.5 < penalised[0] < math.log(2) and 1.9 < penalised[1] < math.log(8)
    assert (se > 0).all() and (se < 0.5).all()


def _brute_force(x: np.ndarray, precision: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mode of the penalised log-likelihood by nested ternary search (it is concave), written
    out with math only; the se from a central finite-difference Hessian of the same function."""
    def f(a: float, b: float) -> float:
        total = sum(-math.log1p(math.exp(-(r[0] * a + r[1] * b))) for r in x.tolist())
        return total - 0.5 * (precision[0] * a * a + precision[1] * b * b)

    def argmax(g, low=-10.0, high=10.0) -> float:
        for _ in range(90):
            m1, m2 = low + (high - low) / 3, high - (high - low) / 3
            low, high = (m1, high) if g(m1) < g(m2) else (low, m2)
        return (low + high) / 2

    a = argmax(lambda a: f(a, argmax(lambda b: f(a, b))))
    b = argmax(lambda b: f(a, b))
    h = 1e-4
    hessian = np.array([
        [(f(a + h, b) - 2 * f(a, b) + f(a - h, b)) / h ** 2,
         (f(a + h, b + h) - f(a + h, b - h) - f(a - h, b + h) + f(a - h, b - h)) / (4 * h * h)],
        [0.0, (f(a, b + h) - 2 * f(a, b) + f(a, b - h)) / h ** 2]])
    hessian[1, 0] = hessian[0, 1]
    return np.array([a, b]), np.sqrt(np.diag(np.linalg.inv(-hessian)))


def test_a_two_annotator_fit_matches_a_brute_force_search_and_a_hand_worked_value():
    """Two annotators, a 0/1 attribute and a continuous one (dg in {-4, -2, 2, 4}). The prior
    precision per coordinate is 1 / (2.5 s)^2 with s the RMS of the pool's non-zero dg: s = 1 for
    the 0/1 one; for the other the non-zero values are 2, 2, -4, 2, 4, -2, 2 -> s^2 = 52 / 7, so
    precision 7 / 325. Annotator b's 0/1 attribute alone, 3 wins in 3, is the hand-worked case: the
    mode solves 3 sigmoid(-t) = t / 6.25, t = 2.0808, se = 1 / sqrt(3 sigmoid(t) sigmoid(-t) + 0.16)."""
    rows = {"a": [(1, 2), (1, 0), (-1, 2), (1, -4), (0, 2), (1, 0), (-1, 0)],
            "b": [(1, 0), (1, 0), (1, 0), (0, 4), (0, -2), (0, 2)]}
    diffs = np.array(rows["a"] + rows["b"], dtype=float)
    vertex = np.array([0] * len(rows["a"]) + [1] * len(rows["b"]))
    precision = prior_precision(diffs)
    assert precision.tolist() == pytest.approx([0.16, 7 / 325])
    fit = fit_joint(diffs, vertex, ["a", "b"], ["flag", "size"])
    for k, annotator in enumerate(("a", "b")):
        mode, se = _brute_force(np.array(rows[annotator], dtype=float), precision)
        assert fit.estimate[k] == pytest.approx(mode, abs=1e-6)
        assert fit.se[k] == pytest.approx(se, rel=1e-4)
    low, high = 0.0, 10.0  # the hand-worked root, by bisection
    for _ in range(100):
        t = (low + high) / 2
        low, high = (t, high) if 3 * _sigmoid(-t) > t / 6.25 else (low, t)
    alone, se_alone = fit_annotator(np.ones((3, 1)), np.array([0.16]))
    assert alone[0] == pytest.approx(t, abs=1e-9) and t == pytest.approx(2.0808, abs=1e-4)
    assert se_alone[0] == pytest.approx(1 / math.sqrt(3 * _sigmoid(t) * _sigmoid(-t) + 0.16), rel=1e-9)


def test_an_attribute_without_cross_group_judgments_has_no_estimate():
    fit = fit_joint(np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]), np.array([0, 0, 1]), ["a", "b"], ["x", "y"])
    assert math.isnan(fit.estimate[0, 1]) and math.isnan(fit.estimate[1, 0])
    assert fit.estimate[0, 0] == pytest.approx(0.0, abs=1e-12) and fit.estimate[1, 1] > 0


def test_robust_level_hand_worked():
    """[-0.2, -0.1, 0, 0.1, 0.2, 5, 5.5], equal se: median 0.1, MAD 0.2 (deviations 0.3, 0.2, 0.1,
    0, 0.1, 4.9, 5.4), S = 0.2965; 5 and 5.5 lie beyond 4.685 S = 1.39 and get weight 0, and the
    five symmetric values have their centre 0 as the fixed point (the mean is 1.5). More than half
    equal (MAD 0): that value. None without estimates."""
    found = robust_level([-0.2, -0.1, 0.0, 0.1, 0.2, 5.0, 5.5], [0.3] * 7)
    assert found.level == pytest.approx(0.0, abs=1e-9) and found.scale == pytest.approx(1.4826 * 0.2)
    assert found.weights[5:].tolist() == [0.0, 0.0] and found.weights.sum() == pytest.approx(1.0)
    assert found.weights[0] == pytest.approx(found.weights[4]) and found.weights[2] > found.weights[0]
    tied = robust_level([0.0, 0.0, 0.0, 2.0], [1.0] * 4)
    assert tied.level == 0.0 and tied.weights.tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0.0])
    assert robust_level([], []).level is None
    assert two_sided_p(np.array([1.959964, 0.0])).tolist() == pytest.approx([0.05, 1.0], abs=1e-6)


def test_the_robust_level_stays_with_the_unbiased_raters_when_a_third_are_biased():
    """15 raters, 60 cross-group judgments each on one 0/1 attribute: 10 with theta 0.3, 5 with
    theta 2.5 (seeded draws). The log-odds pooled over all judgments is pulled toward the biased
    third (+0.81 against the unbiased raters' +0.26; their mean estimate is +1.08, their median
    +0.40); the biweight level (+0.32) stays within 0.25 of the unbiased raters' value, the biased
    raters weigh 0.3% to 1% each in it against ~10% for the others, the five are flagged and at
    most one unbiased rater is."""
    rng = np.random.default_rng(7)
    theta = [0.3] * 10 + [2.5] * 5
    wins = [int(rng.binomial(60, _sigmoid(t))) for t in theta]
    diffs = np.array([[1.0] if j < w else [-1.0] for w in wins for j in range(60)])
    vertex = np.repeat(np.arange(15), 60)
    fit = fit_joint(diffs, vertex, [f"r{k:02d}" for k in range(15)], ["x"])
    found = robust_level(fit.estimate[:, 0], fit.se[:, 0])
    unbiased = math.log(sum(wins[:10]) / (600 - sum(wins[:10])))
    pooled = math.log(sum(wins) / (900 - sum(wins)))
    assert abs(found.level - unbiased) < 0.25 and pooled - unbiased > 0.5
    assert found.weights[10:].sum() < 0.05 < found.weights[:10].min()  # ~0.1 each for the unbiased
    flagged = two_sided_p((fit.estimate[:, 0] - found.level) / fit.se[:, 0]) < 0.05
    assert flagged[10:].all() and flagged[:10].sum() <= 1


# -------------------------------------------------------------------------- through the CLI
def _pool_rows() -> list[dict]:
    """Nine raters judging texts with a sign-off (``-- cheers``) and emoji (🙂). Six are unbiased:
    sign-off only 15 of 30, emoji only 18 of 36, sign-off vs emoji 20 of 40. Three like emoji
    (theta (0, log 8)): sign-off only 15 of 30, emoji only 32 of 36, sign-off vs emoji 5 of 45 for
    the sign-off side (log 1/8). Their marginal sign-off estimate pools 20 wins in 75:
    log(20.5 / 55.5) = -1.00, an anti-sign-off rater; jointly their sign-off theta is near 0."""
    suffixes = {(1, 0): (" -- cheers", ""), (-1, 0): ("", " -- cheers"), (0, 1): (" 🙂", ""),
                (0, -1): ("", " 🙂"), (1, -1): (" -- cheers", " 🙂"), (-1, 1): (" 🙂", " -- cheers")}
    plan = {**{f"u{k}": ((15, 15), (18, 18), (20, 20)) for k in range(6)},
            **{f"e{k}": ((15, 15), (32, 4), (5, 40)) for k in range(3)}}
    rows = []
    for rater, counts in plan.items():
        for j, dg in enumerate(_confounded_rows(*counts)):
            chosen, rejected = suffixes[dg]
            rows.append({"prompt": f"q {rater} {j}", "chosen": f"answer {j}{chosen}",
                         "rejected": f"answer {j}{rejected}", "annotator": rater})
    return rows


def test_a_rater_biased_on_one_of_two_correlated_attributes_is_flagged_on_that_one_only(tmp_path, capsys):
    path = tmp_path / "pool.jsonl"
    write_judgments(path, validate_judgments(_pool_rows()))
    out = tmp_path / "report"
    assert main(["audit", str(path), "-a", SIGNOFF, "-a", EMOJI, "--report", str(out)]) == 0
    printed = capsys.readouterr().out
    with open(out / "annotators.csv", encoding="utf-8", newline="") as handle:
        rows = {(r["attribute"], r["annotator"]): r for r in csv.DictReader(handle)}
    emoji_raters, others = ["e0", "e1", "e2"], [f"u{k}" for k in range(6)]
    for rater in emoji_raters:
        signoff, emoji = rows[("signoff", rater)], rows[("emoji", rater)]
        assert float(signoff["marginal_estimate"]) == pytest.approx(math.log(20.5 / 55.5), rel=1e-5)
        assert float(signoff["marginal_high"]) < 0  # one attribute at a time: "anti-sign-off"
        assert abs(float(signoff["estimate"])) < 0.2 and signoff["outlying"] == "0"
        assert float(emoji["estimate"]) > 1.5 and emoji["outlying"] == "1"
    for rater in others:
        assert rows[("signoff", rater)]["outlying"] == rows[("emoji", rater)]["outlying"] == "0"
        assert float(rows[("emoji", rater)]["estimate"]) == pytest.approx(0.0, abs=1e-9)
    document = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    emoji_report = document["attributes"][1]
    assert emoji_report["pool_level"]["estimate"] == pytest.approx(0.0, abs=1e-9)
    assert sorted(emoji_report["pool_level"]["left_out"]) == emoji_raters
    assert emoji_report["pooled_marginal"]["estimate"] > 0.5  # all judgments pooled: pulled up
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "marginal and joint disagree" in readme and "e0 -1.00 ->" in readme
    assert "emoji: pool level +0.00 (biweight over 9 annotators, 3 left out)" in printed
