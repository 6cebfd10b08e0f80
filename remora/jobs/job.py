"""One job: an agent on a node, run in its own workspace; what the orchestrator and the
worker processes both run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2

from remora.agents.definition import Agent
from remora.config.settings import RemoraSettings
from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace
from remora.events import JobEvents
from remora.findings.results import ErrorCode, JobError, JobResult, JobStatus
from remora.jobs.profiles import resolve_profile
from remora.jobs.runner import JobRunner, ModelSeat
from remora.protocol.messages import ChatModel
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox

Job = tuple[Agent, Node]


@dataclass(frozen=True)
class JobOptions:
    """How every job of a run is run, beyond the settings."""

    keep_workspaces: bool = False
    """Keep each job's workspace folder (its path is in the result)."""
    record: bool = False
    """Keep each job's transcript in its result (`--record`)."""


def job_id(agent: Agent, node: Node) -> str:
    return f"{agent.name}:{node.id}"


async def run_job(
    agent: Agent,
    node: Node,
    *,
    model: ChatModel,
    sandbox: ToolSandbox,
    commands: CommandRunner,
    settings: RemoraSettings,
    root: Path,
    options: JobOptions,
    events: JobEvents,
    model_seat: ModelSeat | None = None,
) -> JobResult:
    """One job in its own workspace, in this process or a worker's; a crash is its result.
    `model_seat` is awaited before the job's first model request (the orchestrator's limit on
    jobs asking the model at once)."""
    events.emit("job_started")
    profile = resolve_profile(settings.runner.model_profile, settings.server.model, agent.model)
    workspace = Workspace(
        root, keep=options.keep_workspaces, copy_project=commands.confinement is None
    )
    runner = JobRunner(
        agent,
        node,
        model=model,
        sandbox=sandbox,
        commands=commands,
        workspace=workspace,
        profile=profile,
        settings=settings.runner,
        events=events,
        record=options.record,
        model_seat=model_seat,
    )
    try:
        result = await runner.run()
    except jinja2.TemplateError as exc:  # the agent's template on this node: its author's to fix
        message = f"node_context: cannot render template for this node: {exc}"
        error = JobError(code=ErrorCode.AGENT_TEMPLATE, message=message)
        result = JobResult(node=node, agent=agent.name, status=JobStatus.ERROR, error=error)
    except Exception as exc:  # a bug in one job must not take the run down
        result = crashed(agent, node, exc, turns=runner.turns)
    finally:
        workspace.close()
    if workspace.kept_directory is not None:
        result.workspace = str(workspace.kept_directory)
    return result


def crashed(agent: Agent, node: Node, exc: BaseException, *, turns: int = 0) -> JobResult:
    return JobResult(
        node=node,
        agent=agent.name,
        status=JobStatus.ERROR,
        turns=turns,
        error=JobError(code=ErrorCode.INTERNAL, message=f"{type(exc).__name__}: {exc}"),
    )
