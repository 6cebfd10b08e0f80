"""Context providers: facts about the project that an agent's prompt can include
(`context: [ruff_config]` in its YAML, then `{{ context.ruff_config }}` in node_context)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Literal

from remora.discovery.nodes import Node

ProviderName = Literal["ruff_config"]


RUFF_CONFIG_FILES = (".ruff.toml", "ruff.toml")
"""In ruff's own order: in one folder, .ruff.toml wins over ruff.toml, which wins over
pyproject.toml (measured with `ruff check --show-settings`)."""


def ruff_config(node: Node, root: Path) -> str:
    """The ruff configuration that applies to the node's file, as ruff finds it: the nearest
    .ruff.toml, ruff.toml or pyproject.toml with a [tool.ruff] table, from the file's folder up
    to the project root. A file that is a symbolic link leading outside the project is not
    read (its text would reach the model's prompt; ruff in the sandbox cannot see it either)."""
    return _ruff_config_from((root / node.file).parent.resolve(), root.resolve())


@lru_cache(maxsize=256)
def _ruff_config_from(folder: Path, root: Path) -> str:
    for candidate in (folder, *folder.parents):
        for name in RUFF_CONFIG_FILES:
            path = candidate / name
            if path.is_file():
                if not path.resolve().is_relative_to(root):
                    return f"# {_shown(path, root)}: a link outside the project, not read"
                return f"# {_shown(path, root)}\n{path.read_text(encoding='utf-8').strip()}"
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file() and pyproject.resolve().is_relative_to(root):
            section = _ruff_tables(pyproject.read_text(encoding="utf-8"))
            if section:
                return f"# {_shown(pyproject, root)}\n{section}"
        if candidate == root or not candidate.is_relative_to(root):
            break
    return "# no ruff configuration: ruff's defaults apply"


def _ruff_tables(text: str) -> str:
    """The [tool.ruff] and [tool.ruff.*] tables of a pyproject.toml, as written."""
    kept: list[str] = []
    inside = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            inside = stripped.startswith(("[tool.ruff]", "[tool.ruff."))
        if inside:
            kept.append(line)
    return "\n".join(kept).strip()


def _shown(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


PROVIDERS: dict[str, Callable[[Node, Path], str]] = {"ruff_config": ruff_config}


def provide(names: list[ProviderName], node: Node, root: Path) -> dict[str, str]:
    return {name: PROVIDERS[name](node, root) for name in names}
