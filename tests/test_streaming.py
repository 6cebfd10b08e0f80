"""Streamed replies on the wire: a queue before the first event is not a stall, a stream that
stops is given up after `server.timeout` while a slow one that keeps going completes, a reply
that may hold one call ends with it, errors inside the stream and servers that do not stream.
A hand-written server (tests.test_server_faults) sends exactly the bytes each case needs."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from remora.protocol.messages import ModelError, ModelReply, ReplyProgress
from tests.test_server_faults import (
    HostileServer,
    Request,
    Wire,
    ask,
    chat_body,
    client,
    head,
    serving,
)

SSE = {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {"id": "s", "object": "chat.completion.chunk", "choices": [choice], **extra}


def call_chunks(name: str, arguments: str, index: int = 0) -> Iterator[dict[str, Any]]:
    yield chunk(
        {
            "tool_calls": [
                {"index": index, "id": f"c{index}", "type": "function", "function": {"name": name}}
            ]
        }
    )
    for start in range(0, len(arguments), 5):
        piece = arguments[start : start + 5]
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})


def event(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    payload = f"data: {text}\n\n".encode()
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def stream(
    wire: Wire,
    chunks: list[dict[str, Any]],
    *,
    before: float = 0.0,
    every: float = 0.0,
    stall_after: int | None = None,
    stall: float = 0.0,
) -> None:
    """Headers at once (as vLLM sends them, before the request is even scheduled), then the
    chunks and [DONE], with the waits asked for."""
    wire.send(head(200, SSE))
    wire.hold(before)
    for number, item in enumerate([chunk({"role": "assistant", "content": ""}), *chunks]):
        if number and every:
            wire.hold(every)
        if stall_after is not None and number == stall_after:
            wire.hold(stall)
        wire.send(event(item))
    wire.send(event("[DONE]") + b"0\r\n\r\n")


FIND = list(call_chunks("find_todos", '{"marker": "FIXME"}'))
END = chunk({}, "tool_calls", usage={"prompt_tokens": 9, "completion_tokens": 7})


def ask_streamed(
    url: str, *, parallel: bool = True, progress: list[ReplyProgress] | None = None, **kw: Any
) -> tuple[ModelReply, float]:
    async def go() -> ModelReply:
        model = client(url, **kw)
        try:
            return await ask(
                model,
                stream=True,
                parallel_calls=parallel,
                on_progress=None if progress is None else progress.append,
            )
        finally:
            await model.aclose()

    started = time.monotonic()
    reply = anyio.run(go)
    return reply, time.monotonic() - started


def test_a_streamed_reply_is_folded_into_the_reply_and_shown_as_it_grows() -> None:
    seen: list[ReplyProgress] = []
    with HostileServer(serving(lambda r, w: stream(w, [*FIND, END]))) as server:
        reply, _ = ask_streamed(server.base_url, progress=seen)
    body = server.requests[0].json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert server.requests[0].headers["accept"] == "text/event-stream"
    assert [(call.id, call.name, call.arguments) for call in reply.tool_calls] == [
        ("c0", "find_todos", '{"marker": "FIXME"}')
    ]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (9, 7)
    assert seen[0].calls == (("find_todos", ""),)
    assert seen[-1].calls == (("find_todos", '{"marker": "FIXME"}'),)
    assert len(seen) == len(FIND)


def test_a_queued_stream_is_not_a_stall_and_a_slow_one_that_progresses_completes() -> None:
    """server.timeout=0.5: 1.5 s in the queue before the first event, then 0.3 s between events
    (2.5 s in all): no gap after the first event reaches the timeout."""
    handler = serving(lambda r, w: stream(w, [*FIND, END], before=1.5, every=0.3))
    with HostileServer(handler) as server:
        reply, took = ask_streamed(server.base_url, timeout=0.5)
    assert reply.tool_calls[0].arguments == '{"marker": "FIXME"}'
    assert took > 2.5
    assert len(server.requests) == 1  # nothing retried


def test_a_stream_that_stops_is_given_up_after_server_timeout() -> None:
    handler = serving(lambda r, w: stream(w, [*FIND, END], stall_after=3, stall=30))
    with HostileServer(handler) as server:
        started = time.monotonic()
        with pytest.raises(ModelError) as caught:
            ask_streamed(server.base_url, timeout=0.5)
    assert "the reply stopped: no event for 0.5s (server.timeout)" in caught.value.message
    assert time.monotonic() - started < 5


def test_a_stopped_stream_is_asked_again_like_any_stalled_reply() -> None:
    tries: list[int] = []

    def chat(request: Request, wire: Wire) -> None:
        tries.append(1)
        stall = 30.0 if len(tries) == 1 else 0.0
        stream(wire, [*FIND, END], stall_after=2, stall=stall)

    with HostileServer(serving(chat)) as server:
        reply, _ = ask_streamed(server.base_url, timeout=0.5, retries=1)
    assert reply.tool_calls[0].name == "find_todos"
    assert len(tries) == 2


def test_a_reply_that_may_hold_one_call_ends_when_that_call_is_whole() -> None:
    """The server would send a second call after 30 s: with parallel calls off the client
    closes the stream once the first call's arguments are a whole JSON object."""
    second = list(call_chunks("submit_result", '{"summary": "x"}', index=1))
    handler = serving(
        lambda r, w: stream(w, [*FIND, *second, END], stall_after=len(FIND) + 1, stall=30)
    )
    with HostileServer(handler) as server:
        reply, took = ask_streamed(server.base_url, parallel=False)
    assert [call.name for call in reply.tool_calls] == ["find_todos"]
    assert took < 5


def test_an_error_inside_the_stream_is_a_model_error_naming_it() -> None:
    def chat(request: Request, wire: Wire) -> None:
        wire.send(head(200, SSE))
        wire.send(event(chunk({"role": "assistant"})))
        wire.send(event({"error": {"message": "engine died", "code": 500}}))
        wire.send(event("[DONE]") + b"0\r\n\r\n")

    with HostileServer(serving(chat)) as server, pytest.raises(ModelError) as caught:
        ask_streamed(server.base_url)
    assert "ended the streamed reply with an error: engine died" in caught.value.message


def test_a_server_that_does_not_stream_is_read_as_a_plain_reply() -> None:
    def chat(request: Request, wire: Wire) -> None:
        wire.reply(chat_body(calls=[("find_todos", {"marker": "TODO"})]))

    with HostileServer(serving(chat)) as server:
        reply, _ = ask_streamed(server.base_url)
    assert reply.tool_calls[0].arguments == '{"marker": "TODO"}'


@pytest.mark.parametrize(
    ("wire_bytes", "words"),
    [
        (b"data: {not json\n\n", "a streamed event is not JSON"),
        (
            b'data: {"choices": [{"index": 0, "delta": {"tool_calls": 5}}]}\n\n',
            "a streamed delta's tool_calls is not a list",
        ),
        (b"", "the stream ended before its first event"),
    ],
)
def test_a_broken_stream_is_a_model_error(wire_bytes: bytes, words: str) -> None:
    def chat(request: Request, wire: Wire) -> None:
        wire.send(head(200, {"Content-Type": "text/event-stream", "Connection": "close"}))
        wire.send(wire_bytes)
        wire.sock.shutdown(socket.SHUT_RDWR)

    with HostileServer(serving(chat)) as server, pytest.raises(ModelError) as caught:
        ask_streamed(server.base_url)
    assert words in caught.value.message


def test_a_stream_larger_than_the_cap_is_refused() -> None:
    big = chunk({"content": "x" * 60_000})

    def chat(request: Request, wire: Wire) -> None:
        stream(wire, [big] * 40)  # 2.4 MB of events

    with HostileServer(serving(chat)) as server, pytest.raises(ModelError) as caught:
        ask_streamed(server.base_url, max_reply_mb=1)
    assert "larger than 1 MiB" in caught.value.message
