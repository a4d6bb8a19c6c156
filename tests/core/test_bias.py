"""Tests for badpo.core.bias.BiasChannel: every variant by hand, declared subsets, warm starts, fixed
offsets, the JSON file, bad input, and Proposition prop:rate (the mean learns m times more slowly).

Hand-worked set-up shared by the forward tests (every number is dyadic, so float32 is exact):
attributes (woman, black); annotators in original order a7, b3, c1 with classes x, y, x; a batch
judged by (b3, a7, c1, a7) with Delta g rows (1, 0), (1, 1), (0, -1), (-1, 0.5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from badpo.core.bias import VARIANT_FACTS, VARIANTS, BiasChannel, variant_facts
from badpo.core.losses import ba_dpo_loss

NAMES = ["woman", "black"]
ANNOTATORS = ["a7", "b3", "c1"]
CLASSES = {"a7": "x", "b3": "y", "c1": "x"}
BATCH_IDS = ["b3", "a7", "c1", "a7"]
ATTR_DIFF = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, -1.0], [-1.0, 0.5]])


def make(variant: str, **options) -> BiasChannel:
    classes = CLASSES if variant == "class_offsets" else None
    return BiasChannel(variant, NAMES, ANNOTATORS, classes, **options)


def set_values(channel: BiasChannel, **values) -> BiasChannel:
    with torch.no_grad():
        for name, value in values.items():
            getattr(channel, name).copy_(torch.tensor(value))
    return channel


def bias_of(channel: BiasChannel) -> torch.Tensor:
    return channel(channel.annotator_index(BATCH_IDS), ATTR_DIFF)


def randomised(variant: str, seed: int, **options) -> BiasChannel:
    """A channel whose every trainable parameter holds random values."""
    channel = make(variant, **options)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in channel.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return channel


# ------------------------------------------------------------------------------------ forward
def test_none_is_zero_and_applies_only_the_fixed_offset() -> None:
    """Offset (0.25, -0.5): rows give 0.25, 0.25 - 0.5 = -0.25, 0.5, -0.25 - 0.25 = -0.5."""
    assert torch.equal(bias_of(make("none")), torch.zeros(4))
    channel = make("none", fixed_offset=[0.25, -0.5])
    assert list(channel.parameters()) == []
    assert torch.equal(bias_of(channel), torch.tensor([0.25, -0.25, 0.5, -0.5]))
    assert torch.equal(channel.theta(), torch.zeros(3, 2))


def test_pooled_ignores_annotators() -> None:
    """theta = (0.5, -1): rows give 0.5, -0.5, 1.0, -0.5 - 0.5 = -1.0; continuous Delta g works."""
    channel = set_values(make("pooled"), pooled_theta=[0.5, -1.0])
    assert torch.equal(bias_of(channel), torch.tensor([0.5, -0.5, 1.0, -1.0]))
    assert torch.equal(channel(None, ATTR_DIFF), bias_of(channel))
    assert torch.equal(channel(None, torch.tensor([[0.5, 2.0]])), torch.tensor([0.25 - 2.0]))
    assert torch.equal(channel.theta(), torch.tensor([[0.5, -1.0]] * 3))
    assert torch.equal(channel.mean(), torch.tensor([0.5, -1.0]))
    assert torch.equal(channel.deviations(), torch.zeros(3, 2))


def test_per_annotator_indexes_by_original_id() -> None:
    """theta_a7 = (1, 2), theta_b3 = (-1, 0.5), theta_c1 = (0, 3): b = -1, 3, -3, -1 + 1 = 0."""
    channel = set_values(make("per_annotator"), annotator_theta=[[1.0, 2.0], [-1.0, 0.5], [0.0, 3.0]])
    assert torch.equal(bias_of(channel), torch.tensor([-1.0, 3.0, -3.0, 0.0]))
    assert torch.equal(channel.annotator_index(BATCH_IDS), torch.tensor([1, 0, 2, 0]))
    torch.testing.assert_close(channel.mean(), torch.tensor([0.0, 5.5 / 3]))


def test_shared_mean_adds_mean_and_deviation() -> None:
    """theta_bar = (0.5, 0.25), eps = a7 (0.5, 0), b3 (-1, 0.25), c1 (0, 0):
    theta = a7 (1, 0.25), b3 (-0.5, 0.5), c1 (0.5, 0.25); b = -0.5, 1.25, -0.25, -1 + 0.125.
    The reported mean is the mean of the theta_k, (1/3, 1/3), not the raw 0.5, 0.25."""
    channel = set_values(make("shared_mean"), shared_mean=[0.5, 0.25],
                         deviation=[[0.5, 0.0], [-1.0, 0.25], [0.0, 0.0]])
    assert torch.equal(bias_of(channel), torch.tensor([-0.5, 1.25, -0.25, -0.875]))
    assert torch.equal(channel.theta(), torch.tensor([[1.0, 0.25], [-0.5, 0.5], [0.5, 0.25]]))
    torch.testing.assert_close(channel.mean(), torch.tensor([1 / 3, 1 / 3]))
    assert torch.equal(channel.shared_parameter(), torch.tensor([0.5, 0.25]))
    torch.testing.assert_close(channel.deviations().sum(dim=0), torch.zeros(2))
    torch.testing.assert_close(channel.deviations(), channel.theta() - torch.tensor([1 / 3, 1 / 3]))


def test_class_offsets_insert_a_class_term() -> None:
    """theta_bar (0.5, 0.25), delta_x (0.25, 0), delta_y (0, -0.5), eps as above:
    theta = a7 (1.25, 0.25), b3 (-0.5, 0), c1 (0.75, 0.25); b = -0.5, 1.5, -0.25, -1.25 + 0.125."""
    channel = set_values(make("class_offsets"), shared_mean=[0.5, 0.25],
                         class_offset=[[0.25, 0.0], [0.0, -0.5]],
                         deviation=[[0.5, 0.0], [-1.0, 0.25], [0.0, 0.0]])
    assert channel.classes == ("x", "y")
    assert torch.equal(bias_of(channel), torch.tensor([-0.5, 1.5, -0.25, -1.125]))
    offsets = channel.class_offsets()
    assert torch.equal(offsets["x"], torch.tensor([0.25, 0.0]))
    assert torch.equal(offsets["y"], torch.tensor([0.0, -0.5]))


def test_fixed_offset_adds_to_every_theta_and_is_not_a_parameter() -> None:
    """per_annotator as above plus offset (0.25, -0.5): b = -1 + 0.25, 3 - 0.25, -3 + 0.5, 0 - 0.5."""
    for variant in VARIANTS:
        channel = randomised(variant, seed=4, fixed_offset=[0.25, -0.5])
        assert "fixed_offset" in dict(channel.named_buffers())
        assert all(p.data_ptr() != channel.fixed_offset.data_ptr() for p in channel.parameters())
        before = channel.theta().detach().clone()
        shifted = (before + torch.tensor([0.25, -0.5]))[channel.annotator_index(BATCH_IDS)]
        torch.testing.assert_close(bias_of(channel), (shifted * ATTR_DIFF).sum(-1))
    channel = set_values(make("per_annotator", fixed_offset=[0.25, -0.5]),
                         annotator_theta=[[1.0, 2.0], [-1.0, 0.5], [0.0, 3.0]])
    assert torch.equal(bias_of(channel), torch.tensor([-0.75, 2.75, -2.5, -0.5]))
    bias_of(channel).sum().backward()
    torch.optim.SGD(channel.parameters(), lr=0.1).step()
    assert torch.equal(channel.fixed_offset, torch.tensor([0.25, -0.5]))


# ------------------------------------------------------------------- declared subset, warm start
@pytest.mark.parametrize("variant", ["pooled", "per_annotator", "shared_mean", "class_offsets"])
def test_undeclared_coordinate_has_no_parameter_and_stays_zero(variant: str) -> None:
    channel = make(variant, declared=["woman"], init_mean=[0.5, 0.0])
    assert all(p.shape[-1] == 1 for p in channel.parameters())
    optimizer = torch.optim.Adam(channel.parameters(), lr=0.1)
    for _ in range(3):  # Delta g is nonzero on the undeclared 'black' in three of four rows
        optimizer.zero_grad()
        bias_of(channel).pow(2).sum().backward()
        optimizer.step()
    assert torch.equal(channel.theta()[:, 1], torch.zeros(3))
    assert channel.mean()[1] == 0.0
    assert not torch.equal(channel.theta()[:, 0], torch.full((3,), 0.5))  # the declared one moved
    # b reads only the declared coordinate: b = theta_woman * Delta g_woman.
    expected = channel.theta()[channel.annotator_index(BATCH_IDS), 0] * ATTR_DIFF[:, 0]
    torch.testing.assert_close(bias_of(channel), expected)


def test_declared_pooled_gradient_reads_only_the_declared_column() -> None:
    """Loss = sum of b, declared = black: d/d theta_black = sum of Delta g_black = 0 + 1 - 1 + 0.5."""
    channel = make("pooled", declared=["black"])
    bias_of(channel).sum().backward()
    assert torch.equal(channel.pooled_theta.grad, torch.tensor([0.5]))


@pytest.mark.parametrize("variant", ["pooled", "per_annotator", "shared_mean", "class_offsets"])
def test_warm_start_sets_the_mean_and_every_theta(variant: str) -> None:
    channel = make(variant, init_mean=[0.75, -0.25])
    assert torch.equal(channel.mean(), torch.tensor([0.75, -0.25]))
    assert torch.equal(channel.theta(), torch.tensor([[0.75, -0.25]] * 3))
    assert torch.equal(channel.deviations(), torch.zeros(3, 2))
    if variant != "per_annotator":
        assert torch.equal(channel.shared_parameter(), torch.tensor([0.75, -0.25]))


def test_default_start_is_zero_in_float32() -> None:
    for variant in VARIANTS:
        channel = make(variant)
        assert torch.equal(channel.theta(), torch.zeros(3, 2))
        assert all(p.dtype == torch.float32 for p in channel.parameters())


def test_the_variant_table_matches_the_channel_each_variant_builds() -> None:
    """The rest of the library reads VARIANT_FACTS instead of comparing variant names, so every
    fact must be what the channel of that variant does."""
    assert VARIANTS == tuple(VARIANT_FACTS) == ("none", "pooled", "per_annotator", "shared_mean",
                                                "class_offsets")
    for variant, facts in VARIANT_FACTS.items():
        channel = make(variant)
        assert facts.name == variant and channel.facts is facts is variant_facts(variant)
        assert {name for name, _ in channel.named_parameters()} == set(facts.parameters)
        assert facts.learns_theta == bool(facts.parameters)
        assert list(channel.to_dict()["parameters"]) == list(facts.parameters)
        if facts.per_annotator:  # theta_k differs by annotator: ids needed, and read in forward
            with pytest.raises(ValueError, match="annotator_index"):
                channel(None, ATTR_DIFF)
            with pytest.raises(ValueError, match="needs at least one annotator"):
                BiasChannel(variant, NAMES)
        else:
            assert channel(None, ATTR_DIFF).shape == (4,)
            BiasChannel(variant, NAMES)
        if facts.class_offsets:
            with pytest.raises(ValueError, match="needs a class per annotator"):
                BiasChannel(variant, NAMES, ANNOTATORS)
            assert set(channel.class_offsets()) == {"x", "y"}
        else:
            with pytest.raises(ValueError, match="has no class offsets"):
                channel.class_offsets()
        if facts.shared_parameter is None:
            with pytest.raises(ValueError, match="has no shared parameter"):
                channel.shared_parameter()
        else:
            assert facts.separate_mean or not facts.per_annotator
            assert torch.equal(channel.shared_parameter(), torch.zeros(2))
    with pytest.raises(ValueError, match="unknown bias variant 'bogus'"):
        variant_facts("bogus")


# ------------------------------------------------------------------------------------ save/load
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_save_load_reproduces_forward_exactly(variant: str, dtype: torch.dtype, tmp_path: Path) -> None:
    channel = randomised(variant, seed=5, declared=["black"], fixed_offset=[0.1, -0.3]).to(dtype)
    if dtype == torch.float64:  # use digits float32 cannot hold
        with torch.no_grad():
            channel.fixed_offset.add_(1e-12)
    path = tmp_path / "theta.json"
    channel.save(path)
    loaded = BiasChannel.load(path)
    assert loaded.annotators == tuple(ANNOTATORS) and loaded.declared == ("black",)
    assert loaded.annotator_classes == channel.annotator_classes
    assert torch.equal(loaded.fixed_offset, channel.fixed_offset)
    assert torch.equal(loaded.theta(), channel.theta())
    attr_diff = ATTR_DIFF.to(dtype) * 1.37
    index = channel.annotator_index(BATCH_IDS)
    assert torch.equal(loaded(index, attr_diff), channel(index, attr_diff))
    assert [(n, p.dtype) for n, p in loaded.named_parameters()] == [
        (n, dtype) for n, _ in channel.named_parameters()
    ]


def test_file_is_readable_json_keyed_by_id_and_attribute(tmp_path: Path) -> None:
    channel = set_values(make("class_offsets"), shared_mean=[0.5, 0.25],
                         class_offset=[[0.25, 0.0], [0.0, -0.5]],
                         deviation=[[0.5, 0.0], [-1.0, 0.25], [0.0, 0.0]])
    path = tmp_path / "theta.json"
    channel.save(path)
    data = json.loads(path.read_text())
    assert list(data["annotators"]) == ANNOTATORS
    # theta = a7 (1.25, 0.25), b3 (-0.5, 0), c1 (0.75, 0.25); mean (0.5, 1/6).
    entry = data["annotators"]["b3"]
    assert entry["class"] == "y" and entry["theta"] == {"woman": -0.5, "black": 0.0}
    assert entry["deviation"] == {"woman": -1.0, "black": pytest.approx(-1 / 6)}
    assert data["theta_bar"] == {"woman": 0.5, "black": pytest.approx(1 / 6)}
    assert data["parameters"]["class_offset"] == {"x": {"woman": 0.25, "black": 0.0},
                                                  "y": {"woman": 0.0, "black": -0.5}}
    assert len(path.read_text().splitlines()) < 25  # one line per annotator, not per number
    # A float32 0.1 is written 0.1, not 0.10000000149011612.
    assert '"woman": 0.1' in json.dumps(make("none", fixed_offset=[0.1, 0.0]).to_dict())


def test_hand_edit_of_the_readable_part_is_refused(tmp_path: Path) -> None:
    data = randomised("shared_mean", seed=6).to_dict()
    data["annotators"]["c1"]["theta"]["woman"] += 1.0
    with pytest.raises(ValueError, match="annotators.c1.theta"):
        BiasChannel.from_dict(data)
    data = randomised("shared_mean", seed=6).to_dict()
    del data["parameters"]["deviation"]["b3"]
    with pytest.raises(ValueError, match="parameters.deviation"):
        BiasChannel.from_dict(data)


# --------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("build", "option"),
    [
        (lambda: BiasChannel("barp", NAMES, ANNOTATORS), "variant"),
        (lambda: BiasChannel("class_offsets", NAMES, ANNOTATORS), "annotator_classes"),
        (lambda: BiasChannel("class_offsets", NAMES, ANNOTATORS, {"a7": "x", "b3": "y"}),
         "annotator_classes: annotator 'c1' has no class"),
        (lambda: BiasChannel("pooled", NAMES, ANNOTATORS, {**CLASSES, "zz": "x"}), "annotator_classes: 'zz'"),
        (lambda: make("pooled", declared=["race"]), "declared: 'race'"),
        (lambda: make("pooled", init_mean=[0.5]), "init_mean"),
        (lambda: make("pooled", fixed_offset=[0.5, 0.1, 0.2]), "fixed_offset"),
        (lambda: make("pooled", declared=["woman"], init_mean=[0.5, 0.2]), "init_mean: 'black'"),
        (lambda: make("none", init_mean=[0.5, 0.2]), "init_mean"),
        (lambda: make("pooled", init_mean=[float("nan"), 0.0]), "init_mean: values must be finite"),
        (lambda: BiasChannel("per_annotator", NAMES), "annotators"),
        (lambda: BiasChannel("per_annotator", NAMES, ["a7", "a7"]), "annotators: 'a7' appears twice"),
        (lambda: BiasChannel("pooled", "woman"), "attribute_names"),
    ],
)
def test_bad_options_name_the_option(build, option: str) -> None:
    with pytest.raises(ValueError, match=option):
        build()


def test_bad_forward_input_is_refused() -> None:
    channel = make("per_annotator")
    with pytest.raises(ValueError, match="attr_diff"):
        channel(channel.annotator_index(BATCH_IDS), ATTR_DIFF[:, :1])
    with pytest.raises(ValueError, match="annotator_index"):
        channel(None, ATTR_DIFF)
    with pytest.raises(KeyError, match="zz"):
        channel.annotator_index(["a7", "zz"])
    with pytest.raises(ValueError, match="no class offsets"):
        channel.class_offsets()
    with pytest.raises(ValueError, match="no shared parameter"):
        channel.shared_parameter()


# ------------------------------------------------------------------------ Proposition prop:rate
def test_one_sgd_step_moves_the_shared_mean_m_times_further() -> None:
    """Prop. prop:rate: equal shares, plain gradient descent, the same lr and the same starting
    theta_k. One step moves the shared_mean parameter by -lr * mean_k G_k, m times the motion of the
    mean of the free theta_k, moves the deviations theta_k - mean identically, and moves the mean
    of the eps_k by the same small amount as the free mean."""
    m, per_annotator, q, lr = 5, 7, 2, 0.3
    generator = torch.Generator().manual_seed(7)
    ids = [f"k{k}" for k in range(m)]
    batch_ids = [annotator for annotator in ids for _ in range(per_annotator)]
    attr_diff = torch.randint(-1, 2, (len(batch_ids), q), generator=generator).double()
    logps = [-20 * torch.rand(len(batch_ids), generator=generator, dtype=torch.float64) for _ in range(4)]
    start = torch.randn(m, q, generator=generator, dtype=torch.float64)
    shared_start = torch.randn(q, generator=generator, dtype=torch.float64)

    free = BiasChannel("per_annotator", NAMES, ids).double()
    shared = BiasChannel("shared_mean", NAMES, ids).double()
    with torch.no_grad():
        free.annotator_theta.copy_(start)
        shared.shared_mean.copy_(shared_start)
        shared.deviation.copy_(start - shared_start)
    torch.testing.assert_close(shared.theta(), free.theta(), atol=1e-15, rtol=0)

    def step(channel: BiasChannel) -> None:
        bias = channel(channel.annotator_index(batch_ids), attr_diff)
        torch.optim.SGD(channel.parameters(), lr=lr).zero_grad()
        ba_dpo_loss(*logps, bias, 0.1)[0].mean().backward()
        torch.optim.SGD(channel.parameters(), lr=lr).step()

    free_mean, free_dev = free.mean().detach(), free.deviations().detach()
    shared_raw, shared_dev = shared.shared_parameter().detach(), shared.deviations().detach()
    eps_mean = shared.deviation.detach().mean(dim=0).clone()
    step(free)
    step(shared)
    free_motion = free.mean().detach() - free_mean
    shared_motion = shared.shared_parameter().detach() - shared_raw
    assert free_motion.abs().min() > 1e-4, "degenerate data: the free mean did not move"
    torch.testing.assert_close(shared_motion, m * free_motion, atol=1e-12, rtol=0)
    torch.testing.assert_close(shared.deviations().detach() - shared_dev,
                               free.deviations().detach() - free_dev, atol=1e-12, rtol=0)
    torch.testing.assert_close(shared.deviation.detach().mean(dim=0) - eps_mean, free_motion,
                               atol=1e-12, rtol=0)
    # The closed form: the shared_mean step is -lr * G_bar with G_k = -E_{D_k}[sigma(-u - b) Delta g].
    u = 0.1 * ((logps[0] - logps[2]) - (logps[1] - logps[3]))
    bias = (start[[int(i[1:]) for i in batch_ids]] * attr_diff).sum(-1)
    weighted = torch.sigmoid(-u - bias)[:, None] * attr_diff
    g_bar = -weighted.reshape(m, per_annotator, q).mean(dim=1).mean(dim=0)
    torch.testing.assert_close(shared_motion, -lr * g_bar, atol=1e-12, rtol=0)
