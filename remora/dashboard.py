"""A live view of the event stream (docs/EVENTS.md): progress, throughput, latency, errors.

`DashboardState` folds event dicts into numbers and knows nothing of terminals, so tests can
check the numbers exactly; `render` turns a `Snapshot` into rich renderables. The stream comes
from a file another process is appending to (`EventFileFollower`, tail -f) or, with
`remora analyze --dashboard`, from the run's own `Events.listeners`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from remora.errors import ExitCode
from remora.events import Events
from remora.signals import exit_code

STATUSES = ("success", "failed", "error", "skipped")
REFRESH_S = 0.25
"""How often the live view is redrawn and a followed file polled."""


def percentile(values: list[float], percent: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method); `values` sorted."""
    if not values:
        return math.nan
    rank = percent / 100 * (len(values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


@dataclass(frozen=True, slots=True)
class Latency:
    count: int
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True, slots=True)
class AgentCounts:
    statuses: dict[str, int]
    cached: int
    findings: int


@dataclass(frozen=True, slots=True)
class JobProblem:
    ts: float
    agent: str
    node_id: str
    status: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class RunProgress:
    run_id: str
    jobs: int
    done: int
    cached: int
    finished: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    events: int
    runs: int
    latest: RunProgress | None
    queued: int
    in_flight: int
    window_s: float
    """The span the rates are over: the window, or less when the stream is younger."""
    jobs_per_s: float
    requests_per_s: float
    tokens_per_s: float
    prompt_tokens: int
    completion_tokens: int
    requests: int
    latency: Latency | None
    agents: dict[str, AgentCounts]
    problems: list[JobProblem]
    tool_failures: int
    bad_calls: int
    unreadable: int
    """Lines or events that could not be used (not JSON, or missing fields)."""


@dataclass(slots=True)
class _Run:
    jobs: int = 0
    done: int = 0
    cached: int = 0
    finished: bool = False


@dataclass(slots=True)
class _AgentTally:
    statuses: Counter[str] = field(default_factory=Counter)
    cached: int = 0
    findings: int = 0


class DashboardState:
    """Numbers folded from events, in the order they are fed.

    Times come from the events' `ts`, never the clock, so a recorded stream always gives the
    same numbers; a live view passes the clock as `now` so that rates fall when work stops.
    """

    def __init__(
        self, *, window_s: float = 10.0, latency_sample: int = 10_000, problems: int = 8
    ) -> None:
        self.window_s = window_s
        self.events = 0
        self.unreadable = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self._runs: dict[str, _Run] = {}
        self._latest_run: str | None = None
        # Keyed by run as well: job ids repeat across runs appending to one file (watch).
        self._queued: set[tuple[str, str]] = set()
        self._in_flight: set[tuple[str, str]] = set()
        # (ts, amount) within the window: finished jobs, requests, tokens.
        self._jobs: deque[tuple[float, int]] = deque()
        self._requests: deque[tuple[float, int]] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._latencies: deque[float] = deque(maxlen=latency_sample)
        self.requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._agents: dict[str, _AgentTally] = {}
        self._problems: deque[JobProblem] = deque(maxlen=problems)
        self.tool_failures = 0
        self.bad_calls = 0

    def feed_all(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            self.feed(event)

    def feed_lines(self, lines: Iterable[bytes | str]) -> None:
        """JSON Lines; a line that is not a JSON object is counted as unreadable (a stream
        that mixes in stderr has warnings in it)."""
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                self.unreadable += 1
                continue
            if isinstance(event, dict):
                self.feed(event)
            else:
                self.unreadable += 1

    def feed(self, event: Mapping[str, Any]) -> None:
        try:
            self._feed(event)
        except (KeyError, TypeError, ValueError):
            # Another version or a damaged line: count it, keep the view alive.
            self.unreadable += 1

    def _feed(self, event: Mapping[str, Any]) -> None:
        kind = event["event"]
        ts = float(event["ts"])
        run = str(event.get("run_id", ""))
        self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        job = (run, str(event.get("job_id", "")))
        if kind == "run_started":
            self._runs[run] = _Run(jobs=int(event["jobs"]))
            self._latest_run = run
        elif kind == "run_finished":
            self._runs.setdefault(run, _Run()).finished = True
            # A run is over: whatever it left queued or started will never finish.
            self._queued = {key for key in self._queued if key[0] != run}
            self._in_flight = {key for key in self._in_flight if key[0] != run}
        elif kind == "job_queued":
            self._queued.add(job)
        elif kind == "job_started":
            self._queued.discard(job)
            self._in_flight.add(job)
        elif kind == "job_finished":
            self._job_finished(event, ts, run, job)
        elif kind == "model_request":
            self.requests += 1
            self._add(self._requests, ts, 1)
        elif kind == "model_response":
            prompt, completion = int(event["prompt_tokens"]), int(event["completion_tokens"])
            self._latencies.append(float(event["latency_s"]))
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self._add(self._tokens, ts, prompt + completion)
        elif kind == "tool_result" and not event.get("ok", True):
            self.tool_failures += 1
        elif kind == "bad_call":
            self.bad_calls += 1
        self.events += 1  # counted once it was usable

    def _job_finished(
        self, event: Mapping[str, Any], ts: float, run: str, job: tuple[str, str]
    ) -> None:
        status, cached = str(event["status"]), bool(event.get("cached"))
        tally = self._agents.setdefault(str(event["agent"]), _AgentTally())
        tally.statuses[status] += 1
        tally.cached += cached
        tally.findings += int(event.get("findings") or 0)
        self._queued.discard(job)
        self._in_flight.discard(job)
        progress = self._runs.setdefault(run, _Run())
        progress.done += 1
        progress.cached += cached
        if not cached:  # cache hits arrive all at once and would swamp the rate
            self._add(self._jobs, ts, 1)
        if event.get("error"):
            self._problems.append(
                JobProblem(
                    ts=ts,
                    agent=str(event["agent"]),
                    node_id=str(event.get("node_id", "")),
                    status=status,
                    code=str(event.get("error_code") or ""),
                    message=str(event["error"]),
                )
            )

    def _add(self, series: deque[tuple[float, int]], ts: float, amount: int) -> None:
        series.append((ts, amount))
        # Only the window is kept; events from several writers may be slightly out of order.
        horizon = (self.last_ts or ts) - self.window_s
        while series and series[0][0] < horizon:
            series.popleft()

    def snapshot(self, now: float | None = None) -> Snapshot:
        """The numbers as of `now` (default: the newest event's time)."""
        now = now if now is not None else (self.last_ts or 0.0)
        span = min(self.window_s, now - self.first_ts) if self.first_ts is not None else 0.0
        latest = None
        if self._latest_run is not None:
            run = self._runs[self._latest_run]
            latest = RunProgress(self._latest_run, run.jobs, run.done, run.cached, run.finished)
        ordered = sorted(self._latencies)
        latency = (
            Latency(
                len(ordered),
                percentile(ordered, 50),
                percentile(ordered, 95),
                percentile(ordered, 99),
            )
            if ordered
            else None
        )
        return Snapshot(
            now=now,
            events=self.events,
            runs=len(self._runs),
            latest=latest,
            queued=len(self._queued),
            in_flight=len(self._in_flight),
            window_s=span,
            jobs_per_s=_rate(self._jobs, now, span),
            requests_per_s=_rate(self._requests, now, span),
            tokens_per_s=_rate(self._tokens, now, span),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            requests=self.requests,
            latency=latency,
            agents={
                name: AgentCounts(
                    {status: tally.statuses[status] for status in STATUSES},
                    tally.cached,
                    tally.findings,
                )
                for name, tally in sorted(self._agents.items())
            },
            problems=list(reversed(self._problems)),
            tool_failures=self.tool_failures,
            bad_calls=self.bad_calls,
            unreadable=self.unreadable,
        )


def _rate(series: deque[tuple[float, int]], now: float, span: float) -> float:
    """Amount per second over the `span` seconds up to `now` (both ends included)."""
    if span <= 0:
        return 0.0
    return sum(amount for ts, amount in series if now - span <= ts <= now) / span


# --------------------------------------------------------------------------- rendering


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
    return Group(*parts)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- following a file


class _Lines:
    """Splits bytes into lines; the last piece, until its newline comes, is still being
    written and is held back."""

    def __init__(self) -> None:
        self._pending = b""

    def _split(self, data: bytes) -> list[bytes]:
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        return lines

    def finish(self) -> list[bytes]:
        """At the end of the stream: a last line without its newline, if any."""
        tail, self._pending = self._pending, b""
        return [tail] if tail.strip() else []


class EventFileFollower(_Lines):
    """The lines appended to a file since the last call (tail -f).

    A file that does not exist yet is waited for; one that is truncated or replaced (same
    name, another file) is read again from its start.
    """

    ended = False  # a file can always grow

    def __init__(self, path: Path, *, chunk: int = 4 << 20) -> None:
        super().__init__()
        self.path = path
        self.chunk = chunk
        self.behind = False
        """The last read stopped at `chunk` bytes: more is waiting."""
        self._file: IO[bytes] | None = None

    def read(self) -> list[bytes]:
        # In chunks, so a long file already there is folded in a piece at a time, with the
        # view redrawn in between, instead of all of it held in memory at once.
        self.behind = False
        if not self._reopen_if_needed():
            return []
        assert self._file is not None
        data = self._file.read(self.chunk)
        self.behind = len(data) == self.chunk
        return self._split(data)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _reopen_if_needed(self) -> bool:
        try:
            on_disk = os.stat(self.path)
        except OSError:
            return self._file is not None  # gone for now: finish what is open
        if self._file is not None:
            held = os.fstat(self._file.fileno())
            if held.st_ino == on_disk.st_ino and on_disk.st_size >= self._file.tell():
                return True
            self.close()
        try:
            self._file = self.path.open("rb")
        except OSError:
            return False
        self._pending = b""
        return True


class StreamFollower(_Lines):
    """A pipe (standard input), read without blocking so one event loop can both read and
    redraw; end of file ends the stream."""

    behind = False  # each read takes all there is

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.ended = False
        self._was_blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)

    def read(self) -> list[bytes]:
        chunks: list[bytes] = []
        while not self.ended:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.ended = True
            chunks.append(chunk)
        lines = self._split(b"".join(chunks))
        return lines + self.finish() if self.ended else lines

    def close(self) -> None:
        os.set_blocking(self.fd, self._was_blocking)


Follower = EventFileFollower | StreamFollower


async def follow(
    follower: Follower,
    state: DashboardState,
    *,
    on_poll: Callable[[], None] | None = None,
    interval: float = REFRESH_S,
    stop: anyio.Event | None = None,
) -> None:
    """Feed `state` from a growing file or a pipe until cancelled or `stop` is set; after a
    pipe ends, keep calling `on_poll` so the view stays up (and its rates fall)."""
    while stop is None or not stop.is_set():
        if not follower.ended:
            state.feed_lines(follower.read())
        if on_poll is not None:
            on_poll()
        await anyio.sleep(0 if follower.behind else interval)


# --------------------------------------------------------------------------- commands


def cmd_dashboard(args: argparse.Namespace) -> int:
    """`remora dashboard`: the view goes to stdout, being what the command is for."""
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


def read_to_end(follower: Follower, state: DashboardState) -> None:
    if isinstance(follower, StreamFollower):
        os.set_blocking(follower.fd, True)  # nothing else to do meanwhile: block
    state.feed_lines(follower.read())
    while follower.behind:
        state.feed_lines(follower.read())
    state.feed_lines(follower.finish())


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
