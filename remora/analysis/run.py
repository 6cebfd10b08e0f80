"""`analyze`: one run from request to outcome. The stages are modules of this package; this
function only puts them in order."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel

from remora.agents.registry import select_agents
from remora.analysis.baseline import Baseline
from remora.analysis.engine import ModelOpener, choose_engine, opened_model
from remora.analysis.filters import ResultFilters
from remora.analysis.imports import skipped, unimportable
from remora.analysis.plan import make_plan, project_root
from remora.analysis.request import AnalysisHooks, AnalyzeOutcome, AnalyzeRequest
from remora.analysis.requirements import check_requirements
from remora.analysis.suite import awaits_check, check_suites, checked_agents
from remora.cache.folder import cache_dir_problem, cache_location
from remora.cache.store import ResultCache
from remora.config.loading import LoadedSettings
from remora.edits.apply import apply_changes
from remora.errors import RunFailed, UserInputError
from remora.events import NO_EVENTS, Events
from remora.findings.results import EngineUsage, JobResult, JobStatus, RunSummary
from remora.jobs.job import Job, JobOptions, job_id
from remora.jobs.orchestrator import emit_finished, run_jobs
from remora.jobs.transcripts import TranscriptWriter
from remora.models.http.adaptive import adapted
from remora.models.local.model import LocalChatModel
from remora.protocol.messages import ChatModel, ModelError
from remora.sandbox.interpreter import project_commands


async def analyze(
    request: AnalyzeRequest,
    loaded: LoadedSettings,
    *,
    events: Events = NO_EVENTS,
    hooks: AnalysisHooks = AnalysisHooks(),  # noqa: B008 (frozen: one shared default is fine)
    open_model: ModelOpener = opened_model,
) -> AnalyzeOutcome:
    """Run the request's agents over its paths. Bad input raises `UserInputError`; a run that
    cannot go on (no model, a failing server, an unusable cache) raises `RunFailed`. With
    edits="fix", `hooks.report` gets the outcome before any file is written: if it raises (the
    report cannot be written), no file is. `open_model` opens the model when a job needs it (a
    long-lived caller wraps it, e.g. to let one run at a time hold the model). The results of
    agents with `verify_together` that changed files reach `hooks.result` only after the suite
    check (analysis/suite.py), which may make them not done."""
    started = time.perf_counter()
    settings = loaded.settings
    choice = choose_engine(loaded)
    agents = select_agents(
        loaded,
        list(request.agents) or None,
        model=choice.model_name,
        options={"unsafe_fixes": True} if request.unsafe_fixes else None,
    )
    if not agents:
        raise UserInputError(
            "no agents enabled; enable one in remora.yaml or name one with --agents"
        )
    python, commands = project_commands(
        settings.sandbox.commands,
        project_root(list(request.paths)),
        trusted_project=loaded.project_trusted is not None,
    )
    check_requirements(agents, commands)
    if choice.description:
        hooks.say(choice.description)
    if any(agent.definition.requires.python_modules for agent in agents):
        hooks.say(f"project Python: {python.path} ({python.why})")
    run_settings = choice.settings.model_copy(
        update={"sandbox": choice.settings.sandbox.model_copy(update={"commands": commands})}
    )
    use_cache = request.use_cache and request.record is None
    cache_folder = cache_location(loaded) if use_cache else None
    recorder = TranscriptWriter(request.record) if request.record is not None else None
    if cache_folder is not None and (problem := cache_dir_problem(cache_folder)):
        raise RunFailed(problem)  # before any work, not on the first write
    plan = make_plan(
        list(request.paths),
        agents,
        cache=cache_folder,
        diff_base=request.diff_base,
        staged=request.staged,
        shard=request.shard,
        only=request.nodes,
        events=events,
        warn=hooks.warn,
    )
    # Ctrl-C during discovery (blocking) is delivered here, before anything is written.
    await anyio.lowlevel.checkpoint()
    cache = (
        None
        if cache_folder is None
        else ResultCache(
            cache_folder,
            run_settings,
            settings.cache_max_mb,
            warn=hooks.warn,
            retry_not_done=request.retry_not_done,
        )
    )
    baseline = Baseline.load(request.baseline) if request.baseline else None
    filters = ResultFilters(plan.found.nodes, plan.root, changed=plan.changed, baseline=baseline)
    cached = 0

    def planned(pending: int, from_cache: int) -> None:
        nonlocal cached
        cached = from_cache
        events.emit(
            "run_started",
            paths=[str(path) for path in request.paths],
            agents=[agent.name for agent in agents],
            jobs=len(plan.jobs),
            cached=from_cache,
            concurrency=settings.concurrency,
        )
        jobs = dict.fromkeys((agent.name for agent in agents), 0)
        for agent, _ in plan.jobs:
            jobs[agent.name] += 1
        hooks.planned(jobs)
        for result in skip.values():  # decided before the run: they count as ended at once
            hooks.ended(result)

    engine: EngineUsage | None = None
    """What the embedded engine did, once it has closed (none through a server)."""

    @asynccontextmanager
    async def model() -> AsyncIterator[ChatModel]:
        nonlocal engine
        async with open_model(choice, agents, say=hooks.say, warn=hooks.warn) as opened:
            hooks.started(len(runnable) - cached)
            if choice.local is not None:  # the embedded engine schedules its own requests
                try:
                    yield opened
                finally:
                    engine = opened.usage() if isinstance(opened, LocalChatModel) else None
                return
            async with adapted(opened, run_settings) as steered:
                yield steered

    models = {agent.name: agent.model for agent in agents}
    together = checked_agents(agents)

    def ended(result: JobResult) -> None:
        hooks.ended(result)
        finished(result)

    def finished(result: JobResult) -> None:
        filters.apply(result)
        if not awaits_check(result, together):  # else final (recorded, reported) after the check
            final(result)

    def final(result: JobResult) -> None:
        if recorder is not None:
            model = models[result.agent]
            recorder.write(result, model=model, temperature=settings.runner.temperature)
        hooks.result(result)

    broken = unimportable(plan.jobs, plan.root, commands)
    skip = {
        index: skipped(agent, node, broken[node.file][1])
        for index, (agent, node) in enumerate(plan.jobs)
        if agent.definition.requires.project_imports and node.file in broken
    }
    for module, error in sorted(set(broken.values())):
        count = sum(1 for result in skip.values() if broken[result.node.file][0] == module)
        hooks.warn(
            f"{module} does not import in the project's Python {python.path}: {error}; its "
            f"{count} job{'s' if count != 1 else ''} that need it are skipped. Install the "
            "project's dependencies in that environment, or set sandbox.commands.python"
        )
    runnable = [job for index, job in enumerate(plan.jobs) if index not in skip]
    try:
        ran = await run_jobs(
            runnable,
            open_model=model,
            settings=run_settings,
            root=plan.root,
            options=JobOptions(
                keep_workspaces=request.keep_workspaces, record=request.record is not None
            ),
            cache=cache,
            events=events,
            on_result=ended,
            on_planned=planned,
            workers=1 if choice.local is not None else settings.workers,
        )
    except ModelError as exc:
        raise RunFailed(exc.message) from exc
    results = merged(plan.jobs, ran, skip, finished, events)
    # And Ctrl-C while jobs were answered from the cache, before the report is written.
    await anyio.lowlevel.checkpoint()
    held = [index for index, result in enumerate(results) if awaits_check(result, together)]
    results = await check_suites(
        results, agents, root=plan.root, commands=commands, events=events, hooks=hooks
    )
    for index in held:
        final(results[index])
    if cached:
        hooks.say(f"{cached} of {len(plan.jobs)} jobs answered from the cache")
    said = baseline.report(request.baseline, results) if baseline and request.baseline else None
    if said:
        hooks.say(said)
    outcome = AnalyzeOutcome(
        results=results,
        summary=RunSummary.of(len(plan.nodes), results, engine=engine),
        agents=agents,
        root=plan.root,
        cached=cached,
        changes=[
            change
            for result in results
            if result.status is JobStatus.SUCCESS
            for change in result.changes
        ],
    )
    if outcome.summary.engine is not None and outcome.summary.engine.requests:
        hooks.say(outcome.summary.engine.line())
    hooks.report(outcome)
    if request.edits == "fix" and outcome.changes:
        outcome.applied = apply_changes(outcome.changes, plan.root)
        events.emit(
            "changes_applied", files=outcome.applied.applied, conflicts=outcome.applied.conflicts
        )
    events.emit(
        "run_finished",
        summary=outcome.summary.model_dump(),
        duration_s=time.perf_counter() - started,
    )
    return outcome


def merged(
    jobs: list[Job],
    ran: list[JobResult],
    skip: dict[int, JobResult],
    finished: Callable[[JobResult], None],
    events: Events,
) -> list[JobResult]:
    """The results in job order: those run, and those skipped before any job (reported and
    announced like any result)."""
    results = iter(ran)
    out = []
    for index, (agent, node) in enumerate(jobs):
        if index in skip:
            result = skip[index]
            finished(result)
            emit_finished(events.for_job(job_id(agent, node), node.id, agent.name), result)
        else:
            result = next(results)
        out.append(result)
    return out
