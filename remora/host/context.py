"""What a job's host functions close over (`HostContext`), and the inputs a tool script sees
that the model never does (`injected_context`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remora.agents.toolscript import Tool
from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace
from remora.findings.results import ErrorCode, JobError
from remora.protocol.completion import Completion, CompletionRequest, DraftsRequest
from remora.sandbox.commands import CommandMissing, CommandRunner, SandboxFailed

Complete = Callable[[CompletionRequest], Awaitable[Completion]]
"""The job's model continuing (or scoring) a text (protocol/completion.py)."""
CompleteDrafts = Callable[[DraftsRequest], Awaitable[list[Completion]]]
"""The job's model continuing a text once per temperature (protocol/completion.py)."""


@dataclass(frozen=True)
class HostContext:
    """One job's view of the world, as its host functions see it: paths are relative to the
    project root (the workspace refuses absolute paths and '..' escapes).

    Failures of the environment (a program missing, a command timing out, an unreadable
    project file, or what a script reports with `environment_error`) are added to `faults`:
    the runner ends the job as an error, whatever the script does with the exception.
    """

    workspace: Workspace
    node: Node
    commands: CommandRunner
    faults: list[JobError] = field(default_factory=list)
    completion: Complete | None = None
    """None where no model runs (`remora tool run`)."""
    drafting: CompleteDrafts | None = None

    def fault(self, code: ErrorCode, message: str) -> None:
        self.faults.append(JobError(code=code, message=message))

    async def reported(
        self, name: str, args: list[str], directory: Path, *, copy_back: bool = True
    ) -> dict[str, Any]:
        """The command's result; a missing program or a crashed sandbox: the job's error.
        `copy_back`: whether what the command leaves in `directory` is read afterwards (it
        always comes back into a workspace kept for inspection, --keep-workspaces)."""
        copy_back = copy_back or self.workspace.keep
        try:
            return await self.commands.run(
                name, args, directory, project=self.workspace.root, copy_back=copy_back
            )
        except CommandMissing as exc:
            self.fault(ErrorCode.REQUIREMENT_MISSING, str(exc))
            raise
        except SandboxFailed as exc:
            self.fault(ErrorCode.SANDBOX_CRASHED, str(exc))
            raise

    def timed_out(self, program: str) -> None:
        self.fault(
            ErrorCode.COMMAND_TIMEOUT,
            f"{program} took longer than sandbox.commands.timeout_s="
            f"{self.commands.settings.timeout_s}s",
        )

    def file_exists(self, path: str) -> bool:
        return self.workspace.exists(checked_path(path))

    def project_text(self, path: str) -> str:
        """A project file read from disk, not through the workspace (a file the job reads
        becomes a copy in every command's folder): for call sites and examples."""
        file = (self.workspace.root / path).resolve()
        inside = file.is_relative_to(self.workspace.root.resolve())
        # A regular file only: the repository is untrusted, and a FIFO would block the read.
        if not inside or not file.is_file() or file.stat().st_size > 500_000:
            raise ValueError(f"{path}: not read for call sites")
        return file.read_text(encoding="utf-8")


def checked_path(path: object) -> str:
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    return path


def injected_context(
    tool: Tool, node: Node, options: dict[str, Any], workspace: Workspace
) -> dict[str, Any]:
    """Inputs the script sees and the model never does: `node`, `options` and the context
    providers the tool's header asks for."""
    context: dict[str, Any] = {"node": node.model_dump(), "options": options}
    if "file_text" in tool.header.context:
        context["file_text"] = workspace.read_text(node.file)
    return context
