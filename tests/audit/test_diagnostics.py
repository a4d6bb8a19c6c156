"""The label audit: hand-worked counts, the annotator graph, warnings, JSON, the CLI, and a signed
corpus (``badpo.corpora.signing``) whose planted theta_k the swap-pair log-odds must reproduce."""

from __future__ import annotations

import dataclasses
import json
import math
import random

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from badpo.auditing.estimates import (
    BiasIdentifiabilityWarning,
    audit,
    offline_log_odds,
    penalised_log_odds,
    penalised_p_value,
)
from badpo.auditing.terminal_table import format_audit
from badpo.cli import main
from badpo.core.attributes import resolve_attributes
from badpo.core.judgments import Judgment, read_judgments, validate_judgments, write_judgments
from badpo.corpora.example import example_report
from badpo.corpora.signing import SigningConfig, implied_log_odds, sign_corpus
from badpo.corpora.tiny import TinyWorldConfig, tiny_base_pairs

AB = resolve_attributes(["given:a", "given:b"])


def row(pair: str, annotator: str, g_w: tuple, g_l: tuple, cls: str | None = None,
        pair_type: str | None = None) -> dict:
    """A judgment whose texts encode the attribute values, so that equal pairs have equal texts."""
    text = lambda g: f"{pair} answer a={g[0]} b={g[1]}"  # noqa: E731
    if g_w == g_l:  # same-group pair: the two answers differ in text only
        texts = (text(g_w) + " (first)", text(g_l) + " (second)")
    else:
        texts = (text(g_w), text(g_l))
    out = {"prompt": f"prompt of {pair}", "chosen": texts[0], "rejected": texts[1],
           "annotator": annotator, "pair_id": pair,
           "g_chosen": {"a": g_w[0], "b": g_w[1]}, "g_rejected": {"a": g_l[0], "b": g_l[1]}}
    if cls is not None:
        out["annotator_class"] = cls
    if pair_type is not None:
        out["pair_type"] = pair_type
    return out


# (g_w, g_l) on the attributes (a, b); see the docstring of test_hand_worked_corpus.
SIX_ROWS = validate_judgments([
    row("pair1", "k1", (1, 0), (0, 0), "P", "swap"),
    row("pair1", "k2", (0, 0), (1, 0), "P", "swap"),
    row("pair2", "k2", (1, 0), (0, 0), "P", "swap"),
    row("pair3", "k3", (1, 1), (0, 0), "Q", "mixed"),
    row("pair3", "k1", (0, 0), (1, 1), "P", "mixed"),
    row("pair4", "k3", (0, 1), (0, 1), "Q", "quality"),
])


def test_offline_log_odds_values_edges_and_errors():
    """log(w / (n - w)): 3 of 5 -> log 1.5; 1 of 2 -> 0; the edges are infinite."""
    assert offline_log_odds(3, 5) == pytest.approx(math.log(1.5), abs=1e-15)
    assert offline_log_odds(1, 2) == 0.0
    assert offline_log_odds(4, 4) == math.inf and offline_log_odds(0, 4) == -math.inf
    for wins, total in ((0, 0), (3, 2), (-1, 2)):
        with pytest.raises(ValueError, match="offline_log_odds"):
            offline_log_odds(wins, total)


def test_hand_worked_corpus():
    """Six judgments on attributes (a, b); rows 1-5 are cross-group on a, rows 4-5 on b.

    a: cross 5 of 6; the attribute side wins rows 1, 3, 4 -> log(3/2) = 0.405465,
       se sqrt(1/3 + 1/2) = 0.912871. Class P (rows 1, 2, 3, 5): 2 of 4 -> 0, se 1.
       Class Q (rows 4, 6): 1 of 1 -> +inf. Swap (rows 1-3): 2 of 3 -> log 2, se sqrt(3/2).
       Mixed (rows 4, 5): 1 of 2 -> 0, se sqrt 2. Quality (row 6): no cross-group -> None.
       k3's only cross-group judgment on a (row 4) went to the attribute side -> +inf.
    b: cross 2 of 6 (rows 4, 5), 1 win -> 0, se sqrt 2. k1 lost its one (row 5) -> -inf,
       k3 won its one -> +inf, k2 never saw b on one side only -> unidentified.
    Cross-group on at least one attribute: rows 1-5, 5 of 6.
    Graphs: pair1 joins k1-k2, pair3 joins k1-k3 -> one component (any, and a); on b only
    pair3 counts -> {k1, k3} and {k2}.
    """
    with pytest.warns(BiasIdentifiabilityWarning) as record:
        result = audit(SIX_ROWS, AB)
    assert result.n_judgments == 6 and result.annotators == ("k1", "k2", "k3")
    assert result.cross_any == 5
    a, b = result.coordinate("a"), result.coordinate("b")
    assert (a.overall.judgments, a.overall.cross, a.overall.wins) == (6, 5, 3)
    assert a.overall.share_cross == pytest.approx(5 / 6)
    assert a.overall.log_odds == pytest.approx(0.405465, abs=1e-6)
    assert a.overall.se == pytest.approx(0.912871, abs=1e-6)
    assert (a.by_class["P"].cross, a.by_class["P"].wins, a.by_class["P"].log_odds) == (4, 2, 0.0)
    assert a.by_class["P"].se == pytest.approx(1.0)
    assert a.by_class["Q"].log_odds == math.inf and a.by_class["Q"].divergent == "+inf"
    assert a.by_class["Q"].se is None
    assert a.by_pair_type["swap"].log_odds == pytest.approx(math.log(2))
    assert a.by_pair_type["swap"].se == pytest.approx(math.sqrt(1.5))
    assert a.by_pair_type["mixed"].se == pytest.approx(math.sqrt(2))
    assert a.by_pair_type["quality"].log_odds is None and a.by_pair_type["quality"].judgments == 1
    assert a.by_pair_type_class["mixed"]["P"].divergent == "-inf"
    assert a.by_pair_type_class["swap"]["P"] == a.by_pair_type["swap"]
    assert (b.overall.cross, b.overall.wins, b.overall.share_cross) == (2, 1, pytest.approx(1 / 3))
    assert b.overall.se == pytest.approx(math.sqrt(2))
    assert (a.diverge_up, a.diverge_down, a.unidentified) == (("k3",), (), ())
    assert (b.diverge_up, b.diverge_down, b.unidentified) == (("k3",), ("k1",), ("k2",))
    assert result.graph.components == (("k1", "k2", "k3"),) and a.graph.connected
    assert b.graph.components == (("k1", "k3"), ("k2",))
    assert result.unidentified == ()
    assert [str(w.message) for w in record] == list(result.warnings)
    assert len(result.warnings) == 4 + 1  # a: +inf; b: unidentified, +inf, -inf, 2 components
    assert any("b: the annotator graph has 2 connected components" in w for w in result.warnings)


def test_format_audit_shows_the_hand_worked_numbers():
    with pytest.warns(BiasIdentifiabilityWarning):
        text = format_audit(audit(SIX_ROWS, AB))
    lines = text.splitlines()
    overall = next(line for line in lines if line.split()[:2] == ["a", "all"])
    assert overall.split() == ["a", "all", "6", "5", "83.3%", "3", "+0.405", "0.913"]
    class_q = next(line for line in lines if line.split()[:3] == ["a", "class", "Q"])
    assert class_q.split()[-2:] == ["+inf", "-"]
    quality = next(line for line in lines if line.split()[:3] == ["a", "pair", "quality"])
    assert quality.split()[-2:] == ["-", "-"]
    assert "b: 1 annotator(s) with no cross-group judgment (theta_k not identified): k2" in text
    header = next(i for i, line in enumerate(lines) if line.startswith("attribute"))
    assert len({len(line) for line in lines[header:header + 2]}) == 1  # header and rule are one width
    assert "(marginal: one attribute at a time" in text  # and where the joint estimates are


def test_split_graph_and_pairs_without_pair_id():
    """k1, k2 share cross-group pair X (no pair_id: the same texts, either way round, are one
    pair); k3, k4 share pair Y; the two halves share only a same-group pair, which is no edge."""
    rows = [row("X", "k1", (1, 0), (0, 0)), row("X", "k2", (0, 0), (1, 0)),
            row("Y", "k3", (1, 0), (0, 0)), row("Y", "k4", (1, 0), (0, 0)),
            row("Z", "k1", (0, 0), (0, 0)), row("Z", "k4", (0, 0), (0, 0))]
    for r in rows:
        del r["pair_id"]
    with pytest.warns(BiasIdentifiabilityWarning) as record:
        result = audit(validate_judgments(rows), AB)
    assert any(str(w.message).startswith("any attribute: the annotator graph has 2 connected components")
               for w in record)
    assert result.graph.components == (("k1", "k2"), ("k3", "k4"))
    assert result.coordinate("a").graph.components == (("k1", "k2"), ("k3", "k4"))


def test_components_match_scipy_on_a_random_graph():
    """Union-find against scipy's connected components (an independent path): 40 annotators,
    60 pairs with two or three judges each, a third of them same-group (no edge)."""
    rng = random.Random(0)
    rows = []
    for p in range(60):
        cross = p % 3 != 0
        for k in rng.sample(range(40), rng.choice((2, 3))):
            rows.append(row(f"p{p}", f"k{k:02d}", (1, 0) if cross else (0, 0), (0, 0)))
    judgments = validate_judgments(rows)
    with pytest.warns(BiasIdentifiabilityWarning):
        result = audit(judgments, AB)
    edges = [(int(j.annotator[1:]), int(other.annotator[1:])) for j in judgments for other in judgments
             if j.pair_id == other.pair_id and j.g_chosen != j.g_rejected]
    i, k = np.array(edges).T
    count, labels = connected_components(coo_matrix((np.ones(len(i)), (i, k)), shape=(40, 40)))
    judges = {j.annotator for j in judgments}  # scipy also counts the 40 - len(judges) absent ones
    expected = {tuple(f"k{v:02d}" for v in np.flatnonzero(labels == c)) for c in range(count)}
    expected = {c for c in expected if c[0] in judges}
    assert count - len(expected) == 40 - len(judges)
    assert set(result.graph.components) == expected and result.graph.n_components > 1
    sizes = [len(c) for c in result.graph.components]
    assert sizes == sorted(sizes, reverse=True)


def test_unidentified_annotator_and_no_cross_group_coordinate_warn():
    """k9 judged only a same-group pair; no judgment is cross-group on b."""
    rows = validate_judgments([row("X", "k1", (1, 0), (0, 0)), row("X", "k2", (0, 0), (1, 0)),
                               row("Z", "k9", (1, 0), (1, 0))])
    with pytest.warns(BiasIdentifiabilityWarning) as record:
        result = audit(rows, AB)
    messages = [str(w.message) for w in record]
    assert "b: no cross-group judgments; theta is not identified on this attribute" in messages
    assert any(m.startswith("a: 1 annotator(s) with no cross-group judgment") and m.endswith("k9")
               for m in messages)
    assert any(m.startswith("1 annotator(s) with no cross-group judgment on any attribute") for m in messages)
    assert result.unidentified == ("k9",) and result.coordinate("b").overall.log_odds is None
    assert result.coordinate("a").diverge_up == ("k1",) and result.coordinate("a").diverge_down == ("k2",)


def test_json_is_plain_stable_and_round_trips():
    """No inf/NaN (a flag instead), the same text for shuffled rows, and loads back equal."""
    with pytest.warns(BiasIdentifiabilityWarning):
        result = audit(SIX_ROWS, AB)
    text = result.to_json()
    assert "Infinity" not in text and "NaN" not in text
    data = json.loads(text)
    assert data == json.loads(json.dumps(result.to_dict()))
    a = data["coordinates"][0]
    assert a["by_class"]["Q"] == {"judgments": 2, "cross": 1, "wins": 1, "share_cross": 0.5,
                                  "log_odds": None, "se": None, "divergent": "+inf"}
    assert a["overall"]["log_odds"] == pytest.approx(math.log(1.5))
    assert data["share_cross_any"] == pytest.approx(5 / 6)
    shuffled = list(SIX_ROWS)
    random.Random(1).shuffle(shuffled)
    assert shuffled != list(SIX_ROWS)
    with pytest.warns(BiasIdentifiabilityWarning):
        assert audit(shuffled, AB).to_json() == text


def test_bad_input_names_the_row():
    class WrongLength:
        names = ("a", "b")

        def judgment_values(self, j: Judgment):
            return np.zeros(2), np.zeros(3 if j.annotator == "k3" else 2)

    with pytest.raises(ValueError, match="row 3"):
        audit(SIX_ROWS, WrongLength())
    with pytest.raises(ValueError, match="no judgments"):
        audit([], AB)


def test_cli_audit_writes_the_table_and_the_json(tmp_path, capsys, cli_error):
    path, out = tmp_path / "six.jsonl", tmp_path / "audit.json"
    write_judgments(path, SIX_ROWS)
    assert main(["audit", str(path), "--attribute", "given:a", "-a", "given:b", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    with pytest.warns(BiasIdentifiabilityWarning):
        expected = audit(read_judgments(path), AB, start=True)  # the command shows where train starts
    # the labels it read come first, and in the JSON (six plain wins, read in the chosen/rejected form)
    labels = {"rows": 6, "forms": {"chosen_rejected": 6}, "ties": 0, "plain_wins": 6, "strengths": {}}
    expected = dataclasses.replace(expected, labels=labels)
    assert printed == "labels: 6 judgments (rows by form: chosen_rejected 6); 0 ties; 6 plain wins\n" + format_audit(
        expected)
    assert out.read_text() == expected.to_json()
    assert json.loads(out.read_text())["ties"] == 0
    assert "--attribute" in cli_error(["audit", str(path)])
    assert "--example" in cli_error(["audit", "--example", str(path)])
    assert "unknown attribute spec 'nope'" in cli_error(["audit", str(path), "--attribute", "nope"])


def test_cli_example_runs_on_the_planted_corpus(tmp_path, capsys):
    out = tmp_path / "example.json"
    assert main(["audit", "--example", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "planted corpus (seed 0" in printed and "warnings: none" in printed
    assert json.loads(out.read_text())["n_judgments"] == 12000
    assert json.loads(out.read_text())["ties"] == 0  # the example's labels are plain wins, said first
    assert printed.startswith("labels: 12000 judgments (rows by form: chosen_rejected 12000); 0 ties; "
                              "12000 plain wins\n")
    comparison = printed[printed.index("planted corpus (seed 0"):].splitlines()
    assert [line.split()[:2] for line in comparison[2:]] == [
        [name, key] for name in ("woman_coded", "black_coded") for key in ("all", "A", "B", "C")]


@pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")  # 300 pairs
def test_example_report_is_seeded():
    first, again, other = (example_report(seed, n_pairs=300)[1] for seed in (3, 3, 4))
    assert first == again and first != other
    assert "badpo label audit: 1200 judgments" in first


def test_swap_log_odds_reproduce_the_planted_theta():
    """The headline check. On swap pairs dg = +-e_i, so a judgment by annotator k on attribute i
    goes to the attribute side with probability sigma(theta_k[i]). Given the draw's assignment of
    annotators, the audit's swap-pair log-odds of a class estimates

        logit( sum_k n_ki sigma(theta_k[i]) / sum_k n_ki ),  n_ki = swap judgments of k on i,

    computed here per annotator (independently of ``signing.implied_log_odds``, which works per
    judgment and must agree to 1e-12). Tolerance: 4 standard errors of the log-odds, the audit's
    delta-method se = sqrt(1/w + 1/(n - w)). Conditionally on the assignment the wins are a sum
    of independent Bernoullis whose variance is at most n p(1 - p), so the true sampling error is
    at most this se to first order; 6 cells at 4 se fail by chance with probability < 4e-4.
    The corpus: the signing protocol over 8,000 tiny-world base pairs, 80% swap, 10 annotators
    per class, 4 judgments per pair, so the cells hold ~4,250 judgments and 4 se is 0.13 to 0.24
    (measured: the six deviations are +1.15, +0.53, +0.92, +0.07, -0.56, +1.45 se). On
    black_coded, whose class means (2.5, -0.5, 1.0) are >= 1.5 apart, the check also tells the
    classes apart: every gap between class estimates exceeds 8 se. (On woman_coded the means are
    0.2 to 0.4 apart, within the spread of 10 annotators' theta_k around them, so the realised
    classes need not differ; at this seed A and C do not.)
    """
    config = SigningConfig(quality_share=0.1, swap_share=0.8, mixed_share=0.1,
                           annotators_per_class=10, heldout_share=0.0, seed=11)
    corpus = sign_corpus(tiny_base_pairs(TinyWorldConfig(n_pairs=8000, signing=config))[0], config)
    result = audit(corpus.train, resolve_attributes(["names"]))
    assert not result.warnings
    implied = implied_log_odds(corpus, corpus.train, ("swap",))
    theta = {a.annotator: a.theta for a in corpus.annotators}
    pairs = {p.pair_id: p for p in corpus.pairs}
    for i, name in enumerate(result.attribute_names):
        swap = result.coordinate(name).by_pair_type_class["swap"]
        estimates = {}
        for cls in ("A", "B", "C"):
            counts: dict[str, int] = {}
            for j in corpus.train:
                pair = pairs[j.pair_id]
                if j.pair_type == "swap" and j.annotator_class == cls and pair.g_1[i] != pair.g_2[i]:
                    counts[j.annotator] = counts.get(j.annotator, 0) + 1
            p = sum(n / (1 + math.exp(-theta[k][i])) for k, n in counts.items()) / sum(counts.values())
            expected = math.log(p / (1 - p))
            assert implied[name][cls] == pytest.approx(expected, abs=1e-12)
            cell = swap[cls]
            assert cell.cross == sum(counts.values()) > 4000
            assert abs(cell.log_odds - expected) <= 4 * cell.se, (name, cls, cell.log_odds, expected, cell.se)
            assert 4 * cell.se < 0.26
            estimates[cls] = cell.log_odds
        if name == "black_coded":
            gaps = np.diff(sorted(estimates.values()))
            assert gaps.min() > 2 * 4 * max(swap[c].se for c in swap), (name, estimates)


# --- the penalised (Jeffreys) per-annotator estimate and its profile interval -------------------

def test_penalised_log_odds_hand_worked_count_table():
    """a = w + 1/2, b = n - w + 1/2; estimate log(a / b).

    w=3 of n=4: log(3.5 / 1.5) = log(7/3) = 0.847298. w=0 of n=1: log(0.5 / 1.5) = -log 3 =
    -1.098612 (the MLE is -inf). w=n=10: log(10.5 / 0.5) = log 21 = 3.044522.
    Symmetric counts (a = b) have a closed-form interval: l(t) = -2a log(2 cosh(t/2)), so
    2 (l(0) - l(t)) = 4a log cosh(t/2) = z^2 gives t = +-2 acosh(exp(z^2 / (4a))).
    w=1 of n=2 (a = 1.5): exp(3.841459 / 6) = 1.896931, acosh -> 1.255301, t = +-2.510602.
    n = 0 (a = 0.5): t = +-2 acosh(exp(3.841459 / 2)) = +-5.216935.
    """
    estimate, low, high = penalised_log_odds([3, 0, 10, 1, 0], [4, 1, 10, 2, 0])
    np.testing.assert_allclose(estimate, [math.log(7 / 3), -math.log(3), math.log(21), 0.0, 0.0],
                               atol=1e-12)
    z2 = 1.959963984540054 ** 2
    for column, a in ((3, 1.5), (4, 0.5)):
        half = 2 * math.acosh(math.exp(z2 / (4 * a)))
        assert (low[column], high[column]) == pytest.approx((-half, half), abs=1e-9)
    assert half == pytest.approx(5.216935, abs=1e-6)
    assert np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < estimate)


def test_penalised_interval_matches_an_independent_root_finder_and_the_p_value():
    """Each bound solves 2 (l(estimate) - l(t)) = z^2 (scipy's brentq on the log-likelihood written
    out with log1p); the p-value against a bound is 1 - level, inside it larger, outside smaller."""
    from scipy.optimize import brentq

    wins, total = np.array([7, 2, 0, 25]), np.array([9, 11, 6, 40])
    estimate, low, high = penalised_log_odds(wins, total, level=0.9)
    z = 1.6448536269514722
    for k in range(4):
        a, b = wins[k] + 0.5, total[k] - wins[k] + 0.5

        def deficit(t):
            loglik = lambda u: -a * math.log1p(math.exp(-u)) - b * math.log1p(math.exp(u))  # noqa: E731
            return 2 * (loglik(estimate[k]) - loglik(t)) - z * z

        assert low[k] == pytest.approx(brentq(deficit, estimate[k] - 40, estimate[k]), abs=1e-8)
        assert high[k] == pytest.approx(brentq(deficit, estimate[k], estimate[k] + 40), abs=1e-8)
        assert penalised_p_value(wins[k], total[k], high[k]) == pytest.approx(0.1, abs=1e-8)
        assert penalised_p_value(wins[k], total[k], estimate[k]) == pytest.approx(1.0)
        assert penalised_p_value(wins[k], total[k], low[k] - 0.5) < 0.1
    with pytest.raises(ValueError, match="0 <= wins <= total"):
        penalised_log_odds([3], [2])
    with pytest.raises(ValueError, match="level must lie in"):
        penalised_log_odds([1], [2], level=1.0)


def test_penalised_interval_exact_binomial_coverage():
    """Coverage summed over every outcome w ~ Binomial(n, sigmoid(theta)), n = 5..40, theta on
    -3..3: near the nominal 95% on average and never below 0.90 (the docstring's figures)."""
    coverages = []
    for n in range(5, 41):
        wins = np.arange(n + 1)
        _, low, high = penalised_log_odds(wins, np.full(n + 1, n))
        ways = np.array([math.comb(n, int(w)) for w in wins], dtype=np.float64)
        for theta in np.linspace(-3, 3, 13):
            p = 1 / (1 + math.exp(-theta))
            pmf = ways * p ** wins * (1 - p) ** (n - wins)
            coverages.append(pmf[(low <= theta) & (theta <= high)].sum())
    assert 0.94 < np.mean(coverages) < 0.97
    assert min(coverages) > 0.90


def test_penalised_interval_coverage_by_simulation_on_a_pool():
    """400 annotators, theta_k ~ N(0.8, 1), 1..30 cross-group judgments each, seed 7: the share of
    intervals holding the true theta_k is within 0.92..0.98 (nominal 0.95; binomial s.e. of the
    share about 0.011)."""
    rng = np.random.default_rng(7)
    theta = rng.normal(0.8, 1.0, size=400)
    total = rng.integers(1, 31, size=400)
    wins = rng.binomial(total, 1 / (1 + np.exp(-theta)))
    _, low, high = penalised_log_odds(wins, total)
    covered = np.mean((low <= theta) & (theta <= high))
    assert 0.92 <= covered <= 0.98
