"""What a worker is given once, before its first job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from remora.agents.definition import Agent
from remora.config.settings import RemoraSettings
from remora.jobs.job import JobOptions


@dataclass(frozen=True)
class WorkerStart:
    settings: RemoraSettings
    agents: list[Agent]
    """Jobs name their agent by position in this list."""
    root: Path
    options: JobOptions
    share: int
    """Most jobs in flight in this worker (its part of `settings.concurrency`)."""
    run_id: str
    events: bool
    """Whether the parent has anyone listening: else no job event is even built."""
    payloads: bool
    payload_limit: int
