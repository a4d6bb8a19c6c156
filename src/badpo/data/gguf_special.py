"""A converted GGUF's special tokens, held to what the file itself says.

transformers rebuilds a GGUF's tokenizer from the file's metadata, and how it maps the special
token ids has changed between versions: 5.17 reads SmolLM2-135M-Instruct's GGUF (whose metadata
says ``eos_token_id = 2``, ``<|im_end|>``) with ``<|im_start|>`` as its end token and no padding
token, where 5.24 reads ``<|im_end|>`` for both. badpo appends the end token to every response it
trains on and stops sampling at it, so a misread end token trains and reads out another model:
the H200 runs of 2026-11-26 (transformers 5.17) carried a reference whose body-fixed length
preference differed from the CPU's (5.24) by 0.08–0.12 at every seed. So a conversion sets the end
and padding tokens to the file's ids, and a folder converted before this check is refused on reuse.
"""

from __future__ import annotations

import json
from pathlib import Path

from badpo.core.config import ConfigError

# tokenizer attribute -> the GGUF metadata key holding its id; the two badpo relies on: the end
# token ends every trained response and stops sampling, the padding token fills batches
GGUF_SPECIAL_IDS = {"eos_token": "tokenizer.ggml.eos_token_id",
                    "pad_token": "tokenizer.ggml.padding_token_id"}
_READ: dict[str, dict[str, str]] = {}  # content hash -> the file's special tokens, per process
SOURCE_FILE = "gguf_source.json"  # written into each converted folder: where it came from


def gguf_module(path: Path, where: str = ""):
    """The ``gguf`` package, which reads the file; its absence is one line naming the extra."""
    try:
        import gguf
    except ImportError:
        raise ImportError(f"{where}reading {str(path)!r} needs the gguf package; "
                          'pip install -e ".[gguf]" in badpo\'s clone') from None
    return gguf


def file_special_tokens(path: Path, digest: str = "", where: str = "") -> dict[str, str]:
    """{attribute: token text} for each of ``GGUF_SPECIAL_IDS`` the file's metadata names; an id
    outside the vocabulary, or a token that is not UTF-8, is one line naming the file and key."""
    if digest and digest in _READ:
        return _READ[digest]
    reader = gguf_module(path, where).GGUFReader(str(path))
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    found: dict[str, str] = {}
    for attribute, meta_key in GGUF_SPECIAL_IDS.items():
        field = reader.fields.get(meta_key)
        if field is None or not field.data or tokens is None:
            continue
        token_id = int(field.parts[field.data[0]][0])
        if not 0 <= token_id < len(tokens.data):
            raise ConfigError(f"{where}{str(path)!r}: {meta_key} = {token_id} is outside its vocabulary of "
                              f"{len(tokens.data)} tokens")
        try:
            found[attribute] = bytes(tokens.parts[tokens.data[token_id]]).decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{where}{str(path)!r}: {meta_key} = {token_id} names a token that is not "
                              "UTF-8 text") from None
    if digest:
        _READ[digest] = found
    return found


def mend_special_tokens(tokenizer, path: Path, digest: str = "") -> dict[str, list]:
    """Set the tokenizer's end and padding tokens to the file's where transformers read others;
    returns {attribute: [what transformers read, what the file says]} for each one set."""
    mended = {}
    for attribute, token in file_special_tokens(path, digest).items():
        read = getattr(tokenizer, attribute)
        if read != token:
            setattr(tokenizer, attribute, token)
            mended[attribute] = [read, token]
    return mended


def check_converted(folder: Path, path: Path, digest: str, where: str = "") -> None:
    """Refuse a converted folder whose saved tokenizer names other end or padding tokens than the
    file: converted before badpo set them (by a transformers that misread them). The file's tokens
    are those the conversion recorded (``special_tokens`` of ``gguf_source.json``), or, for a folder
    converted before it recorded them, read from the file."""
    try:
        saved = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # no tokenizer config of this shape: nothing saved to compare
    try:
        recorded = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8")).get("special_tokens")
    except (OSError, ValueError, AttributeError):
        recorded = None
    expected = recorded if isinstance(recorded, dict) else file_special_tokens(path, digest, where)
    for attribute, token in expected.items():
        value = saved.get(attribute)
        value = value.get("content") if isinstance(value, dict) else value
        if value != token:
            raise ConfigError(f"{where}{str(folder)!r} was converted with {attribute} {value!r} where "
                              f"{path.name} says {token!r} (converted before badpo set the file's special "
                              "tokens); delete the folder and run again")
