"""Streamed replies on the wire: a queue before the first event is not a stall, a stream that
stops is given up after `server.timeout` while a slow one that keeps going completes, a reply
that may hold one call ends with it, errors inside the stream and servers that do not stream.
A hand-written server (tests.test_server_faults) sends exactly the bytes each case needs."""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from remora.findings.results import ErrorCode
from remora.models.http.chat_stream import (
    MAX_STREAM_EVENTS,
    MAX_STREAMED_CALLS,
    EventSplitter,
    StreamedReply,
)
from remora.protocol.confidence import call_confidence
from remora.protocol.messages import MalformedReply, ModelError, ModelReply, ReplyProgress, ToolCall
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

MIB = 1 << 20
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


# --------------------------------------------------------------------------- parsing costs


def logprob_chunk(*tokens: str) -> dict[str, Any]:
    """A chunk that carries log-probabilities and nothing else (vLLM's shape)."""
    entries = [{"token": t, "logprob": -0.1, "bytes": list(t.encode())} for t in tokens]
    choice = {"index": 0, "delta": {}, "logprobs": {"content": entries}, "finish_reason": None}
    return {"id": "s", "object": "chat.completion.chunk", "choices": [choice]}


def test_a_16_mib_stream_of_one_entry_logprob_chunks_is_a_model_error_within_seconds() -> None:
    """Under the 16 MiB cap, about 150,000 one-entry chunks: folding them once cost quadratic
    CPU (a new list per event), which only the job timeout ended. Now the reply is refused at
    MAX_STREAM_EVENTS events, as malformed."""
    one = f"data: {json.dumps(logprob_chunk('x'))}\n\n".encode()
    body = one * ((16 * MIB - 4096) // len(one))
    assert len(body) // len(one) > MAX_STREAM_EVENTS

    def chat(request: Request, wire: Wire) -> None:
        wire.send(head(200, SSE))
        wire.send(f"{len(body):x}\r\n".encode() + body + b"\r\n")
        wire.send(event("[DONE]") + b"0\r\n\r\n")

    with HostileServer(serving(chat)) as server:
        started = time.monotonic()
        with pytest.raises(ModelError) as caught:
            ask_streamed(server.base_url)
        took = time.monotonic() - started
    assert caught.value.code is ErrorCode.MODEL_ERROR
    assert f"more than {MAX_STREAM_EVENTS} events" in caught.value.message
    assert took < 5


def test_a_call_streamed_in_tiny_pieces_is_folded_in_linear_time() -> None:
    """60,000 pieces of `}}}}` inside a string: every piece ends like a closed object. Parsing
    the whole arguments after each event (to close a one-call reply early) took 12 s here;
    each character is now looked at once, and the call still ends the reply when it closes."""
    pieces = [
        chunk({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "f"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": "'}}]}),
        *[chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}}}}"}}]})] * 60_000,
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '\\"}'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}),
    ]
    body = b"".join(f"data: {json.dumps(piece)}\n\n".encode() for piece in pieces)

    def chat(request: Request, wire: Wire) -> None:
        wire.send(head(200, SSE))
        wire.send(f"{len(body):x}\r\n".encode() + body + b"\r\n")
        wire.hold(30)  # no [DONE]: only the closed call can end the reply this soon

    seen: list[ReplyProgress] = []
    with HostileServer(serving(chat)) as server:
        reply, took = ask_streamed(server.base_url, parallel=False, progress=seen)
    (call,) = reply.tool_calls
    assert json.loads(call.arguments) == {"a": "}}}}" * 60_000 + '"}'}
    assert took < 5
    assert len(seen) == len(pieces)
    # What progress shows of a long text may lag it by an eighth, never more.
    assert len(seen[-1].calls[0][1]) >= len(call.arguments) * 7 // 8


def test_a_line_sent_one_byte_at_a_time_is_split_in_linear_time() -> None:
    splitter = EventSplitter()
    started = time.monotonic()
    for _ in range(200_000):
        assert splitter.feed(b"x") == []
    assert splitter.feed(b"\n\n") == []  # not a data line: no event
    assert splitter.feed(b"data: {}\n") == []
    assert splitter.feed(b"\n") == [b"{}"]
    assert time.monotonic() - started < 3  # 8.7 s when each piece copied the line so far


def fold(*chunks: dict[str, Any]) -> StreamedReply:
    reply = StreamedReply()
    for item in chunks:
        reply.add_event(json.dumps(item).encode(), None)
    return reply


def test_more_logprob_entries_or_calls_than_a_reply_can_have_are_malformed() -> None:
    with pytest.raises(MalformedReply, match=f"more than {MAX_STREAM_EVENTS} log-probability"):
        fold(*[logprob_chunk("a", "b", "c")] * (MAX_STREAM_EVENTS // 3 + 1))
    calls = [
        chunk({"tool_calls": [{"index": index, "function": {"name": "f", "arguments": "{}"}}]})
        for index in range(MAX_STREAMED_CALLS + 1)
    ]
    assert len(fold(*calls[:-1]).body()["choices"][0]["message"]["tool_calls"]) == 256
    with pytest.raises(MalformedReply, match=f"more than {MAX_STREAMED_CALLS} tool calls"):
        fold(*calls)


@pytest.mark.parametrize(
    ("pieces", "whole"),
    [
        (['  {"a": "\\\\', '"', ', "b": "}\\"', '{"}', "  "], True),  # escapes across pieces
        (['{"a": {"b": [1, {}]}', "}"], True),
        (['{"a": 1} x'], False),  # closed, then more: never one object
        (['{"a": 1}', "}"], True),  # decided when it closed (the reply ends there)
        (['{"a": 1}}'], False),
        (['{"a": tru}'], False),
        (["[1]"], False),
        (['{"a": "}"'], False),  # not closed yet
    ],
)
def test_a_first_call_is_whole_exactly_when_its_arguments_are_one_json_object(
    pieces: list[str], whole: bool
) -> None:
    deltas = [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    reply = fold(*deltas)
    assert reply.first_call_whole() is whole
    text = reply.body()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    assert text == "".join(pieces)


def test_confidence_over_many_calls_and_tokens_is_not_quadratic() -> None:
    tokens = [("call:", -0.1), ("f", -0.2), ("{", -0.01), ("x}", 0.0)] * 5000
    calls = [ToolCall(id=str(index), name="f", arguments="{}") for index in range(5000)]
    started = time.monotonic()
    assert call_confidence(tokens, calls) == pytest.approx(math.exp(-0.2))
    assert time.monotonic() - started < 1  # 4.7 s when every call walked every token
