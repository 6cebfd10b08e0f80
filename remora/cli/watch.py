"""`remora watch`: analyse, then analyse again after every burst of changes.

Each run is an ordinary analysis (an `AnalyzeRequest` built from the flags, reported as
`remora analyze` reports it). What makes
a re-run cheap is the result cache: a job whose node text and agent are unchanged is answered
from disk, so only the nodes that changed reach the model. Watch only decides *when* to run:
after a burst of changes settles (watchfiles debounces), and only when the burst touched a
file the analysis covers, by the same rules discovery walks with (.gitignore, default
excludes), or changed which files those are.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from rich.markup import escape
from watchfiles import DefaultFilter, awatch

from remora.analysis.request import AnalyzeOutcome, AnalyzeRequest
from remora.cli.analyze import ReportOptions, analyze_and_report
from remora.cli.console import fail, stderr
from remora.cli.flags import agent_names, config_flags, load, run_flags
from remora.config.loading import LoadedSettings
from remora.discovery.walk import iter_python_files
from remora.errors import ExitCode, UserInputError
from remora.events import Events
from remora.signals import exit_code

Batch = set[str]
"""Absolute paths that changed in one burst."""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "watch",
        parents=[config_flags(), run_flags()],
        help="analyse, then re-analyse what changes, until Ctrl-C",
        description="Analyse PATH like analyze, then watch it: after each burst of changes to "
        "Python files, run again through the result cache, so only changed nodes reach the "
        "model. The report goes to stdout after every run, a summary line to stderr. "
        "Ctrl-C stops (exit 130).",
    )
    parser.set_defaults(run=run)
    parser.add_argument(
        "--events",
        metavar="FILE",
        help="append the event stream of every run to FILE (follow it with remora dashboard)",
    )
    parser.add_argument(
        "--debounce",
        type=int,
        default=200,
        metavar="MS",
        help="wait until files have been quiet for MS milliseconds before a run (default 200)",
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        metavar="N",
        help="exit after N runs, the first full one included, with the last run's exit code",
    )


def run(args: argparse.Namespace) -> int:
    loaded = load(args)
    if args.max_runs is not None and args.max_runs < 1:
        raise UserInputError("--max-runs must be at least 1")
    if args.debounce < 1:
        raise UserInputError("--debounce must be at least 1 millisecond")
    try:
        return anyio.run(watch, args, loaded)
    except KeyboardInterrupt as interrupt:
        # Not main()'s "no report written": every finished run has written its report.
        stderr.print("remora: watch stopped")
        return exit_code(interrupt)


@dataclass(frozen=True)
class RunTally:
    """What one run did."""

    jobs: int = 0
    cached: int = 0
    requests: int = 0
    findings: int = 0
    exit_code: int = 0

    @classmethod
    def of(cls, code: int, outcome: AnalyzeOutcome | None) -> RunTally:
        if outcome is None:
            return cls(exit_code=code)
        return cls(
            jobs=len(outcome.results),
            cached=outcome.cached,
            requests=outcome.model_requests,
            findings=outcome.summary.findings,
            exit_code=code,
        )


async def watch(
    args: argparse.Namespace,
    loaded: LoadedSettings,
    *,
    stop: anyio.Event | None = None,
    on_run: Callable[[int, RunTally], None] | None = None,
) -> int:
    """Run, then re-run after each relevant burst of changes, until cancelled, `stop` is set
    or `args.max_runs` runs are done. Returns the last finished run's exit code."""
    watcher = Watcher(args, loaded, on_run)
    # Set before the watcher's thread is waited on: it polls this every `step` ms, so Ctrl-C
    # or `stop` ends the watch at once instead of after watchfiles' 5 s timeout.
    watcher_stop = anyio.Event()
    send, receive = anyio.create_memory_object_stream[Batch](math.inf)
    try:
        async with receive, anyio.create_task_group() as group:
            group.start_soon(_pump, watcher.roots, watcher.cache, args.debounce, watcher_stop, send)
            if stop is not None:
                group.start_soon(_stop_when_set, stop, watcher_stop, group)
            # The watcher is set up in the pump's first step; once every task waits, it is
            # watching, so nothing saved during the first run can be missed.
            await anyio.wait_all_tasks_blocked()
            stderr.print(
                f"remora watch: watching {escape(', '.join(str(p) for p in args.paths))} "
                "(Ctrl-C to stop)"
            )
            try:
                await watcher.run_until_done(receive)
            finally:
                watcher_stop.set()
                group.cancel_scope.cancel()
    finally:
        watcher.sink.close()
    return watcher.last_code


class Watcher:
    """The runs of one watch: what to analyse, with which arguments, and how it went."""

    def __init__(
        self,
        args: argparse.Namespace,
        loaded: LoadedSettings,
        on_run: Callable[[int, RunTally], None] | None,
    ) -> None:
        self.paths: list[Path] = list(args.paths)
        missing = [str(path) for path in self.paths if not path.exists()]
        if missing:
            raise UserInputError(f"path does not exist: {missing[0]}")
        self.roots = watch_roots(Path(os.path.abspath(path)) for path in self.paths)
        self.cache = Path(os.path.abspath(loaded.base_dir / loaded.settings.cache_dir))
        self.max_runs: int | None = args.max_runs
        self.loaded = loaded
        self.on_run = on_run
        self.request = AnalyzeRequest(paths=tuple(self.paths), agents=agent_names(args.agents))
        self.root = self.request.root
        self.options = ReportOptions(output_format=args.output_format)
        self.sink = Events.to_target(args.events)
        self.runs = 0
        self.last_code = 0

    async def run_until_done(self, batches: MemoryObjectReceiveStream[Batch]) -> None:
        known = python_files(self.paths, self.root)
        changed: list[str] = []
        while True:
            await self.run(changed)
            if self.max_runs is not None and self.runs >= self.max_runs:
                return
            while True:
                batch = await batches.receive()
                # Bursts that came in while the run was going make one more run, not several.
                while True:
                    try:
                        batch |= batches.receive_nowait()
                    except anyio.WouldBlock:
                        break
                now = python_files(self.paths, self.root)
                changed = relevant_changes(batch, known, now)
                known = now
                if changed:
                    break

    async def run(self, changed: Sequence[str]) -> None:
        number = self.runs + 1
        if changed:
            stderr.rule(f"run {number}: {escape(describe(changed, self.root))}", style="dim")
        # A fresh run id per run, one file for all: `remora dashboard` tells the runs apart.
        events = Events(
            sink=self.sink.sink, payloads=self.sink.payloads, payload_limit=self.sink.payload_limit
        )
        started = time.perf_counter()
        outcome = None
        try:
            code, outcome = await analyze_and_report(
                self.request, self.options, self.loaded, events
            )
        except UserInputError as exc:
            # A bad agent definition or a model the server lacks stops this run, not the
            # watch: the fix is the next change.
            code = fail(str(exc))
        tally = RunTally.of(code, outcome)
        self.runs, self.last_code = number, code
        last = self.max_runs is not None and number >= self.max_runs
        stderr.print(
            f"remora watch: run {number} done in {time.perf_counter() - started:.1f} s: "
            f"{tally.jobs - tally.cached} of {tally.jobs} jobs ran ({tally.requests} model "
            f"requests), {tally.cached} from the cache; {tally.findings} findings; exit code "
            f"{code}.{'' if last else ' Watching for changes.'}",
            style="red" if code == ExitCode.ERROR else None,
        )
        if self.on_run is not None:
            self.on_run(number, tally)


async def _pump(
    roots: Sequence[Path],
    cache: Path,
    debounce_ms: int,
    stop: anyio.Event,
    send: MemoryObjectSendStream[Batch],
) -> None:
    """Watcher bursts into `send`, also while a run is going, so none is lost."""
    # watchfiles' own noise filter (.git, __pycache__, editor swap files) plus the cache,
    # which every run writes to.
    ignore = DefaultFilter(ignore_paths=[str(cache)])
    with send:
        async for changes in awatch(
            *roots,
            watch_filter=ignore,
            step=debounce_ms,  # the quiet time that ends a burst
            debounce=max(2_000, 4 * debounce_ms),  # the longest a burst is grouped
            stop_event=stop,
        ):
            await send.send({path for _, path in changes})


async def _stop_when_set(stop: anyio.Event, watcher_stop: anyio.Event, group: TaskGroup) -> None:
    await stop.wait()
    watcher_stop.set()
    group.cancel_scope.cancel()


def watch_roots(targets: Iterable[Path]) -> list[Path]:
    """Folders to watch: a file's folder rather than the file, since editors that save by
    replacing a file would leave a watch on the old one; nested folders only once."""
    folders = sorted({path if path.is_dir() else path.parent for path in targets})
    return [f for f in folders if not any(f != o and f.is_relative_to(o) for o in folders)]


def python_files(paths: Sequence[Path], root: Path) -> frozenset[str]:
    """The files `analyze` would read now: discovery's own walk, so the same ignore rules."""
    return frozenset(str(path) for path in iter_python_files(paths, root))


def relevant_changes(batch: Batch, before: frozenset[str], now: frozenset[str]) -> list[str]:
    """The analysed files a burst touched, plus those that appeared or disappeared (also by a
    moved folder, or a .gitignore edit). Empty: nothing the analysis sees has changed."""
    touched = {path for path in batch if path in before or path in now}
    return sorted(touched | (before ^ now))


def describe(changed: Sequence[str], root: Path, limit: int = 3) -> str:
    names = []
    for path in changed[:limit]:
        try:
            names.append(Path(path).relative_to(root).as_posix())
        except ValueError:
            names.append(path)
    more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
    return f"{', '.join(names)}{more} changed"
