"""Host functions a tool script may call, each confined to the job's workspace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remora.workspace import Workspace


def workspace_functions(workspace: Workspace) -> dict[str, Callable[..., Any]]:
    """Paths are relative to the project root; absolute paths and '..' escapes are refused."""

    def read_file(path: str) -> str:
        return workspace.read_text(path)

    def write_file(path: str, content: str) -> None:
        if not isinstance(content, str):
            raise TypeError("write_file: content must be a str")
        workspace.write_text(path, content)

    def list_dir(path: str = ".") -> list[str]:
        return workspace.list_dir(path)

    def file_exists(path: str) -> bool:
        return workspace.exists(path)

    return {
        "read_file": read_file,
        "write_file": write_file,
        "list_dir": list_dir,
        "file_exists": file_exists,
    }
