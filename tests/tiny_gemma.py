"""A tiny, randomly initialised Gemma 3 written as a GGUF file: the same architecture, tensor
names and tokenizer as the packaged 270M model (so llama.cpp loads it and transformers converts
it), with 2 layers of width 64. Built in the test, from nothing downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 64, 128, 2, 2, 1, 256
"""Head size 256 as in the 270M model: llama.cpp scales attention by 1/sqrt(head size), transformers
by 1/sqrt(query_pre_attn_scalar), which a GGUF file does not carry (256 by default)."""


def write_tiny_gemma(path: Path, *, seed: int = 0) -> Path:
    """A GGUF model at `path`; the tokenizer (262k words) is copied from the packaged model."""
    import gguf

    from remora.models.local.resolve import resolve_model

    tokenizer = gguf.GGUFReader(resolve_model().path)
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "gemma3")
    writer.add_string("general.name", "tiny gemma3")
    writer.add_uint32("gemma3.context_length", 32768)
    writer.add_uint32("gemma3.embedding_length", HIDDEN)
    writer.add_uint32("gemma3.block_count", LAYERS)
    writer.add_uint32("gemma3.feed_forward_length", FFN)
    writer.add_uint32("gemma3.attention.head_count", HEADS)
    writer.add_uint32("gemma3.attention.head_count_kv", KV_HEADS)
    writer.add_uint32("gemma3.attention.key_length", HEAD_DIM)
    writer.add_uint32("gemma3.attention.value_length", HEAD_DIM)
    writer.add_float32("gemma3.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_float32("gemma3.rope.freq_base", 1_000_000.0)
    writer.add_uint32("gemma3.attention.sliding_window", 512)
    for key, field in tokenizer.fields.items():
        if key.startswith("tokenizer."):
            _copy_field(writer, key, field)
    vocab = len(tokenizer.fields["tokenizer.ggml.tokens"].data)

    def weight(*shape: int, scale: float = 0.05) -> np.ndarray[Any, Any]:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm(size: int) -> np.ndarray[Any, Any]:
        # Gemma's GGUF files store 1 + the norm's weight.
        return (1.0 + rng.standard_normal(size) * 0.1).astype(np.float32)

    # Large enough for the logits (tied to the embeddings) to tell words apart: with the 0.05 of
    # the other weights every word is about as likely, and no adapter could change that.
    writer.add_tensor("token_embd.weight", weight(vocab, HIDDEN, scale=1.0))
    for layer in range(LAYERS):
        blk = f"blk.{layer}."
        writer.add_tensor(blk + "attn_norm.weight", norm(HIDDEN))
        writer.add_tensor(blk + "attn_q.weight", weight(HEADS * HEAD_DIM, HIDDEN))
        writer.add_tensor(blk + "attn_k.weight", weight(KV_HEADS * HEAD_DIM, HIDDEN))
        writer.add_tensor(blk + "attn_v.weight", weight(KV_HEADS * HEAD_DIM, HIDDEN))
        writer.add_tensor(blk + "attn_output.weight", weight(HIDDEN, HEADS * HEAD_DIM))
        writer.add_tensor(blk + "attn_q_norm.weight", norm(HEAD_DIM))
        writer.add_tensor(blk + "attn_k_norm.weight", norm(HEAD_DIM))
        writer.add_tensor(blk + "post_attention_norm.weight", norm(HIDDEN))
        writer.add_tensor(blk + "ffn_norm.weight", norm(HIDDEN))
        writer.add_tensor(blk + "ffn_gate.weight", weight(FFN, HIDDEN))
        writer.add_tensor(blk + "ffn_up.weight", weight(FFN, HIDDEN))
        writer.add_tensor(blk + "ffn_down.weight", weight(HIDDEN, FFN))
        writer.add_tensor(blk + "post_ffw_norm.weight", norm(HIDDEN))
    writer.add_tensor("output_norm.weight", norm(HIDDEN))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _copy_field(writer: Any, key: str, field: Any) -> None:
    import gguf

    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        writer.add_array(key, field.contents())
    elif kind == gguf.GGUFValueType.STRING:
        writer.add_string(key, field.contents())
    elif kind == gguf.GGUFValueType.BOOL:
        writer.add_bool(key, field.contents())
    elif kind == gguf.GGUFValueType.UINT32:
        writer.add_uint32(key, field.contents())
    elif kind == gguf.GGUFValueType.FLOAT32:
        writer.add_float32(key, field.contents())
    else:
        raise TypeError(f"{key}: GGUF type {kind} not copied")
