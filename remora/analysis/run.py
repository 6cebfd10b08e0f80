"""`analyze`: one run from request to outcome. The stages are modules of this package; this
function only puts them in order: setup, plan, the import check, the jobs, the suite check,
the outcome (and --fix)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext

import anyio
import anyio.lowlevel

from remora.analysis.baseline import Baseline
from remora.analysis.engine import ModelHold, RunModel
from remora.analysis.filters import ResultFilters
from remora.analysis.imports import import_check
from remora.analysis.plan import Plan, make_plan
from remora.analysis.request import AnalysisHooks, AnalyzeOutcome, AnalyzeRequest
from remora.analysis.routing import ResultRoutes
from remora.analysis.setup import RunSetup, prepare
from remora.config.loading import LoadedSettings
from remora.edits.apply import apply_changes
from remora.errors import RunFailed
from remora.events import NO_EVENTS, Events
from remora.findings.results import EngineUsage, JobResult, JobStatus, RunSummary
from remora.jobs.job import Job, JobOptions, job_id
from remora.jobs.orchestrator import emit_finished, run_jobs
from remora.protocol.messages import ModelError


async def analyze(
    request: AnalyzeRequest,
    loaded: LoadedSettings,
    *,
    events: Events = NO_EVENTS,
    hooks: AnalysisHooks = AnalysisHooks(),  # noqa: B008 (frozen: one shared default is fine)
    hold_model: ModelHold = nullcontext,
) -> AnalyzeOutcome:
    """Run the request's agents over its paths. Bad input raises `UserInputError`; a run that
    cannot go on (no model, a failing server, an unusable cache) raises `RunFailed`. With
    edits="fix", `hooks.report` gets the outcome before any file is written: if it raises (the
    report cannot be written), no file is. The model opens when a job needs it, inside
    `hold_model` (a long-lived caller's lock, e.g. one run at a time holds the model). The
    results of agents with `verify_together` that changed files reach `hooks.result` only after
    the suite check (analysis/suite.py), which may make them not done."""
    started = time.perf_counter()
    run = prepare(request, loaded, hooks)
    plan = make_plan(
        list(request.paths),
        run.agents,
        root=request.root,
        cache=run.cache_folder,
        diff_base=request.diff_base,
        staged=request.staged,
        shard=request.shard,
        only=request.nodes,
        events=events,
        warn=hooks.warn,
    )
    # Ctrl-C during discovery (blocking) is delivered here, before anything is written.
    await anyio.lowlevel.checkpoint()
    cache = run.open_cache(request, hooks)
    baseline = Baseline.load(request.baseline) if request.baseline else None
    filters = ResultFilters(plan.found.nodes, plan.root, changed=plan.changed, baseline=baseline)
    skip = import_check(plan.jobs, plan.root, run.commands, hooks.warn)
    routes = ResultRoutes(request, run, plan.jobs, filters, skip, hooks, events)
    runnable = [job for index, job in enumerate(plan.jobs) if index not in skip]
    waiting = lambda: len(runnable) - routes.cached  # noqa: E731 (known once the cache answered)
    model = RunModel(run.choice, run.agents, run.settings, hooks, hold_model, waiting)
    try:
        ran = await run_jobs(
            runnable,
            open_model=model.open,
            settings=run.settings,
            root=plan.root,
            options=JobOptions(
                keep_workspaces=request.keep_workspaces, record=request.record is not None
            ),
            cache=cache,
            events=events,
            on_result=routes.ended,
            on_planned=routes.planned,
            workers=1 if run.choice.local is not None else run.configured.workers,
        )
    except ModelError as exc:
        raise RunFailed(exc.message) from exc
    results = merged(plan.jobs, ran, skip, routes.finished, events)
    # And Ctrl-C while jobs were answered from the cache, before the report is written.
    await anyio.lowlevel.checkpoint()
    results = await routes.suite_check(results, plan.root, cache)
    if routes.cached:
        hooks.say(f"{routes.cached} of {len(plan.jobs)} jobs answered from the cache")
    said = baseline.report(request.baseline, results) if baseline and request.baseline else None
    if said:
        hooks.say(said)
    outcome = finish(request, run, plan, results, routes.cached, model.engine, hooks, events)
    events.emit(
        "run_finished",
        summary=outcome.summary.model_dump(),
        duration_s=time.perf_counter() - started,
    )
    return outcome


def finish(
    request: AnalyzeRequest,
    run: RunSetup,
    plan: Plan,
    results: list[JobResult],
    cached: int,
    engine: EngineUsage | None,
    hooks: AnalysisHooks,
    events: Events,
) -> AnalyzeOutcome:
    """The outcome, reported (`hooks.report`), then with --fix the changes applied."""
    outcome = AnalyzeOutcome(
        results=results,
        summary=RunSummary.of(len(plan.nodes), results, engine=engine),
        agents=run.agents,
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
