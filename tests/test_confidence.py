"""The model's confidence in the tool it chose: computed from the reply's log-probabilities,
recorded in the result and the event stream, and acted on per agent (resample the turn, seeded;
or end the job not done). The scripted model gives log-probabilities like vLLM."""

# ruff: noqa: F811  (the runner tests' fixtures, imported)

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from remora.agents.definition import Agent, load_agent
from remora.config.settings import ConfidencePolicy
from remora.discovery.nodes import Node
from remora.events import Events
from remora.findings.results import ErrorCode, JobResult, JobStatus
from remora.models.scripted.server import Reply, tool_call
from remora.protocol.confidence import call_confidence
from remora.protocol.messages import ToolCall
from remora.sandbox.executor import ToolSandbox
from tests.test_runner import anyio_backend, node, run_job, sandbox  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio

SUBMIT = tool_call("submit_result", {"summary": "done", "todo_count": 0})


def agent_with(probe_agent: Path, max_turns: int | None = None, **policy: Any) -> Agent:
    return load_agent(
        probe_agent,
        model="google/functiongemma-270m-it",
        max_turns=max_turns,
        confidence=ConfidencePolicy(**policy) if policy else None,
    )


async def run(
    agent: Agent, node: Node, project: Path, sandbox: ToolSandbox, rule: Any, **settings: Any
) -> tuple[JobResult, list[dict[str, Any]], list[dict[str, Any]]]:
    events = Events()
    seen: list[dict[str, Any]] = []
    events.listeners.append(seen.append)
    job_events = events.for_job("j", node.id, agent.name)
    result, requests = await run_job(
        None, agent, node, project, sandbox, rule=rule, events=job_events, **settings
    )
    return result, requests, seen


def unsure_first(sure_when_hot: bool = True) -> Any:
    """find_todos, given 0.2 confidence at temperature 0 (the turn's own request) and 0.9 when
    resampled hot; then submit_result."""

    def rule(body: dict[str, Any]) -> Reply:
        if len(body["messages"]) > 2:
            return SUBMIT
        hot = body["temperature"] > 0 and sure_when_hot
        return tool_call("find_todos", {"marker": "FIXME"}, confidence=0.9 if hot else 0.2)

    return rule


def test_confidence_is_the_probability_of_the_name_tokens() -> None:
    tokens = [("<start_function_call>", -0.1), ("call", 0.0), (":find", math.log(0.5))]
    tokens += [("_todos", math.log(0.8)), ("{", -0.2), ("}", 0.0)]
    call = ToolCall(id="c", name="find_todos", arguments="{}")
    assert call_confidence(tokens, [call]) == pytest.approx(0.4)
    assert call_confidence(tokens, [call.model_copy(update={"name": "other"})]) is None


async def test_confidence_is_recorded_in_the_result_and_the_events(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    result, requests, events = await run(
        agent_with(probe_agent, max_turns=2), node, project, sandbox, unsure_first()
    )
    assert result.status is JobStatus.SUCCESS
    assert result.confidence == pytest.approx(0.2)  # only recorded: no threshold set
    assert result.resamples == 0
    assert result.usage.requests == len(requests) == 2
    assert all(body["stream"] is True for body in requests)
    # Log-probabilities are asked for where the model chooses: not on the forced last turn.
    assert [body.get("logprobs") for body in requests] == [True, None]
    responses = [event for event in events if event["event"] == "model_response"]
    # The first turn chose among tools; the last (of 2) offered only submit_result: no choice.
    assert [event["confidence"] for event in responses] == [pytest.approx(0.2), None]
    progress = [event for event in events if event["event"] == "model_progress"]
    assert progress and progress[0]["calls"][0]["name"] == "find_todos"
    # At most one event per 0.25 s and job: here the whole reply came within that.
    assert all('{"marker": "FIXME"}'.startswith(e["calls"][0]["arguments"]) for e in progress)


async def test_an_unsure_turn_is_resampled_with_seeds_and_the_sure_reply_kept(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = agent_with(probe_agent, threshold=0.5, resamples=3, temperature=0.8)
    result, requests, events = await run(agent, node, project, sandbox, unsure_first())
    assert result.status is JobStatus.SUCCESS
    assert result.resamples == 1
    assert result.confidence == pytest.approx(0.9)  # the reply that was kept
    assert result.usage.requests == 3
    first, resample = requests[0], requests[1]
    assert first["temperature"] == 0.0 and "seed" not in first
    assert resample["temperature"] == 0.8 and isinstance(resample["seed"], int)
    assert resample["messages"] == first["messages"]
    attempts = [e["attempt"] for e in events if e["event"] == "model_request"]
    assert attempts == [0, 1, 0]
    # Seeds come from the job and the turn: a rerun asks the same.
    _, again, _ = await run(agent, node, project, sandbox, unsure_first())
    assert again[1]["seed"] == resample["seed"]


async def test_resamples_are_bounded_and_the_most_confident_reply_is_kept(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = agent_with(probe_agent, threshold=0.5, resamples=2)
    result, requests, _ = await run(
        agent, node, project, sandbox, unsure_first(sure_when_hot=False)
    )
    assert result.resamples == 2
    assert len(requests) == 4  # the turn, two resamples, submit_result
    assert len({body["seed"] for body in requests[1:3]}) == 2
    assert result.confidence == pytest.approx(0.2)
    assert result.status is JobStatus.SUCCESS  # the tools verified the work all the same


async def test_an_agent_can_end_unsure_jobs_not_done(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = agent_with(probe_agent, threshold=0.5, below="not_done")
    result, requests, _ = await run(agent, node, project, sandbox, unsure_first())
    assert result.status is JobStatus.FAILED
    assert result.error is not None and result.error.code is ErrorCode.LOW_CONFIDENCE
    assert "confidence 0.20, below confidence.threshold=0.5" in result.error.message
    assert "find_todos" in result.error.message
    assert len(requests) == 1  # no tool ran on the unsure choice


async def test_without_streaming_the_reply_is_the_same(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = agent_with(probe_agent, threshold=0.5)
    streamed, _, _ = await run(agent, node, project, sandbox, unsure_first())
    plain, requests, events = await run(agent, node, project, sandbox, unsure_first(), stream=False)
    assert "stream" not in requests[0]
    assert not [event for event in events if event["event"] == "model_progress"]
    fields = {"status", "outcome", "confidence", "resamples", "turns", "findings"}
    assert plain.model_dump(include=fields) == streamed.model_dump(include=fields)
