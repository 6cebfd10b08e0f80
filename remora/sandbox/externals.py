"""Host functions a tool script may call (declared for authors in host_functions.pyi), each
confined to the job's workspace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from remora.agents.toolscript import Tool
from remora.discovery.node_info import node_info as describe_node
from remora.discovery.nodes import Node
from remora.sandbox import python_checks
from remora.sandbox.commands import CommandRunner
from remora.workspace import Workspace

HOST_STUBS = (Path(__file__).parent / "host_functions.pyi").read_text(encoding="utf-8")


def injected_context(
    tool: Tool, node: Node, options: dict[str, Any], workspace: Workspace
) -> dict[str, Any]:
    """Inputs the script sees and the model never does: `node`, `options` and the context
    providers the tool's header asks for."""
    context: dict[str, Any] = {"node": node.model_dump(), "options": options}
    if "file_text" in tool.header.context:
        context["file_text"] = workspace.read_text(node.file)
    return context


def host_functions(
    workspace: Workspace, node: Node, commands: CommandRunner
) -> dict[str, Callable[..., Any]]:
    """Paths are relative to the project root; absolute paths and '..' escapes are refused."""

    def read_file(path: str) -> str:
        return workspace.read_text(_path(path))

    def read_original(path: str) -> str | None:
        return workspace.original_text(_path(path))

    def write_file(path: str, content: str) -> None:
        if not isinstance(content, str):
            raise TypeError("write_file: content must be a str")
        workspace.write_text(_path(path), content)

    def list_dir(path: str = ".") -> list[str]:
        return workspace.list_dir(_path(path))

    def file_exists(path: str) -> bool:
        return workspace.exists(_path(path))

    def node_info() -> dict[str, Any]:
        return describe_node(node)

    async def run_command(name: str, args: list[str]) -> dict[str, Any]:
        directory = workspace.directory()
        result = await commands.run(name, args, directory)
        workspace.sync_from_directory()
        return result

    return {
        "read_file": read_file,
        "read_original": read_original,
        "write_file": write_file,
        "list_dir": list_dir,
        "file_exists": file_exists,
        "node_info": node_info,
        "run_command": run_command,
        # Pure functions of their arguments: no workspace access, safe to share.
        "check_docstring": python_checks.check_docstring,
        "parse_docstring": python_checks.parse_docstring,
        "render_docstring": python_checks.render_docstring,
        "compare_python": python_checks.compare_python,
    }


def _path(path: object) -> str:
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    return path
