"""Every node x agent job in one task group under one capacity limit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

from remora.agents.definition import Agent
from remora.cache import ResultCache
from remora.config import RemoraSettings
from remora.discovery.nodes import Node
from remora.events import NO_EVENTS, Events, JobEvents
from remora.protocol.messages import ChatModel
from remora.protocol.profiles import resolve_profile
from remora.results import ErrorCode, JobError, JobResult, JobStatus
from remora.runner import FunctionGemmaRunner
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox
from remora.workspace import Workspace

Job = tuple[Agent, Node]


def plan_jobs(agents: Sequence[Agent], nodes: Sequence[Node]) -> list[Job]:
    """Jobs of one agent are scheduled together: they share a prompt prefix the server caches."""
    return [(agent, node) for agent in agents for node in nodes if agent.handles(node)]


async def run_jobs(
    jobs: Sequence[Job],
    *,
    model: ChatModel,
    settings: RemoraSettings,
    root: Path,
    keep_workspaces: bool = False,
    cache: ResultCache | None = None,
    events: Events = NO_EVENTS,
    on_result: Callable[[JobResult], None] | None = None,
) -> list[JobResult]:
    """Run every job; a job that crashes becomes an `error` result and never stops the others.

    Results come back in job order whatever order they finished in. Successful results are
    stored in `cache` (looking jobs up is the caller's business: it decides whether a server
    is needed at all).
    """
    results: list[JobResult | None] = [None] * len(jobs)
    limiter = anyio.CapacityLimiter(settings.concurrency)
    commands = CommandRunner(settings.sandbox.commands)

    async with ToolSandbox() as sandbox:

        async def run_one(index: int, agent: Agent, node: Node) -> None:
            job_events = events.for_job(job_id(agent, node), node.id, agent.name)
            async with limiter:
                job_events.emit("job_started")
                profile = resolve_profile(
                    settings.runner.model_profile, settings.server.model, agent.model
                )
                workspace = Workspace(
                    root, keep=keep_workspaces, copy_project=commands.confinement is None
                )
                runner = FunctionGemmaRunner(
                    agent,
                    node,
                    model=model,
                    sandbox=sandbox,
                    commands=commands,
                    workspace=workspace,
                    profile=profile,
                    settings=settings.runner,
                    events=job_events,
                )
                try:
                    result = await runner.run()
                except Exception as exc:  # a bug in one job must not take the run down
                    result = crashed(agent, node, exc, turns=runner.turns)
                finally:
                    workspace.close()
                if workspace.kept_directory is not None:
                    result.workspace = str(workspace.kept_directory)
            if cache is not None:
                cache.put(agent, result, root)
            emit_finished(job_events, result)
            results[index] = result
            if on_result is not None:
                on_result(result)

        async with anyio.create_task_group() as group:
            for index, (agent, node) in enumerate(jobs):
                events.emit(
                    "job_queued", job_id=job_id(agent, node), node_id=node.id, agent=agent.name
                )
                group.start_soon(run_one, index, agent, node)
    return [result for result in results if result is not None]


def job_id(agent: Agent, node: Node) -> str:
    return f"{agent.name}:{node.id}"


def emit_finished(events: JobEvents, result: JobResult) -> None:
    events.emit(
        "job_finished",
        status=result.status.value,
        outcome=result.outcome,
        turns=result.turns,
        findings=len(result.findings),
        changes=len(result.changes),
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        duration_s=result.duration_s,
        cached=result.cached,
        error_code=result.error.code.value if result.error else None,
        error=result.error.message if result.error else None,
    )


def crashed(agent: Agent, node: Node, exc: BaseException, *, turns: int = 0) -> JobResult:
    return JobResult(
        node=node,
        agent=agent.name,
        status=JobStatus.ERROR,
        turns=turns,
        error=JobError(code=ErrorCode.INTERNAL, message=f"{type(exc).__name__}: {exc}"),
    )
