"""A ``given:`` difference that overflows is named as an overflow (issue 49, item 8).

Values 1e308 and -1e308 (the side won half its judgments) made g(y_w) - g(y_l) infinite, and
training refused them as "the attribute's side won every, or none, of its cross-group judgments".
Training holds the differences in float32, so there the bound is float32's largest number.
"""

from __future__ import annotations

import json

import pytest

from badpo.core.attributes import resolve_attributes
from badpo.core.constraints import FLOAT32_MAX
from badpo.core.judgments import validate_judgments


def _rows(high: float) -> list[dict]:
    return [{"prompt": f"p{i}", "chosen": f"a{i}", "rejected": f"b{i}", "annotator": f"k{i % 3}",
             "g_chosen": {"tag": high if i % 2 else -high}, "g_rejected": {"tag": -high if i % 2 else high}}
            for i in range(12)]


def test_an_overflowing_difference_is_named_in_the_audit(tmp_path, cli_error):
    data = tmp_path / "judgments.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _rows(1e308)))
    line = cli_error(["audit", str(data), "-a", "tag=given:tag"])
    assert f"{data}: row 0: attribute 'tag': g_chosen - g_rejected = -1e+308 - 1e+308 overflows" in line, line
    assert "won every" not in line


def test_training_s_differences_stay_within_float32():
    attributes = resolve_attributes(["tag=given:tag"])
    judgments = validate_judgments(_rows(2e38))
    assert attributes.differences(judgments)[1, 0] == 4e38  # the audit reads float64
    with pytest.raises(ValueError, match=r"attribute 'tag': g_chosen - g_rejected = 2e\+38 - -2e\+38 overflows "
                                         r"\(its size exceeds 3\.403e\+38\)"):
        attributes.judgment_differences(judgments[1])
    assert attributes.judgment_differences(validate_judgments(_rows(1e38))[1]).tolist() == [2e38]
    assert FLOAT32_MAX > 3.4e38


def test_the_engine_names_the_row(tmp_path):
    from badpo.engine.batches import _differences

    with pytest.raises(ValueError, match=r"^row 0: attribute 'tag': .* overflows"):
        _differences(resolve_attributes(["tag=given:tag"]), validate_judgments(_rows(2e38)))


def test_training_names_the_file_of_the_row():
    """The engine's row error, as training reads it, names the file the row is in."""
    from badpo.engine.batches import build_preference_data
    from badpo.engine.tokenize import TokenizationConfig
    from fixtures.engine import build_tokenizer

    with pytest.raises(ValueError, match=r"^votes\.jsonl: row 0: attribute 'tag': .* overflows"):
        build_preference_data(validate_judgments(_rows(2e38)), resolve_attributes(["tag=given:tag"]),
                              build_tokenizer(), TokenizationConfig(), source="votes.jsonl")


def test_an_overflow_is_refused_without_numpy_s_warning_first():
    """The retry of the case: training printed numpy's "overflow encountered in scalar subtract"
    before its one-line refusal (the values arrive as numpy floats)."""
    import warnings

    import numpy as np

    from badpo.core.attributes import difference

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="overflows"):
            difference("tag", np.float64(1e308), np.float64(-1e308))
