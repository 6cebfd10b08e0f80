"""The base weights an adapter is trained on: the GGUF file the embedded engine runs, converted
once to a Hugging Face folder and cached (no download), or a Hugging Face folder the user names.

The conversion dequantizes every tensor to float32 with transformers' GGUF reader (the `gguf`
package): for the packaged Gemma 3 270M Q4_K_M file it takes about 1.5 minutes and 3 GB of
memory on 2 cores, once per file (keyed by the file's sha256)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remora.errors import UserInputError
from remora.models.local.model_files import file_sha256

_READY = ".remora-ready"


@dataclass(frozen=True)
class BaseWeights:
    folder: Path
    """A Hugging Face folder (config.json, weights, tokenizer)."""
    source: Path
    """What the user's configuration named: the GGUF file, or the folder itself."""
    sha256: str
    """Of the GGUF file, or of the folder's config and weight files: the card's base identity."""
    architecture: str
    """llama.cpp's name for it (`gemma3`), what a GGUF adapter must declare."""


def base_weights(source: Path, cache: Path, *, say: Callable[[str], None]) -> BaseWeights:
    """`source` as a Hugging Face folder: itself when it is one, else the GGUF file converted
    into `cache/SHA256[:16]/` (reused when there)."""
    if source.is_dir():
        config = source / "config.json"
        if not config.is_file():
            raise UserInputError(f"--base-model {source}: a folder without config.json")
        hasher = hashlib.sha256()
        for file in sorted(source.iterdir()):
            if file.suffix in (".json", ".safetensors", ".bin") and file.is_file():
                hasher.update(file.name.encode() + file_sha256(file).encode())
        return BaseWeights(source, source, hasher.hexdigest(), _architecture(config))
    if not source.is_file():
        raise UserInputError(f"--base-model {source}: no such file or folder")
    digest = file_sha256(source)
    folder = cache / digest[:16]
    if not (folder / _READY).is_file():
        say(f"converting {source.name} to float32 weights for training, once: {folder}")
        _convert(source, folder)
    return BaseWeights(folder, source, digest, _architecture(folder / "config.json"))


def _convert(gguf: Path, folder: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model: Any = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # Dequantized on load: what remains is a plain float32 model, saved as one.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(partial)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(partial)
    (partial / _READY).write_text(gguf.name + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def _architecture(config: Path) -> str:
    model_type = str(json.loads(config.read_text()).get("model_type", ""))
    return {"gemma3_text": "gemma3", "gemma3": "gemma3"}.get(model_type, model_type)
