"""Every phase of an evaluation reports its progress (count, elapsed, ETA) where stderr is a log, not
a terminal (issue 37 item 5: 30 tiny prompts were 64 s silent); a phase shorter than the interval
writes nothing; ``TQDM_DISABLE`` silences it."""

from __future__ import annotations

import copy
import re

from badpo.core import progress as progress_module
from badpo.core.config import from_dict
from badpo.core.progress import progress
from badpo.corpora.tiny import TinyWorldConfig
from badpo.corpora.tiny_multipref import TinyMultiPrefConfig
from badpo.readouts.evaluate_policy import Corpus, EvalConfig, evaluate_policy

LINE = re.compile(r"^(?P<phase>.+): (?P<unit>\w+) (?P<n>\d+) of (?P<total>\d+) \(\d+%\), [\d:]+ elapsed, ETA \S+$")


def phases(err: str) -> dict[str, list[tuple[int, int]]]:
    """The (count, total) lines each phase wrote."""
    seen: dict[str, list[tuple[int, int]]] = {}
    for line in err.splitlines():
        match = LINE.match(line)
        if match:
            seen.setdefault(match["phase"], []).append((int(match["n"]), int(match["total"])))
    return seen


def load(folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer" if (folder / "tokenizer").exists()
                                              else folder / "model")
    return AutoModelForCausalLM.from_pretrained(folder / "model").eval(), tokenizer


def test_a_phase_shorter_than_the_interval_writes_nothing_in_a_log(capsys):
    assert list(progress(range(3), "quick phase")) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_a_phase_in_a_log_writes_whole_lines_with_its_count_and_eta(capsys, monkeypatch):
    monkeypatch.setattr(progress_module.LOG, "every_s", 0.0)
    assert list(progress(range(3), "some phase", "batch")) == [0, 1, 2]
    err = capsys.readouterr().err
    lines = phases(err)["some phase"]
    assert "\r" not in err and lines[0] == (0, 3) and lines[-1] == (3, 3)
    assert all(line.startswith("some phase: batch ") for line in err.splitlines())


def test_tqdm_disable_silences_the_progress_lines(capsys, monkeypatch):
    monkeypatch.setattr(progress_module.LOG, "every_s", 0.0)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert list(progress(range(3), "some phase")) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_every_phase_of_evaluate_on_the_tiny_signed_world_reports_progress(tmp_path, build_tiny_world, capsys,
                                                                           monkeypatch):
    build_tiny_world(from_dict(TinyWorldConfig, {"n_pairs": 120}), tmp_path)
    model, tokenizer = load(tmp_path)
    monkeypatch.setattr(progress_module.LOG, "every_s", 0.0)
    capsys.readouterr()
    evaluate_policy(copy.deepcopy(model), model, tokenizer, Corpus.load(tmp_path),  # a policy apart: KL is read
                    EvalConfig(max_prompts=4, surnames=2, max_new_tokens=8))
    seen = phases(capsys.readouterr().err)
    for phase in ("reference answer bodies", "names readout",
                  "held-out judgments: policy", "held-out judgments: reference", "policy answers",
                  "KL on the policy's answers"):
        assert phase in seen, sorted(seen)
        assert seen[phase][-1][0] == seen[phase][-1][1] > 0  # its last line: every item done
    assert seen["names readout"][-1] == (4, 4)  # counted in prompts (first names and whole signatures)


def test_the_candidate_probabilities_of_the_tiny_multipref_world_report_progress(tmp_path, build_tiny_multipref,
                                                                                 capsys, monkeypatch):
    build_tiny_multipref(from_dict(TinyMultiPrefConfig, {"n_prompts": 120, "n_eval_prompts": 8,
                                                         "crowd_annotators": 6, "expert_annotators": 5}), tmp_path)
    model, tokenizer = load(tmp_path)
    monkeypatch.setattr(progress_module.LOG, "every_s", 0.0)
    capsys.readouterr()
    evaluate_policy(copy.deepcopy(model), model, tokenizer, Corpus.load(tmp_path),
                    EvalConfig(attributes=("length", "markdown"), max_prompts=6, body="given",
                               whole_signature=False, max_new_tokens=12, batch_size=64))
    seen = phases(capsys.readouterr().err)
    assert {"candidate answers", "reference answers", "policy answers"} <= set(seen), sorted(seen)


def test_progress_counts_a_generator_given_its_total(capsys, monkeypatch):
    monkeypatch.setattr(progress_module.LOG, "every_s", 0.0)
    assert list(progress((i for i in range(2)), "unsized", total=2)) == [0, 1]
    assert phases(capsys.readouterr().err)["unsized"][-1] == (2, 2)


def test_generation_reports_inside_a_batch_counted_in_decoding_steps(tmp_path, build_tiny_world, capsys,
                                                                     monkeypatch):
    """One batch of a large model on a CPU takes minutes (issue 75: `badpo evaluate` was 7 minutes
    silent): the answers are counted in decoding steps, each batch's max_new_tokens, so a line can
    come while a batch runs; a batch that stops early at EOS counts its steps done."""
    from badpo.readouts.model import generate

    build_tiny_world(from_dict(TinyWorldConfig, {"n_pairs": 120}), tmp_path)
    model, tokenizer = load(tmp_path)
    monkeypatch.setattr(progress_module.LOG, "every_s", 0.0)
    capsys.readouterr()
    generate(model, tokenizer, ["hello", "a question", "more"], max_new_tokens=6, batch_size=2, what="some answers")
    lines = phases(capsys.readouterr().err)["some answers"]
    assert lines[-1] == (12, 12) and any(0 < n < 6 for n, _ in lines)  # a line from inside the first batch
