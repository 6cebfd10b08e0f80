"""`remora dashboard`: follow an event stream and show it live."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from remora.dashboard.followers import EventFileFollower, StreamFollower, read_to_end
from remora.dashboard.state import DashboardState
from remora.dashboard.view import render, show_following
from remora.errors import ExitCode
from remora.signals import exit_code


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "dashboard",
        help="live view of an event stream: progress, throughput, latency, errors",
        description="Follow an event stream (remora analyze --events FILE) as it grows and "
        "show jobs in flight, throughput, model latency percentiles, per-agent results and "
        "the most recent errors. Ctrl-C stops.",
    )
    parser.set_defaults(run=run)
    parser.add_argument(
        "--events",
        default="-",
        metavar="FILE",
        help="the event file to follow (default -: standard input)",
    )
    parser.add_argument(
        "--no-follow",
        action="store_true",
        help="read what is there, print the dashboard once and exit",
    )
    parser.add_argument(
        "--window",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="throughput over the last SECONDS of events (default 10)",
    )


def run(args: argparse.Namespace) -> int:
    """The view goes to stdout, being what the command is for."""
    console = Console(highlight=False)
    if args.window <= 0:
        console.print("[red]remora: error:[/] --window must be more than 0 seconds")
        return ExitCode.ERROR
    if args.events == "-" and sys.stdin.isatty():
        console.print(
            "[red]remora: error:[/] no event stream: give --events FILE, or pipe one in, e.g. "
            "remora analyze PATH --events - 2>&1 >/dev/null | remora dashboard"
        )
        return ExitCode.ERROR
    source = "standard input" if args.events == "-" else args.events
    state = DashboardState(window_s=args.window)
    follower = (
        StreamFollower(sys.stdin.fileno())
        if args.events == "-"
        else EventFileFollower(Path(args.events))
    )
    try:
        if args.no_follow:
            read_to_end(follower, state)
            console.print(render(state.snapshot(), source=source))
        else:
            anyio.run(show_following, follower, state, console, source)
    except KeyboardInterrupt as interrupt:
        return exit_code(interrupt)
    finally:
        follower.close()
    return ExitCode.OK
