"""BADPOTrainer (badpo.integrations.trl): TRL's DPOTrainer with the BA-DPO bias logit.

The tiny GPT-2 and word-level tokenizer of ``fixtures.engine``; 24 judgments (6 pairs x 4) with a
precomputed attribute ``signed`` (``given:signed``). TRL joins prompt and completion as text and
appends the EOS text, so the rows given to TRL end the prompt with a space and each response with
" <eos>": TRL then tokenizes every sequence exactly as the engine does (checked below), and the
two losses can be compared on the same tokens.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import pytest
import torch

from badpo.core.attributes import resolve_attributes

pytest.importorskip("trl", reason="TRL is the optional extra 'trl' (installed by the 'test' extra)")

from transformers import AutoModelForCausalLM  # noqa: E402

from badpo.core.bias import BiasChannel  # noqa: E402
from badpo.engine.cache import reference_logprobs, token_offsets  # noqa: E402
from badpo.engine.loop import judgment_losses  # noqa: E402
from badpo.engine.preference import prepare_run  # noqa: E402
from badpo.engine.runtime import make_accelerator  # noqa: E402
from badpo.methods import METHODS, get_arm  # noqa: E402
from badpo.methods.arms import legacy_arm_names  # noqa: E402
from fixtures.engine import build_tokenizer, make_config  # noqa: E402
from fixtures.trl import N, config, first_batch_loss, trl_world  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    yield from trl_world(tmp_path_factory.mktemp("trl"), save_model_dir)


def frozen(channel: BiasChannel) -> BiasChannel:
    return channel.requires_grad_(False)


def test_with_theta_frozen_at_zero_it_is_trls_dpo_trainer(world, tmp_path):
    """Same batch: the same loss; two steps: the same weights, so the same gradient too; and every
    metric TRL logs (logps, logits, entropy, token accuracy, token count, rewards) logged alike,
    beside theta's."""
    from trl import DPOTrainer

    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    model = str(path / "policy")
    kwargs = dict(ref_model=None, train_dataset=data, processing_class=build_tokenizer())
    trl = DPOTrainer(model, args=config(tmp_path / "trl", max_steps=2, per_device_train_batch_size=8), **kwargs)
    channel = frozen(BiasChannel("shared_mean", ["signed"], [f"ann{k}" for k in range(5)]))
    ours = BADPOTrainer(model, args=config(tmp_path / "ours", max_steps=2, per_device_train_batch_size=8),
                        attributes=["given:signed"], bias=channel, **kwargs)
    assert ours.theta_optimizer is None
    assert first_batch_loss(ours) == pytest.approx(first_batch_loss(trl), rel=1e-6)
    trl.train()
    ours.train()
    trl_losses = [r["loss"] for r in trl.state.log_history if "loss" in r]
    our_losses = [r["loss"] for r in ours.state.log_history if "loss" in r]
    assert len(our_losses) == 2 and our_losses == pytest.approx(trl_losses, rel=1e-6)
    trl_records = [r for r in trl.state.log_history if "loss" in r]
    our_records = [r for r in ours.state.log_history if "loss" in r]
    for theirs, mine in zip(trl_records, our_records, strict=True):
        assert {"logps/chosen", "logits/rejected", "entropy", "mean_token_accuracy", "num_tokens"} <= set(theirs)
        assert set(theirs) <= set(mine), sorted(set(theirs) - set(mine))
        for key, value in theirs.items():
            assert mine[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
        assert mine["theta_bar/signed"] == 0.0 and "bias_logit" in mine
    for (name, a), b in zip(trl.model.named_parameters(), ours.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7, msg=name)


def test_the_bias_logit_enters_the_dpo_logit(world, tmp_path):
    """Policy = reference, so u = 0 and each loss is -log sigmoid(b) = softplus(-b), b = theta * diff.

    Pooled theta = ln 3. Even pairs (3 of them, 12 judgments): the signed side wins 3 of 4, so
    diff = +1 on 9 judgments (loss ln(1 + 1/3) = ln(4/3)) and -1 on 3 (loss ln(1 + 3) = ln 4);
    odd pairs: diff = 0 on 12 (loss ln 2). Mean = (9 ln(4/3) + 3 ln 4 + 12 ln 2) / 24.
    """
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    channel = BiasChannel("pooled", ["signed"], [f"ann{k}" for k in range(5)], init_mean=[math.log(3)])
    trainer = BADPOTrainer(str(path / "model"), args=config(tmp_path), train_dataset=data,
                           processing_class=build_tokenizer(), attributes=["given:signed"], bias=channel)
    expected = (9 * math.log(4 / 3) + 3 * math.log(4) + 12 * math.log(2)) / 24
    assert first_batch_loss(trainer) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("precompute", [False, True])
def test_first_step_loss_is_the_engines(world, tmp_path, precompute):
    """The engine's loss (judgment_losses, its own tokenization and log-prob code) on the same model,
    judgments and reference log-probs, with a theta that is not 0 and differs by annotator."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    run = prepare_run(make_config(path, "unused", f"model.name_or_path={path / 'policy'}",
                                  "cache_dir=null"))[0]
    # The engine's reference is its start; give it the other model's log-probs instead.
    reference_model = AutoModelForCausalLM.from_pretrained(path / "model")
    run.reference = reference_logprobs(reference_model, run.data.store, identity={}, cache_dir=None,
                                       batch_size=8, chunk_size=64, accelerator=run.accelerator)[0]
    channel = BiasChannel("shared_mean", ["signed"], run.data.annotators, init_mean=[0.4])
    with torch.no_grad():
        channel.deviation.copy_(torch.tensor([[0.3], [-0.2], [0.0], [0.5], [-0.1]]))
    run.bias = channel
    micro = run.items.micro_batch(torch.arange(len(run.items)))
    with torch.no_grad():
        engine = float(judgment_losses(run, micro, 0).losses.mean())

    trainer = BADPOTrainer(str(path / "policy"), ref_model=reference_model, attributes=["given:signed"],
                           bias=channel, args=config(tmp_path, precompute_ref_log_probs=precompute),
                           train_dataset=data, processing_class=build_tokenizer())
    store = run.data.store
    for i in range(N):  # the precondition of the comparison: TRL's tokens are the engine's
        row = trainer.train_dataset[i]
        chosen = store.batch(run.data.chosen_row[i:i + 1], "cpu")
        ids = chosen["input_ids"][0][chosen["attention_mask"][0].bool()].tolist()
        assert row["prompt_ids"] + row["chosen_ids"] == ids, i
    assert first_batch_loss(trainer) == pytest.approx(engine, rel=1e-5)
    assert engine != pytest.approx(math.log(2), rel=1e-3)  # policy != reference and b != 0


@pytest.fixture(scope="module")
def engine_run(world):
    """The engine's run on the same judgments, the policy not its reference: every row's loss below
    is the engine's own (judgment_losses) on this run with that row, its parameters and channel."""
    path, _ = world
    run = prepare_run(make_config(path, "unused", f"model.name_or_path={path / 'policy'}", "cache_dir=null",
                                  "method=dpo"))[0]
    reference_model = AutoModelForCausalLM.from_pretrained(path / "model")
    run.reference = reference_logprobs(reference_model, run.data.store, identity={}, cache_dir=None,
                                       batch_size=8, chunk_size=64, accelerator=run.accelerator)[0]
    return run, reference_model


def channel_of(variant: str, run) -> BiasChannel:
    """A channel of ``variant`` on the engine's annotators whose every parameter is away from 0."""
    channel = BiasChannel(variant, ["signed"], run.data.annotators, run.data.annotator_classes)
    with torch.no_grad():
        for parameter in channel.parameters():
            parameter.copy_(torch.linspace(-0.3, 0.5, parameter.numel()).reshape(parameter.shape))
    return channel


ARMS = sorted(set(METHODS) | set(legacy_arm_names()))  # each method, with each variant it takes


@pytest.mark.parametrize("name", ARMS)
def test_every_method_row_trl_can_give_is_its_loss_in_trl(world, engine_run, tmp_path, name):
    """Each arm (a row of the method table with each bias variant): inside TRL, the loss on one batch
    is the engine's on the same judgments, models and theta (fp32); a row whose view TRL's batch
    lacks is refused, by name."""
    import dataclasses

    from badpo.integrations.trl import BADPOTrainer, trl_refusal

    path, data = world
    run, reference_model = engine_run
    row = get_arm(name)
    params = {"alpha": 0.05} if name.startswith("r_dpo") else {}
    kwargs = dict(ref_model=reference_model, attributes=["given:signed"], args=config(tmp_path),
                  train_dataset=data, processing_class=build_tokenizer(), method=name, method_params=params)
    refusal = trl_refusal(name)
    if refusal is not None:
        with pytest.raises(ValueError, match=f"^method: method '{name}' cannot train inside TRL: it "):
            BADPOTrainer(str(path / "policy"), **kwargs)
        return
    channel = channel_of(row.bias_variant, run)
    parsed = row.parse_params(params)
    annotator_index = run.annotator_index
    if row.shuffle_annotators:  # the engine draws them from runtime.seed, TRL from args.seed (0 here)
        annotator_index = run.data.with_shuffled_annotators(0).annotator_index
    # a trainer built before resets accelerate's state: the engine's run gets an accelerator again
    ours = dataclasses.replace(run, method=row, params=parsed, bias=channel, annotator_index=annotator_index,
                               accelerator=make_accelerator(run.config.runtime.precision))
    if row.needs.token_logratios:  # SamPO: the reference's per-token log-probs, seeds from TRL's args.seed (0)
        _, tokens, _ = reference_logprobs(reference_model, run.data.store, identity={}, cache_dir=None, batch_size=8,
                                          chunk_size=64, accelerator=ours.accelerator, per_token=True)
        runtime = dataclasses.replace(run.config.runtime, seed=0)
        ours = dataclasses.replace(ours, reference_tokens=tokens, token_offsets=token_offsets(run.data.store),
                                   config=dataclasses.replace(run.config, runtime=runtime))
    everyone = torch.arange(N)
    with torch.no_grad():
        losses = judgment_losses(ours, ours.items.micro_batch(torch.arange(len(run.items))), 0).losses
    engine = float(losses.mean())
    if row.weighting is not None:  # the engine's step: weights relative to the step's judgments
        weighting = row.weighting(parsed, run.data.annotator_index, run.data.annotators, run.data.annotator_classes)
        weights = weighting.weights(everyone, everyone)
        assert weights.std() > 0  # unequal groups in the batch: a plain mean would differ
        engine = float((losses * weights).sum() / weights.sum())
    trainer = BADPOTrainer(str(path / "policy"), bias=channel, **kwargs)
    assert trainer.run_record().method == name
    trainer.model.train()  # the loss weights apply in training (dropout is 0: the forward is the same)
    assert first_batch_loss(trainer) == pytest.approx(engine, rel=1e-6)


def test_sampo_reads_the_peft_reference_per_token_and_refuses_a_precompute(world, tmp_path):
    """Given a LoRA policy and no ref_model, TRL's reference is the policy as it started (its
    ``ref`` adapter); SamPO's per-token reference is read the same way: once the policy's own
    adapter has moved, the loss equals the one with the starting model, merged, given as ref_model
    (a reference read through the moved adapter would make every log-ratio 0 and the loss log 2).
    TRL's precompute keeps the sums only: refused."""
    from peft import LoraConfig, get_peft_model

    from badpo.integrations.trl import BADPOTrainer

    path, data = world

    def lora_policy():
        torch.manual_seed(0)  # lora_A's initialisation
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(path / "model"),
                               LoraConfig(r=2, lora_alpha=4, target_modules=["c_attn"], lora_dropout=0.0))
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "lora_B" in name:  # B starts at 0: move it so that the policy is not its base
                    parameter.copy_(torch.linspace(-0.5, 0.5, parameter.numel()).reshape(parameter.shape))
        return model

    def moved(trainer):  # the policy's own adapter trains on; the reference stays where it started
        with torch.no_grad():
            for name, parameter in trainer.model.named_parameters():
                if "lora_B.default" in name:
                    parameter.add_(0.3)
        return trainer

    kwargs = dict(attributes=["given:signed"], train_dataset=data, processing_class=build_tokenizer(),
                  method="sampo")
    own = moved(BADPOTrainer(lora_policy(), args=config(tmp_path / "own"), **kwargs))
    given = moved(BADPOTrainer(lora_policy(), ref_model=lora_policy().merge_and_unload(),
                               args=config(tmp_path / "given"), **kwargs))
    assert first_batch_loss(own) == pytest.approx(first_batch_loss(given), rel=1e-5)
    assert first_batch_loss(own) != pytest.approx(math.log(2), rel=1e-3)
    with pytest.raises(ValueError, match="^args.precompute_ref_log_probs: method 'sampo' needs the reference's "
                                         "log-prob of every token"):
        BADPOTrainer(lora_policy(), args=config(tmp_path / "pre", precompute_ref_log_probs=True), **kwargs)


def test_the_trainer_names_a_bias_of_another_variant_than_its_method(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer
    from badpo.integrations.trl_rows import method_row

    path, data = world
    # a method is a loss and bias its variant: any method that adds the bias logit takes any variant
    assert method_row("ipo", "pooled")[0] == "ba_ipo_pooled" and method_row("r_dpo", None)[0] == "r_dpo"
    assert method_row(None, None)[0] == "ba_dpo_shared_mean" and method_row(None, "none")[0] == "dpo"
    with pytest.raises(ValueError, match="^bias: method 'ba_ipo_pooled' is method 'ipo' with the bias variant "
                                         "'pooled', not 'shared_mean'"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path), train_dataset=data, processing_class=build_tokenizer(),
                     attributes=["given:signed"], method="ba_ipo_pooled", bias="shared_mean")
    with pytest.raises(ValueError, match="^bias: method 'em_dpo' takes no bias"):
        method_row("em_dpo", "pooled")
    with pytest.raises(ValueError, match="method: unknown method 'dpo2'"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path), train_dataset=data, processing_class=build_tokenizer(),
                     attributes=["given:signed"], method="dpo2")


def test_theta_trains_on_its_own_adam_and_is_saved_beside_the_model(world, tmp_path):
    """One step with policy = reference: u = 0, so d loss / d theta_bar = -mean(sigmoid(-b) diff)
    = -0.5 * (9 - 3) / 24 < 0 at theta = 0, and Adam's first step moves theta_bar by exactly
    lr = 1e-2 upward, although the policy's scheduled lr is still 0 (warmup) and its gradient is
    clipped to 1e-3. Trainer's weight decay (0.5 here) does not reach theta."""
    from badpo.integrations.trl import INDEX_COLUMN, BADPOTrainer

    path, data = world
    args = config(tmp_path / "out", warmup_steps=10, max_grad_norm=1e-3, weight_decay=0.5)
    trainer = BADPOTrainer(str(path / "model"), args=args, train_dataset=data,
                           processing_class=build_tokenizer(), attributes=["given:signed"],
                           bias="shared_mean", theta_init="zero")
    assert trainer.bias.annotators == tuple(f"ann{k}" for k in range(5))
    assert INDEX_COLUMN in trainer.train_dataset.column_names
    trainer.train()
    assert float(trainer.bias.shared_parameter().detach()) == pytest.approx(0.01, rel=1e-5)
    record = next(r for r in trainer.state.log_history if "loss" in r)
    assert record["theta_bar/signed"] == pytest.approx(float(trainer.bias.mean()), abs=1e-7)
    theta = trainer.bias.theta().detach()[:, 0]  # each annotator's theta_k reaches TRL's trackers too
    assert [record[f"theta_k/signed/ann{k}"] for k in range(5)] == pytest.approx(theta.tolist(), abs=1e-7)
    assert record["theta_k_sd/signed"] == pytest.approx(float(theta.double().std(unbiased=False)), abs=1e-7)
    assert record["loss"] == pytest.approx(math.log(2), rel=1e-6)
    trainer.save_model()
    saved = BiasChannel.load(tmp_path / "out" / "theta.json")
    assert saved.variant == "shared_mean"
    torch.testing.assert_close(saved.theta(), trainer.bias.theta().detach().cpu(), rtol=0, atol=0)
    assert (tmp_path / "out" / "model.safetensors").exists()


def test_theta_starts_at_the_reference_fit_by_default(world, tmp_path):
    """The engine's default start: the signed side wins 9 of its 12 cross-group judgments, so
    theta_bar starts at log(9 / 3) with every deviation at 0; theta_init='zero' starts at 0."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    trainer = BADPOTrainer(str(path / "model"), args=config(tmp_path / "out"), train_dataset=data,
                           processing_class=build_tokenizer(), attributes=["given:signed"],
                           bias="shared_mean")
    assert float(trainer.bias.shared_parameter().detach()) == pytest.approx(math.log(3), abs=1e-6)
    assert float(trainer.bias.deviations().abs().max()) == 0.0
    from badpo.auditing.estimates import attribute_differences
    from badpo.auditing.start_level import start_level
    from badpo.core.notices import BadpoWarning
    from badpo.integrations.trl_data import dataset_judgments

    judgments = dataset_judgments(data, "train_dataset")  # the fit the conditional start makes, by another path
    fit = start_level(judgments, attribute_differences(judgments, resolve_attributes(["given:signed"])))
    with contextlib.ExitStack() as stack:
        if not fit.identified:  # too few pairs judged twice: the reference fit, and a warning says so
            stack.enter_context(pytest.warns(BadpoWarning, match="not identified"))
        conditional = BADPOTrainer(str(path / "model"), args=config(tmp_path / "out3"), train_dataset=data,
                                   processing_class=build_tokenizer(), attributes=["given:signed"],
                                   bias="shared_mean", theta_init="conditional")
    assert float(conditional.bias.shared_parameter().detach()) == pytest.approx(fit.level[0], abs=1e-6)
    with pytest.raises(ValueError, match=r"theta_init: one of \['reference', 'conditional', 'zero'\], got 'warm'"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path / "out2"), train_dataset=data,
                     processing_class=build_tokenizer(), attributes=["given:signed"], theta_init="warm")


def test_bad_input_is_one_clear_error(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    common = dict(processing_class=build_tokenizer(), attributes=["given:signed"])
    with pytest.raises(ValueError, match="args.loss_type"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, loss_type=["nca_pair"]), train_dataset=data,
                     **common)
    with pytest.raises(ValueError, match="train_dataset.*annotator"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path), train_dataset=data.remove_columns("annotator"),
                     **common)
    unknown = data.select(range(4)).map(lambda row: {"annotator": "stranger"})
    with pytest.raises(ValueError, match="eval_dataset row 0: annotator 'stranger'"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path), train_dataset=data, eval_dataset=unknown,
                     **common)
    tied = data.map(lambda row, i: {"tie": i == 3}, with_indices=True)  # a tie is never read as a win
    with pytest.raises(ValueError, match=r"^eval_dataset row 3: a tie, and the training data holds none"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path), train_dataset=data, eval_dataset=tied, **common)


@pytest.mark.parametrize("loss_type", [None, ["sigmoid", "hinge"]])
def test_bias_level_orthogonal_projects_the_policys_gradient_as_the_engine_does(world, tmp_path, monkeypatch,
                                                                               loss_type):
    """theta at 0 and the policy at the reference: every logit is 0, so the loss sends each chosen
    log-prob the same gradient and its sum along g(y_w) - g(y_l) is that gradient times 9 - 3, not 0.
    Two attributes, ``signed`` declared alone: under bias_level='orthogonal' the gradient reaching the
    chosen and rejected log-probs has none along signed's column (the first; length's is not used),
    theta's gradient is the plain trainer's, the policy's is not; also through TRL's loss types."""
    import badpo.integrations.trl as module
    from badpo.integrations.trl import DIFF_COLUMN, BADPOTrainer
    from fixtures.orthogonal import spy_orthogonal

    path, data = world
    seen, grads = spy_orthogonal(monkeypatch, module), {}
    overrides = {} if loss_type is None else {"loss_type": loss_type, "loss_weights": [1.0, 1.0]}
    for level in ("adam", "orthogonal"):
        channel = BiasChannel("pooled", ["signed", "length"], [f"ann{k}" for k in range(5)], declared=["signed"])
        trainer = BADPOTrainer(str(path / "model"), args=config(tmp_path / level, **overrides), train_dataset=data,
                               processing_class=build_tokenizer(), attributes=["given:signed", "length"],
                               bias=channel, bias_level=level)
        assert trainer.orthogonal == (level == "orthogonal")
        batch = trainer.data_collator([trainer.train_dataset[i] for i in range(N)])
        trainer.compute_loss(trainer.model, batch).backward()
        grads[level] = ([p.grad.clone() for p in trainer.theta_parameters],
                        torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None]))
    assert len(seen) == 2  # chosen and rejected, the orthogonal trainer only
    signed = batch[DIFF_COLUMN][:, :1]
    assert batch[DIFF_COLUMN].shape[1] == 2 and batch[DIFF_COLUMN][:, 1].abs().sum() > 0
    for side in seen:
        assert torch.equal(side["directions"], signed)
        assert float((signed.T.double() @ side["incoming"].double()).abs().max()) > 1e-3
        assert float((signed.T.double() @ side["gradient"].double()).abs().max()) < 1e-6
        assert side["gradient"].abs().max() > 1e-4
    assert all(torch.allclose(a, b) for a, b in zip(grads["adam"][0], grads["orthogonal"][0]))
    assert not torch.allclose(grads["adam"][1], grads["orthogonal"][1])
    assert trainer.run_record().bias_level == "orthogonal"


def test_bias_level_rules_it_cannot_honour_are_refused_by_name(world, tmp_path):
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    common = dict(args=config(tmp_path), train_dataset=data, processing_class=build_tokenizer(),
                  attributes=["given:signed"])
    refusals = [
        (dict(bias_level="tilt"), "^bias_level: tilt moves theta after every step"),
        (dict(bias_level="steady"), "^bias_level: one of"),
        (dict(bias_level="orthogonal", method="dpo"), "^bias_level: orthogonal needs a theta.*'dpo' learns none"),
        (dict(bias_level="orthogonal", method="sampo_ba_pooled"), "^bias_level: orthogonal projects the summed"),
        (dict(bias_level="orthogonal", bias=BiasChannel("shared_mean", ["signed"], [f"ann{k}" for k in range(5)],
                                                         trusted={"ann0": [0.0]})),
         r"^bias_level: orthogonal keeps the policy's lean at the reference's, and trusted annotators \(the channel's"),
    ]
    for kwargs, message in refusals:
        with pytest.raises(ValueError, match=message):
            BADPOTrainer(str(path / "model"), **common, **kwargs)
    one_a_batch = dict(common, args=config(tmp_path, per_device_train_batch_size=1))
    with pytest.raises(ValueError, match=r"^bias_level: orthogonal .*above 1$") as refused:
        BADPOTrainer(str(path / "model"), **one_a_batch, bias_level="orthogonal")
    assert "args.per_device_train_batch_size" in str(refused.value)


def test_an_epochs_last_batch_too_short_to_project_is_named(world, tmp_path):
    """TRL keeps a short last batch unless told otherwise: one judgment against one declared
    attribute gives the policy no gradient, said once; dropped, nothing is said."""
    from badpo.integrations.trl import BADPOTrainer

    path, data = world
    common = dict(train_dataset=data, processing_class=build_tokenizer(), attributes=["given:signed"],
                  bias_level="orthogonal")
    with pytest.warns(UserWarning, match=r"last batch holds 1 judgment\(s\).*dataloader_drop_last=True"):
        BADPOTrainer(str(path / "model"), args=config(tmp_path, per_device_train_batch_size=N - 1), **common)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        BADPOTrainer(str(path / "model"), args=config(tmp_path, per_device_train_batch_size=N - 1,
                                                      dataloader_drop_last=True), **common)
    assert not [w for w in seen if "last batch" in str(w.message)]
