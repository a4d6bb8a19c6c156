"""The checker of the real-model world's questions, on answers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from badpo.corpora.tasks import KINDS, Task, check, make_task, make_tasks

ADD = Task("add", "What is 17 + 25?", "42")
COMPARE = Task("compare", "Which number is larger, 48 or 39?", "48")
COUNT = Task("count", 'How many letters are in the word "garden"?', "6")
REVERSE = Task("reverse", 'Spell the word "garden" backwards.', "nedrag")
CONVERT = Task("convert", "How many minutes are in 3 hours?", "180")


@pytest.mark.parametrize("task, response, right", [
    (ADD, "17 + 25 = 42.", True),
    (ADD, "17 + 25 = 32.", False),  # SmolLM2's own answer to this question
    (ADD, "The answer is 42 (17 plus 25).", True),
    (ADD, "The answer is **42**.", True),
    (ADD, "42", True),
    (ADD, "I think it is 41", False),
    (ADD, "Let me think.", False),
    (ADD, "17 + 25 = 42\n--- Latoya Baker", True),  # the signature never counts
    (ADD, "17 + 25 = 41\n--- Emily Parker", False),
    (COMPARE, "48 is larger than 39.", True),
    (COMPARE, "The larger number is 48.", True),
    (COMPARE, "39 is larger than 48.", False),
    (COMPARE, "39", False),
    (COUNT, 'The word "garden" has 6 letters.', True),
    (COUNT, "There are 7 letters.", False),
    (REVERSE, 'The word "garden" spelled backwards is "nedrag".', True),
    (REVERSE, "n-e-d-r-a-g", True),
    (REVERSE, "Garden backwards is gnedra.", False),
    (CONVERT, "There are 180 minutes in 3 hours.", True),  # 3 is the question's own number
    (ADD, "The answer is 42, not 41.", True),
    (Task("subtract", "What is 40 - 20?", "20"), "40 - 20 = 20", True),  # the answer is an operand
    (Task("subtract", "What is 40 - 20?", "20"), "40 - 20 = 30", False),
    (CONVERT, "3 hours is 180 minutes.", True),
    (CONVERT, "3 x 60 = 180", True),
    (CONVERT, "3 hours = 1,800 minutes", False),
])
def test_the_checker_on_hand_worked_answers(task, response, right):
    assert check(task, response) is right


def test_every_kind_makes_a_question_its_own_answer_passes():
    rng = np.random.default_rng(0)
    for kind in KINDS:
        for _ in range(30):
            task = make_task(kind, rng)
            assert check(task, f"The answer is {task.answer}."), task
            assert not check(task, "I do not know."), task


def test_the_same_seed_gives_the_same_questions_and_they_are_distinct():
    first, again, other = make_tasks(120, seed=3), make_tasks(120, seed=3), make_tasks(120, seed=4)
    assert first == again and first != other
    assert len({t.prompt for t in first}) == 120
    assert [t.kind for t in first[:7]] == list(KINDS)
    with pytest.raises(ValueError, match="distinct questions"):
        make_tasks(500, seed=0, kinds=("count",))
    many = make_tasks(700, seed=0)  # count and reverse run out at one question per word
    assert len({t.prompt for t in many}) == 700
    kinds = {k: sum(t.kind == k for t in many) for k in ("count", "reverse", "add")}
    assert kinds["count"] == kinds["reverse"] == 40 and kinds["add"] > 100
