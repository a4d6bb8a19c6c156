"""``badpo audit --discover`` on worlds built for it (tests/fixtures/discover_worlds.py): it finds
the planted attributes (the names of the tiny signed world, length and markdown of the tiny
MultiPref world, the last word of the ending world, which only the data screen knows) and nothing
else, and nothing at all in the same worlds without a planted bias; through the command line
(table, attributes line, report files, option errors) and the Python API."""

from __future__ import annotations

import json

import pytest

import badpo
from badpo.auditing.discover import discover
from badpo.auditing.estimates import attribute_differences, audit
from badpo.cli import main
from badpo.core.attributes import resolve_attributes
from badpo.core.judgments import write_judgments
from badpo.corpora.signing import SigningConfig, sign_corpus
from badpo.corpora.tiny import TinyWorldConfig, tiny_base_pairs
from fixtures.discover_worlds import PLANTED, WORLDS, ending_world, signed_world


@pytest.mark.parametrize("world", sorted(WORLDS))
def test_finds_what_was_planted_and_nothing_else(world):
    result = discover(WORLDS[world](0))
    assert {f.name for f in result.findings} == PLANTED[world]
    for finding in result.findings:
        assert finding.effect[1] > 0 and finding.heldout[1] > 0  # planted toward the attribute side
        assert finding.spread is not None and finding.spread[0] > 0  # theta_k differ between annotators


def test_the_ending_world_is_found_by_the_data_screen_as_a_declarable_spec():
    [finding] = discover(ending_world(1)).findings
    assert finding.source == "data" and finding.spec.startswith("ends_indeed=regex:")
    attribute = resolve_attributes([finding.spec]).attributes[0]
    assert attribute.fn("", "1 2 3 indeed") == 1.0 and attribute.fn("", "indeed 1 2 3") == 0.0


def test_a_bias_the_annotators_disagree_on_without_a_shared_effect_is_found_by_its_spread():
    """theta_k ~ N(0, 1) on the ending: the pooled log-odds is near 0, the homogeneity test is not."""
    [finding] = discover(ending_world(0, mean=0.0, sigma=1.0)).findings
    assert finding.name == "ends_indeed" and finding.effect[1] < 0 < finding.effect[2]
    assert finding.p_spread < 1e-6 and finding.spread[1] > 0.5


def test_names_are_matched_on_swap_pairs_and_length_has_no_edit():
    woman = {f.name: f for f in discover(signed_world(0)).findings}["woman_coded"]
    assert woman.pairs_matched > 100 and woman.matched[1] > 0  # swap pairs: one body under two names
    length = {f.name: f for f in discover(WORLDS["multipref"](0)).findings}["length"]
    assert length.pairs_matched is None and length.matched is None
    assert any(member.startswith("ends_") for member in length.members)  # the endings make a side longer


def test_a_quality_marker_is_reported_with_a_caution_and_planted_biases_without():
    """Tiny world with quality "gaps" and no planted bias: a left-out digit is written "?", so the
    side with "?" is worse and loses; labels alone cannot tell that from a bias against question
    marks, and the caution says so (no matched pair, no spread). The planted worlds carry none."""
    zero = {"A": [0.0, 0.0], "B": [0.0, 0.0], "C": [0.0, 0.0]}
    config = TinyWorldConfig(quality="gaps", signing=SigningConfig(seed=0, class_means=zero, sigma=0.0))
    [finding] = discover(sign_corpus(tiny_base_pairs(config)[0], config.signing).train).findings
    assert finding.name == "question" and finding.effect[2] < 0
    assert finding.caution is not None and "quality" in finding.caution
    for world in WORLDS:
        assert all(f.caution is None for f in discover(WORLDS[world](0)).findings), world


@pytest.mark.parametrize("world", sorted(WORLDS))
@pytest.mark.parametrize("seed", [0, 1])
def test_a_null_world_reports_nothing_with_its_power(world, seed):
    result = discover(WORLDS[world](seed, null=True))
    assert result.findings == ()
    assert result.power()["best_mde"] < 0.5  # a world of this size would have shown |log-odds| 0.5
    assert "not a bias on an attribute no candidate carries" in result.to_dict()["power"]["covers"]


@pytest.mark.slow  # 60 null worlds, about 20 s on one core
def test_at_most_five_percent_of_twenty_null_seeds_report_anything():
    for world in sorted(WORLDS):
        reported = [seed for seed in range(20) if discover(WORLDS[world](seed, null=True)).findings]
        assert len(reported) <= 1, (world, reported)  # 1 of 20 = 5%


@pytest.fixture(scope="module")
def multipref_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("discover") / "judgments.jsonl"
    write_judgments(path, WORLDS["multipref"](0))
    return path


def test_cli_prints_the_table_and_writes_the_report(multipref_file, tmp_path, capsys):
    report = tmp_path / "report"
    assert main(["audit", str(multipref_file), "--discover", "--report", str(report),
                 "--json", str(tmp_path / "d.json")]) == 0
    captured = capsys.readouterr()
    assert 'attributes=["markdown", "length"]' in captured.out or 'attributes=["length", "markdown"]' in captured.out
    assert "found 2 attribute(s)" in captured.out and "md_list" in captured.out
    assert "data screen" in captured.err  # progress goes to stderr
    for name in ("discover.json", "discover.csv", "discover-forest.png", "discover.md"):
        assert (report / name).is_file()
    document = json.loads((report / "discover.json").read_text())
    assert set(document["attributes"]) == {"markdown", "length"}
    assert json.loads((tmp_path / "d.json").read_text())["attributes"] == document["attributes"]
    assert main(["audit", str(multipref_file), "--discover", "--report", str(report)]) == 2  # no --overwrite
    assert "--overwrite" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["-a", "length"], ["--example"], ["--alpha", "0.1"]])
def test_cli_refuses_options_of_declared_attributes(multipref_file, extra, cli_error):
    line = cli_error(["audit", str(multipref_file), "--discover", *extra])
    assert "--discover proposes the attributes itself" in line


def test_api_discover_returns_the_discovery(multipref_file):
    result = badpo.audit(str(multipref_file), discover=True)
    assert set(result.audit.attributes()) == {"markdown", "length"}
    assert "found 2 attribute(s)" in result.summary()
    assert json.loads(result.to_json())["attributes"] == result.audit.attributes()
    with pytest.raises(badpo.api.ConfigError, match="discover=True"):
        badpo.audit(str(multipref_file), ["length"], discover=True)


def test_duplicate_judgments_are_said_and_kept_or_dropped_as_in_the_declared_audit(multipref_file, tmp_path):
    rows = multipref_file.read_text().splitlines()
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join(rows + rows[:30]) + "\n")  # 30 judgments given again
    kept = badpo.audit(str(twice), discover=True)
    assert kept.summary().startswith("30 exact duplicate judgment(s) in ") and ", kept:" in kept.summary()
    dropped = badpo.audit(str(twice), discover=True, duplicates="drop")
    assert ", dropped (--duplicates drop)" in dropped.summary()
    assert dropped.audit.attributes() == badpo.audit(str(multipref_file), discover=True).audit.attributes()


def test_the_level_column_is_where_train_starts_theta():
    """The tiny MultiPref world's findings: each level is the conditional level that ``badpo audit``
    reports for the same judgments with every finding declared (one joint fit), to the fit's
    tolerance (tau is searched to 1e-3)."""
    judgments = WORLDS["multipref"](0)
    findings = sorted(discover(judgments).findings, key=lambda f: f.name)
    attributes = resolve_attributes([f.spec for f in findings])
    fit = audit(judgments, attributes, differences=attribute_differences(judgments, attributes), start=True).start
    assert fit.identified
    assert [f.level for f in findings] == pytest.approx(fit.level, abs=2e-3)
