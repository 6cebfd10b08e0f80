"""A trained adapter on disk, in both formats the model runs with, and its card.

    ADAPTER/
      card.json                 what it is: base model and hash, data, scores, seed, time
      peft/                     PEFT format: what vLLM loads (`--lora-modules NAME=ADAPTER/peft`)
      adapter.gguf              GGUF LoRA: what llama.cpp (the embedded engine) loads

The GGUF file follows llama.cpp's adapter format: `general.type = adapter`, `adapter.type =
lora`, `adapter.lora.alpha` (float32), and per adapted weight `blk.N.attn_q.weight.lora_a`
(rank x in) and `.lora_b` (out x rank), the base tensor's name with a suffix. llama.cpp scales
the product by alpha / rank, as PEFT does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from remora.errors import UserInputError

_LLAMA_CPP_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.(.+)$")


def llama_cpp_name(module: str) -> str:
    """`model.layers.3.self_attn.q_proj` -> `blk.3.attn_q.weight` (Gemma 3's GGUF names)."""
    match = _LAYER.search(module)
    if match is None or match.group(2) not in _LLAMA_CPP_NAMES:
        raise UserInputError(f"no GGUF name known for the adapted layer {module}")
    return f"blk.{match.group(1)}.{_LLAMA_CPP_NAMES[match.group(2)]}.weight"


def write_gguf_adapter(
    path: Path,
    weights: Mapping[str, tuple[Any, Any]],
    *,
    architecture: str,
    alpha: float,
    name: str,
) -> None:
    """`weights`: module path -> (A, B) tensors (torch or numpy), as `LoraTrainer` gives them."""
    import gguf

    partial = path.with_name(path.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), architecture)
    writer.add_string("general.type", "adapter")
    writer.add_string("general.name", name)
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(alpha))
    for module, (lora_a, lora_b) in sorted(weights.items()):
        base = llama_cpp_name(module)
        writer.add_tensor(f"{base}.lora_a", _array(lora_a))
        writer.add_tensor(f"{base}.lora_b", _array(lora_b))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(path)


def _array(tensor: Any) -> np.ndarray[Any, Any]:
    if hasattr(tensor, "detach"):
        tensor = tensor.detach().float().cpu().numpy()
    return np.ascontiguousarray(tensor, dtype=np.float32)
