"""TrainedRun: the one way to open a trained run. Its defaults are the engine's (beta), an
experiment's settings give what a run folder's config.yaml gives, and a folder that is no
finished run is refused saying what a run holds."""

from __future__ import annotations

import pytest

from badpo.engine.settings import BETA, TrainConfig
from badpo.evaluation.trained_run import TrainedRun


def test_settings_without_beta_read_with_the_engines_default(tmp_path):
    settings = {"model": {"name_or_path": "base", "tokenizer": "tok", "revision": "r", "trust_remote_code": True},
                "tokenization": {"max_prompt_tokens": 7}}
    trained = TrainedRun.of_settings(settings, tmp_path / "run" / "policy", tmp_path / "reference")
    assert trained.beta == BETA == TrainConfig().beta
    assert trained.model_settings == {"trust_remote_code": True} and trained.trust_remote_code
    assert trained.tokenization.max_prompt_tokens == 7 and trained.reference == str(tmp_path / "reference")
    assert trained.kind == "settings" and trained.folder == tmp_path / "run"
    assert trained.mixture() is None and trained.bias() is None and trained.vote_bias() is None
    assert trained.identity() is None  # no config.yaml behind it
    assert TrainedRun.of_settings({"beta": 0.3}, tmp_path / "policy", tmp_path).beta == 0.3
    assert trained.trusting(False).model_settings == {"trust_remote_code": False}


def test_a_folder_that_is_no_finished_run_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a finished run"):
        TrainedRun.open(tmp_path)
