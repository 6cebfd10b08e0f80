"""The analyses the editor asks for, one file at a time: a request waits out a debounce, a newer
request for the same file cancels the older one, and only one run at a time holds the model
(two embedded engines would load the weights twice). Each run is `remora analyze` on that file,
so the result cache answers unchanged nodes before the model is even opened, and their
diagnostics are published at once."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from remora.analysis.request import AnalysisHooks, AnalyzeRequest
from remora.analysis.run import analyze
from remora.config.loading import load_settings
from remora.errors import RunFailed, UserInputError
from remora.findings.results import JobResult, JobStatus

log = logging.getLogger("remora.editor")


@dataclass
class FileState:
    results: dict[tuple[str, str], JobResult] = field(default_factory=dict)
    """The latest result of every (node id, agent) of the file."""
    text: str = ""
    """The file as the agents of those results read it."""
    scope: anyio.CancelScope | None = None
    """The run waiting or running for the file."""


@dataclass(frozen=True)
class RunOptions:
    config: Path | None
    isolated: bool
    flags: dict[str, Any]
    """The settings given on `remora server`'s command line."""
    agents: tuple[str, ...] = ()


class FileRuns:
    def __init__(
        self,
        options: RunOptions,
        *,
        publish: Callable[[Path, FileState], None],
        tell: Callable[[str | None], None],
        progress: Callable[[str], Any],
    ) -> None:
        self._options = options
        self._publish = publish
        self._tell = tell
        self._progress = progress
        self._model_lock = anyio.Lock()
        self._group: TaskGroup | None = None
        self._waiting: list[tuple[Path, float, frozenset[str], bool]] = []
        self.files: dict[Path, FileState] = {}

    async def serve(self) -> None:
        """Run the analyses asked for, until cancelled (the client went away or shut down)."""
        async with anyio.create_task_group() as group:
            self._group = group
            for waiting in self._waiting:
                self.schedule(*waiting)
            self._waiting.clear()
            await anyio.sleep_forever()

    def schedule(
        self, path: Path, delay: float, nodes: frozenset[str] = frozenset(), cache: bool = True
    ) -> None:
        """Analyse `path` after `delay` seconds, cancelling what was waiting or running for it."""
        if self._group is None:
            self._waiting.append((path, delay, nodes, cache))
            return
        self.cancel(path)
        scope = anyio.CancelScope()
        self.files.setdefault(path, FileState()).scope = scope
        self._group.start_soon(self._debounced, path, scope, delay, nodes, cache)

    def cancel(self, path: Path) -> None:
        state = self.files.get(path)
        if state is not None and state.scope is not None:
            state.scope.cancel()
            state.scope = None

    def start_soon(self, task: Callable[[], Any]) -> None:
        if self._group is not None:
            self._group.start_soon(task)

    async def _debounced(
        self, path: Path, scope: anyio.CancelScope, delay: float, nodes: frozenset[str], cache: bool
    ) -> None:
        with scope:
            await anyio.sleep(delay)
            try:
                await self._run(path, nodes, cache)
            except (UserInputError, RunFailed) as exc:
                self._tell(str(exc))
            except Exception as exc:  # a bug: said and logged; the server keeps serving
                log.exception("analysis of %s failed", path)
                self._tell(f"internal error analysing {path.name}: {exc!r}")

    async def _run(self, path: Path, nodes: frozenset[str], cache: bool) -> None:
        o = self._options
        loaded = load_settings(o.config, cli=o.flags, cwd=path, isolated=o.isolated)
        for message in loaded.warnings:  # a project's bound lowered to the user's: the log
            log.warning(message)
        state = self.files.setdefault(path, FileState())
        text = _text(path)
        fresh: dict[tuple[str, str], JobResult] = {}
        progress = self._progress(f"Remora: {path.name}")

        def result(job: JobResult) -> None:
            fresh[(job.node.id, job.agent)] = job
            if not job.cached:
                progress.step()
                self._show(path, state, fresh, text, nodes)

        @asynccontextmanager
        async def holding_model() -> AsyncIterator[None]:
            # Every cache answer is in: show them before the model loads (seconds, locally).
            self._show(path, state, fresh, text, nodes)
            progress.start()
            async with self._model_lock:
                yield

        hooks = AnalysisHooks(result=result, started=progress.jobs, say=log.info, warn=log.warning)
        request = AnalyzeRequest(paths=(path,), agents=o.agents, use_cache=cache, nodes=nodes)
        try:
            await analyze(request, loaded, hooks=hooks, hold_model=holding_model)
        finally:
            progress.end()
        self._show(path, state, fresh, text, nodes)
        errors = sorted(
            {
                job.error.message
                for job in fresh.values()
                if job.status is JobStatus.ERROR and job.error is not None
            }
        )
        failed = [job for job in fresh.values() if job.status is JobStatus.FAILED]
        for job in failed:
            log.info("%s on %s: not done: %s", job.agent, job.node.qualified_name, job.summary)
        self._tell("; ".join(errors) if errors else None)

    def _show(
        self,
        path: Path,
        state: FileState,
        fresh: dict[tuple[str, str], JobResult],
        text: str,
        nodes: frozenset[str],
    ) -> None:
        """A run for some nodes keeps the others' results; a run for the file replaces all."""
        kept = {key: job for key, job in state.results.items() if nodes and key[0] not in nodes}
        state.results = kept | fresh
        state.text = text
        self._publish(path, state)


def _text(path: Path) -> str:
    """The file as the agents are about to read it (a few kB: not worth a thread)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
