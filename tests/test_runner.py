"""The turn loop against the scripted model, the real OpenAI client and the real sandbox."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from remora.agents.definition import Agent, load_agent
from remora.config.settings import CommandSettings, ModelProfileName, RunnerSettings, ServerSettings
from remora.discovery.discover import discover_nodes
from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace
from remora.events import JobEvents
from remora.findings.results import JobResult
from remora.jobs.profiles import PROFILES
from remora.jobs.runner import FINAL_REMINDER, REMINDER, JobRunner
from remora.models.http.openai_client import OpenAIChatModel
from remora.models.scripted.model import ScriptedModel
from remora.models.scripted.server import (
    http_error,
    text,
    tool_call,
)
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox
from tests.conftest import PROBE_EXAMPLE

pytestmark = pytest.mark.anyio

SUBMIT = tool_call("submit_result", {"summary": "done", "todo_count": 0})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def sandbox() -> AsyncIterator[ToolSandbox]:
    async with ToolSandbox() as pool:
        yield pool


@pytest.fixture
def agent(probe_agent: Path) -> Agent:
    return load_agent(probe_agent, model="google/functiongemma-270m-it")


@pytest.fixture
def node(project: Path) -> Node:
    found = discover_nodes([project / "pkg"], root=project)
    return next(n for n in found.nodes if n.qualified_name == "shout")


async def run_job(
    script: list[Any] | None,
    agent: Agent,
    node: Node,
    project: Path,
    sandbox: ToolSandbox,
    *,
    profile: ModelProfileName = ModelProfileName.FUNCTIONGEMMA,
    rule: Any = None,
    events: JobEvents | None = None,
    **runner: Any,
) -> tuple[JobResult, list[dict[str, Any]]]:
    model = ScriptedModel(script, rule=rule)
    result = await JobRunner(
        agent,
        node,
        model=model,
        sandbox=sandbox,
        commands=CommandRunner(CommandSettings()),
        workspace=Workspace(project),
        profile=PROFILES[profile],
        settings=RunnerSettings(**runner),
        events=events,
    ).run()
    return result, model.requests


def assert_not_done(result: JobResult) -> None:
    """The model submitted, but no tool verified anything: never `success`."""
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "not_done"
    assert "submitted without a verified outcome (checked)" in result.error.message
    assert result.summary == ""


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def last_error(request: dict[str, Any]) -> str:
    content = tool_results(request)[-1]["content"]
    return str(json.loads(content)["error"])


async def test_unknown_tool_is_answered_with_an_error_result(
    agent: Agent, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    result, requests = await run_job(
        [tool_call("delete_everything", {}), SUBMIT], agent, node, project, sandbox
    )
    assert_not_done(result)  # repaired, then submitted without find_todos
    message = tool_results(requests[1])[0]
    assert message["name"] == "delete_everything"
    assert message["tool_call_id"] == requests[1]["messages"][2]["tool_calls"][0]["id"]
    error = last_error(requests[1])
    assert "unknown tool 'delete_everything'" in error
    assert "find_todos, replace_text, submit_result" in error


async def test_invalid_json_arguments(
    agent: Agent, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    result, requests = await run_job(
        [tool_call("replace_text", '{"old": "a", '), SUBMIT], agent, node, project, sandbox
    )
    assert_not_done(result)  # repaired, then submitted without find_todos
    assert "arguments are not valid JSON" in last_error(requests[1])


async def test_arguments_failing_the_schema(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = load_agent(probe_agent, model="m", max_turns=2)
    script = [
        tool_call("replace_text", {"old": 3, "node": "x"}),
        tool_call("submit_result", {"summary": "x"}),
    ]
    result, requests = await run_job(script, agent, node, project, sandbox)
    assert result.status == "failed"  # submit_result lacked todo_count on the last turn
    assert "invalid arguments" in last_error(requests[1])
    assert last_error(requests[1]) == (
        "invalid arguments: arguments: 'new' is a required property; "
        "arguments: Additional properties are not allowed ('node' was unexpected); "
        "old: 3 is not of type 'string'"
    )
    assert result.error is not None and result.error.code == "turn_limit"


async def test_repeated_identical_call(
    agent: Agent, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    script = [tool_call("find_todos", {"marker": "X"}), tool_call("find_todos", {"marker": "X"})]
    result, requests = await run_job([*script, SUBMIT], agent, node, project, sandbox)
    assert result.status == "success"
    assert "already made" in last_error(requests[2])
    assert json.loads(tool_results(requests[1])[0]["content"])["findings"] == []


async def test_text_without_a_call_gets_a_reminder(
    agent: Agent, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    result, requests = await run_job(
        [text("I think it is fine."), SUBMIT], agent, node, project, sandbox
    )
    assert_not_done(result)  # repaired, then submitted without find_todos
    assert requests[1]["messages"][2:] == [
        {"role": "assistant", "content": "I think it is fine."},
        {"role": "user", "content": REMINDER},
    ]


async def test_repair_limit_is_an_explicit_error_code(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = load_agent(probe_agent, model="m", max_turns=10)
    script = [text("a"), tool_call("nope", {}), tool_call("replace_text", "{")]
    result, requests = await run_job(script, agent, node, project, sandbox, max_repairs=2)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "invalid_model_output"
    assert "3 unusable model replies" in result.error.message
    assert len(requests) == 3


async def test_turn_limit_when_the_model_never_submits(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = load_agent(probe_agent, model="m", max_turns=2)
    script = [
        tool_call("replace_text", {"old": "A", "new": "B"}),
        tool_call("replace_text", {"old": "C", "new": "D"}),
    ]
    result, requests = await run_job(script, agent, node, project, sandbox)
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "turn_limit"
    assert [t["function"]["name"] for t in requests[1]["tools"]] == ["submit_result"]
    assert "unknown tool 'replace_text'" in result.error.message


async def test_a_verified_outcome_counts_whoever_ends_the_loop(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    """find_todos verified the work; the model then never submits: the job is done all the
    same, with Remora's summary from the tool, not the model's words."""
    agent = load_agent(probe_agent, model="m", max_turns=2)
    script = [tool_call("find_todos", {"marker": "TODO"}), text("I am not sure.")]
    result, _ = await run_job(script, agent, node, project, sandbox)
    assert result.status == "success"
    assert result.outcome == "checked"
    assert result.summary == "1 TODO comments"
    assert result.error is None


async def test_a_note_that_copies_the_prompt_is_dropped(
    agent: Agent, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    copied = tool_call("submit_result", {"summary": "One sentence.", "todo_count": 1})
    echo = tool_call(
        "submit_result", {"summary": "Report TODO comments in the node", "todo_count": 1}
    )
    own = tool_call("submit_result", {"summary": "Found the TODO about None.", "todo_count": 1})
    for submit, note in (
        (echo, None),
        (own, "Found the TODO about None."),
        (copied, None),  # the schema's own description
    ):
        result, _ = await run_job(
            [tool_call("find_todos", {}), submit], agent, node, project, sandbox
        )
        assert result.status == "success"
        assert result.summary == "1 TODO comments"  # Remora's, from find_todos
        assert result.note == note


@pytest.mark.parametrize("profile", [ModelProfileName.OPENAI, ModelProfileName.FUNCTIONGEMMA_KIT])
async def test_required_then_named_choice_profiles(
    profile: ModelProfileName, agent: Agent, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    script = [tool_call("find_todos", {}), tool_call("find_todos", {"marker": "Z"}), SUBMIT]
    result, requests = await run_job(script, agent, node, project, sandbox, profile=profile)
    assert result.status == "success"
    assert [r["tool_choice"] for r in requests[:2]] == ["required", "required"]
    assert requests[2]["tool_choice"] == {"type": "function", "function": {"name": "submit_result"}}
    assert len(requests[2]["tools"]) == 3  # the same tool list every turn: the prefix is cached
    assert requests[2]["tools"] == requests[0]["tools"]


def test_auto_profile_follows_the_model_names() -> None:
    from remora.jobs.profiles import resolve_profile

    auto = ModelProfileName.AUTO
    assert resolve_profile(auto, "google/functiongemma-270m-it").name == "functiongemma"
    assert resolve_profile(auto, "google/functiongemma-270m-it", "lint-lora").name == (
        "functiongemma"
    )
    assert resolve_profile(auto, "Qwen/Qwen3-0.6B").name == "openai"
    assert resolve_profile(ModelProfileName.FUNCTIONGEMMA_KIT, "x").tool_choice == "required"


async def test_server_500_is_a_model_error(
    agent: Agent, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    result, _ = await run_job([http_error(500, "exploded")], agent, node, project, sandbox)
    assert result.status == "error"
    assert result.error is not None and result.error.code == "model_error"
    assert "HTTP 500" in result.error.message and "exploded" in result.error.message


async def test_tool_script_failure_goes_back_to_the_model(
    tmp_path: Path, node: Node, project: Path, sandbox: ToolSandbox, probe_agent: Path
) -> None:
    script = probe_agent.parent / "tools/find_todos.pym"
    script.write_text(script.read_text().split("# ///\n")[0] + "# ///\nx = 1\ny = x / 0\n")
    agent = load_agent(probe_agent, model="m")
    result, requests = await run_job(
        [tool_call("find_todos", {}), SUBMIT], agent, node, project, sandbox
    )
    assert_not_done(result)  # repaired, then submitted without find_todos
    assert last_error(requests[1]) == "find_todos.pym:11: ZeroDivisionError: division by zero"


async def test_tool_cannot_escape_the_workspace(
    node: Node, project: Path, sandbox: ToolSandbox, probe_agent: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("s3cret")
    script = probe_agent.parent / "tools/find_todos.pym"
    script.write_text(
        script.read_text().split("# ///\n")[0] + "# ///\n"
        "results = []\n"
        "for path in ['../secret.txt', '/etc/passwd', "
        + repr(str(tmp_path / "secret.txt"))
        + "]:\n"
        "    try:\n"
        "        results.append(read_file(path))\n"
        "    except PermissionError as exc:\n"
        "        results.append('refused: ' + str(exc))\n"
        "try:\n"
        "    open('/etc/passwd').read()\n"
        "except PermissionError:\n"
        "    results.append('open refused')\n"
        "results\n"
    )
    agent = load_agent(probe_agent, model="m")
    _result, requests = await run_job(
        [tool_call("find_todos", {}), SUBMIT], agent, node, project, sandbox
    )
    outputs = json.loads(tool_results(requests[1])[0]["content"])
    assert all(item.startswith("refused") for item in outputs[:3]), outputs
    assert outputs[3] == "open refused"
    assert "s3cret" not in json.dumps(requests[1])


async def test_job_time_limit(
    agent: Agent, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    from remora.models.scripted.server import ScriptedModelServer as Server

    with Server(script=[SUBMIT], latency=2.0) as server:
        model = OpenAIChatModel(ServerSettings(base_url=server.base_url, retries=0, timeout=5))
        result = await JobRunner(
            agent,
            node,
            model=model,
            sandbox=sandbox,
            commands=CommandRunner(CommandSettings()),
            workspace=Workspace(project),
            profile=PROFILES[ModelProfileName.FUNCTIONGEMMA],
            settings=RunnerSettings(job_timeout=0.3),
        ).run()
        await model.aclose()
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "time_limit"


async def test_final_reminder_before_the_last_turn(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = load_agent(probe_agent, model="m", max_turns=2)
    result, requests = await run_job([text("no"), SUBMIT], agent, node, project, sandbox)
    assert_not_done(result)  # repaired, then submitted without find_todos
    assert requests[1]["messages"][-1] == {"role": "user", "content": FINAL_REMINDER}
    assert [t["function"]["name"] for t in requests[1]["tools"]] == ["submit_result"]


async def test_functiongemma_profile_sends_a_native_call_grammar_per_turn(
    probe_agent: Path, node: Node, project: Path, sandbox: ToolSandbox
) -> None:
    agent = load_agent(probe_agent, model="m", max_turns=2)
    script = [tool_call("find_todos", {}), SUBMIT]
    result, requests = await run_job(script, agent, node, project, sandbox)
    assert result.status == "success"
    first, last = (request["structured_outputs"]["grammar"] for request in requests)
    assert all(request["skip_special_tokens"] is False for request in requests)
    for name in ("find_todos", "replace_text", "submit_result"):
        assert f'"<start_function_call>call:{name}"' in first
    assert '"<start_function_call>call:submit_result"' in last
    assert "find_todos" not in last  # the last turn admits submit_result only


@pytest.fixture
def example_agent(probe_agent: Path, project: Path) -> Agent:
    probe_agent.write_text(probe_agent.read_text() + PROBE_EXAMPLE)
    (project / "pkg" / "other.py").write_text("def whisper(text):\n    return text.lower()\n")
    return load_agent(probe_agent, model="m")


async def test_examples_come_before_every_job_in_the_same_bytes(
    example_agent: Agent, project: Path, sandbox: ToolSandbox
) -> None:
    agent = example_agent
    found = discover_nodes([project / "pkg"], root=project).nodes
    transcripts = []
    for node in [n for n in found if agent.handles(n)][:2]:
        script = [tool_call("find_todos", {}), SUBMIT]
        result, requests = await run_job(script, agent, node, project, sandbox)
        assert result.status == "success"  # the example's calls are shown, not run or counted
        assert result.turns == 2 and len(tool_results(requests[1])) == 2
        first = requests[0]["messages"]
        assert first[0]["role"] == "system" and first[-1]["role"] == "user"
        assert [m["role"] for m in first[1:-1]] == ["user", "assistant", "tool", "assistant"]
        assert node.qualified_name in first[-1]["content"]
        transcripts.append(json.dumps(first[:-1]))
    assert len(transcripts) == 2 and transcripts[0] == transcripts[1]


@pytest.mark.parametrize(
    ("profile", "one_call"),
    [
        (ModelProfileName.FUNCTIONGEMMA, True),
        (ModelProfileName.FUNCTIONGEMMA_KIT, True),
        (ModelProfileName.OPENAI, False),
    ],
)
async def test_functiongemma_profiles_ask_for_one_call_per_reply(
    probe_agent: Path,
    node: Node,
    project: Path,
    sandbox: ToolSandbox,
    profile: ModelProfileName,
    one_call: bool,
) -> None:
    agent = load_agent(probe_agent, model="m", max_turns=2)
    script = [tool_call("find_todos", {}), SUBMIT]
    result, requests = await run_job(script, agent, node, project, sandbox, profile=profile)
    assert result.status == "success"
    for request in requests:
        assert ("parallel_tool_calls" in request) is one_call
        assert request.get("parallel_tool_calls", False) is False
    if profile is ModelProfileName.FUNCTIONGEMMA:  # the grammar admits one call, not several
        grammar = requests[0]["structured_outputs"]["grammar"]
        assert "call+" not in grammar


@pytest.mark.parametrize(
    ("profile", "setting", "sent"),
    [
        (ModelProfileName.OPENAI, "auto", False),
        (ModelProfileName.FUNCTIONGEMMA_KIT, "auto", False),
        (ModelProfileName.FUNCTIONGEMMA, "off", False),
        (ModelProfileName.OPENAI, "on", True),
    ],
)
async def test_grammar_follows_profile_and_setting(
    profile: ModelProfileName,
    setting: str,
    sent: bool,
    agent: Agent,
    node: Node,
    project: Path,
    sandbox: ToolSandbox,
) -> None:
    _, requests = await run_job(
        [SUBMIT], agent, node, project, sandbox, profile=profile, grammar=setting
    )
    assert ("structured_outputs" in requests[0]) is sent
