"""Every node x agent job in one task group under capacity limits: the one owner of the
result cache during a run (look-ups, answers, stores, eviction) and of every job event."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import anyio

from remora.agents.definition import Agent
from remora.cache.store import ResultCache
from remora.config.settings import RemoraSettings
from remora.discovery.nodes import Node
from remora.events import NO_EVENTS, Events, JobEvents
from remora.findings.results import JobResult
from remora.jobs.job import Job, JobOptions, job_id, run_job
from remora.jobs.workers.pool import run_in_workers, worker_count
from remora.protocol.messages import ChatModel
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox, pool_size


def plan_jobs(agents: Sequence[Agent], nodes: Sequence[Node]) -> list[Job]:
    """Jobs of one agent are scheduled together: they share a prompt prefix the server caches."""
    return [(agent, node) for agent in agents for node in nodes if agent.handles(node)]


ModelOpener = Callable[[], AbstractAsyncContextManager[ChatModel]]
"""Opens the model (loads the engine, checks the server) only when some job needs it."""


async def run_jobs(
    jobs: Sequence[Job],
    *,
    model: ChatModel | None = None,
    open_model: ModelOpener | None = None,
    settings: RemoraSettings,
    root: Path,
    options: JobOptions = JobOptions(),  # noqa: B008 (frozen)
    cache: ResultCache | None = None,
    events: Events = NO_EVENTS,
    on_result: Callable[[JobResult], None] | None = None,
    on_planned: Callable[[int, int], None] | None = None,
    workers: int = 1,
) -> list[JobResult]:
    """Run every job; a job that crashes becomes an `error` result and never stops the others.

    Jobs the `cache` can answer are answered from it; the model (`model`, or the one
    `open_model` opens) is asked only when some job is left. `on_planned(pending, cached)` is
    called once the cache was looked up, before any job event. Results come back in job order
    whatever order they finished in; `on_result` gets each as it is final, and every job's
    events are emitted here. `workers` (`worker_count`): 1 runs the jobs in this process;
    more run them in worker processes (a server's model only: each opens its own client).
    """
    if (model is None) == (open_model is None):
        raise TypeError("run_jobs needs exactly one of model and open_model")
    results: list[JobResult | None] = [None] * len(jobs)
    for index, (agent, node) in enumerate(jobs):
        if cache is not None and (hit := cache.get(agent, node, root)) is not None:
            results[index] = hit
    pending = [index for index, result in enumerate(results) if result is None]
    if on_planned is not None:
        on_planned(len(pending), len(jobs) - len(pending))
    for index, hit in enumerate(results):
        if hit is not None:
            agent = jobs[index][0]
            if on_result is not None:
                on_result(hit)
            emit_finished(events.for_job(job_id(agent, hit.node), hit.node.id, agent.name), hit)
    if not pending:
        return [result for result in results if result is not None]
    if cache is not None:
        cache.prepare()

    def finish(index: int, result: JobResult) -> None:
        agent, node = jobs[index]
        if cache is not None:
            cache.put(agent, result, root)
        emit_finished(events.for_job(job_id(agent, node), node.id, agent.name), result)
        results[index] = result
        if on_result is not None:
            on_result(result)

    count = worker_count(workers, jobs=len(pending), concurrency=settings.concurrency)
    opened = given(model) if model is not None else open_model()  # type: ignore[misc]
    async with opened as chat_model:
        for index in pending:
            agent, node = jobs[index]
            events.emit("job_queued", job_id=job_id(agent, node), node_id=node.id, agent=agent.name)
        if count > 1:
            await run_in_workers(
                jobs,
                pending,
                workers=count,
                settings=settings,
                root=root,
                options=options,
                events=events,
                finish=finish,
            )
        else:
            await _run_here(
                jobs,
                pending,
                model=chat_model,
                settings=settings,
                root=root,
                options=options,
                events=events,
                finish=finish,
            )
    if cache is not None:
        cache.evict()
    return [result for result in results if result is not None]


@asynccontextmanager
async def given(model: ChatModel) -> AsyncIterator[ChatModel]:
    """A model the caller opened (and closes)."""
    yield model


async def _run_here(
    jobs: Sequence[Job],
    pending: list[int],
    *,
    model: ChatModel,
    settings: RemoraSettings,
    root: Path,
    options: JobOptions,
    events: Events,
    finish: Callable[[int, JobResult], None],
) -> None:
    """The pending jobs in this process's event loop: `settings.concurrency` of them asking the
    model at a time (a job takes its seat at its first request and keeps it to its end), and
    beside them jobs that run only their tools, `2 x sandbox.commands.max_parallel` more.

    Why two limits: the embedded engine serves two jobs per slot best (one generating while
    the other runs its tools; more in flight only wait for its turns and evict each other's
    prompts), but many jobs never ask it (a lint step without unsafe fixes, a docstring that is
    current, a function with nothing to test), and held to that limit they ran two at a time
    with the cores mostly idle: rich's lint step in 6.4 s against 4.5 s beside the seats."""
    seats = anyio.CapacityLimiter(settings.concurrency)
    at_once = settings.concurrency + 2 * settings.sandbox.commands.max_parallel
    limiter = anyio.CapacityLimiter(at_once)
    commands = CommandRunner(settings.sandbox.commands)

    async with ToolSandbox(pool_size(at_once)) as sandbox:

        async def run_one(index: int, agent: Agent, node: Node) -> None:
            borrower, seated = object(), False

            async def take_seat() -> None:
                nonlocal seated
                if not seated:
                    await seats.acquire_on_behalf_of(borrower)
                    seated = True

            async with limiter:
                try:
                    result = await run_job(
                        agent,
                        node,
                        model=model,
                        sandbox=sandbox,
                        commands=commands,
                        settings=settings,
                        root=root,
                        options=options,
                        events=events.for_job(job_id(agent, node), node.id, agent.name),
                        model_seat=take_seat,
                    )
                finally:
                    if seated:
                        seats.release_on_behalf_of(borrower)
            finish(index, result)

        async with anyio.create_task_group() as group:
            for index in pending:
                group.start_soon(run_one, index, *jobs[index])


def emit_finished(events: JobEvents, result: JobResult) -> None:
    events.emit(
        "job_finished",
        status=result.status.value,
        outcome=result.outcome,
        turns=result.turns,
        findings=len(result.findings),
        changes=len(result.changes),
        suggestions=len(result.suggestions),
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        requests=result.usage.requests,
        confidence=result.confidence,
        resamples=result.resamples,
        duration_s=result.duration_s,
        cached=result.cached,
        error_code=result.error.code.value if result.error else None,
        error=result.error.message if result.error else None,
    )
