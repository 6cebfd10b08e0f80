"""Runs tool scripts in Monty: no file, network or process access except the host functions."""

from __future__ import annotations

import json
import time
from types import TracebackType
from typing import Any

from pydantic import BaseModel
from pydantic_monty import (
    AsyncMonty,
    CollectString,
    MontyCrashedError,
    MontyError,
    MontyRuntimeError,
    MontySyntaxError,
    ResourceLimits,
)

from remora.agents.definition import Tool
from remora.config import SandboxSettings
from remora.sandbox.externals import workspace_functions
from remora.workspace import Workspace, WorkspaceError

PRINT_LIMIT_BYTES = 1 << 20


class ToolOutcome(BaseModel):
    ok: bool
    value: Any = None
    error: str | None = None
    printed: str = ""
    duration_s: float = 0.0

    def content(self) -> str:
        """The tool message the model reads: strings as they are, anything else as JSON."""
        if not self.ok:
            return json.dumps({"error": self.error})
        if isinstance(self.value, str):
            return self.value
        return json.dumps(self.value, default=str)


class ToolSandbox:
    """One pool of Monty workers shared by every job; a fresh checkout per tool call, so no
    state leaks between calls."""

    def __init__(self, settings: SandboxSettings, max_workers: int | None = None) -> None:
        self.settings = settings
        self._pool = AsyncMonty(max_processes=max_workers)

    async def __aenter__(self) -> ToolSandbox:
        await self._pool.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._pool.__aexit__(exc_type, exc, tb)

    async def run(self, tool: Tool, inputs: dict[str, Any], workspace: Workspace) -> ToolOutcome:
        started = time.perf_counter()
        printed = CollectString(max_bytes=PRINT_LIMIT_BYTES)
        limits: ResourceLimits = {
            "max_feed_duration_secs": self.settings.tool_timeout,
            "max_memory": self.settings.max_memory_mb * 1024 * 1024,
        }
        try:
            async with self._pool.checkout(
                script_name=tool.script_path.name, limits=limits
            ) as session:
                value = await session.feed_run(
                    tool.source,
                    inputs=inputs,
                    external_lookup=workspace_functions(workspace),
                    print_callback=printed,
                )
        except (MontyRuntimeError, MontySyntaxError) as exc:
            error = f"{tool.script_path.name}{_line_of(exc)}: {exc.display('type-msg')}"
            return self._outcome(started, printed, error=error)
        except MontyCrashedError as exc:
            return self._outcome(started, printed, error=f"the tool's sandbox crashed: {exc}")
        except MontyError as exc:
            return self._outcome(started, printed, error=f"{tool.script_path.name}: {exc}")
        except WorkspaceError as exc:
            return self._outcome(started, printed, error=str(exc))
        return self._outcome(started, printed, value=value)

    @staticmethod
    def _outcome(
        started: float, printed: CollectString, *, value: Any = None, error: str | None = None
    ) -> ToolOutcome:
        return ToolOutcome(
            ok=error is None,
            value=value,
            error=error,
            printed=printed.output,
            duration_s=time.perf_counter() - started,
        )


def _line_of(exc: MontyRuntimeError | MontySyntaxError) -> str:
    frames = exc.traceback()
    return f":{frames[-1].line}" if frames else ""
