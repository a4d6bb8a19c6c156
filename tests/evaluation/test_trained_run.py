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
    assert trained.policy == tmp_path / "run" / "policy" and trained.bias() is None and trained.vote_bias() is None
    assert trained.identity() is None  # no config.yaml behind it
    assert TrainedRun.of_settings({"beta": 0.3}, tmp_path / "policy", tmp_path).beta == 0.3
    assert trained.trusting(False).model_settings == {"trust_remote_code": False}


def test_a_folder_that_is_no_finished_run_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a finished run"):
        TrainedRun.open(tmp_path)


def test_every_policy_a_run_reads_is_refused_with_a_pickle_before_it_loads(tmp_path):
    """EM-DPO's type policies load through the same door as a run's one policy: a pickle in the
    folder (which badpo never writes) is refused by name before transformers opens anything."""
    trained = TrainedRun.of_settings({}, tmp_path / "run" / "policy", tmp_path / "reference")
    typed = tmp_path / "run" / "types" / "type-1" / "policy"
    typed.mkdir(parents=True)
    (typed / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ValueError, match=r"type-1/policy/pytorch_model\.bin: a pickle"):
        trained.load_policy(typed)


def test_one_door_hands_a_run_of_one_policy_and_emdpos_type_policies_the_same_inputs(tmp_path, monkeypatch):
    """``TrainedRun.read`` is how ``badpo evaluate`` and the experiment read every arm: what the
    reference gives (bodies, its samples, its readouts, the cache) reaches EM-DPO's type policies
    exactly as it reaches one policy; mixture.json in the folder is what routes a run to them."""
    import json

    import badpo.evaluation.trained_run as trained_run

    calls = []
    monkeypatch.setattr(trained_run, "evaluate_mixture",
                        lambda load, mixture, *args, **kwargs: calls.append(("types", mixture.weights, kwargs)) or {})
    monkeypatch.setattr(trained_run, "evaluate_policy",
                        lambda policy, *args, **kwargs: calls.append(("one", policy, kwargs)) or {})
    monkeypatch.setattr(trained_run, "load_causal_lm", lambda folder, settings, base=None: f"model at {folder.name}")
    run = tmp_path / "run"
    (run / "policy").mkdir(parents=True)
    trained = TrainedRun.of_settings({}, run / "policy", tmp_path / "reference")
    shared = {"bodies": ["b"], "reference_samples": "samples", "reference_readouts": {"r": 1}, "cache_dir": tmp_path}
    trained.read("reference", "tokenizer", "corpus", "config", "tokenization", **shared)
    (run / "mixture.json").write_text(json.dumps({"weights": [0.4, 0.6], "type_probabilities": {}, "priors": [0.5, 0.5],
                                                  "policies": ["types/type-0/policy", "types/type-1/policy"]}))
    trained.read("reference", "tokenizer", "corpus", "config", "tokenization", **shared)
    (one, policy, one_kwargs), (types, weights, type_kwargs) = calls
    assert (one, policy, types, weights) == ("one", "model at policy", "types", (0.4, 0.6))
    assert {k: one_kwargs[k] for k in shared} == {k: type_kwargs[k] for k in shared} == shared
    assert one_kwargs["bias"] is None and one_kwargs["vote_bias"] is None and type_kwargs["beta"] == trained.beta
