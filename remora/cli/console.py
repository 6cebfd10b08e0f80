"""Where the command line writes: stdout for what a command is for (reports, lists), stderr for
everything said along the way."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

from remora.errors import ExitCode

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def stdout_console() -> Console:
    """Pipes get wide lines: a wrapped table in a CI log helps nobody."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def say(message: str) -> None:
    stderr.print(f"remora: {escape(message)}")


def warn(message: str) -> None:
    stderr.print(f"[yellow]remora: warning:[/] {escape(message)}")


def fail(message: str) -> int:
    stderr.print(f"[red]remora: error:[/] {escape(message)}")
    return ExitCode.ERROR
