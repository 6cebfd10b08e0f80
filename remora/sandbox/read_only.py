"""Read-only commands run once per run: `ruff check --output-format json FILE` gives the same
answer to every job of FILE's nodes, so the first job to ask runs it and the others share the
result. Which commands qualify is configuration (`sandbox.commands.read_only`), never a guess:
a command shares only when it is exactly one of those entries followed by file operands, the
key is the content of those files as the job sees them, and a job that has written any other
file (a configuration file, say) runs its own."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio


def shared_key(
    entries: Sequence[str],
    argv: list[str],
    content: Callable[[str], str | None],
    written: frozenset[str],
) -> str | None:
    """The key a command's result is shared under, or None when it is not shared. `content`
    gives a file's text as the job sees it (None: not a file), `written` the files the job
    wrote (keys as `content` takes them)."""
    for entry in entries:
        prefix = entry.split()
        operands = argv[len(prefix) :]
        if argv[: len(prefix)] != prefix or not operands:
            continue
        if any(operand.startswith("-") for operand in operands):
            return None  # an option after the entry (`--fix`) is not the listed command
        texts = [content(operand) for operand in operands]
        if any(text is None for text in texts) or written - set(operands):
            return None
        digest = hashlib.sha256(json.dumps([argv, texts]).encode()).hexdigest()
        return digest
    return None


class SharedResults:
    """One result per key for the run; jobs asking at once wait for the first one's."""

    def __init__(self) -> None:
        self._done: dict[str, dict[str, Any]] = {}
        self._running: dict[str, anyio.Event] = {}
        self.ran = 0
        self.shared = 0

    async def get(self, key: str, run: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        while key not in self._done:
            running = self._running.get(key)
            if running is None:
                break
            await running.wait()  # its job may be cancelled: then ask again
        if key in self._done:
            self.shared += 1
            return dict(self._done[key])
        event = self._running[key] = anyio.Event()
        try:
            result = await run()
            self.ran += 1
            self._done[key] = result
            return dict(result)
        finally:
            del self._running[key]
            event.set()
