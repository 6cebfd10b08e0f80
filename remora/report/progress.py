"""Progress on stderr while jobs run: done / total and failures, only on a terminal."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from remora.findings.results import JobResult, JobStatus


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
