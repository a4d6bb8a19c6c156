"""``runtime.precision: fp64``: float64 weights and log-probs end to end (for digits that do not
move with the thread count on a tiny model); fp32 and bf16 unchanged."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from badpo.engine.logprobs import gather_logprobs
from badpo.engine.runtime import mixed_precision
from badpo.engine.train import train
from fixtures.engine import judgment_rows, log_records, make_config, write_jsonl


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    root = tmp_path_factory.mktemp("engine_fp64")
    save_model_dir(root / "model", "llama")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def test_label_logprobs_keep_float64_and_upcast_lower_precisions():
    """log p(label) of a float64 head is float64 and equals log_softmax worked in float64 to 1e-12;
    a bf16 head still reads out in float32 (the path every other precision takes)."""
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 50, bias=False).double()
    hidden, labels = torch.randn(7, 8, dtype=torch.float64), torch.randint(0, 50, (7,))
    got = gather_logprobs(head, hidden, labels, chunk_size=3)
    expected = torch.log_softmax(hidden @ head.weight.T, dim=-1).gather(-1, labels[:, None]).squeeze(-1)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    half = torch.nn.Linear(8, 50, bias=False).to(torch.bfloat16)
    assert gather_logprobs(half, hidden.to(torch.bfloat16), labels, chunk_size=3).dtype == torch.float32


def test_an_fp64_run_trains_and_saves_float64_weights(world):
    assert mixed_precision("fp64") == "no"  # no autocast: the weights themselves are float64
    out = train(make_config(world, "fp64", "runtime.precision=fp64", "bias.init=zero", "steps=2"))
    weights = load_file(out / "policy" / "model.safetensors")
    assert {tensor.dtype for tensor in weights.values()} == {torch.float64}
    first = log_records(out)[0]["loss"]
    # theta at 0 and the policy at the reference: log 2, up to the reference's float32 cache
    assert first == pytest.approx(0.6931471805599453, abs=1e-6)
    fp32 = train(make_config(world, "fp32", "runtime.precision=fp32", "bias.init=zero", "steps=2"))
    assert {t.dtype for t in load_file(fp32 / "policy" / "model.safetensors").values()} == {torch.float32}
