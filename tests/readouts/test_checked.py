"""The checker's accuracy of sampled answers (badpo.readouts.checked): by hand, and wired into
evaluate_policy on prompts whose check does not depend on what the model samples."""

from __future__ import annotations

import pytest

from badpo.readouts.checked import checked_accuracy, checked_readout
from badpo.readouts.evaluate_policy import Corpus, EvalConfig, evaluate_policy
from badpo.readouts.table import readout_unavailable

ADD = {"prompt": "What is 2 + 3?", "kind": "add", "expected": "5"}
REVERSE = {"prompt": 'Spell the word "garden" backwards.', "kind": "reverse", "expected": "nedrag"}


def test_checked_accuracy_by_hand():
    """"2 + 3 = 5" right, "It is 6." wrong, "n-e-d-r-a-g" right (its letters): n 3, accuracy 2/3,
    add 1/2, reverse 1; the compare checker takes the first of the question's numbers named."""
    result = checked_accuracy([ADD, ADD, REVERSE], ["2 + 3 = 5", "It is 6.", "n-e-d-r-a-g"])
    assert result == {"n": 3, "accuracy": pytest.approx(2 / 3), "by_kind": {"add": 0.5, "reverse": 1.0}}
    compare = {"prompt": "Which number is larger, 48 or 39?", "kind": "compare", "expected": "48"}
    assert checked_accuracy([compare, compare], ["39 is smaller than 48", "48 > 39"])["accuracy"] == 0.5
    with pytest.raises(ValueError, match="one sampled answer per prompt"):
        checked_accuracy([ADD], ["5", "6"])


def test_checked_readout_only_where_the_prompts_have_a_checker():
    assert checked_readout([ADD, REVERSE], ["5", "no"]) == {"checked": {"n": 2, "accuracy": 0.5,
                                                                        "by_kind": {"add": 1.0, "reverse": 0.0}}}
    assert checked_readout([{"prompt": "hello"}, {"prompt": "hi"}], ["5", "hi"]) == {}
    with pytest.raises(ValueError, match="row 1 has no kind and expected answer, where 1 of 2 rows have them"):
        checked_readout([ADD, {"prompt": "hello"}], ["5", "hi"])
    with pytest.raises(ValueError, match="row 0: kind 'poem' has no checker"):
        checked_readout([{**ADD, "kind": "poem"}], ["5"])
    assert readout_unavailable(EvalConfig(generations=False), "checked.accuracy").startswith("checked is read")
    assert readout_unavailable(EvalConfig(), "checked.by_kind.add") is None


def test_evaluate_policy_reads_the_checker_on_its_own_samples(tmp_path, save_model_dir):
    """Whatever the tiny model samples: an expected "" of reverse is in every answer's letters
    (right), a nine-digit sum is in none of four new tokens' words of this vocabulary (wrong)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = save_model_dir(tmp_path / "model", "llama", chat_template=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    rows = [{"prompt_id": "a", "prompt": 'Spell the word "apple" backwards.', "kind": "reverse", "expected": ""},
            {"prompt_id": "b", "prompt": "What is 12345 + 67890?", "kind": "add", "expected": "123456789"},
            {"prompt_id": "c", "prompt": 'Spell the word "river" backwards.', "kind": "reverse", "expected": ""}]
    config = EvalConfig(attributes=("length", "markdown"), max_prompts=None, body="given", whole_signature=False,
                        max_new_tokens=4, batch_size=8)
    result = evaluate_policy(model, model, tokenizer, Corpus(rows, [], None), config)
    assert result["checked"] == {"n": 3, "accuracy": pytest.approx(2 / 3), "by_kind": {"add": 0.0, "reverse": 1.0}}
    without = evaluate_policy(model, model, tokenizer, Corpus([{"prompt": r["prompt"]} for r in rows], [], None),
                              config)
    assert "checked" not in without and without["sampled_text"]["n"] == 3
