"""The evaluation's settings refuse counts that read nothing or slice from the end (issue 49's retry:
`evaluate max_prompts=-3` read 12 of 15 prompts in silence, `max_prompts=0` ended in a traceback)."""

from __future__ import annotations

import pytest

from badpo.core.config import ConfigError, from_dict
from badpo.readouts.eval_config import EvalConfig


@pytest.mark.parametrize("key", ["max_prompts", "whole_signature_prompts", "surnames", "max_new_tokens", "batch_size"])
@pytest.mark.parametrize("value", [0, -3])
def test_a_count_below_one_is_one_line_naming_the_key(key, value):
    with pytest.raises(ConfigError, match=f"^{key}: must be >= 1, got {value}$"):
        from_dict(EvalConfig, {key: value})


def test_sampling_settings_out_of_range_are_refused_and_null_counts_mean_all():
    with pytest.raises(ConfigError, match=r"^temperature: must be > 0, got 0.0$"):
        from_dict(EvalConfig, {"temperature": 0.0})
    with pytest.raises(ConfigError, match=r"^top_p: must lie in \(0, 1\], got 1.5$"):
        from_dict(EvalConfig, {"top_p": 1.5})
    with pytest.raises(ConfigError, match=r"^top_p: must lie in \(0, 1\], got 0.0$"):
        from_dict(EvalConfig, {"top_p": 0})
    assert from_dict(EvalConfig, {"max_prompts": None, "surnames": None}).max_prompts is None
