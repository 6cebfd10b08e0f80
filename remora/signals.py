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


class Terminated(KeyboardInterrupt):
    """Raised by SIGTERM."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: Callable[..., Any] | int | None = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(interrupt: KeyboardInterrupt) -> int:
    return ExitCode.TERMINATED if isinstance(interrupt, Terminated) else ExitCode.INTERRUPTED
