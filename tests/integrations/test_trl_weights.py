"""A weight column in BADPOTrainer: each judgment's loss weighted by its weight, the batch's loss the
weighted mean (as the engine's step), checked against the unweighted trainer on the rows whose weight
is not 0; an all-zero or negative weight is refused."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl", reason="TRL is the optional extra 'trl' (installed by the 'test' extra)")

from badpo.core.bias import BiasChannel  # noqa: E402
from fixtures.engine import build_tokenizer  # noqa: E402
from fixtures.trl import N, config, trl_world  # noqa: E402

ANNOTATORS = [f"ann{k}" for k in range(5)]


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    yield from trl_world(tmp_path_factory.mktemp("trl_weights"), save_model_dir)


def _loss(trainer, rows) -> float:
    batch = trainer.data_collator([trainer.train_dataset[i] for i in rows])
    with torch.no_grad():
        return float(trainer.compute_loss(trainer.model, batch))


def test_the_loss_is_the_weighted_mean_of_the_judgments_losses(world, tmp_path):
    from transformers import AutoModelForCausalLM

    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    weights = [2.0 if i % 3 == 0 else 0.0 if i % 3 == 1 else 1.0 for i in range(N)]
    common = dict(processing_class=build_tokenizer(), attributes=["given:signed"], theta_init="zero")

    def trainer(dataset, out):
        channel = BiasChannel("shared_mean", ["signed"], ANNOTATORS, init_mean=[0.4]).requires_grad_(False)
        return BADPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                            args=config(tmp_path / out), train_dataset=dataset, bias=channel, **common)

    weighted = trainer(data.add_column("weight", weights), "weighted")
    plain = trainer(data, "plain")
    per_row = [_loss(plain, [i]) for i in range(N)]
    expected = sum(w * value for w, value in zip(weights, per_row)) / sum(weights)
    assert _loss(weighted, range(N)) == pytest.approx(expected, rel=1e-5)
    assert _loss(plain, range(N)) == pytest.approx(sum(per_row) / N, rel=1e-5)


def test_bad_weights_are_refused_naming_the_row(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    common = dict(args=config(tmp_path), processing_class=build_tokenizer(), attributes=["given:signed"])
    with pytest.raises(ValueError, match=r"^train_dataset: every judgment's weight is 0"):
        BADPOTrainer(str(path / "model"), train_dataset=data.add_column("weight", [0.0] * N), **common)
    negative = [1.0] * N
    negative[5] = -1.0
    with pytest.raises(ValueError, match=r"^train_dataset: row 5.*field 'weight': expected a finite number >= 0"):
        BADPOTrainer(str(path / "model"), train_dataset=data.add_column("weight", negative), **common)
