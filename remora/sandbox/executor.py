"""Runs tool scripts in Monty: no file, network or process access except the host functions."""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio.from_thread
import anyio.lowlevel
from pydantic import BaseModel
from pydantic_monty import (
    AsyncMonty,
    CollectString,
    MontyCrashedError,
    MontyError,
    MontyRuntimeError,
    MontySyntaxError,
    MontyTypingError,
)

from remora.agents.limits import Limits
from remora.agents.toolscript import Tool

PRINT_LIMIT_BYTES = 1 << 20
_CHECK_WRAPPER = "async def __remora_tool__() -> None:\n"
_DIAGNOSTIC = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<column>\d+): ", re.MULTILINE)


class ToolOutcome(BaseModel):
    ok: bool
    value: Any = None
    error: str | None = None
    printed: str = ""
    duration_s: float = 0.0
    crashed: bool = False
    """The sandbox worker died: the environment's failure, not the script's."""

    def content(self) -> str:
        """The tool message the model reads: strings as they are, anything else as JSON."""
        if not self.ok:
            return json.dumps({"error": self.error})
        if isinstance(self.value, str):
            return self.value
        return json.dumps(self.value, default=str)


MAX_POOL = 64
"""Most Monty workers a pool sized to the concurrency grows to (`pool_size`)."""


def pool_size(concurrency: int) -> int:
    """One worker per job in flight, up to `MAX_POOL`."""
    return max(1, min(concurrency, MAX_POOL))


class ToolSandbox:
    """One pool of Monty workers shared by every job. Each tool call gets a fresh checkout, so
    no state leaks between calls or jobs, and no worker is held while a job waits for its next
    turn. A tool call holds its worker while its host functions wait (a command, a completion
    from the model), so the pool grows on demand to `max_workers` (about 8 MB each): sized to
    the jobs in flight, tool calls never queue behind others' waits.
    """

    def __init__(self, max_workers: int | None = None) -> None:
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

    async def run(
        self,
        tool: Tool,
        inputs: dict[str, Any],
        host: dict[str, Callable[..., Any]],
        limits: Limits,
    ) -> ToolOutcome:
        started = time.perf_counter()
        printed = CollectString(max_bytes=PRINT_LIMIT_BYTES)
        name = tool.script_path.name
        try:
            async with self._pool.checkout(script_name=name, limits=limits.monty()) as session:
                value = await session.feed_run(
                    tool.source,
                    inputs=inputs,
                    external_lookup=on_this_thread(host),
                    print_callback=printed,
                )
        except (MontyRuntimeError, MontySyntaxError) as exc:
            error = f"{name}{_line_of(exc)}: {exc.display('type-msg')}"
            return _outcome(started, printed, error=error)
        except MontyCrashedError as exc:
            crash = _outcome(started, printed, error=f"{name}: the sandbox worker crashed: {exc}")
            return crash.model_copy(update={"crashed": True})
        except MontyError as exc:
            return _outcome(started, printed, error=f"{name}: {exc}")
        return _outcome(started, printed, value=value)

    async def type_check(self, tool: Tool, host_stubs: str) -> list[str]:
        """Monty's type checker over the script, against stubs of everything it is given: the
        host functions its agent declares (`host_stubs`) and its inputs.

        The script is checked as the body of a function that is never called, so checking runs
        none of it. Diagnostics come back as `path:line:column: message`.
        """
        body = "".join(f"    {line}\n" for line in tool.source.splitlines()) or "    pass\n"
        stubs = host_stubs + "\n" + tool.type_stubs()
        async with self._pool.checkout(
            script_name=tool.script_path.name,
            type_check=True,
            type_check_stubs=stubs,
            type_check_format="concise",
        ) as session:
            try:
                await session.feed_run(_CHECK_WRAPPER + body + "    return None\n")
            except MontyTypingError as exc:
                return _relocate(exc.display(), tool)
            except (MontyRuntimeError, MontySyntaxError) as exc:
                line = max(int(_line_of(exc)[1:] or 2) - 1, 1)
                return [f"{tool.script_path}:{line}:1: {exc.display('type-msg')}"]
        return []


def _relocate(diagnostics: str, tool: Tool) -> list[str]:
    """Map the wrapper's line and column numbers back to the script's."""
    found = []
    for line in diagnostics.splitlines():
        match = _DIAGNOSTIC.match(line)
        if not match:
            continue
        row = max(int(match["line"]) - 1, 1)
        column = max(int(match["column"]) - 4, 1)
        found.append(f"{tool.script_path}:{row}:{column}: {line[match.end() :]}")
    return found


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


def on_this_thread(host: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """The host functions, each run on the calling event loop's thread. Monty calls a host
    function from a thread of its own (a plain function runs there; an async one only starts
    there), so host code would run beside Remora's other code: CPython 3.11's `ast` is not
    thread-safe (three test jobs on rich 13.9.4 failed with "SystemError: AST constructor
    recursion depth mismatch"), nor are the caches Remora's host code shares."""
    token = anyio.lowlevel.current_token()
    loop_thread = threading.get_ident()

    def bound(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == loop_thread:
                return function(*args, **kwargs)
            return anyio.from_thread.run_sync(
                functools.partial(function, *args, **kwargs), token=token
            )

        return call

    return {name: bound(function) for name, function in host.items()}


def _line_of(exc: MontyRuntimeError | MontySyntaxError) -> str:
    frames = exc.traceback()
    return f":{frames[-1].line}" if frames else ""
