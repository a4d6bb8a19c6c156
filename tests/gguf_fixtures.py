"""A tiny llama-architecture GGUF written with the ``gguf`` package, so that the GGUF tests need
no download: 2 layers, hidden size 32, a byte-level BPE vocabulary of 264 tokens (the tokenizer
kind of SmolLM2's GGUF, ``tokenizer.ggml.model = gpt2``) and a ChatML chat template.

The 2-D weights are quantized as in the real Q4_1 file (Q4_1 for the layers, Q8_0 for the
embedding), so loading it exercises the dequantization; the norms stay F32. The vocabulary is
every byte plus a few merges and three control tokens, which is what transformers' GGUF tokenizer
builder needs to rebuild a ``GPT2Tokenizer``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2 (CONTROL)
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "s"), ("Ġ", "a")]
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)
HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 32, 64, 2, 4, 2


def byte_alphabet() -> list[str]:
    """The 256 printable stand-ins of GPT-2's byte-level BPE, in byte order."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    spelled = bytes_to_unicode()
    return [spelled[byte] for byte in range(256)]


def vocabulary() -> tuple[list[str], list[int]]:
    """Tokens and their GGUF token types (3 = control, 1 = normal)."""
    tokens = SPECIALS + byte_alphabet() + ["".join(pair) for pair in MERGES]
    return tokens, [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))


def _weights(vocab: int, rng: np.random.Generator) -> dict[str, tuple[np.ndarray, str]]:
    """GGUF tensor name -> (values in torch order [out, in], storage type)."""
    head = HIDDEN // HEADS

    def matrix(rows: int, cols: int) -> np.ndarray:
        return rng.normal(0.0, 0.2, (rows, cols)).astype(np.float32)

    tensors = {"token_embd.weight": (matrix(vocab, HIDDEN), "Q8_0"),
               "output_norm.weight": (1 + matrix(1, HIDDEN)[0] * 0.1, "F32")}
    for layer in range(LAYERS):
        block = {"attn_norm": (1 + matrix(1, HIDDEN)[0] * 0.1, "F32"),
                 "ffn_norm": (1 + matrix(1, HIDDEN)[0] * 0.1, "F32"),
                 "attn_q": (matrix(HEADS * head, HIDDEN), "Q4_1"),
                 "attn_k": (matrix(KV_HEADS * head, HIDDEN), "Q4_1"),
                 "attn_v": (matrix(KV_HEADS * head, HIDDEN), "Q4_1"),
                 "attn_output": (matrix(HIDDEN, HEADS * head), "Q4_1"),
                 "ffn_gate": (matrix(FFN, HIDDEN), "Q4_1"),
                 "ffn_up": (matrix(FFN, HIDDEN), "Q4_1"),
                 "ffn_down": (matrix(HIDDEN, FFN), "Q4_1")}
        tensors.update({f"blk.{layer}.{name}.weight": value for name, value in block.items()})
    return tensors


def write_tiny_gguf(path: Path, architecture: str = "llama", seed: int = 0,
                    quantization: str | None = None) -> Path:
    """Write the tiny model to ``path``. ``architecture`` other than llama (with the same
    tensors) and ``quantization`` (every 2-D weight stored as that ggml type's raw blocks) make
    files transformers cannot read, for the error tests."""
    import gguf

    tokens, types = vocabulary()
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny llama")
    writer.add_context_length(128)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([" ".join(pair) for pair in MERGES])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(0)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)
    rng = np.random.default_rng(seed)
    for name, (values, kind) in _weights(len(tokens), rng).items():
        if quantization is not None and values.ndim == 2:
            blocks = np.zeros((values.shape[0], _row_bytes(quantization, values.shape[1])), np.uint8)
            writer.add_tensor(name, blocks, raw_dtype=gguf.GGMLQuantizationType[quantization])
        elif kind == "F32":
            writer.add_tensor(name, values)
        else:
            qtype = gguf.GGMLQuantizationType[kind]
            writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _row_bytes(quantization: str, columns: int) -> int:
    """Bytes of one row of ``columns`` values stored as that ggml type's blocks."""
    import gguf

    block_size, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[quantization]]
    return columns // block_size * type_size
