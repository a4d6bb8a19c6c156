"""A training batch forwarded in groups of similar length (``runtime.length_groups``): the
partition pads the fewest tokens, and the log-probs, their ragged per-token layout and the
gradients are the one-forward path's."""

from __future__ import annotations

import itertools

import pytest
import torch

from badpo.core.config import ConfigError, from_dict
from badpo.core.constraints import check_fields
from badpo.engine.logprobs import LogprobModel, length_groups
from badpo.engine.settings import CPU_LENGTH_GROUPS, CPU_ROWS_PER_GROUP, LEAN_MIN_PARAMETERS, RuntimeConfig, TrainConfig
from badpo.engine.tokenize import TokenizationConfig, build_token_store
from badpo.run_folder.identity import identity
from fixtures.engine import build_tokenizer

SEQUENCES = [
    ("what is the best way to learn", "sure i think you should try this first"),
    ("write code", "yes"),
    ("what is the best way to cook", "maybe try that --- emily smith"),
    ("write", "no"),
    ("what is the way", "sure i think you should try this first and then that"),
]


def padded(lengths: list[int], groups: list[list[int]]) -> int:
    return sum(len(g) * max(lengths[i] for i in g) for g in groups)


def fewest_padded(lengths: list[int], most: int) -> int:
    """Brute force over the cuts of the sorted lengths (the optimum is contiguous in that order)."""
    ordered = sorted(lengths)
    best = len(ordered) * ordered[-1]
    for k in range(1, min(most, len(ordered))):
        for cuts in itertools.combinations(range(1, len(ordered)), k):
            bounds = [0, *cuts, len(ordered)]
            best = min(best, sum((j - i) * ordered[j - 1] for i, j in itertools.pairwise(bounds)))
    return best


@pytest.mark.parametrize("seed", range(20))
def test_the_groups_pad_the_fewest_tokens(seed):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 40, (int(torch.randint(1, 9, (1,), generator=generator)),), generator=generator)
    for most in (1, 2, 3, 4):
        groups = [g.tolist() for g in length_groups(lengths, most)]
        assert sorted(i for g in groups for i in g) == list(range(len(lengths)))  # every row once
        assert len(groups) <= most
        assert padded(lengths.tolist(), groups) == fewest_padded(lengths.tolist(), most)


def test_worked_groups_and_ties():
    """[10, 2, 3, 9, 100, 4] padded to 100 is 600 tokens; in two groups 5 x 10 + 100 = 150; in four
    2 + 2 x 4 + 2 x 10 + 100 = 130. Equal lengths stay one group (a tie prefers fewer forwards)."""
    lengths = torch.tensor([10, 2, 3, 9, 100, 4])
    assert [g.tolist() for g in length_groups(lengths, 2)] == [[1, 2, 5, 3, 0], [4]]
    assert [g.tolist() for g in length_groups(lengths, 4)] == [[1], [2, 5], [3, 0], [4]]
    assert [g.tolist() for g in length_groups(torch.tensor([5, 5, 5]), 4)] == [[0, 1, 2]]


@pytest.mark.parametrize("seed", range(12))
def test_no_more_groups_than_one_per_rows_per_group(seed):
    """The CPU default forwards at most one group per 8 sequences: every forward pays a fixed
    per-operator cost, which a forward of a few rows does not earn back. Within that bound the
    partition is the one that pads least."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 60, (int(torch.randint(1, 20, (1,), generator=generator)),), generator=generator)
    for most, rows in ((4, 3), (3, 2), (4, 5), (2, 1), (4, 8)):
        groups = [g.tolist() for g in length_groups(lengths, most, rows)]
        allowed = min(most, max(1, len(lengths) // rows))
        assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
        assert len(groups) <= allowed
        assert padded(lengths.tolist(), groups) == fewest_padded(lengths.tolist(), allowed)


def test_a_batch_of_eight_is_one_forward_and_thirty_two_may_be_four():
    """The bench's pair-grouped micro-batch (8 sequences), where four groups were slower and
    heavier, is one forward; 32 sequences (its per-judgment one) may still be four, of any sizes."""
    lengths = torch.tensor([3, 90, 4, 80, 5, 70, 6, 60])
    assert [g.tolist() for g in length_groups(lengths, 4, 8)] == [[0, 2, 4, 6, 7, 5, 3, 1]]
    assert len(length_groups(lengths, 4, 4)) == 2 and len(length_groups(lengths, 4)) == 4
    many = torch.tensor([5] * 29 + [50, 90, 200])
    assert [len(g) for g in length_groups(many, 4, 8)] == [29, 1, 1, 1]


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_grouped_forwards_give_the_one_forward_log_probs_and_gradients(arch, build_model):
    model = build_model(arch)
    store = build_token_store(build_tokenizer(), SEQUENCES, TokenizationConfig())
    batch = store.batch(torch.tensor([0, 1, 2, 3, 4]))
    weights = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0])
    results = {}
    for groups in (1, 3):
        model.zero_grad()
        summed, tokens = LogprobModel(model, chunk_size=4, groups=groups)(**batch, per_token=True)
        ((summed * weights).sum() + tokens.pow(2).sum()).backward()
        results[groups] = summed.detach(), tokens.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}
    assert len(length_groups(batch["attention_mask"].sum(1), 3)) == 3  # the test splits the batch
    (one, one_tokens, one_grads), (grouped, grouped_tokens, grouped_grads) = results[1], results[3]
    torch.testing.assert_close(grouped, one, rtol=0, atol=1e-5)
    torch.testing.assert_close(grouped_tokens, one_tokens, rtol=0, atol=1e-6)  # the same ragged order
    for name, grad in one_grads.items():
        torch.testing.assert_close(grouped_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    alone = LogprobModel(model, chunk_size=4, groups=3)(**batch)
    torch.testing.assert_close(alone, one, rtol=0, atol=1e-5)


def test_the_setting_resolves_by_device_and_keys_only_when_set():
    big = LEAN_MIN_PARAMETERS
    assert RuntimeConfig().groups_on("cpu", parameters=big) == CPU_LENGTH_GROUPS
    assert RuntimeConfig().groups_on("cuda", parameters=big) == 1
    assert RuntimeConfig().groups_on("cpu", parameters=big - 1) == 1  # a small model's step is overhead-bound
    assert RuntimeConfig(length_groups=2).groups_on("cuda") == 2
    assert RuntimeConfig().groups_on("cpu", sharded=True, parameters=big) == 1  # FSDP: every forward is a collective
    assert RuntimeConfig().rows_per_group() == CPU_ROWS_PER_GROUP == 8  # the default: a group per 8 rows at most
    assert RuntimeConfig(length_groups=4).rows_per_group() == 1  # a set value: as many groups as asked
    with pytest.raises(ConfigError, match=r"runtime.length_groups: must be >= 1"):
        check_fields(from_dict(TrainConfig, {"runtime": {"length_groups": 0}}))
    assert "length_groups" not in identity(TrainConfig())["runtime"]  # runs made before it keep their identity
    assert identity(from_dict(TrainConfig, {"runtime": {"length_groups": 1}}))["runtime"]["length_groups"] == 1


def test_training_forwards_in_the_default_groups_or_as_many_as_set(tmp_path, save_model_dir, monkeypatch):
    """The preference stage builds its scorer with the setting as resolved: null on a CPU run of a
    model above the size rule gives up to four groups, one per eight rows at most, a set value as many as
    asked (the size rule lowered to 0 so that the tests' tiny model counts as large)."""
    from badpo.engine import preference, settings
    from badpo.engine.train import train
    from fixtures.engine import judgment_rows, make_config, write_jsonl

    save_model_dir(tmp_path / "model", "llama")
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    made = []

    class Recording(preference.LogprobModel):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append((self.groups, self.rows_per_group))

    monkeypatch.setattr(settings, "LEAN_MIN_PARAMETERS", 0)
    monkeypatch.setattr(preference, "LogprobModel", Recording)
    train(make_config(tmp_path, "by_default", "steps=1", "model.selective_checkpointing=false"))
    train(make_config(tmp_path, "as_set", "steps=1", "model.selective_checkpointing=false", "runtime.length_groups=3"))
    assert made == [(CPU_LENGTH_GROUPS, CPU_ROWS_PER_GROUP), (3, 1)]
