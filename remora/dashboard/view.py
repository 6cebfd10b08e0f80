"""The dashboard drawn with rich: a snapshot rendered, kept live while a stream is followed or
an analysis runs."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable

import anyio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from remora.dashboard.followers import Follower, follow
from remora.dashboard.state import (
    LOW_CONFIDENCE,
    REFRESH_S,
    STATUSES,
    DashboardState,
    JobActivity,
    Snapshot,
)
from remora.events import Events


def render(snapshot: Snapshot, *, source: str = "") -> RenderableType:
    """The dashboard as rich renderables; plain words and numbers, so it reads in a log too."""
    head = Text.assemble(("remora dashboard", "bold"), f"  {source}" if source else "")
    numbers = Table.grid(padding=(0, 2))
    numbers.add_column(style="bold")
    numbers.add_column()
    if snapshot.latest is not None:
        run = snapshot.latest
        state = "finished" if run.finished else "running"
        numbers.add_row(
            "run",
            f"{run.run_id} {state}: {run.done}/{run.jobs} jobs done ({run.cached} from the "
            f"cache); {snapshot.runs} runs in the stream",
        )
    else:
        numbers.add_row("run", "waiting for events" if not snapshot.events else "not started")
    numbers.add_row("jobs", f"in flight {snapshot.in_flight}  queued {snapshot.queued}")
    numbers.add_row(
        "throughput",
        f"{snapshot.jobs_per_s:.2f} jobs/s  {snapshot.requests_per_s:.2f} requests/s  "
        f"{snapshot.tokens_per_s:.1f} tokens/s  (last {snapshot.window_s:.1f} s)",
    )
    latency = snapshot.latency
    numbers.add_row(
        "model latency",
        f"p50 {_ms(latency.p50)}  p95 {_ms(latency.p95)}  p99 {_ms(latency.p99)}  "
        f"(n={latency.count})"
        if latency is not None
        else "no responses yet",
    )
    numbers.add_row(
        "tokens",
        f"{snapshot.prompt_tokens} prompt  {snapshot.completion_tokens} completion  "
        f"in {snapshot.requests} requests",
    )
    rated = snapshot.rated_replies
    numbers.add_row(
        "confidence",
        (
            f"{snapshot.low_confidence}/{rated} replies below {LOW_CONFIDENCE:g} "
            f"({snapshot.low_confidence / rated:.0%})"
            if rated
            else "no replies rated yet"
        )
        + f"  {snapshot.resamples} resamples",
    )
    numbers.add_row(
        "problems",
        f"{snapshot.tool_failures} tool failures  {snapshot.bad_calls} bad calls  "
        f"{snapshot.unreadable} unreadable events",
    )

    agents = Table(show_edge=False, pad_edge=False)
    agents.add_column("agent")
    for column in (*STATUSES, "cached", "findings"):
        agents.add_column(column, justify="right")
    for name, counts in snapshot.agents.items():
        agents.add_row(
            escape(name),
            *(str(counts.statuses[status]) for status in STATUSES),
            str(counts.cached),
            str(counts.findings),
        )

    parts: list[RenderableType] = [head, numbers]
    if snapshot.agents:
        parts += [Text(), agents]
    if snapshot.problems:
        parts.append(Text("\nrecent errors", style="bold"))
        for problem in snapshot.problems:
            clock = time.strftime("%H:%M:%S", time.localtime(problem.ts))
            parts.append(
                Text(
                    f"{clock} {problem.agent} {problem.node_id} {problem.status} "
                    f"{problem.code}: {_shorten(problem.message)}",
                    style="red" if problem.status == "error" else "yellow",
                    # One line each: the view's height stays put while errors come and go.
                    no_wrap=True,
                    overflow="ellipsis",
                )
            )
    if snapshot.activity:
        parts += [Text(), _activity(snapshot)]
    return Group(*parts)


def _activity(snapshot: Snapshot) -> RenderableType:
    """The jobs in flight, one line each: agent, node, how long, what they are doing."""
    table = Table(show_edge=False, pad_edge=False, box=None, padding=(0, 1))
    table.add_column("agent", max_width=16)
    table.add_column("node", max_width=28)  # all but "for" give way to a narrow view
    table.add_column("for", justify="right", no_wrap=True)
    table.add_column("doing")
    for job in snapshot.activity:
        table.add_row(
            _line(job.agent),
            # The end of a node id says most (`…/module.py::Class.method`).
            _line(job.node_id if len(job.node_id) <= 28 else "…" + job.node_id[-27:]),
            f"{max(0.0, snapshot.now - job.since_ts):.1f}s",
            _line(_doing(job)),
        )
    if snapshot.activity_more:
        table.add_row("", "", "", Text(f"and {snapshot.activity_more} more", style="dim"))
    return Group(Text("in flight", style="bold"), table)


def _line(text: str) -> Text:
    """A cell kept to one line, cut with an ellipsis: the view's height stays put."""
    return Text(text, no_wrap=True, overflow="ellipsis")


def _doing(job: JobActivity) -> str:
    again = f" (resample {job.attempt})" if job.attempt else ""
    if job.phase == "waiting":
        return "waiting for the model" + again
    if job.phase == "forming":
        return f"forming {job.tool}({_shorten(job.arguments, 60)}){again}"
    if job.phase == "writing":
        return f"writing text ({job.chars} chars){again}"
    if job.phase == "replied":
        return f"chose {job.tool}" if job.tool else "replied with text"
    if job.phase in ("running", "ran"):
        return f"{job.phase} {job.tool}"
    return job.phase


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- following a file


async def show_following(
    follower: Follower, state: DashboardState, console: Console, source: str
) -> None:
    """Redrawn on a timer, not per event: rates fall while nothing happens, and a burst of a
    thousand events costs one redraw."""

    def view() -> RenderableType:
        return render(state.snapshot(now=time.time()), source=source)

    with Live(get_renderable=view, console=console, auto_refresh=False) as live:
        await follow(follower, state, on_poll=live.refresh)


async def run_with_dashboard(
    work: Callable[[], Awaitable[int]], events: Events, console: Console
) -> int:
    """Run `work` (an analysis emitting to `events`) under a live dashboard on `console`.

    One event loop, no threads: the listener folds events in as they are emitted and a task
    redraws on a timer. The report on stdout is routed above the view only when stdout is a
    terminal, where it would otherwise be drawn over; a redirected report is left alone.
    """
    state = DashboardState()
    events.listeners.append(state.feed)

    def view() -> RenderableType:
        return render(state.snapshot(now=time.time()))

    try:
        with Live(
            get_renderable=view,
            console=console,
            auto_refresh=False,
            redirect_stdout=sys.stdout.isatty(),
        ) as live:
            async with anyio.create_task_group() as group:

                async def redraw() -> None:
                    while True:
                        live.refresh()
                        await anyio.sleep(REFRESH_S)

                group.start_soon(redraw)
                code = await work()
                group.cancel_scope.cancel()
            return code
    finally:
        events.listeners.remove(state.feed)
