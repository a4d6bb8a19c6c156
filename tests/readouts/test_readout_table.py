"""The readout table: rows write disjoint paths, a row is read only when its needs are present
(an absent need with a reason names the row's paths under ``skipped``; a reward model is read by the rows
that say how), the planner asks the row
that writes a path, and the summary shows the rows' lines in their order."""

from __future__ import annotations

from badpo.core.judgments import Judgment
from badpo.readouts import table
from badpo.readouts.eval_config import EvalConfig
from badpo.readouts.reading import Corpus, Need, Reading, Readout
from badpo.readouts.table import READOUTS, read_run, readout_unavailable, row_of, summary_lines


def test_every_path_head_is_written_by_one_row():
    heads = [head for row in READOUTS for head in row.writes]
    assert len(heads) == len(set(heads))
    assert all(row.per_attribute == tuple(h for h in row.per_attribute if h in row.writes) for row in READOUTS)
    assert row_of("votes").name == "held-out judgments" and row_of("training") is None


def _reading(heldout: bool) -> Reading:
    judgments = [Judgment("p", "a", "b", "a1")] if heldout else []
    return Reading(object(), object(), None, Corpus([{"prompt": "p"}], judgments, None), EvalConfig())


def test_a_row_is_read_when_its_needs_are_present_and_named_under_skipped_when_not(monkeypatch):
    held = Need("held-out judgments", lambda r: bool(r.corpus.heldout), skip="no held-out judgments")
    never = Need("never", lambda r: False)  # absent without a reason: left out silently
    rows = (Readout("first", ("one",), (), lambda r: {"one": 1}),
            Readout("held", ("two", "three"), (held,), lambda r: {"two": len(r.result)}, skipped_as=("two",)),
            Readout("silent", ("four",), (never,), lambda r: {"four": 4}),
            Readout("reward model's", ("five",), (), None))
    monkeypatch.setattr(table, "READOUTS", rows)
    assert read_run(_reading(heldout=True)) == {"one": 1, "two": 1}
    assert read_run(_reading(heldout=False)) == {"one": 1, "skipped": {"two": "no held-out judgments"}}


def test_a_reward_models_reading_reads_the_rows_that_say_how_and_only_those(monkeypatch):
    """A row reads a reward model by its ``read_reward_model`` (a policy's ``read`` is not called),
    with the same needs; its skipped reasons land under ``skipped`` as a policy's do."""
    held = Need("held-out judgments", lambda r: bool(r.corpus.heldout), skip="no held-out judgments")

    def tilt(reading):
        reading.skipped["tilt.length"] = "no edit"
        return {"tilt": reading.kind}

    rows = (Readout("policy only", ("one",), (), lambda r: {"one": 1}),
            Readout("both", ("two",), (held,), lambda r: {"two": "u"}, read_reward_model=lambda r: {"two": "r"},
                    skipped_as=("two",)),
            Readout("reward model only", ("three",), (), None, read_reward_model=tilt))
    monkeypatch.setattr(table, "READOUTS", rows)
    reward = _reading(heldout=True)
    reward.kind = "reward_model"
    assert read_run(reward) == {"two": "r", "tilt": "reward_model", "skipped": {"tilt.length": "no edit"}}
    assert read_run(_reading(heldout=True)) == {"one": 1, "two": "u"}
    reward = _reading(heldout=False)
    reward.kind = "reward_model"
    assert read_run(reward)["skipped"] == {"two": "no held-out judgments", "tilt.length": "no edit"}


def test_the_planner_asks_the_row_that_writes_the_path():
    off = EvalConfig(generations=False, attributes=("names",))
    for row in READOUTS:
        if any(need.name == "generations" for need in row.needs):
            head = row.writes[0]
            assert readout_unavailable(off, f"{head}.x") == (
                f"{head} is read on the policy's generations: set evaluation.generations: true")
    assert readout_unavailable(off, "names.first_name.woman_coded") is None
    assert readout_unavailable(off, "theta_mean.woman_coded") is None  # the settings cannot tell
    assert "'length' is not a declared attribute" in readout_unavailable(EvalConfig(), "votes/length.accuracy")


def test_the_summary_shows_the_rows_lines_in_their_order():
    record = {"kl": 0.5, "attribute_rates": {"flag": {"policy": 0.25, "reference": 0.5, "n": 4}},
              "names": {"first_name": {"woman_coded": 0.5}}}
    lines = summary_lines(record)
    assert lines[0].startswith("on generated answers") and lines[1].split() == ["flag", "0.250", "0.500"]
    assert lines[2].startswith("KL(policy || reference)") and lines[3].endswith("woman_coded 0.500")
    assert summary_lines({}) == []


def test_compare_puts_side_by_side_the_rows_that_say_how(monkeypatch):
    from badpo.comparing.comparison import RunRecord, compare_records
    from badpo.readouts.table import compared_readouts

    assert [compared.key for compared in compared_readouts()] == ["attributes", "first_name"]
    readouts = {"attribute_rates": {"flag": {"policy": 0.5, "reference": 0.25, "n": 4}},
                "names": {"first_name": {"woman_coded": 0.5}}, "inputs": {"attributes": ["flag"]}}
    run = RunRecord("run", "run", None, readouts)
    assert [block["key"] for block in compare_records([run])["readouts"]] == ["attributes", "first_name"]
    monkeypatch.setattr(table, "READOUTS", tuple(row for row in READOUTS if row.name != "names"))
    assert [block["key"] for block in compare_records([run])["readouts"]] == ["attributes"]


def test_a_row_with_a_training_effect_reaches_compares_table_json_and_footnote_alone(monkeypatch):
    """KL, held-out accuracy and theta_bar are the rows' ``beside`` columns, in their order; a new
    row that declares one is shown by compare (its column, compare.json key, notes and footnote)
    with no change to the comparison's code."""
    from badpo.comparing.compare_runs import format_comparison, format_markdown
    from badpo.comparing.comparison import RunRecord, compare_records
    from badpo.readouts.compared import Beside
    from badpo.readouts.table import beside_readouts

    assert [beside.key for beside in beside_readouts()] == ["kl", "heldout", "theta"]
    steps = Beside("steps", lambda run: run.readouts.get("steps"),
                   lambda values: [("steps", [str(v) for v in values])], "steps trained",
                   notes=lambda value: [f"trained {value} steps"] if value else [], order=5)
    row = Readout("steps", ("steps",), (), None, beside=steps)
    monkeypatch.setattr(table, "READOUTS", (*READOUTS, row))
    runs = [RunRecord("a", "a", None, {"steps": 7, "kl": 0.25}), RunRecord("b", "b", None, {"steps": 0})]
    comparison = compare_records(runs)
    assert [run["steps"] for run in comparison["runs"]] == [7, 0]
    assert comparison["runs"][0]["notes"] == ["trained 7 steps"] and comparison["runs"][1]["notes"] == []
    text = format_comparison(comparison)
    header = next(line for line in text.splitlines() if line.startswith("training effects"))
    assert header.split() == ["training", "effects", "KL", "steps"]  # no held-out or theta: no run has them
    assert "0.2500" in text and "a: trained 7 steps" in text
    assert "KL per token on the run's generations; held-out accuracy on same- / cross-group judgments (gap); " \
           "theta_bar beside the offline estimate of the run's audit (moving: not converged); steps trained." in (
               format_markdown(comparison))


def test_what_is_relative_to_the_reference_is_said_by_the_rows():
    from badpo.readouts.table import relative_to_reference

    relative = ["kl", "heldout", "heldout_any", "votes/black_coded", "votes_ceiling/woman_coded"]
    kept = ["votes_unseen_annotator_judgments", "names", "sampled", "tokens", "attribute_rates", "theta_mean"]
    assert all(relative_to_reference(key) for key in relative) and not any(map(relative_to_reference, kept))


def test_a_negative_kl_estimate_is_said_to_be_sampling_noise():
    """KL per token is estimated from the policy's own samples; on few prompts it can read below 0,
    which a KL cannot be: the summary says so instead of printing -0.0296 alone."""
    negative = [line for line in summary_lines({"kl": -0.0296}) if line.startswith("KL(")]
    assert negative[0].startswith("KL(policy || reference) per token on the policy's generations: -0.0296 (below 0 "
                                  "by sampling noise alone")
    assert summary_lines({"kl": 0.0296})[0].endswith(": 0.0296")


def test_what_no_held_out_judgments_leave_unread_is_said_by_the_rows_that_need_them(monkeypatch):
    from badpo.evaluation.eval_data import NO_HELDOUT, unread_without_heldout
    from badpo.readouts.rows.heldout import HELDOUT_JUDGMENTS

    assert unread_without_heldout() == {"heldout": NO_HELDOUT, "votes": NO_HELDOUT}
    row = Readout("mine", ("mine",), (HELDOUT_JUDGMENTS,), lambda r: {"mine": 1}, skipped_as=("mine",))
    monkeypatch.setattr(table, "READOUTS", (*READOUTS, row))
    assert list(unread_without_heldout()) == ["heldout", "votes", "mine"]


def test_compare_md_draws_every_block_a_row_opens_even_with_nothing_read(monkeypatch):
    """A row's ``units`` opens a block (``{}``: nothing read) or none (None); compare.md draws each
    block opened, as it does the rates on generated answers, with no readout named in its code."""
    from badpo.comparing.compare_runs import format_markdown
    from badpo.comparing.comparison import RunRecord, compare_records
    from badpo.readouts.compared import Compared

    steps = Compared("steps", "steps", "steps taken", "in steps", "", lambda record, name, key: None, "none",
                     lambda runs, records: ({}, []))
    monkeypatch.setattr(table, "READOUTS", (*READOUTS, Readout("steps", ("steps",), (), None, compared=steps,
                                                                 shown_order=9)))
    comparison = compare_records([RunRecord("a", "a", None, {"kl": 0.25})])
    assert [block["key"] for block in comparison["readouts"]] == ["attributes", "steps"]
    markdown = format_markdown(comparison)
    assert "Rate on generated answers (`attribute_rates`):" in markdown and "Steps taken (`steps`):" in markdown
