"""A weight column in BADPOTrainer: each judgment's loss weighted by its weight, the batch's loss the
weighted mean (as the engine's step), checked against the unweighted trainer on the rows whose weight
is not 0; an all-zero or negative weight is refused."""

from __future__ import annotations

import re

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


def test_conversational_rows_train_and_are_trls_loss_at_theta_zero(world, tmp_path):
    """TRL's conversational format (prompt and responses as chat messages): badpo reads the
    assistant's text for the attributes, TRL renders the conversation; with theta frozen at 0 the loss
    is DPOTrainer's on the same rows."""
    from transformers import AutoModelForCausalLM
    from trl import DPOTrainer

    from badpo.integrations.trl import DIFF_COLUMN, BADPOTrainer

    path, data = world
    chat = data.map(lambda row: {"prompt": [{"role": "user", "content": row["prompt"].strip()}],
                                 "chosen": [{"role": "assistant", "content": row["chosen"]}],
                                 "rejected": [{"role": "assistant", "content": row["rejected"]}]})
    kwargs = dict(train_dataset=chat, processing_class=build_tokenizer(chat_template=True))
    trl = DPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                     args=config(tmp_path / "trl"), **kwargs)
    channel = BiasChannel("shared_mean", ["signed"], ANNOTATORS).requires_grad_(False)
    ours = BADPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                        args=config(tmp_path / "ours"), attributes=["given:signed"], bias=channel, **kwargs)
    text = BADPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                        args=config(tmp_path / "text"), attributes=["given:signed"], bias=channel,
                        train_dataset=data, processing_class=build_tokenizer())
    assert ours.train_dataset[DIFF_COLUMN] == text.train_dataset[DIFF_COLUMN]  # the same attributes
    theirs = _loss(trl, range(N))
    assert theirs > 0 and _loss(ours, range(N)) == pytest.approx(theirs, rel=1e-6)


def test_ties_and_strengths_train_with_the_engines_likelihood(world, tmp_path):
    """Rows with ties and graded wins: the batch loss is the mean of badpo.core.losses.graded_loss at
    each row's logit (read back from the plain trainer's per-row loss -log sigmoid(z)) with the
    trainer's fitted cut points; the cut points are stepped by theta's Adam."""
    import math

    from transformers import AutoModelForCausalLM

    from badpo.core.losses import graded_loss
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    graded = data.map(lambda row, i: {"tie": i % 5 == 0, "strength": None if i % 5 == 0 else 1 + i % 2},
                      with_indices=True)
    common = dict(processing_class=build_tokenizer(), attributes=["given:signed"])

    def trainer(dataset, out):
        channel = BiasChannel("shared_mean", ["signed"], ANNOTATORS, init_mean=[0.3]).requires_grad_(False)
        return BADPOTrainer(str(path / "policy"), AutoModelForCausalLM.from_pretrained(path / "model"),
                            args=config(tmp_path / out), train_dataset=dataset, bias=channel, **common)

    ours, plain = trainer(graded, "graded"), trainer(data, "plain")
    assert ours.cuts is not None and ours.theta_optimizer is not None  # the cut points learn, theta is frozen
    logits = torch.tensor([-math.log(math.expm1(_loss(plain, [i]))) for i in range(N)], dtype=torch.float64)
    grade = torch.tensor(ours.train_dataset["badpo_grade"])
    nu, gaps = ours.cuts.tie_strength().double(), ours.cuts.gaps().double()
    expected = float(graded_loss(logits, grade, nu, gaps).mean())
    assert _loss(ours, range(N)) == pytest.approx(expected, rel=1e-4)
    assert sorted(set(grade.tolist())) == [0, 1, 2]


@pytest.mark.parametrize("options", [dict(loss_type=["sigmoid", "hinge"], loss_weights=[1.0, float("nan")]),
                                     dict(loss_type=["sigmoid"], loss_weights=[float("inf")]),
                                     dict(loss_type=["sigmoid"], loss_weights=[1e39])])  # inf in float32
def test_non_finite_loss_weights_are_refused(world, tmp_path, options):
    message = r"^args.loss_weights: every weight must be finite"
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    with pytest.raises(ValueError, match=message):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, **options), train_dataset=data,
                     processing_class=build_tokenizer(), attributes=["given:signed"])


@pytest.mark.parametrize("theta_lr, said", [(float("inf"), "at most 3.403e+38"), (1e39, "at most 3.403e+38"),
                                             (float("nan"), "must be > 0"), ("0.01", "a number, got '0.01'")])
def test_a_theta_lr_outside_float32_or_not_a_number_is_one_line(theta_lr, said):
    """inf and 1e39 passed (only lr > 0 was checked) and trained theta and every weight to NaN while
    the logged loss read 0; a string was a TypeError traceback (issue 76's re-trial)."""
    from badpo.core.config import ConfigError
    from badpo.integrations.trl_rows import theta_options

    with pytest.raises(ConfigError, match=rf"^theta_lr: .*{re.escape(said)}") as error:
        theta_options(theta_lr, "reference")
    assert "\n" not in str(error.value)


def test_an_empty_loss_type_list_is_named(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    with pytest.raises(ValueError, match=r"^args.loss_type: an empty list"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, loss_type=[], loss_weights=None), train_dataset=data,
                     processing_class=build_tokenizer(), attributes=["given:signed"])


def test_an_empty_dataset_is_one_line(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    with pytest.raises(ValueError, match=r"^train_dataset: no rows"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path), train_dataset=data.select([]),
                     processing_class=build_tokenizer(), attributes=["given:signed"])


def test_weights_with_gradient_accumulation_are_refused(world, tmp_path):
    """The batch's weighted mean is the step's only with one batch a step on one process."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    with pytest.raises(ValueError, match=r"^train_dataset's weight column weights each judgment .* \(got 2 on 1\)"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, gradient_accumulation_steps=2),
                     train_dataset=data.add_column("weight", [1.0] * N), processing_class=build_tokenizer(),
                     attributes=["given:signed"])
