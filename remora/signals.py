"""SIGTERM handled like Ctrl-C: the run unwinds (tasks cancelled, workspaces removed, no
half-written file) and exits 143 instead of dying mid-write. Kept free of heavy imports so it
is installed before anything slow is imported."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from remora.errors import ExitCode

_terminated = threading.Event()


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM becomes what Ctrl-C is: while an event loop runs, asyncio's runner takes SIGINT
    by cancelling the main task, so the run unwinds through its `finally` clauses (raising in
    whatever frame the signal landed in could break the loop's own state and hang it); outside
    one, SIGINT raises KeyboardInterrupt at once. `exit_code` then says 143, not 130."""
    _terminated.set()
    signal.raise_signal(signal.SIGINT)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _terminated.clear()
    previous: Callable[..., Any] | int | None = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def terminated(interrupt: KeyboardInterrupt) -> bool:
    """Whether the interrupt came from SIGTERM."""
    return _terminated.is_set()


def exit_code(interrupt: KeyboardInterrupt) -> int:
    return ExitCode.TERMINATED if terminated(interrupt) else ExitCode.INTERRUPTED
