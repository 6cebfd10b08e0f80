"""The in-process scripted model answers exactly as the scripted HTTP server does through the
real OpenAI client: the same request bodies recorded, the same replies, errors as ModelError."""

from __future__ import annotations

from typing import Any

import pytest

from remora.config.settings import ServerSettings
from remora.models.http.openai_client import OpenAIChatModel
from remora.models.scripted.model import ScriptedModel
from remora.models.scripted.replies import CallEveryTool, tool_calls
from remora.models.scripted.server import ScriptedModelServer, http_error, raw, text, tool_call
from remora.protocol.completion import CompletionRequest
from remora.protocol.messages import ChatRequest, ModelError, ModelReply

pytestmark = pytest.mark.anyio

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "find_todos",
            "description": "Find TODO comments.",
            "parameters": {
                "type": "object",
                "properties": {"marker": {"type": "string"}},
                "required": ["marker"],
            },
        },
    }
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(content: str = "hi", **fields: Any) -> ChatRequest:
    options: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "tools": TOOLS,
        "tool_choice": "auto",
        "max_tokens": 64,
        "temperature": 0.0,
    }
    return ChatRequest(**{**options, **fields})


async def over_http(script: list[Any], requests: list[ChatRequest]) -> tuple[list[Any], list[Any]]:
    with ScriptedModelServer(script=script) as server:
        client = OpenAIChatModel(ServerSettings(base_url=server.base_url, retries=0, timeout=5))
        try:
            replies = [await client.complete(one) for one in requests]
        finally:
            await client.aclose()
        return replies, server.requests


async def test_the_same_replies_and_bodies_as_over_http() -> None:
    script = [
        tool_call("find_todos", {"marker": "TODO"}),
        tool_calls(("find_todos", {"marker": "A"}), ("find_todos", {"marker": "B"})),
        text("no call"),
    ]
    asked = [
        request(),
        request("two", grammar="root ::= x", parallel_calls=False),
        request("three"),
    ]
    http_replies, http_bodies = await over_http(script, asked)
    model = ScriptedModel(script)
    replies = [await model.complete(one) for one in asked]
    assert replies == http_replies
    assert all(isinstance(reply, ModelReply) for reply in replies)
    assert model.requests == http_bodies
    assert model.requests[1]["parallel_tool_calls"] is False
    assert model.requests[1]["structured_outputs"] == {"grammar": "root ::= x"}
    assert [call.name for call in replies[1].tool_calls] == ["find_todos", "find_todos"]
    assert replies[2].content == "no call" and not replies[2].tool_calls


async def test_rules_completions_and_errors() -> None:
    model = ScriptedModel(rule=CallEveryTool(), completion=lambda body: "done.\nmore")
    reply = await model.complete(request())
    assert [call.name for call in reply.tool_calls] == ["find_todos"]
    completion = await model.complete_text(
        model="m", request=CompletionRequest(prompt="x", stop=["\n"])
    )
    assert completion.text == "done."
    assert model.completion_requests == [
        {"model": "m", "prompt": "x", "max_tokens": 64, "temperature": 0.0, "stop": ["\n"]}
    ]
    assert await model.list_models() == ["google/functiongemma-270m-it"]
    failing = ScriptedModel([http_error(503, "busy"), raw(200, b"{}")])
    with pytest.raises(ModelError, match="HTTP 503: busy"):
        await failing.complete(request())
    with pytest.raises(ModelError, match="malformed reply"):
        await failing.complete(request())
    with pytest.raises(ModelError, match="script exhausted"):
        await failing.complete(request())
