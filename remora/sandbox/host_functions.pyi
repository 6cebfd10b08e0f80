# Host functions every tool script can call. Paths are relative to the project root; the job's
# workspace keeps writes until the user applies them (remora analyze --fix).
from typing import Any

def read_file(path: str) -> str: ...
def read_original(path: str) -> str | None:
    """The file as the job first saw it, before its own writes (None: it did not exist)."""

def write_file(path: str, content: str) -> None: ...
def list_dir(path: str = ".") -> list[str]: ...
def file_exists(path: str) -> bool: ...
def node_info() -> dict[str, Any]:
    """name, qualified_name, type, file, start_line, end_line, decorators, docstring; for
    functions also signature, parameters (name, annotation, default, kind), return_annotation,
    is_async; for classes bases."""

async def run_command(name: str, args: list[str]) -> dict[str, Any]:
    """Run an allow-listed program in the job's workspace directory. Returns command,
    exit_code (None on timeout), timed_out, stdout, stderr, truncated."""
