"""The scripted model server streaming replies and sending log-probabilities as vLLM does, read
through the OpenAI SDK and as raw server-sent events over HTTP."""

from __future__ import annotations

import http.client
import itertools
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from remora.models.scripted.server import (
    DelayedReply,
    PacedReply,
    Reply,
    ScriptedModelServer,
    TextReply,
    ToolCall,
    ToolCallsReply,
    http_error,
    paced,
    raw,
    text,
    tool_call,
    tool_calls,
)

USER: Any = [{"role": "user", "content": "look at a.py"}]
FIND = "<start_function_call>call:find_todos{"


def tool(name: str) -> Any:
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


TOOLS: Any = [tool("find_todos"), tool("read_file"), tool("submit_result"), tool("find_files")]


@pytest.fixture(autouse=True)
def no_leftover_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


def client_for(server: ScriptedModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10)


def post(server: ScriptedModelServer, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """One request on its own HTTP/1.1 connection: status, headers, the whole (unchunked) body."""
    conn = http.client.HTTPConnection("127.0.0.1", urlsplit(server.base_url).port, timeout=10)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Accept": "*/*"})
        response = conn.getresponse()
        return response.status, dict(response.headers), response.read()
    finally:
        conn.close()


def events_of(body: bytes) -> list[Any]:
    """The events of a server-sent event stream: chunks as JSON, and the closing "[DONE]"."""
    assert body.endswith(b"\n\n")
    events = body.decode().split("\n\n")[:-1]
    assert all(event.startswith("data: ") for event in events)
    return [e[6:] if e == "data: [DONE]" else json.loads(e[6:]) for e in events]


def stream(server: ScriptedModelServer, **fields: Any) -> list[dict[str, Any]]:
    """The chunks of a streamed request (asserting how the stream is framed and closed)."""
    body = {"model": "m", "messages": USER, "tools": TOOLS, "stream": True, **fields}
    status, headers, raw_body = post(server, body)
    assert status == 200
    assert headers["Content-Type"] == "text/event-stream"
    assert headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in headers
    *chunks, done = events_of(raw_body)
    assert done == "[DONE]"
    return chunks


def fold(chunks: list[ChatCompletionChunk]) -> dict[str, Any]:
    """Chunks from the SDK folded as a client does: text appended, calls by index."""
    content, calls, finish, usage = "", dict[int, dict[str, str]](), None, None
    for chunk in chunks:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    return {"content": content, "calls": [calls[i] for i in sorted(calls)], "finish": finish}


def native(reply: ToolCallsReply | TextReply) -> str:
    """The reply in FunctionGemma's words, as the pseudo tokens spell it."""
    calls = reply.calls if isinstance(reply, ToolCallsReply) else ()
    spelled = [
        f"<start_function_call>call:{c.name}{{{c.arguments}}}<end_function_call>" for c in calls
    ]
    return (reply.content or "") + "".join(spelled)


def name_logprob(tokens: list[dict[str, Any]], name: str) -> float:
    """The sum of the log-probabilities of the tokens spelling `name` after `call:` (how Remora
    reads a call's confidence)."""
    spelled = "".join(t["token"] for t in tokens)
    found = re.search(rf"call:({re.escape(name)})\{{", spelled)
    assert found is not None
    start, end = found.span(1)
    total, at = 0.0, 0
    for token in tokens:
        if at < end and at + len(token["token"]) > start:
            total += token["logprob"]
        at += len(token["token"])
    return total


# --------------------------------------------------------------------------- the OpenAI SDK


@pytest.mark.parametrize(
    "reply",
    [
        tool_call("read_file", {"path": "a.py", "limit": 50}),
        tool_calls(
            ("read_file", {"path": "a.py"}), ("find_todos", '{"marker": "TO'), content="Hm."
        ),
        text("Nothing to do here, all\n  done.", finish_reason="length"),
    ],
)
def test_the_sdk_folds_the_stream_into_the_reply_sent_whole(reply: Reply) -> None:
    with ScriptedModelServer([reply]) as server, client_for(server) as client:
        whole = client.chat.completions.create(model="m", messages=USER, tools=TOOLS)
    with ScriptedModelServer([reply]) as server, client_for(server) as client:
        chunks = list(
            client.chat.completions.create(
                model="m",
                messages=USER,
                tools=TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    folded = fold(chunks)
    message = whole.choices[0].message
    assert folded["content"] == (message.content or "")
    assert folded["calls"] == [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in message.tool_calls or []
        if c.type == "function"
    ]
    assert folded["finish"] == whole.choices[0].finish_reason
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"
    assert chunks[0].choices[0].delta.role == "assistant"
    *choices, last = chunks
    assert last.choices == [] and last.usage is not None and whole.usage is not None
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert all(c.usage is None for c in choices)
    assert len(choices) > 4  # in pieces, not in one


def test_the_sdk_stream_helper_reads_calls() -> None:
    reply = tool_calls(("find_todos", {"marker": "TODO"}), ("submit_result", {"summary": "ok"}))
    with (
        ScriptedModelServer([reply]) as server,
        client_for(server) as client,
        client.chat.completions.stream(model="m", messages=USER, tools=TOOLS) as events,
    ):
        kinds = [event.type for event in events]
        final = events.get_final_completion()
    assert kinds.count("tool_calls.function.arguments.done") == 2
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = [c for c in choice.message.tool_calls or [] if c.type == "function"]
    assert [(c.id, c.function.name) for c in calls] == [
        ("call_1", "find_todos"),
        ("call_2", "submit_result"),
    ]
    assert [json.loads(c.function.arguments) for c in calls] == [
        {"marker": "TODO"},
        {"summary": "ok"},
    ]


# --------------------------------------------------------------------------- the wire


def test_chunks_are_as_vllm_sends_them() -> None:
    arguments = '{"path": "src/a b.py", "n": [1, 2.5e-3], "q": "\\u00e9\\"x"}'
    with ScriptedModelServer([tool_call("find_todos", arguments)]) as server:
        chunks = stream(server, stream_options={"include_usage": True})
    # The opening (`<start_function_call>`, `call`, `:`, `find`, `_todos`) is held back by the
    # kit's parser until the name is whole: empty deltas, carrying log-probabilities when asked.
    first, held, name, pieces = chunks[0], chunks[1:6], chunks[6], chunks[7:-2]
    finish, usage = chunks[-2:]
    assert [chunk["choices"][0]["delta"] for chunk in held] == [{}] * 5
    for chunk in chunks:
        assert set(chunk) >= {"id", "object", "created", "model", "choices"}
        assert chunk["id"] == "chatcmpl-scripted-1" and chunk["model"] == "m"
    assert first["choices"] == [
        {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
    ]
    assert name["choices"][0]["delta"] == {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "find_todos", "arguments": ""},
            }
        ]
    }
    streamed = ""
    for chunk in pieces:
        [entry] = chunk["choices"][0]["delta"]["tool_calls"]
        assert set(entry) == {"index", "function"} and set(entry["function"]) == {"arguments"}
        streamed += entry["function"]["arguments"]
    assert streamed == arguments and len(pieces) > 10
    assert finish["choices"][0]["delta"] == {} and "usage" not in finish
    assert finish["choices"][0]["finish_reason"] == "tool_calls"
    assert usage["choices"] == []
    counts = usage["usage"]
    assert counts["total_tokens"] == counts["prompt_tokens"] + counts["completion_tokens"]


def test_continuous_usage_counts_the_tokens_streamed_so_far() -> None:
    options = {"include_usage": True, "continuous_usage_stats": True}
    with ScriptedModelServer([tool_call("find_todos", {"marker": "TODO"})] * 2) as server:
        chunks = stream(server, stream_options=options, logprobs=True)
        whole = json.loads(post(server, {"model": "m", "messages": USER, "logprobs": True})[2])
    *choices, last = chunks
    assert last["choices"] == []
    assert last["usage"] == choices[-1]["usage"]
    assert last["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"]
    assert len({c["usage"]["prompt_tokens"] for c in chunks}) == 1
    so_far = [c["usage"]["completion_tokens"] for c in choices]
    covered = [len((c["choices"][0]["logprobs"] or {"content": []})["content"]) for c in choices]
    assert so_far[0] == 0
    assert so_far[:-1] == [sum(covered[: n + 1]) for n in range(len(covered) - 1)]
    assert so_far[-1] == so_far[-2] + 1  # the end of the turn, counted as vLLM does


def test_errors_and_raw_replies_are_not_streamed() -> None:
    script = [
        http_error(429, "slow down", headers={"Retry-After": "1"}),
        raw(200, b'{"not": "a stream"}'),
        DelayedReply(PacedReply(TextReply("late")), 0.3),
    ]
    with ScriptedModelServer(script) as server:
        body = {"model": "m", "messages": USER, "stream": True}
        status, headers, error = post(server, body)
        assert (status, headers["Retry-After"]) == (429, "1")
        assert headers["Content-Type"] == "application/json"
        assert json.loads(error)["error"]["message"] == "slow down"
        assert post(server, body)[2] == b'{"not": "a stream"}'
        started = time.monotonic()
        status, headers, late = post(server, body)
        assert time.monotonic() - started >= 0.3
    assert headers["Content-Type"] == "text/event-stream"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in events_of(late)[1:-1])
    assert [r["stream"] for r in server.requests] == [True] * 3


def test_an_http_1_0_client_gets_the_stream_until_the_connection_closes() -> None:
    with ScriptedModelServer([text("one two")]) as server:
        port = urlsplit(server.base_url).port
        assert port is not None

        async def go() -> bytes:
            sock = await anyio.connect_tcp("127.0.0.1", port)
            async with sock:
                payload = json.dumps({"model": "m", "messages": USER, "stream": True}).encode()
                head = f"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: {len(payload)}"
                await sock.send(head.encode() + b"\r\n\r\n" + payload)
                received = b""
                with anyio.fail_after(10):
                    async for data in sock:
                        received += data
                return received

        received = anyio.run(go)
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower() and b"content-length" not in head.lower()
    assert events_of(body)[-1] == "[DONE]"


def test_in_process_callers_get_the_whole_stream_as_the_body() -> None:
    server = ScriptedModelServer([text("hello there")])
    body = {"model": "m", "messages": USER, "stream": True}
    response = anyio.run(server.answer_chat, json.dumps(body).encode())
    assert response.events is not None
    assert response.body == b"".join(event for _, event in response.events)
    assert (
        "".join(
            c["choices"][0]["delta"].get("content", "")
            for c in events_of(response.body)[:-1]
            if c["choices"]
        )
        == "hello there"
    )


# --------------------------------------------------------------------------- pace


def test_events_arrive_as_they_are_produced() -> None:
    reply = paced(tool_call("find_todos", {"marker": "TODO"}), every=0.2)

    async def go(url: str) -> list[tuple[float, bytes]]:
        body = {"model": "m", "messages": USER, "stream": True}
        arrivals: list[tuple[float, bytes]] = []
        async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "text/event-stream"
            started = time.monotonic()
            async for line in response.content:
                if line.startswith(b"data: "):
                    arrivals.append((time.monotonic() - started, line.strip()))
        return arrivals

    with ScriptedModelServer([reply]) as server:
        arrivals = anyio.run(go, f"{server.base_url}/chat/completions")
    assert arrivals[-1][1] == b"data: [DONE]"
    times = [at for at, _ in arrivals]
    assert len(times) >= 6
    assert times[0] < 0.15  # the first event did not wait for the rest
    assert times[-1] >= 0.2 * (len(times) - 1) - 0.05
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) > 0.1


def test_a_stall_holds_back_the_events_after_it() -> None:
    reply = paced(text("one two three four five"), stall_after=2, stall=1.0)

    async def go(url: str) -> list[float]:
        body = {"model": "m", "messages": USER, "stream": True}
        times: list[float] = []
        async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
            started = time.monotonic()
            async for line in response.content:
                if line.startswith(b"data: "):
                    times.append(time.monotonic() - started)
        return times

    with ScriptedModelServer([reply]) as server:
        times = anyio.run(go, f"{server.base_url}/chat/completions")
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert 0.9 <= gaps[1] < 1.5  # between the second event and the third
    assert max(gaps[:1] + gaps[2:]) < 0.2


def test_a_paced_reply_not_streamed_comes_whole_after_the_same_waits() -> None:
    inner = text("one two")  # the role, two pieces, the finish and [DONE]: 4 waits of 0.1
    with ScriptedModelServer([paced(inner, every=0.1, stall_after=1, stall=0.2)]) as server:
        started = time.monotonic()
        status, _, body = post(server, {"model": "m", "messages": USER})
        took = time.monotonic() - started
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "one two"
    assert 0.6 <= took < 1.0


def test_only_tool_calls_and_text_are_paced() -> None:
    assert isinstance(paced(text("x"), every=1), PacedReply)
    with pytest.raises(TypeError):
        paced(http_error(500))
    with pytest.raises(ValueError):
        paced(text("x"), every=-1)


# --------------------------------------------------------------------------- log-probabilities


CONFIDENCE_REPLY = tool_calls(
    ("find_todos", {"marker": "TODO"}, 0.25),
    ("submit_result", '{"summary": "o', None),
    content="Let me look.",
)


def test_logprobs_of_a_whole_reply() -> None:
    assert isinstance(CONFIDENCE_REPLY, ToolCallsReply)
    with ScriptedModelServer([CONFIDENCE_REPLY, CONFIDENCE_REPLY]) as server:
        _, _, plain = post(server, {"model": "m", "messages": USER})
        body = {"model": "m", "messages": USER, "tools": TOOLS, "logprobs": True, "top_logprobs": 3}
        _, _, asked = post(server, {**body, "seed": 7})
    assert json.loads(plain)["choices"][0]["logprobs"] is None
    tokens = json.loads(asked)["choices"][0]["logprobs"]["content"]
    assert "".join(t["token"] for t in tokens) == native(CONFIDENCE_REPLY)
    assert math.isclose(name_logprob(tokens, "find_todos"), math.log(0.25), abs_tol=1e-9)
    assert math.isclose(name_logprob(tokens, "submit_result"), -0.002, abs_tol=1e-9)  # 2 pieces
    for token in tokens:
        assert token["bytes"] == list(token["token"].encode())
        assert len(token["top_logprobs"]) == 3
        chosen, *others = token["top_logprobs"]
        assert chosen == {k: token[k] for k in ("token", "logprob", "bytes")}
        assert all(set(o) == {"token", "logprob", "bytes"} for o in others)
        assert len({t["token"] for t in token["top_logprobs"]}) == 3
        assert sum(math.exp(t["logprob"]) for t in token["top_logprobs"]) <= 1 + 1e-9
    find = next(t for t in tokens if t["token"] == "find")
    assert [t["token"] for t in find["top_logprobs"]] == ["find", "read", "submit"]
    assert server.requests[1]["seed"] == 7


@pytest.mark.parametrize("top", [None, 0, 5, 20])
def test_logprobs_of_a_stream_cover_every_token_once(top: int | None) -> None:
    assert isinstance(CONFIDENCE_REPLY, ToolCallsReply)
    asked = {"logprobs": True} | ({} if top is None else {"top_logprobs": top})
    with ScriptedModelServer([CONFIDENCE_REPLY]) as server:
        chunks = stream(server, **asked)
    assert chunks[0]["choices"][0]["logprobs"] is None  # the role: no token yet
    tokens = [t for c in chunks[1:] for t in c["choices"][0]["logprobs"]["content"]]
    assert "".join(t["token"] for t in tokens) == native(CONFIDENCE_REPLY)
    assert math.isclose(name_logprob(tokens, "find_todos"), math.log(0.25), abs_tol=1e-9)
    assert {len(t["top_logprobs"]) for t in tokens} == {top or 0}
    for chunk in chunks[1:]:
        delta = chunk["choices"][0]["delta"]
        covered = "".join(t["token"] for t in chunk["choices"][0]["logprobs"]["content"])
        if "content" in delta:
            assert covered == delta["content"]
        elif "tool_calls" in delta and "name" in delta["tool_calls"][0]["function"]:
            assert covered == "{"  # the step that completes `call:NAME{`
        elif "tool_calls" in delta:
            assert covered.startswith(delta["tool_calls"][0]["function"]["arguments"])


def test_a_confident_model_by_default() -> None:
    reply = tool_call("find_todos", {})
    with ScriptedModelServer([reply]) as server:
        chunks = stream(server, logprobs=True)
    tokens = [t for c in chunks[1:] for t in c["choices"][0]["logprobs"]["content"]]
    assert {t["logprob"] for t in tokens} == {-0.001}
    assert [t["token"] for t in tokens] == [
        "<start_function_call>",
        "call",
        ":",
        "find",
        "_todos",
        "{",
        "{}",
        "}",
        "<end_function_call>",
    ]


def test_confidence_is_a_probability() -> None:
    assert tool_call("f", {}, confidence=1.0) == ToolCallsReply((ToolCall("f", "{}", 1.0),))
    assert ToolCall("f", "{}") == ToolCall("f", "{}", None)
    for wrong in (0.0, -0.5, 1.5, math.nan):
        with pytest.raises(ValueError, match="confidence"):
            tool_call("f", {}, confidence=wrong)
    with ScriptedModelServer([tool_call("find_todos", {}, confidence=1.0)]) as server:
        body = {"model": "m", "messages": USER, "tools": TOOLS, "logprobs": True, "top_logprobs": 2}
        tokens = json.loads(post(server, body)[2])["choices"][0]["logprobs"]["content"]
    find = next(t for t in tokens if t["token"] == "find")
    assert find["logprob"] == 0.0 and find["top_logprobs"][1]["logprob"] == -9999.0
