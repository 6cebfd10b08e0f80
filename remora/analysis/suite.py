"""The suite check: test files that agents generated are shown and written only as a set that
passes together with the project's tests.

Each generated file passed on its own in its job; together they may not (a test calls a
function that changes module-level state, and a later test sees it). After the run's jobs, the
successful jobs of agents with `verify_together: pytest` are checked, per project folder (the
nearest folder up with pyproject.toml, setup.py, setup.cfg, pytest.ini or tox.ini), in one
pytest session with the test files already in the generated files' folders (`test_*.py`,
`*_test.py`; not their subfolders), in the project's Python, in the OS sandbox, in two orders:
the files sorted (as pytest would collect them), and reversed. A round drops:

1. the jobs whose file fails in the first order, else those whose file fails in the second;
2. else, for an existing test that fails in company but passes without the generated files in
   the same order (a baseline session, run only when needed; tests that fail alone do not
   count), the generated files that ran before it, narrowed by halves to the one that makes
   it fail where the halves tell.

Rounds repeat until both orders pass, or no generated file is left, at most `ROUNDS` times; a set
still failing after them is not verified, and none of it is written. A dropped job ends
`not_done` (status failed) with its reason as summary and error, without its changes (neither
`--diff` nor `--fix` sees them); its findings stay, and the result cache stores it so
(routing.py). When a session says nothing (pytest timed out, the sandbox failed, pytest could
not run), the project's generated files are not verified:
their jobs end as errors (`command_timeout`, `sandbox_crashed`, `tool_environment`), not
written, with one warning: precision first, a set that was not verified is never written.

Each session may take `TIMEOUT_FACTOR` times `sandbox.commands.timeout_s` (suite_runs.py); the
agent's `pytest_args` option, if it has one, comes first on pytest's command line, and the
check's own arguments (the order kept, every file run) after it. The check runs whatever
`--fix` or `--diff` say, so the report is the same either way; until it is done, the results it
may change are not final (`analyze` streams and records them after it). A job that changes a
file an earlier job changes is dropped (one view of the project cannot hold both).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import anyio

from remora.agents.definition import Agent
from remora.analysis.request import AnalysisHooks
from remora.analysis.suite_runs import Failure, SuiteRunner, Unverifiable
from remora.config.settings import CommandSettings
from remora.events import Events
from remora.findings.results import ErrorCode, JobError, JobResult, JobStatus
from remora.tool_library.module_paths import project_of

ROUNDS = 5
ORDERS = ("order as written", "order reversed")


@dataclass(frozen=True)
class Drop:
    """Why a job's files are not written, and what its result becomes."""

    reason: str
    status: JobStatus = JobStatus.FAILED
    code: ErrorCode = ErrorCode.NOT_DONE


def checked_agents(agents: Sequence[Agent]) -> frozenset[str]:
    return frozenset(agent.name for agent in agents if agent.definition.verify_together)


def awaits_check(result: JobResult, checked: frozenset[str]) -> bool:
    """A result that is final only after the check (its changes may be dropped)."""
    return result.agent in checked and result.status is JobStatus.SUCCESS and bool(result.changes)


async def check_suites(
    results: list[JobResult],
    agents: Sequence[Agent],
    *,
    root: Path,
    commands: CommandSettings,
    events: Events,
    hooks: AnalysisHooks,
) -> list[JobResult]:
    """The results with every job whose generated files do not pass together made not done
    (or an error, when they could not be checked); the others as they were, in order."""
    checked = checked_agents(agents)
    waiting = [index for index, result in enumerate(results) if awaits_check(result, checked)]
    if not waiting:
        return results
    owner, drops = _owners(results, waiting)
    projects = _projects(root, owner)
    if total := sum(len(files) for files in projects.values()):
        noun = "file" if total == 1 else "files"
        hooks.say(
            f"checking {total} generated test {noun} together with the project's tests "
            f"({len(ORDERS)} orders)"
        )
    texts = {
        index: {change.file: change.new_text for change in results[index].changes}
        for index in set(owner.values())
    }
    runner = SuiteRunner(root, commands, _extra_args(agents, {results[i].agent for i in waiting}))
    for project, in_project in sorted(projects.items()):
        started, before = time.perf_counter(), runner.runs
        # A job dropped in an earlier project folder is not run in this one.
        files = {file: index for file, index in in_project.items() if index not in drops}
        check = ProjectCheck(runner, project, files, texts, _existing(root, files, owner))
        found = await check.run()
        drops.update(found)
        _announce(events, hooks, results, check, found, time.perf_counter() - started, before)
    if failed := sum(1 for drop in drops.values() if drop.status is JobStatus.FAILED):
        hooks.say(
            f"{failed} of {len(waiting)} jobs' test files not written: they do not pass "
            "together with the project's tests (the report says why)"
        )
    return [
        _dropped(result, drops[index]) if index in drops else result
        for index, result in enumerate(results)
    ]


def _owners(results: list[JobResult], waiting: list[int]) -> tuple[dict[str, int], dict[int, Drop]]:
    """Each changed file's job; a job that changes a file an earlier job changes is dropped
    (the two cannot both be in one view of the project)."""
    owner: dict[str, int] = {}
    drops: dict[int, Drop] = {}
    for index in waiting:
        files = [change.file for change in results[index].changes]
        if shared := [file for file in files if file in owner]:
            drops[index] = Drop(f"{shared[0]} is also changed by another job; not written")
        else:
            owner.update(dict.fromkeys(files, index))
    return owner, drops


def _projects(root: Path, owner: dict[str, int]) -> dict[str, dict[str, int]]:
    """The changed test files (`.py` but conftest.py) by project folder."""
    projects: dict[str, dict[str, int]] = {}
    exists = _exists(root, owner)
    for file, index in sorted(owner.items()):
        name = PurePosixPath(file).name
        if name.endswith(".py") and name != "conftest.py":
            projects.setdefault(project_of(file, exists), {})[file] = index
    return projects


@dataclass
class ProjectCheck:
    """The check of one project folder's generated files (`files`: file → job)."""

    runner: SuiteRunner
    project: str
    files: dict[str, int]
    texts: dict[int, dict[str, str]]
    """Each job's changes (file → text), written into every session it is part of."""
    existing: list[str]
    rounds: int = 0
    problem: str | None = None
    """Why a session said nothing, when one did not: the files were then not verified."""
    baseline: dict[int, frozenset[Failure]] = field(default_factory=dict)

    def order(self, kept: set[int], number: int = 0) -> list[str]:
        """The existing files and those of the `kept` jobs, in order `number` (of `ORDERS`)."""
        files = sorted([*self.existing, *(f for f, job in self.files.items() if job in kept)])
        return files if number == 0 else files[::-1]

    async def session(self, files: list[str], kept: set[int]) -> frozenset[Failure]:
        view = {file: text for job in sorted(kept) for file, text in self.texts[job].items()}
        return await self.runner.session(self.project, files, view)

    async def run(self) -> dict[int, Drop]:
        """What to drop: the jobs that fail in company, or make others fail."""
        kept = set(self.files.values())
        drops: dict[int, Drop] = {}
        try:
            while kept:
                if self.rounds == ROUNDS:
                    why = f"was not verified: the tests still failed together after {ROUNDS} rounds"
                    return drops | {job: Drop(self._say(job, why)) for job in kept}
                self.rounds += 1
                orders = [self.order(kept, number) for number in range(len(ORDERS))]
                if orders[0] == orders[-1]:
                    orders = orders[:1]  # one file: both orders are the same session
                sessions = await self._sessions(orders, kept)
                found = self._failing(sessions, kept) or await self._polluters(
                    orders, sessions, kept
                )
                if not found:
                    return drops
                drops.update(found)
                kept -= set(found)
        except Unverifiable as exc:
            self.problem = exc.message
            why = f"was not checked with the project's tests: {exc.message}"
            unchecked = {job: Drop(self._say(job, why), JobStatus.ERROR, exc.code) for job in kept}
            return drops | unchecked
        return drops

    async def _sessions(self, orders: list[list[str]], kept: set[int]) -> list[frozenset[Failure]]:
        """The orders' sessions, at the same time; the first that says nothing stops the other."""
        sessions: list[frozenset[Failure]] = [frozenset()] * len(orders)
        problems: list[Unverifiable] = []

        async def run(number: int) -> None:
            try:
                sessions[number] = await self.session(orders[number], kept)
            except Unverifiable as exc:
                problems.append(exc)
                group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            for number in range(len(orders)):
                group.start_soon(run, number)
        if problems:
            raise problems[0]
        return sessions

    def _failing(self, sessions: list[frozenset[Failure]], kept: set[int]) -> dict[int, Drop]:
        """The jobs whose files fail in the first order that has any."""
        for number, failures in enumerate(sessions):
            failed = {}
            for failure in sorted(failures, key=lambda found: found.test):
                job = self.files.get(failure.file)
                if job is not None and job in kept and job not in failed:
                    failed[job] = Drop(
                        f"{failure.file} passes alone but fails when run with the project's "
                        f"other tests ({ORDERS[number]}: {failure.test}): a test changes state "
                        "that other tests see, or what it pins changes from run to run (random "
                        "numbers, the clock); not written"
                    )
            if failed:
                return failed
        return {}

    async def _polluters(
        self, orders: list[list[str]], sessions: list[frozenset[Failure]], kept: set[int]
    ) -> dict[int, Drop]:
        """For the first existing test that fails in company and not without the generated
        files (in the first order where one does): the generated files that make it fail."""
        for number, failures in enumerate(sessions):
            if not failures:
                continue
            if number not in self.baseline:
                alone = self.order(set(), number)
                self.baseline[number] = await self.session(alone, set()) if alone else frozenset()
            alone_tests = {failure.test for failure in self.baseline[number]}
            victims = [failure for failure in failures if failure.test not in alone_tests]
            if not victims:
                continue
            order = orders[number]
            at = {file: position for position, file in enumerate(order)}
            victim = min(victims, key=lambda found: (at.get(found.file, len(order)), found.test))
            before = order[: at.get(victim.file, len(order))]
            suspects = list(dict.fromkeys(self.files[f] for f in before if f in self.files))
            # None ran before it: an import did it (pytest imports every file first).
            culprits = await self._narrow(order, victim, suspects) if suspects else sorted(kept)
            where = f"{victim.test} fails after it ({ORDERS[number]}) and passes without it"
            if len(culprits) > 1:
                others = len(culprits) - 1
                where = (
                    f"{victim.test} fails when it and {others} other generated "
                    f"file{'s' if others > 1 else ''} run ({ORDERS[number]}) and passes "
                    "without them"
                )
            return {
                job: Drop(self._say(job, f"changes state that other tests see: {where}"))
                for job in culprits
            }
        return {}

    async def _narrow(self, order: list[str], victim: Failure, suspects: list[int]) -> list[int]:
        """The suspects that make `victim` fail, by halves: a session of the existing files
        that ran before it, half the suspects' files and the victim's file (each in its place
        in `order`); where neither half does it alone, all that are left."""
        if victim.file not in order:
            return suspects
        position = order.index(victim.file)
        existing = {file for file in order[:position] if file not in self.files}

        async def fails(jobs: list[int]) -> bool:
            chosen = existing | {file for file, job in self.files.items() if job in jobs}
            files = [file for file in order[:position] if file in chosen] + [victim.file]
            failures = await self.session(files, set(jobs))
            return victim.test in {failure.test for failure in failures}

        while len(suspects) > 1:
            half = len(suspects) // 2
            if await fails(suspects[:half]):
                suspects = suspects[:half]
            elif await fails(suspects[half:]):
                suspects = suspects[half:]
            else:
                break
        return suspects

    def _say(self, job: int, why: str) -> str:
        files = ", ".join(file for file, owner in sorted(self.files.items()) if owner == job)
        return f"{files} {why}; not written"


def _dropped(result: JobResult, drop: Drop) -> JobResult:
    return result.model_copy(
        update={
            "status": drop.status,
            "outcome": None,
            "summary": drop.reason,
            "changes": [],
            "error": JobError(code=drop.code, message=drop.reason),
        }
    )


def _exists(root: Path, owner: dict[str, int]) -> Callable[[str], bool]:
    def exists(path: str) -> bool:
        return path in owner or (root / path).is_file()

    return exists


def _existing(root: Path, files: dict[str, int], owner: dict[str, int]) -> list[str]:
    """The project's test files in the folders of `files` (pytest's default names), but those
    a job changes."""
    found = []
    for folder in sorted({PurePosixPath(file).parent for file in files}):
        host = root / folder
        if not host.is_dir():
            continue
        for entry in sorted(host.iterdir()):
            key = (folder / entry.name).as_posix()
            name = entry.name
            test = name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
            if test and entry.is_file() and key not in owner:
                found.append(key)
    return found


def _extra_args(agents: Sequence[Agent], names: set[str]) -> list[str]:
    """The `pytest_args` option of the checked agents (a list of strings; the same list of
    two agents once)."""
    lists: dict[tuple[str, ...], None] = {}
    for agent in agents:
        value = agent.options.get("pytest_args") if agent.name in names else None
        if isinstance(value, list) and all(isinstance(arg, str) for arg in value):
            lists[tuple(value)] = None
    return [arg for given in lists for arg in given]


def _announce(
    events: Events,
    hooks: AnalysisHooks,
    results: list[JobResult],
    check: ProjectCheck,
    found: dict[int, Drop],
    duration_s: float,
    runs_before: int,
) -> None:
    where = check.project or "."
    if check.problem is not None:
        hooks.warn(
            f"the generated test files in {where} were not checked together with the "
            f"project's tests ({check.problem}); none of them is written"
        )
    events.emit(
        "suite_checked",
        project=where,
        files=sorted(check.files),
        kept=sorted(file for file, job in check.files.items() if job not in found),
        dropped=[
            {
                "files": sorted(file for file, owner in check.files.items() if owner == job),
                "job_id": f"{results[job].agent}:{results[job].node.id}",
                "status": drop.status.value,
                "reason": drop.reason,
            }
            for job, drop in sorted(found.items())
        ],
        orders=list(ORDERS),
        rounds=check.rounds,
        runs=check.runner.runs - runs_before,
        verified=check.problem is None,
        duration_s=duration_s,
    )
