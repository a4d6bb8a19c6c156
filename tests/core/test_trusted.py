"""Trusted annotators: theta_k fixed (at 0 or a given value) in the bias channel, the config and the
engine, the audit's pinning warning, and the tiny world's unbiased annotators.

The theory (a trusted annotator removes the flat direction of the shared level) is tested in
tests/core/test_theory.py.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
import yaml

from badpo.auditing.estimates import BiasIdentifiabilityWarning, audit
from badpo.core.attributes import resolve_attributes
from badpo.core.bias import BiasChannel
from badpo.core.config import ConfigError, from_dict
from badpo.core.judgments import Judgment, read_judgments, write_judgments
from badpo.corpora.signing import sign_corpus
from badpo.corpora.tiny import TinyWorldConfig, UnbiasedAnnotators, tiny_base_pairs
from badpo.engine.train import train
from fixtures.engine import judgment_rows, make_config, write_jsonl

NAMES = ["a", "b"]
IDS = ["k0", "k1", "k2"]


def _step(channel: BiasChannel, annotator_index, attr_diff) -> None:
    """One Adam step (lr 0.1) on -log sigmoid(b): every theta that is free moves."""
    optimizer = torch.optim.Adam(channel.parameters(), lr=0.1)
    torch.nn.functional.softplus(-channel(annotator_index, attr_diff)).sum().backward()
    optimizer.step()


@pytest.mark.parametrize("variant", ["per_annotator", "shared_mean", "class_offsets"])
def test_trusted_rows_keep_their_value_while_the_others_learn(variant):
    """k1 trusted at (0.5, -1) on a channel warm-started at (2, 2): theta_k1 reads (0.5, -1) before
    and after a step whose gradient reaches every annotator; k0 and k2 move off the warm start."""
    classes = {"k0": "A", "k1": "A", "k2": "B"} if variant == "class_offsets" else None
    channel = BiasChannel(variant, NAMES, IDS, classes, init_mean=[2.0, 2.0],
                          trusted={"k1": [0.5, -1.0]})
    index, diff = torch.tensor([0, 1, 2, 1]), torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    torch.testing.assert_close(channel(index, diff), torch.tensor([2.0, -0.5, 2.0, 0.5]))
    _step(channel, index, diff)
    theta = channel.theta().detach()
    assert theta[1].tolist() == [0.5, -1.0]
    assert theta[0, 0] > 2.0 and theta[2, 1] > 2.0  # -log sigmoid(b) pushes b, so theta, up
    # theta_bar is the mean over every annotator, the trusted one included
    torch.testing.assert_close(channel.mean().detach(), theta.mean(0))


def test_a_list_of_ids_fixes_theta_at_zero_and_leaves_state_dict_keys_alone():
    plain = BiasChannel("shared_mean", NAMES, IDS)
    trusted = BiasChannel("shared_mean", NAMES, IDS, init_mean=[1.0, 1.0], trusted=["k0", "k2"])
    assert trusted.theta().tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    assert trusted.state_dict().keys() == plain.state_dict().keys()  # checkpoints are unchanged
    assert "trusted" not in plain.to_dict()  # files of channels without trusted ids are unchanged


def test_trusted_round_trips_through_the_json_file(tmp_path):
    channel = BiasChannel("per_annotator", NAMES, IDS, trusted={"k2": [0.25, 0.0]}, declared=["a"])
    with torch.no_grad():
        channel.annotator_theta.add_(0.7)  # the trusted row's raw value moves; its theta does not
    channel.save(tmp_path / "theta.json")
    loaded = BiasChannel.load(tmp_path / "theta.json")
    assert loaded.trusted == {"k2": (0.25, 0.0)}
    diff = torch.tensor([[1.0, 1.0]] * 3)
    torch.testing.assert_close(loaded(torch.arange(3), diff), channel(torch.arange(3), diff).detach())
    assert loaded.theta()[2].tolist() == [0.25, 0.0]


def test_trusted_errors_name_the_option_and_the_annotator():
    with pytest.raises(ValueError, match="trusted: annotator 'k9' is not among the annotators"):
        BiasChannel("per_annotator", NAMES, IDS, trusted=["k9"])
    with pytest.raises(ValueError, match="trusted: variant 'pooled' has one theta for every judgment"):
        BiasChannel("pooled", NAMES, IDS, trusted=["k0"])
    with pytest.raises(ValueError, match="trusted: variant 'none' learns no theta"):
        BiasChannel("none", NAMES, IDS, trusted=["k0"])
    with pytest.raises(ValueError, match=r"trusted.k0: 'b' is undeclared \(fixed at 0\)"):
        BiasChannel("per_annotator", NAMES, IDS, declared=["a"], trusted={"k0": [0.0, 1.0]})
    with pytest.raises(ValueError, match="trusted.k0: expected 2 values"):
        BiasChannel("per_annotator", NAMES, IDS, trusted={"k0": [0.0]})


# ------------------------------------------------------------------------------ the audit
def _rows(groups: list[list[str]]) -> list[Judgment]:
    """Each group judges its own cross-group pair (g 1 vs 0), every annotator once each way: one
    component per group, no divergent annotator."""
    rows = []
    for i, group in enumerate(groups):
        for annotator in group:
            for chosen, rejected in ((f"a{i}", f"b{i}"), (f"b{i}", f"a{i}")):
                rows.append(Judgment(prompt=f"x{i}", chosen=chosen, rejected=rejected, annotator=annotator,
                                     g_chosen={"g": float(chosen[0] == "a")},
                                     g_rejected={"g": float(rejected[0] == "a")}))
    return rows


def test_audit_names_the_components_left_unpinned():
    """Two components {k0, k1}, {k2, k3}: k0 trusted pins the first only; the warning names the
    second; trusting one annotator in each pins both (no graph warning although it is split)."""
    rows, attributes = _rows([["k0", "k1"], ["k2", "k3"]]), resolve_attributes(["given:g"])
    with pytest.warns(BiasIdentifiabilityWarning) as record:
        result = audit(rows, attributes, trusted=["k0"])
    messages = [str(w.message) for w in record]
    assert ("any attribute: 1 of 2 connected component(s) hold no trusted annotator, so their theta "
            "level is not pinned (a free offset each): {k2, k3}") in messages
    assert result.unpinned() == (("k2", "k3"),)
    assert result.to_dict()["unpinned"] == [["k2", "k3"]] and result.to_dict()["trusted"] == ["k0"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all
        both = audit(rows, attributes, trusted=["k1", "k3"])
    assert both.unpinned() == () and not both.graph.connected
    with pytest.raises(ValueError, match="trusted: annotator 'k9' has no judgment"):
        audit(rows, attributes, trusted=["k9"])


# ----------------------------------------------------------------------- config and engine
@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir) -> Path:
    root = tmp_path_factory.mktemp("trusted")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


@pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")  # fixture labels
def test_bias_trusted_config_forms_and_errors(world):
    from badpo.engine.settings import BiasSettings

    assert from_dict(BiasSettings, {"trusted": ["ann1"]}).trusted_values(2) == {"ann1": [0.0, 0.0]}
    assert from_dict(BiasSettings, {"trusted": {"ann1": [0.5]}}).trusted_values(1) == {"ann1": [0.5]}
    with pytest.raises(ConfigError, match="bias.trusted: annotator 'nobody' has no judgment"):
        train(make_config(world, "bad", "bias.trusted=[nobody]"))
    with pytest.raises(ConfigError, match="bias.trusted: method 'dpo' learns no theta"):
        train(make_config(world, "bad", "method=dpo", "bias.trusted=[ann1]"))
    with pytest.raises(ConfigError, match="bias.trusted: variant 'pooled' has one theta"):
        train(make_config(world, "bad", "method=ba_dpo_pooled", "bias.trusted=[ann1]"))
    with pytest.raises(ConfigError, match=r"bias.trusted.ann1: expected 1 values"):
        train(make_config(world, "bad", "bias.trusted={ann1: [0.0, 1.0]}"))


@pytest.mark.filterwarnings("ignore::badpo.auditing.estimates.BiasIdentifiabilityWarning")  # fixture labels
def test_engine_trains_with_a_trusted_annotator(world):
    """Two steps of BA-DPO theta_bar + eps_k with ann1 trusted at 0.3: its theta stays 0.3 in
    theta.json, the others learn, and the audit records the trusted id."""
    out = train(make_config(world, "trusted", "steps=2", "bias.trusted={ann1: [0.3]}"))
    channel = BiasChannel.load(out / "theta.json")
    theta = dict(zip(channel.annotators, channel.theta()[:, 0].tolist()))
    assert theta["ann1"] == pytest.approx(0.3, abs=1e-7)
    assert all(value != 0.0 for a, value in theta.items() if a != "ann1")
    assert json.loads((out / "audit.json").read_text())["trusted"] == ["ann1"]


# ----------------------------------------------------------------------- the tiny world
def test_unbiased_annotators_are_appended_and_the_default_world_is_unchanged(tmp_path, build_tiny_world):
    """Off: train.jsonl is the signed corpus's training judgments exactly and world.yaml has no
    `unbiased` key. On: the same judgments first, then 3 x 10 judgments by U00-U02 with planted
    theta 0 (and a class U of mean 0), on distinct pairs, SFT rows and model unchanged."""
    small = {"n_pairs": 40, "signing": {"annotators_per_class": 2}}
    off = from_dict(TinyWorldConfig, small)
    on = from_dict(TinyWorldConfig, {**small, "unbiased": {"count": 3, "judgments_each": 10}})
    build_tiny_world(off, tmp_path / "off")
    build_tiny_world(on, tmp_path / "on")
    expected = sign_corpus(tiny_base_pairs(off)[0], off.signing)
    write_judgments(tmp_path / "expected.jsonl", expected.train)
    assert (tmp_path / "off" / "train.jsonl").read_bytes() == (tmp_path / "expected.jsonl").read_bytes()
    assert "unbiased" not in yaml.safe_load((tmp_path / "off" / "world.yaml").read_text())
    for name in ("sft.jsonl", "eval_prompts.jsonl", "model/model.safetensors"):
        assert (tmp_path / "off" / name).read_bytes() == (tmp_path / "on" / name).read_bytes()
    train_on = read_judgments(tmp_path / "on" / "train.jsonl")
    heldout_on = read_judgments(tmp_path / "on" / "heldout.jsonl")
    assert train_on[: len(expected.train)] == list(expected.train)
    added = train_on[len(expected.train):] + heldout_on[len(expected.heldout):]
    assert sorted({j.annotator for j in added}) == ["U00", "U01", "U02"] and len(added) == 30
    for annotator in ("U00", "U01", "U02"):
        pairs = [j.pair_id for j in added if j.annotator == annotator]
        assert len(pairs) == len(set(pairs)) == 10
    planted = json.loads((tmp_path / "on" / "planted.json").read_text())
    assert [a["theta"] for a in planted["annotators"] if a["annotator_class"] == "U"] == [[0.0, 0.0]] * 3
    assert planted["class_means"]["U"] == [0.0, 0.0]
    assert from_dict(TinyWorldConfig, yaml.safe_load((tmp_path / "on" / "world.yaml").read_text())) == on
    with pytest.raises(ConfigError, match="unbiased.annotator_class: 'A' is already a planted class"):
        from_dict(TinyWorldConfig, {**small, "unbiased": {"annotator_class": "A"}})
    assert UnbiasedAnnotators().count == 5
