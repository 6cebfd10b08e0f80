"""Progress on stderr while jobs run: a bar on a terminal (`JobProgress`), a plain line at a
steady pace elsewhere, such as a CI log (`ProgressLines`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from remora.findings.results import JobResult, JobStatus

INTERVAL_S = 20.0
"""Seconds between two progress lines when stderr is not a terminal. CI systems kill a step
that prints nothing for about 10 minutes and people give up watching well before that; a line
every 20 s keeps a whole-library run of an hour at 180 lines of log, and a run of under 20 s
(a pull request's changed nodes) prints none: its report follows at once."""


class JobProgress:
    def __init__(self, total: int, *, enabled: bool) -> None:
        self.failures = 0
        self._progress = (
            Progress(
                TextColumn("analysing"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failures]} failed"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            if enabled and total
            else None
        )
        self._task = (
            self._progress.add_task("jobs", total=total, failures=0) if self._progress else None
        )

    def __enter__(self) -> JobProgress:
        if self._progress:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress:
            self._progress.stop()

    def advance(self, result: JobResult) -> None:
        if result.status in (JobStatus.FAILED, JobStatus.ERROR):
            self.failures += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, failures=self.failures)


class ProgressLines:
    """Progress for a log nobody watches live (stderr not a terminal, e.g. CI): one plain line
    every `interval` seconds, such as

        remora: 812 of 3,204 jobs finished (lint 1,045/1,045, docstring 512/1,015, test 0/1,010,
        sample_data 0/134; 300 from the cache, 41 not done, 2 errors) in 4m 10s

    (one line in the log). Decisions, for a person scrolling a CI log or grepping it:

    - Jobs count as finished whatever their status, those answered from the cache and those
      skipped before the run included: the total is the `jobs` of `run_started` and of the
      closing summary, and the count reaches it. "not done" (the report's word for `failed`)
      and errors are counted apart, shown only when there are any: errors early in a run (a
      server that went away) are a reason to cancel it. The cache's share explains a fast
      start.
    - The first line comes one interval after the jobs were planned, not at once: a run
      shorter than that prints none. Then one every interval (never two closer than that, even
      after a late one), also when no job finished meanwhile: a slow job or a model still
      loading must not look like a hung run, and after the last job the lines go on while the
      generated tests are checked together. A timer thread, not an event-loop task: the
      analysis hooks are plain functions with no task group to start a task in, and an event
      loop busy with synchronous work (cache lookups and writes) must not silence it.
    - No line at the end: the report and its closing lines follow.
    - The time is the time since the jobs were planned (discovery before it is not counted),
      in whole seconds: `45s`, `4m 10s`, `1h 02m 05s`.
    - Plain text: no colour, no ANSI escape codes, no carriage returns; one `write` per line,
      so it never lands in the middle of another line on the same stream.

    `clock` and `interval` let tests drive `tick` by hand; the CLI takes the defaults and
    `start`s the timer thread."""

    def __init__(
        self,
        jobs: Mapping[str, int],
        *,
        stream: TextIO,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`jobs`: how many jobs each agent has in the run, in the order to show them."""
        self.totals = {agent: count for agent, count in jobs.items() if count > 0}
        self.done = dict.fromkeys(self.totals, 0)
        self.cached = 0
        self.not_done = 0
        self.errors = 0
        self._stream = stream
        # Read at call time, not bound as a default: a test of the whole command sets the
        # module's INTERVAL_S in the process it starts.
        self._interval = INTERVAL_S if interval is None else interval
        if self._interval <= 0:
            raise ValueError("the interval must be positive")
        self._clock = clock
        self._began = clock()
        self._next = self._began + self._interval
        self._lock = threading.Lock()
        """`count` runs on the event loop's thread, `tick` on the timer's."""
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def total(self) -> int:
        return sum(self.totals.values())

    def count(self, result: JobResult) -> None:
        """One job finished (answered from the cache, skipped, or run)."""
        with self._lock:
            self.done[result.agent] = self.done.get(result.agent, 0) + 1
            self.totals.setdefault(result.agent, 0)  # never shown below its own count
            if result.cached:
                self.cached += 1
            if result.status is JobStatus.FAILED:
                self.not_done += 1
            elif result.status is JobStatus.ERROR:
                self.errors += 1

    def line(self) -> str:
        """The progress line now, without its newline."""
        with self._lock:
            done = sum(self.done.values())
            total = max(self.total, done)
            agents = ", ".join(
                f"{agent} {self.done[agent]:,}/{max(count, self.done[agent]):,}"
                for agent, count in self.totals.items()
            )
            extra = [f"{self.cached:,} from the cache"] if self.cached else []
            if self.not_done:
                extra.append(f"{self.not_done:,} not done")
            if self.errors:
                extra.append(f"{self.errors:,} error{'' if self.errors == 1 else 's'}")
        details = agents + (f"; {', '.join(extra)}" if extra else "")
        elapsed = duration(self._clock() - self._began)
        return f"remora: {done:,} of {total:,} jobs finished ({details}) in {elapsed}"

    def tick(self) -> bool:
        """Print the line if it is due; True when it printed one."""
        now = self._clock()
        if now < self._next:
            return False
        self._stream.write(self.line() + "\n")
        self._stream.flush()
        # From now, not from when it was due: a late line (a busy machine) never brings the
        # next one closer than the interval.
        self._next = now + self._interval
        return True

    def start(self) -> ProgressLines:
        """Print from a timer thread until `stop`."""
        if self._thread is None and self.total:
            self._thread = threading.Thread(
                target=self._run, name="remora-progress-lines", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """No line after this returns (the report follows on the same terminal or log)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stopped.wait(max(0.0, self._next - self._clock())):
            try:
                self.tick()
            except (OSError, ValueError):  # stderr closed or gone: progress is not worth a crash
                return

    def __enter__(self) -> ProgressLines:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def duration(seconds: float) -> str:
    """Whole seconds, the largest unit first: `45s`, `4m 10s`, `1h 02m 05s`."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
