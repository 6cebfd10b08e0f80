"""What one analysis is asked to do, what it reports while it runs, and what it gives back."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from remora.agents.definition import Agent
from remora.edits.apply import ApplyReport
from remora.findings.results import Change, JobResult, RunSummary
from remora.tool_library.module_paths import PROJECT_MARKERS

Edits = Literal["report", "diff", "fix"]
"""What happens to the changes of successful jobs: nothing (they are in the report), collected
for a combined patch, or applied to the user's files."""


@dataclass(frozen=True, kw_only=True)
class AnalyzeRequest:
    """One run, as `remora analyze` flags or `remora watch` describe it. Settings (server,
    engine, concurrency, cache folder) come from the loaded configuration, flags included."""

    paths: tuple[Path, ...]
    agents: tuple[str, ...] = ()
    """Agents to run, enabled or not; empty: every enabled agent."""
    use_cache: bool = True
    retry_not_done: bool = False
    """Ask again the jobs the cache holds as finished without a verified outcome."""
    diff_base: str | None = None
    """Only nodes whose lines differ from this git revision (plus untracked files)."""
    staged: bool = False
    """Only nodes with staged changes."""
    baseline: Path | None = None
    shard: tuple[int, int] | None = None
    """(index, total), 1-based."""
    nodes: frozenset[str] = frozenset()
    """Only the nodes with these ids (an editor's "run agents on this node"); empty: all."""
    edits: Edits = "report"
    unsafe_fixes: bool = False
    keep_workspaces: bool = False
    record: Path | None = None
    """Append every job's transcript to this folder (`AGENT.jsonl`); the cache is then neither
    read nor written, so every job runs and is recorded."""

    @cached_property
    def root(self) -> Path:
        """The project root: what paths in results are relative to, where the project's
        Python and configuration are looked for. Worked out once per request."""
        return project_root(list(self.paths))


def project_root(paths: list[Path]) -> Path:
    """The working directory, unless the paths lie elsewhere: then the nearest folder up from
    their common folder with a project file or `.git` (`remora analyze ../lib/pkg/mod.py` is
    imported as `pkg.mod` from `../lib`, as pytest finds its rootdir), else that folder."""
    cwd = Path.cwd().resolve()
    resolved = [path.resolve() for path in paths]
    if all(path.is_relative_to(cwd) for path in resolved):
        return cwd
    common = Path(os.path.commonpath(resolved))
    common = common if common.is_dir() else common.parent
    for folder in (common, *common.parents):
        if any((folder / marker).exists() for marker in (*PROJECT_MARKERS, ".git")):
            return folder
    return common


def _ignore(_: object) -> None:
    return None


@dataclass(frozen=True)
class AnalysisHooks:
    """How a caller follows a run while it goes: results as they are final (a streamed report,
    a progress bar), lines to show the user (`say`), and warnings."""

    result: Callable[[JobResult], None] = _ignore
    started: Callable[[int], None] = _ignore
    """Called with the number of jobs that need the model once it is ready, before the first
    one starts (never when the cache answered every job)."""
    say: Callable[[str], None] = _ignore
    warn: Callable[[str], None] = _ignore
    report: Callable[[AnalyzeOutcome], None] = _ignore
    """The results are final: write the report. Called before any fix is applied; if it
    raises, no file is written."""
    planned: Callable[[dict[str, int]], None] = _ignore
    """Called once the cache was looked up, before any `ended`: how many jobs each agent has
    in the run (all of them: answered from the cache, skipped, and those for the model), in
    the order of the agents."""
    ended: Callable[[JobResult], None] = _ignore
    """Each job as it ends, for progress: first those answered from the cache and those
    skipped before the run, then the others as they finish. Unlike `result`, it does not
    wait for the suite check of agents with `verify_together` (which may still make the job
    not done)."""


@dataclass
class AnalyzeOutcome:
    results: list[JobResult]
    summary: RunSummary
    agents: list[Agent]
    root: Path
    """The folder paths in the results are relative to."""
    cached: int = 0
    """Jobs answered from the result cache."""
    changes: list[Change] = field(default_factory=list)
    """The changes of successful jobs."""
    applied: ApplyReport | None = None
    """With edits="fix": what was written, refused as a conflict, or failed."""

    @property
    def model_requests(self) -> int:
        return sum(result.turns for result in self.results if not result.cached)
