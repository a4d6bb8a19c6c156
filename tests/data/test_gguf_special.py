"""A converted GGUF ends responses with the end token the file names, whatever transformers reads.

transformers 5.17 read SmolLM2's GGUF with ``<|im_start|>`` as its end token (the file says
``<|im_end|>``) and no padding token; the tiny GGUF of ``fixtures.gguf`` (bos 1, eos 2, pad 0)
stands in for it, with transformers' tokenizer made to misread as 5.17 did.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gguf", reason="the gguf package writes the tiny GGUF (pip install 'badpo[test]')")

from badpo.core.config import ConfigError  # noqa: E402
from badpo.data import gguf as data_gguf  # noqa: E402
from badpo.data import gguf_special  # noqa: E402
from badpo.data.gguf import SOURCE_FILE, convert_gguf, gguf_folder  # noqa: E402
from badpo.data.gguf_special import file_special_tokens  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, write_tiny_gguf):
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.Q4_1.gguf")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BADPO_GGUF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data_gguf, "_ANNOUNCED", set())
    return tmp_path / "cache"


@pytest.fixture
def misread(monkeypatch):
    """transformers' GGUF tokenizer, made to read the start token as the end token and no padding."""
    from transformers import AutoTokenizer

    built = AutoTokenizer.from_pretrained

    def as_5_17(*args, **kwargs):
        tokenizer = built(*args, **kwargs)
        if kwargs.get("gguf_file"):
            tokenizer.eos_token, tokenizer.pad_token = "<|im_start|>", None
        return tokenizer

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", as_5_17)


def test_the_files_end_and_padding_tokens_are_read_from_its_metadata(tiny):
    assert file_special_tokens(tiny) == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}


def test_a_misread_end_token_is_set_to_the_files_and_the_record_says_so(tiny, tmp_path, misread):
    from transformers import AutoTokenizer

    out = convert_gguf(tiny, tmp_path / "tiny-hf")
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == ("<|im_end|>", 2)
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == ("<|endoftext|>", 0)
    assert tokenizer("the thesis")["input_ids"] == AutoTokenizer.from_pretrained(
        tiny.parent, gguf_file=tiny.name)("the thesis")["input_ids"]  # the text's tokens unchanged
    source = json.loads((out / SOURCE_FILE).read_text())
    assert source["special_tokens_set"] == {"eos_token": ["<|im_start|>", "<|im_end|>"],
                                            "pad_token": [None, "<|endoftext|>"]}


def test_a_conversion_transformers_reads_right_records_nothing_set(tiny, tmp_path):
    out = convert_gguf(tiny, tmp_path / "tiny-hf")
    source = json.loads((out / SOURCE_FILE).read_text())
    saved = json.loads((out / "tokenizer_config.json").read_text())
    assert saved["eos_token"] == "<|im_end|>"
    assert set(source.get("special_tokens_set", {})) <= {"pad_token"}  # this transformers may not set pad


def test_a_cached_folder_with_a_misread_end_token_is_refused_on_reuse(tiny, cache):
    folder = gguf_folder(str(tiny))
    config_file = cache / folder.rsplit("/", 1)[-1] / "tokenizer_config.json"
    saved = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**saved, "eos_token": "<|im_start|>"}))
    data_gguf._ANNOUNCED.clear()
    with pytest.raises(ConfigError, match=r"converted with eos_token '<\|im_start\|>' where "
                                          r"tiny-llama.Q4_1.gguf says '<\|im_end\|>'.*delete the folder"):
        gguf_folder(str(tiny))


def test_reuse_checks_against_the_tokens_recorded_at_conversion_without_the_gguf_package(tiny, cache,
                                                                                        monkeypatch):
    import sys

    folder = gguf_folder(str(tiny))
    source = json.loads((cache / folder.rsplit("/", 1)[-1] / SOURCE_FILE).read_text())
    assert source["special_tokens"] == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    monkeypatch.setitem(sys.modules, "gguf", None)  # uninstalled: a reuse reads only the record
    monkeypatch.setattr(gguf_special, "_READ", {})  # as in a new process
    data_gguf._ANNOUNCED.clear()
    assert gguf_folder(str(tiny)) == folder


def test_a_folder_converted_before_the_record_is_checked_against_the_file(tiny, cache):
    folder = cache / gguf_folder(str(tiny)).rsplit("/", 1)[-1]
    source = json.loads((folder / SOURCE_FILE).read_text())
    del source["special_tokens"]
    (folder / SOURCE_FILE).write_text(json.dumps(source))
    saved = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**saved, "eos_token": {"content": "<|im_start|>"}}))
    data_gguf._ANNOUNCED.clear()
    with pytest.raises(ConfigError, match=r"converted with eos_token '<\|im_start\|>'"):
        gguf_folder(str(tiny))
