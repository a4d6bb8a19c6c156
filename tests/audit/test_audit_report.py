"""``badpo audit --report DIR``: per-annotator estimates and flags on a hand-worked pool, the files,
the learned theta of a run beside them, pseudonyms in every output, and the CLI's errors."""

from __future__ import annotations

import csv
import hashlib
import hmac
import json
import math

import numpy as np
import pytest
import torch

from badpo.auditing.estimates import LogOdds, penalised_log_odds
from badpo.auditing.forest import plot_forest
from badpo.auditing.joint import fit_joint, robust_level
from badpo.auditing.report import _file_stem, attribute_report, pseudonymiser
from badpo.cli import main
from badpo.core.bias import BiasChannel
from badpo.core.judgments import validate_judgments, write_judgments

# annotator -> (class, cross-group judgments, of which the attribute side won); k4 judges only
# same-group pairs (2 of them).
POOL = {"k1": ("A", 4, 3), "k2": ("A", 4, 1), "k3": ("B", 3, 3), "k4": ("B", 0, 0), "k5": ("B", 20, 1)}


def pool_rows() -> list[dict]:
    rows = []
    for annotator, (cls, cross, wins) in POOL.items():
        for i in range(max(cross, 2)):
            pair = f"{annotator}-pair{i}"
            same = cross == 0
            won = i < wins
            rows.append({
                "prompt": f"prompt {pair}", "chosen": f"first answer {pair}", "rejected": f"second answer {pair}",
                "annotator": annotator, "annotator_class": cls, "pair_id": pair,
                "g_chosen": {"flag": 0.0 if same else float(won)},
                "g_rejected": {"flag": 0.0 if same else float(not won)},
            })
    return rows


@pytest.fixture
def pool_file(tmp_path):
    path = tmp_path / "pool.jsonl"
    write_judgments(path, validate_judgments(pool_rows()))
    return path


def read_csv(path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _ridge_root(wins: int, cross: int) -> float:
    """The joint estimate of one 0/1 attribute alone: the root of
    wins sigmoid(-t) - (cross - wins) sigmoid(t) = t / 2.5^2, by bisection."""
    def score(t: float) -> float:
        return wins / (1 + math.exp(t)) - (cross - wins) / (1 + math.exp(-t)) - t / 6.25

    low, high = -20.0, 20.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if score(middle) > 0 else (low, middle)
    return (low + high) / 2


def test_report_estimates_and_flags_hand_worked(pool_file, tmp_path, capsys):
    """One attribute, so the joint estimate is the root of w sigmoid(-t) - (n - w) sigmoid(t) =
    t / 6.25 (:func:`_ridge_root`): k1 3 of 4 -> +0.9125, k2 1 of 4 -> -0.9125, k3 3 of 3 ->
    +2.0808 (divergent: +inf MLE), k5 1 of 20 -> -2.5772; se = 1 / sqrt(n sigmoid(t) sigmoid(-t)
    + 0.16); k4 has no cross-group judgment: unidentified. The marginal columns keep
    log((w + 1/2) / (n - w + 1/2)) = log(7/3), -log(7/3), log 7, log(1.5 / 19.5). The pool level is
    the biweight of the four estimates (-0.25, all four weighted in); only k5 lies more than 1.96 se
    from it (z = -2.83, p = 0.0047 < 0.05 / 4: Bonferroni too). Class B's level (k3, k5) is
    -0.39: k5 is outlying in its class too. The log-odds pooled over all 31 cross-group judgments,
    8 won, is log(8.5 / 23.5) = -1.0169, pulled by k5's 20 judgments."""
    out = tmp_path / "report"
    assert main(["audit", str(pool_file), "-a", "tag=given:flag", "--report", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "report written to" in printed and "pooled log-odds -1.02 [-1.86, -0.27]" in printed
    assert "tag: pool level -0.25 (biweight over 4 annotators)" in printed
    assert "1 outlying (1 after Bonferroni)" in printed
    rows = read_csv(out / "annotators.csv")
    assert [r["annotator"] for r in rows] == ["k5", "k2", "k1", "k3", "k4"]  # by estimate, unidentified last
    by_id = {r["annotator"]: r for r in rows}
    for annotator, (_, cross, wins) in POOL.items():
        if annotator == "k4":
            continue
        t = _ridge_root(wins, cross)
        assert float(by_id[annotator]["estimate"]) == pytest.approx(t, rel=1e-5)
        info = cross / (1 + math.exp(t)) / (1 + math.exp(-t)) + 0.16
        assert float(by_id[annotator]["se"]) == pytest.approx(1 / math.sqrt(info), rel=1e-5)
        assert float(by_id[annotator]["marginal_estimate"]) == pytest.approx(
            math.log((wins + 0.5) / (cross - wins + 0.5)), rel=1e-5)
    assert by_id["k5"]["estimate"] == "-2.57724"  # six significant digits in the CSV
    assert by_id["k4"]["estimate"] == "" and by_id["k4"]["unidentified"] == "1"
    assert [by_id[k]["outlying"] for k in ("k1", "k2", "k3", "k4", "k5")] == ["0", "0", "0", "0", "1"]
    assert [by_id[k]["outlying_bonferroni"] for k in ("k1", "k2", "k3", "k5")] == ["0", "0", "0", "1"]
    assert [by_id[k]["outlying_in_class"] for k in ("k1", "k2", "k3", "k5")] == ["0", "0", "0", "1"]
    assert float(by_id["k5"]["z"]) == pytest.approx(-2.8258, abs=1e-3)
    assert by_id["k3"]["divergent"] == "+inf" and by_id["k5"]["divergent"] == ""
    assert (by_id["k5"]["cross"], by_id["k5"]["wins"], by_id["k4"]["judgments"]) == ("20", "1", "2")

    document = json.loads((out / "audit.json").read_text())
    report = document["attributes"][0]
    assert report["name"] == "tag" and report["plot"] == "forest-tag.png"
    estimates = [float(by_id[k]["estimate"]) for k in ("k1", "k2", "k3", "k5")]
    ses = [float(by_id[k]["se"]) for k in ("k1", "k2", "k3", "k5")]
    assert report["pool_level"]["estimate"] == pytest.approx(robust_level(estimates, ses).level, abs=1e-5)
    assert report["pool_level"]["left_out"] == [] and report["prior_sd"] == pytest.approx(2.5)
    assert (report["pooled_marginal"]["cross"], report["pooled_marginal"]["wins"]) == (31, 8)
    assert report["pooled_marginal"]["estimate"] == pytest.approx(math.log(8.5 / 23.5), abs=1e-12)
    assert report["classes"]["B"]["marginal"]["estimate"] == pytest.approx(math.log(4.5 / 19.5), abs=1e-12)
    assert report["classes"]["A"]["annotators"] == 2 and report["classes"]["A"]["estimate"] == pytest.approx(0.0)
    assert report["counts"] == {"annotators": 5, "identified": 4, "unidentified": 1, "divergent": 1,
                                "outlying": 1, "outlying_bonferroni": 1, "outlying_in_class": 1}
    assert document["audit"]["attribute_names"] == ["tag"] and document["pseudonymised"] is False
    assert (out / "forest-tag.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    readme = (out / "README.md").read_text()
    assert "## tag" in readme and "pool level: -0.25 (biweight over 4 annotators)" in readme
    assert "personal data" in readme and "**outlying**" in readme and "- outlying: k5 -2.58" in readme


def test_learned_theta_of_a_run_sits_beside_the_estimates(pool_file, tmp_path):
    """theta.json written by BiasChannel.save (per_annotator, theta_k = 0.1 * k for k1..k5 on
    'tag'); an extra annotator in the run is counted, not shown. The correlation is numpy's
    corrcoef of (estimate, learned) over k1, k2, k3, k5."""
    run = tmp_path / "run"
    run.mkdir()
    ids = ["k1", "k2", "k3", "k4", "k5", "k9"]
    channel = BiasChannel("per_annotator", ["tag"], annotators=ids)
    with torch.no_grad():
        channel.annotator_theta.copy_(torch.tensor([[0.1 * (i + 1)] for i in range(len(ids))]))
    channel.save(run / "theta.json")
    out = tmp_path / "report"
    assert main(["audit", str(pool_file), "-a", "tag=given:flag", "--report", str(out), "--run", str(run)]) == 0
    rows = {r["annotator"]: r for r in read_csv(out / "annotators.csv")}
    assert [float(rows[k]["learned_theta"]) for k in ("k1", "k2", "k3", "k4", "k5")] == pytest.approx(
        [0.1, 0.2, 0.3, 0.4, 0.5])
    document = json.loads((out / "audit.json").read_text())
    report = document["attributes"][0]
    estimates = [float(rows[k]["estimate"]) for k in ("k1", "k2", "k3", "k5")]  # the joint ones
    expected = np.corrcoef(estimates, [0.1, 0.2, 0.3, 0.5])[0, 1]
    assert report["learned_vs_offline_correlation"] == pytest.approx(expected, abs=1e-6)
    assert report["learned_theta_bar"] == pytest.approx(0.35)
    assert document["run_annotators_without_judgments"] == 1


def test_a_run_without_the_audited_attribute_is_a_one_line_error(pool_file, tmp_path, cli_error):
    run = tmp_path / "run"
    run.mkdir()
    BiasChannel("pooled", ["other"], annotators=["k1"]).save(run / "theta.json")
    line = cli_error(["audit", str(pool_file), "-a", "tag=given:flag", "--report", str(tmp_path / "r"),
                      "--run", str(run)])
    assert "has theta on ['other'], none of the audited attributes ['tag']" in line
    line = cli_error(["audit", str(pool_file), "-a", "tag=given:flag", "--report", str(tmp_path / "r"),
                      "--run", str(tmp_path / "nowhere")])
    assert "no theta.json" in line


def test_pseudonyms_replace_every_id_in_every_output(pool_file, tmp_path, capsys, monkeypatch):
    """anon- + 12 hex digits of HMAC-SHA256(key, id), computed here with hmac; no raw id (k1..k5)
    survives in the printed table (its warnings name annotators), --json, the CSV, the JSON or
    the README; the same key gives the same pseudonyms, another key others."""
    def run(key: str, out) -> str:
        monkeypatch.setenv("BADPO_PSEUDONYM_KEY", key)
        assert main(["audit", str(pool_file), "-a", "tag=given:flag", "--report", str(out),
                     "--json", str(out) + ".json", "--pseudonymise"]) == 0
        return capsys.readouterr().out

    printed = run("s3cret", tmp_path / "one")
    expected = {k: "anon-" + hmac.new(b"s3cret", k.encode(), hashlib.sha256).hexdigest()[:12] for k in POOL}
    texts = [printed, (tmp_path / "one.json").read_text()] + [
        (tmp_path / "one" / name).read_text() for name in ("annotators.csv", "audit.json", "README.md")]
    for text in texts:
        assert not any(f"k{i}" in text for i in range(1, 6))
    assert "anon-" in printed  # the warnings name annotators, by pseudonym
    rows = read_csv(tmp_path / "one" / "annotators.csv")
    assert {r["annotator"] for r in rows} == set(expected.values())
    assert json.loads((tmp_path / "one" / "audit.json").read_text())["pseudonymised"] is True
    run("s3cret", tmp_path / "two")
    assert (tmp_path / "two" / "annotators.csv").read_text() == (tmp_path / "one" / "annotators.csv").read_text()
    run("other", tmp_path / "three")
    assert {r["annotator"] for r in read_csv(tmp_path / "three" / "annotators.csv")}.isdisjoint(expected.values())


def test_pseudonyms_apply_to_the_run_ids_too(pool_file, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    channel = BiasChannel("per_annotator", ["tag"], annotators=list(POOL))
    with torch.no_grad():
        channel.annotator_theta.fill_(0.7)
    channel.save(run / "theta.json")
    assert main(["audit", str(pool_file), "-a", "tag=given:flag", "--report", str(tmp_path / "r"),
                 "--run", str(run), "--pseudonymise", "--pseudonym-key", "k"]) == 0
    rows = read_csv(tmp_path / "r" / "annotators.csv")
    assert [float(r["learned_theta"]) for r in rows] == pytest.approx([0.7] * 5)


@pytest.mark.parametrize("argv, message", [
    (["--run", "x"], "--run RUN_DIR needs --report DIR"),
    (["--pseudonymise"], "--pseudonymise needs a secret key"),
    (["--pseudonym-key", "k"], "--pseudonym-key is the key of --pseudonymise"),
])
def test_cli_option_errors(pool_file, argv, message, cli_error, monkeypatch):
    monkeypatch.delenv("BADPO_PSEUDONYM_KEY", raising=False)
    assert message in cli_error(["audit", str(pool_file), "-a", "tag=given:flag", *argv])


def test_example_refuses_report_options(cli_error, tmp_path):
    assert "apply to DATA, not to --example" in cli_error(["audit", "--example", "--report", str(tmp_path)])


def test_pseudonymiser_refuses_an_empty_key():
    with pytest.raises(ValueError, match="non-empty key"):
        pseudonymiser("")


def test_file_stems_are_safe_and_distinct():
    taken: set[str] = set()
    assert _file_stem("signoff", taken) == "signoff"
    spec = "regex:-- (cheers|thanks)$"
    stem = _file_stem(spec, taken)
    assert stem == "regex_--_cheers_thanks-" + hashlib.sha256(spec.encode()).hexdigest()[:8]
    assert _file_stem("signoff", {"signoff"}) != "signoff"
    long = "a" * 300  # a given: column of 300 safe characters: a file name holds at most 255 bytes
    assert len(_file_stem(long, set())) <= 60 and _file_stem(long, set()) != _file_stem("a" * 301, set())


class _Coordinate:
    """The fields of CoordinateAudit that attribute_report reads."""

    def __init__(self, name, counts):
        self.name = name
        self.by_annotator = counts
        self.overall = LogOdds(*(sum(getattr(c, f) for c in counts.values()) for f in ("judgments", "cross", "wins")))
        self.by_class = {}


def test_a_large_pool_is_drawn_without_names_and_its_estimates_match(tmp_path):
    """300 annotators (over the 120 named rows): the plot is drawn unlabelled; the marginal columns
    equal penalised_log_odds on the same counts, the joint ones the fit, and every identified row
    is in estimate order."""
    rng = np.random.default_rng(3)
    cross = rng.integers(0, 25, size=300)
    wins = rng.binomial(cross, 0.6)
    ids = [f"a{i:03d}" for i in range(300)]
    counts = {ids[i]: LogOdds(int(cross[i]) + 1, int(cross[i]), int(wins[i])) for i in range(300)}
    diffs = np.array([[1.0 if j < wins[i] else -1.0 if j < cross[i] else 0.0]
                      for i in range(300) for j in range(cross[i] + 1)])
    vertex = np.repeat(np.arange(300), cross + 1)
    fit = fit_joint(diffs, vertex, ids, ["x"])
    report = attribute_report(_Coordinate("x", counts), {}, fit)
    marginal, _, _ = penalised_log_odds(wins, cross)
    got = {r["annotator"]: r for r in report["annotators"]}
    for i in range(300):
        row = got[ids[i]]
        assert row["marginal_estimate"] == (None if cross[i] == 0 else pytest.approx(float(marginal[i])))
        assert row["estimate"] == (None if cross[i] == 0 else pytest.approx(float(fit.estimate[i, 0])))
    shown = [r["estimate"] for r in report["annotators"] if r["estimate"] is not None]
    assert shown == sorted(shown) and report["counts"]["unidentified"] == int((cross == 0).sum())
    plot_forest(report, tmp_path / "big.png")
    assert (tmp_path / "big.png").stat().st_size > 10_000


def test_a_short_name_flows_through_training_into_the_report(tmp_path, save_model_dir):
    """Train one step with ``sig=given:signed`` and ``smith=regex:smith``: theta.json and
    log.jsonl are keyed by the short names, and ``--run`` finds them for the report."""
    from badpo.engine.train import train
    from fixtures.engine import judgment_rows, log_records, make_config, write_jsonl

    save_model_dir(tmp_path / "model", "gpt2")
    data = write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    out = train(make_config(tmp_path, "run", "steps=1", "method=ba_dpo_shared_mean",
                            "attributes=[sig=given:signed, smith=regex:smith]",
                            "bias.init=zero"))  # smith's side wins all its judgments: no finite start
    theta = json.loads((out / "theta.json").read_text())
    assert theta["attribute_names"] == ["sig", "smith"] and set(theta["theta_bar"]) == {"sig", "smith"}
    assert set(log_records(out)[0]["theta_bar"]) == {"sig", "smith"}
    report = tmp_path / "report"
    assert main(["audit", str(data), "-a", "sig=given:signed", "--report", str(report), "--run", str(out)]) == 0
    rows = read_csv(report / "annotators.csv")
    assert {r["attribute"] for r in rows} == {"sig"}
    assert all(r["learned_theta"] != "" for r in rows)
    assert (report / "forest-sig.png").exists()
