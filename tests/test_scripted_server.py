"""The scripted model server, exercised through the real OpenAI client and plain HTTP."""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import jsonschema
import openai
import pydantic
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from remora.models.scripted.server import (
    SCRIPT_EXHAUSTED,
    CallEveryTool,
    Reply,
    ScriptedModelServer,
    arguments_from_schema,
    http_error,
    raw,
    text,
    tool_call,
    tool_calls,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
# Typed as Any: the OpenAI client wants TypedDicts, the assertions compare plain dicts.
USER: Any = [{"role": "user", "content": "look at a.py"}]


@pytest.fixture(autouse=True)
def no_leftover_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


def client_for(server: ScriptedModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10)


def tool(name: str, parameters: dict[str, Any]) -> Any:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def calls_of(completion: ChatCompletion) -> list[ChatCompletionMessageFunctionToolCall]:
    calls = completion.choices[0].message.tool_calls or []
    assert all(isinstance(c, ChatCompletionMessageFunctionToolCall) for c in calls)
    return calls  # type: ignore[return-value]


def http_get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers), exc.read()


def http_post(url: str, body: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


READ_FILE = tool(
    "read_file",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "default": 50}},
        "required": ["path"],
    },
)


# --------------------------------------------------------------------------- scripted replies


def test_tool_call_round_trip() -> None:
    with (
        ScriptedModelServer([tool_call("read_file", {"path": "a.py"})]) as server,
        client_for(server) as client,
    ):
        completion = client.chat.completions.create(
            model="small-model",
            messages=USER,
            tools=[READ_FILE],
            tool_choice="required",
            temperature=0,
        )
    assert completion.object == "chat.completion"
    assert completion.model == "small-model"
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.role == "assistant"
    assert choice.message.content is None
    [call] = calls_of(completion)
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "a.py"}
    usage = completion.usage
    assert usage is not None
    assert usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens

    [request] = server.requests
    assert request["model"] == "small-model"
    assert request["messages"] == USER
    assert request["tools"] == [READ_FILE]
    assert request["tool_choice"] == "required"
    assert request["temperature"] == 0


def test_parallel_calls_have_ids_unique_across_requests() -> None:
    script = [
        tool_calls(("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"})),
        tool_call("read_file", {"path": "c.py"}),
    ]
    with ScriptedModelServer(script) as server, client_for(server) as client:
        first = client.chat.completions.create(model="m", messages=USER)
        second = client.chat.completions.create(model="m", messages=USER)
    calls = calls_of(first) + calls_of(second)
    assert [json.loads(c.function.arguments)["path"] for c in calls] == ["a.py", "b.py", "c.py"]
    assert len({c.id for c in calls}) == 3
    assert first.id != second.id


def test_text_reply() -> None:
    with (
        ScriptedModelServer([text("all good"), text("cut", finish_reason="length")]) as server,
        client_for(server) as client,
    ):
        done = client.chat.completions.create(model="m", messages=USER)
        cut = client.chat.completions.create(model="m", messages=USER)
    assert done.choices[0].message.content == "all good"
    assert done.choices[0].message.tool_calls is None
    assert done.choices[0].finish_reason == "stop"
    assert cut.choices[0].finish_reason == "length"


def test_string_arguments_are_sent_verbatim() -> None:
    broken = '{"path": "a.py", '
    with (
        ScriptedModelServer([tool_call("read_file", broken)]) as server,
        client_for(server) as client,
    ):
        completion = client.chat.completions.create(model="m", messages=USER)
    [call] = calls_of(completion)
    assert call.function.arguments == broken


def test_exhausted_script_fails_loudly() -> None:
    with ScriptedModelServer([text("only one")]) as server, client_for(server) as client:
        client.chat.completions.create(model="m", messages=USER)
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="m", messages=USER)
    assert info.value.status_code == 500
    assert SCRIPT_EXHAUSTED in info.value.message
    assert len(server.requests) == 2


def test_http_error_with_retry_after() -> None:
    script = [http_error(429, "slow down", headers={"Retry-After": "7"}), text("after")]
    with ScriptedModelServer(script) as server, client_for(server) as client:
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model="m", messages=USER)
        after = client.chat.completions.create(model="m", messages=USER)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.body == {
        "message": "slow down",
        "type": "invalid_request_error",
        "code": "too_many_requests",
    }
    assert after.choices[0].message.content == "after"


def test_raw_truncated_body() -> None:
    truncated = b'{"id": "chatcmpl-1", "object": "chat.comp'
    script: list[Reply] = [
        raw(200, truncated),
        raw(200, truncated),
        raw(502, b"<html>bad gateway</html>", headers={"Content-Type": "text/html"}),
    ]
    with ScriptedModelServer(script) as server:
        status, body = http_post(
            f"{server.base_url}/chat/completions", json.dumps({"messages": []}).encode()
        )
        assert (status, body) == (200, truncated)
        with client_for(server) as client:
            with pytest.raises(json.JSONDecodeError):
                client.chat.completions.create(model="m", messages=USER)
            with pytest.raises(openai.InternalServerError) as info:
                client.chat.completions.create(model="m", messages=USER)
    assert info.value.status_code == 502
    assert info.value.response.text == "<html>bad gateway</html>"


def test_raw_body_shorter_than_content_length_drops_the_connection() -> None:
    script = [raw(200, b'{"id": ', headers={"Content-Length": "100"}), text("still here")]
    with ScriptedModelServer(script) as server, client_for(server) as client:
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=USER)
        after = client.chat.completions.create(model="m", messages=USER)
    assert after.choices[0].message.content == "still here"


# --------------------------------------------------------------------------- HTTP surface


def test_models_endpoint() -> None:
    with ScriptedModelServer([], models=["qwen-small", "phi-mini"]) as server:
        with client_for(server) as client:
            assert [m.id for m in client.models.list()] == ["qwen-small", "phi-mini"]
        status, _, body = http_get(server.base_url.removesuffix("/v1") + "/models")
    assert status == 200
    assert json.loads(body) == {
        "object": "list",
        "data": [
            {"id": "qwen-small", "object": "model", "created": 0, "owned_by": "remora-scripted"},
            {"id": "phi-mini", "object": "model", "created": 0, "owned_by": "remora-scripted"},
        ],
    }
    assert server.model_list_requests == 2
    assert server.requests == []


def test_unknown_path_and_bad_requests() -> None:
    with ScriptedModelServer([text("unused")]) as server:
        status, headers, body = http_get(f"{server.base_url}/embeddings")
        assert status == 404
        assert headers["Content-Type"] == "application/json"
        assert set(json.loads(body)["error"]) == {"message", "type", "code"}

        status, body = http_post(f"{server.base_url}/chat/completions", b"{not json")
        assert status == 400
        assert "not valid JSON" in json.loads(body)["error"]["message"]

        # Fields vLLM refuses before generating anything (streaming itself is served).
        for refused, words in [
            ({"stream_options": {"include_usage": True}}, "stream_options"),
            ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
            ({"top_logprobs": 2}, "logprobs must be set"),
            ({"seed": "7"}, "seed"),
        ]:
            request = json.dumps({"model": "m", "messages": USER, **refused}).encode()
            status, body = http_post(f"{server.base_url}/chat/completions", request)
            assert status == 400
            assert words in json.loads(body)["error"]["message"]
    assert server.requests == []


def test_keep_alive() -> None:
    with ScriptedModelServer([text("one"), text("two"), text("three")]) as server:
        with client_for(server) as client:
            for expected in ("one", "two"):
                reply = client.chat.completions.create(model="m", messages=USER)
                assert reply.choices[0].message.content == expected
        assert server.connections == 1

        # The same, spelled out on one raw HTTP/1.1 connection and without the /v1 prefix.
        conn = http.client.HTTPConnection("127.0.0.1", urlsplit(server.base_url).port)
        try:
            payload = json.dumps({"model": "m", "messages": USER})
            conn.request("POST", "/chat/completions", payload, {"Content-Type": "application/json"})
            first = conn.getresponse()
            assert json.loads(first.read())["choices"][0]["message"]["content"] == "three"
            conn.request("GET", "/v1/models")
            assert conn.getresponse().status == 200
        finally:
            conn.close()
        assert server.connections == 2


def test_latency_and_concurrency_in_the_same_event_loop() -> None:
    # A latency long enough for 20 requests of a cold client on a busy CI machine to overlap
    # (0.2 s saw 13 of them in flight once); one at a time they would take 20 s.
    server = ScriptedModelServer(rule=lambda body: text("ok"), latency=1.0)

    async def scenario() -> float:
        async with anyio.create_task_group() as tg:
            base_url = await tg.start(server.serve)
            async with openai.AsyncOpenAI(base_url=base_url, api_key="t", max_retries=0) as client:

                async def ask() -> None:
                    reply = await client.chat.completions.create(model="m", messages=USER)
                    assert reply.choices[0].message.content == "ok"

                started = time.perf_counter()
                async with anyio.create_task_group() as requests:
                    for _ in range(20):
                        requests.start_soon(ask)
                elapsed = time.perf_counter() - started
            tg.cancel_scope.cancel()
        return elapsed

    elapsed = anyio.run(scenario)
    assert 1.0 <= elapsed < 5.0, elapsed
    assert server.max_in_flight == 20
    assert server.in_flight == 0
    assert len(server.requests) == 20


# --------------------------------------------------------------------------- rules


class Finding(pydantic.BaseModel):
    line: int = pydantic.Field(ge=1)
    severity: Literal["low", "high"]
    note: str | None


class Result(pydantic.BaseModel):
    findings: list[Finding] = pydantic.Field(min_length=1)
    summary: str = pydantic.Field(min_length=3)
    span: tuple[int, int]
    score: float = pydantic.Field(gt=0.5, le=1.0)
    confident: bool = True


SEARCH = tool(
    "search",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 2},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 10},
            "mode": {"enum": ["regex", "literal"]},
        },
        "required": ["query", "max_results", "mode"],
        "additionalProperties": False,
    },
)
SUBMIT = tool("submit_result", Result.model_json_schema())


def test_call_every_tool_conversation() -> None:
    schemas = {
        t["function"]["name"]: t["function"]["parameters"] for t in (READ_FILE, SEARCH, SUBMIT)
    }
    messages: Any = list(USER)
    called: list[str] = []
    with ScriptedModelServer(rule=CallEveryTool()) as server, client_for(server) as client:
        for _ in range(4):
            reply = client.chat.completions.create(
                model="m",
                messages=messages,
                tools=[READ_FILE, SEARCH, SUBMIT],
            )
            [call] = calls_of(reply)
            name, arguments = call.function.name, json.loads(call.function.arguments)
            jsonschema.validate(arguments, schemas[name])
            called.append(name)
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "ok"})
    # submit_result is repeated when the conversation goes on (e.g. after a rejected result).
    assert called == ["read_file", "search", "submit_result", "submit_result"]
    Result.model_validate_json(call.function.arguments)
    assert [len(r["messages"]) for r in server.requests] == [1, 3, 5, 7]


def test_call_every_tool_overrides_choice_and_fallback() -> None:
    rule = CallEveryTool(arguments={"read_file": {"path": "x.py"}, "search": "not json"})
    body: dict[str, Any] = {"messages": USER, "tools": [READ_FILE, SEARCH]}

    first = rule(body)
    assert first == tool_call("read_file", {"path": "x.py"})
    done = [{"role": "assistant", "tool_calls": [{"function": {"name": "read_file"}}]}]
    assert rule({**body, "messages": USER + done}) == tool_call("search", "not json")
    all_done = [*done, {"role": "assistant", "tool_calls": [{"function": {"name": "search"}}]}]
    assert rule({**body, "messages": USER + all_done}) == text("done")

    forced = {"type": "function", "function": {"name": "search"}}
    assert rule({**body, "tool_choice": forced}) == tool_call("search", "not json")
    assert rule({**body, "tool_choice": "none"}) == text("done")
    assert rule({"messages": USER}) == text("done")


def test_arguments_from_schema() -> None:
    schema = Result.model_json_schema()
    generated = arguments_from_schema(schema)
    jsonschema.validate(generated, schema)
    assert generated == {
        "findings": [{"line": 1, "severity": "low", "note": "a"}],
        "summary": "aaa",
        "span": [0, 0],
        "score": 1.0,
    }
    assert arguments_from_schema(READ_FILE["function"]["parameters"]) == {"path": "a"}
    assert arguments_from_schema({"type": "array", "items": {"type": "number"}}) == []
    assert arguments_from_schema({"anyOf": [{"type": "boolean"}, {"type": "null"}]}) is False
    assert arguments_from_schema({"type": ["null", "integer"], "exclusiveMinimum": 3}) == 4


def test_raising_rule_answers_500_and_keeps_serving() -> None:
    calls = 0

    async def flaky(body: dict[str, Any]) -> Reply:
        nonlocal calls
        calls += 1
        await anyio.lowlevel.checkpoint()
        if calls == 1:
            raise RuntimeError("rule blew up")
        return text(f"call {calls}")

    with ScriptedModelServer(rule=flaky) as server, client_for(server) as client:
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="m", messages=USER)
        assert "rule blew up" in info.value.message
        reply = client.chat.completions.create(model="m", messages=USER)
    assert reply.choices[0].message.content == "call 2"
    assert server.in_flight == 0


def test_constructor_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError):
        ScriptedModelServer()
    with pytest.raises(ValueError):
        ScriptedModelServer([], rule=CallEveryTool())
    with pytest.raises(RuntimeError):
        _ = ScriptedModelServer([]).base_url


# --------------------------------------------------------------------------- process


def read_line(proc: subprocess.Popen[str], timeout: float = 10.0) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the server did not announce its base_url in time"
    return proc.stdout.readline()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_module_runs_as_a_process(stop_signal: signal.Signals) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [
        sys.executable,
        "-m",
        "remora.models.scripted",
        "--latency",
        "0.01",
        "--model",
        "a",
        "b",
    ]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT
    )
    try:
        line = read_line(proc)
        assert line.startswith("base_url=http://127.0.0.1:")
        base_url = line.strip().removeprefix("base_url=")
        assert base_url.endswith("/v1")

        with openai.OpenAI(base_url=base_url, api_key="t", max_retries=0, timeout=10) as client:
            assert [m.id for m in client.models.list()] == ["a", "b"]
            reply = client.chat.completions.create(
                model="a",
                messages=USER,
                tools=[READ_FILE, SUBMIT],
            )
        [call] = calls_of(reply)
        assert call.function.name == "read_file"

        proc.send_signal(stop_signal)
        stdout, stderr = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert stdout == ""
    assert "Traceback" not in stderr
