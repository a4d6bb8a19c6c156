"""The SFT reference stage: which rows, what it trains, what it saves."""

from __future__ import annotations

import json

import pytest
import torch

from badpo.core.config import ConfigError, apply_overrides, from_dict, load_config
from badpo.core.judgments import read_judgments
from badpo.data.sources import read_sft_source
from badpo.engine.batches import majority_chosen
from badpo.engine.settings import SFTConfig
from badpo.engine.sft import sft
from badpo.engine.tokenize import TokenizationConfig, build_token_store
from fixtures.engine import full_logit_token_logprobs, judgment_rows, write_jsonl


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    root = tmp_path_factory.mktemp("engine_sft")
    save_model_dir(root / "model", "gpt2")
    write_jsonl(root / "judgments.jsonl", judgment_rows())
    return root


def make_config(world, name, *overrides) -> SFTConfig:
    base = {"data": str(world / "judgments.jsonl"), "source": "judgments",
            "model": {"name_or_path": str(world / "model")}, "epochs": 4.0, "batch_size": 6,
            "micro_batch_size": 6, "optim": {"lr": 1e-2}, "runtime": {"num_threads": 1},
            "report": {"progress_bar": False}, "output_dir": str(world / name)}
    return from_dict(SFTConfig, apply_overrides(base, overrides))


def test_majority_chosen_breaks_ties_by_the_first_judgment():
    """Even pairs: the signed side a wins 3 of 4. Odd pairs: 2-2, and judgment 0 chose a."""
    judgments = [j for j in read_judgments_from_rows(judgment_rows())]
    rows, ties = majority_chosen(judgments)
    assert ties == ["p1", "p3", "p5"]
    firsts = {r["pair_id"]: (r["prompt"], r["chosen"]) for r in judgment_rows()[::4]}
    assert rows == [firsts[f"p{i}"] for i in range(6)]
    assert all(response.endswith("--- emily smith") for _, response in rows[::2])
    skipped, _ = majority_chosen(judgments, tie_break="skip")
    assert skipped == rows[::2]


def read_judgments_from_rows(rows):
    from badpo.core.judgments import validate_judgments

    return validate_judgments(rows)


def test_sft_lowers_the_response_nll_and_saves_a_loadable_model(world):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = sft(make_config(world, "sft"))
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert len(records) == 4 and records[-1]["loss"] < records[0]["loss"]
    summary = json.loads((out / "sft.json").read_text())
    assert summary["rows"] == 6 and summary["pairs_with_tied_votes"] == 3

    rows, _ = majority_chosen(read_judgments(world / "judgments.jsonl"))
    tokenizer = AutoTokenizer.from_pretrained(out)
    store = build_token_store(tokenizer, rows, TokenizationConfig())
    batch = store.batch(torch.arange(len(store)))
    tokens = int(batch["response_mask"].sum())

    def nll(path):
        with torch.no_grad():
            model = AutoModelForCausalLM.from_pretrained(path)
            return float(-full_logit_token_logprobs(model, batch).sum()) / tokens

    before, after = nll(world / "model"), nll(out)
    assert before == pytest.approx(records[0]["loss"], abs=1e-5)  # the logged loss is this NLL
    assert after < before - 0.5


def test_sft_micro_batches_give_the_same_steps(world):
    """Per-token mean over the whole step: 6 x 1 and 2 x 3 give the same losses and gradients."""
    whole = sft(make_config(world, "whole"))
    split = sft(make_config(world, "split", "micro_batch_size=2"))
    read = lambda out: [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]  # noqa: E731
    for a, b in zip(read(whole), read(split), strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5)


def test_lora_sft_saves_a_merged_plain_model(world):
    from transformers import AutoModelForCausalLM

    out = sft(make_config(world, "sft_lora", "lora.enabled=true", "lora.rank=4", "optim.lr=null"))
    assert not (out / "adapter_config.json").exists() and (out / "model.safetensors").exists()
    merged = AutoModelForCausalLM.from_pretrained(out)
    base = AutoModelForCausalLM.from_pretrained(world / "model")
    moved = max((a - b).abs().max() for a, b in zip(merged.parameters(), base.parameters()))
    assert moved > 0
    first = json.loads((out / "log.jsonl").read_text().splitlines()[0])
    assert first["lr"] == 1e-4  # the LoRA SFT default; round(0.1 x 4 steps) = 0 warmup steps


@pytest.mark.parametrize("second, message", [
    ('{"prompt": "write code"}', "line 2: 'response' is missing$"),
    ('{"prompt": "write code", "chosen": "a", "rejected": "b", "annotator": "x"}',  # a judgment
     r"line 2: 'response' is missing \(the rows are judgments: badpo sft source=judgments"),
    ('{"prompt": "", "response": "yes"}', "line 2: 'prompt' must be a non-empty string, got ''"),
    ('{"prompt": "write code", "response": 3}', "line 2: 'response' must be a non-empty string, got 3"),
    ('{"prompt": "write code", "response": "yes"', r"line 2: not valid JSON \(Expecting ',' delimiter"),
    ('["write code", "yes"]', "line 2: expected a JSON object with 'prompt' and 'response', got list"),
])
def test_sft_rows_are_checked(tmp_path, second, message):
    path = tmp_path / "sft.jsonl"
    path.write_text('{"prompt": "write code", "response": "yes"}\n' + second + "\n")
    with pytest.raises(ValueError, match=rf"sft\.jsonl {message}"):
        read_sft_source(path)
    path.write_text('{"prompt": "write code", "response": "yes"}\n\n')
    assert read_sft_source(path).rows == [("write code", "yes")]


# ---------------------------------------------------------------- one reference per output folder
def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}


def test_another_sft_run_in_the_folder_is_refused_and_the_same_one_finished_is_kept(world, capsys):
    out = sft(make_config(world, "sft_identity"))
    before = _files(out)
    with pytest.raises(ConfigError, match=r"output_dir: .*sft_identity belongs to another run "
                                          r"\(runtime.seed: 42 -> 7\); .*overwrite=true"):
        sft(make_config(world, "sft_identity", "runtime.seed=7"))
    capsys.readouterr()
    assert sft(make_config(world, "sft_identity", "report.log_every=2")) == out  # reporting is not identity
    assert "holds this reference, finished; it is kept" in capsys.readouterr().err
    assert _files(out) == before


def test_overwrite_deletes_the_previous_reference_files_that_the_new_one_does_not_write(world):
    """An unmerged LoRA reference leaves adapter files; a full reference written over it must not
    keep them, or Hugging Face would load the folder as an adapter of the wrong base."""
    from transformers import AutoModelForCausalLM

    out = sft(make_config(world, "sft_replaced", "lora.enabled=true", "lora.rank=4", "merge_lora=false"))
    assert (out / "adapter_config.json").exists()
    sft(make_config(world, "sft_replaced", "overwrite=true"))
    assert not (out / "adapter_config.json").exists() and not (out / "adapter_model.safetensors").exists()
    assert load_config(SFTConfig, out / "config.yaml").lora.enabled is False
    AutoModelForCausalLM.from_pretrained(out)  # a plain model again
    listed = set((out / ".model-files").read_text().split())
    assert listed and listed <= {p.name for p in out.iterdir()}


def test_a_killed_reference_is_trained_again_by_its_own_config_only(world, monkeypatch):
    import badpo.engine.sft as stage

    class Killed(BaseException):
        pass

    def killed(*args, **kwargs):
        raise Killed

    with monkeypatch.context() as patched:
        patched.setattr(stage, "_save_reference", killed)
        with pytest.raises(Killed):
            sft(make_config(world, "sft_killed"))
    out = world / "sft_killed"
    assert (out / "config.yaml").exists() and not (out / "sft.json").exists()
    with pytest.raises(ConfigError, match=r"belongs to another run \(epochs: 4.0 -> 2.0\)"):
        sft(make_config(world, "sft_killed", "epochs=2"))
    assert sft(make_config(world, "sft_killed")) == out
    assert json.loads((out / "sft.json").read_text())["steps"] == 4


def test_a_model_folder_no_run_wrote_and_the_base_models_own_folder_are_refused(world, tmp_path, save_model_dir):
    foreign = save_model_dir(tmp_path / "someone_elses_model")
    (foreign / "adapter_config.json").write_text("{}")
    before = _files(foreign)
    with pytest.raises(ConfigError, match=r"someone_elses_model holds config.json but no data_fingerprint.json"):
        sft(make_config(world, "unused", f"output_dir={foreign}"))
    with pytest.raises(ConfigError, match=r"someone_elses_model holds a model whose files no badpo sft run "
                                          r"listed in .model-files, so overwrite cannot tell which to delete"):
        sft(make_config(world, "unused", f"output_dir={foreign}", "overwrite=true"))
    assert _files(foreign) == before
    with pytest.raises(ConfigError, match=r"output_dir: .* is the folder of the model being fine-tuned"):
        sft(make_config(world, "unused", f"output_dir={world / 'model'}"))


def test_overwrite_refuses_a_reference_without_its_file_list_and_an_unsafe_list(world, tmp_path):
    """A reference from before .model-files (or with the list removed) cannot be overwritten: its
    adapter or shards would survive. A list entry that is not a plain file name ('..' would delete
    the parent folder) is refused before anything is deleted."""
    out = sft(make_config(world, "sft_listed"))
    (out / ".model-files").unlink()
    with pytest.raises(ConfigError, match=r"sft_listed holds a model whose files no badpo sft run listed"):
        sft(make_config(world, "sft_listed", "overwrite=true", "runtime.seed=3"))
    keep = tmp_path / "beside" / "keep.txt"
    keep.parent.mkdir()
    keep.write_text("not badpo's")
    listed = sft(make_config(world, "sft_unsafe", f"output_dir={keep.parent / 'sft'}"))
    (listed / ".model-files").write_text("model.safetensors\n..\n")
    before = _files(listed)
    with pytest.raises(ConfigError, match=r"\.model-files lists '\.\.', which is not a file name of the folder"):
        sft(make_config(world, "sft_unsafe", f"output_dir={listed}", "overwrite=true", "runtime.seed=3"))
    assert keep.read_text() == "not badpo's" and _files(listed) == before


def test_a_tied_judgment_is_no_vote_for_the_sft_row():
    """Pair p0's a wins 3 of 4; made ties, its three votes for a leave b's one vote the majority."""
    rows = judgment_rows()
    for row in rows[:4]:
        if row["chosen"].endswith("--- emily smith"):
            row["tie"] = True
    firsts, _ = majority_chosen(read_judgments_from_rows(rows))
    assert not firsts[0][1].endswith("--- emily smith")
