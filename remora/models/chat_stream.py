"""A chat reply streamed as server-sent events (`"stream": true`), read into the body a
non-streamed reply would have had, so one parser checks both.

Why stream: the live view sees each call as it forms (`ChatRequest.on_progress`); the reply's
pace is visible, so one that stops making progress is given up while a slow one that keeps
going is not; and a reply that may hold only one call is closed as soon as that call is whole.

The guards of a plain reply hold here too, in a stream's terms: the wait for the first event is
not bounded (the server may be queueing the request; `runner.job_timeout` bounds the job), and
from then on every wait for more bytes is bounded by `server.timeout`; the bytes read are capped
by `server.max_reply_mb`. A whole reply sent instead of a stream, and an error body, are bounded
by `runner.job_timeout` only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aiohttp
import anyio

from remora.models.http_guards import ReplyRefused, read_capped
from remora.protocol.messages import MalformedReply, ReplyProgress, parse_json


class Stalled(Exception):
    """A streamed reply that started and then sent nothing for `server.timeout` seconds."""


class StreamFailed(Exception):
    """The server reported an error inside the stream (vLLM sends `data: {"error": ...}`)."""


class _Call:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments = ""


class StreamedReply:
    """Chunks (`chat.completion.chunk` objects) folded into one reply."""

    def __init__(self) -> None:
        self.content = ""
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: object = None
        self.logprobs: list[object] | None = None
        self.started = False
        """An event has come: the server is generating (before, it may be queueing)."""

    def add_event(self, event: bytes, on_progress: Callable[[ReplyProgress], None] | None) -> bool:
        """Fold in one event's data; True at the end (`[DONE]`)."""
        if event == b"[DONE]":
            return True
        self.started = True
        try:
            chunk = json.loads(event)
        except (ValueError, RecursionError) as exc:
            raise MalformedReply(f"a streamed event is not JSON: {event[:120]!r}") from exc
        if self.add(chunk) and on_progress is not None:
            on_progress(self.progress())
        return False

    def add(self, chunk: object) -> bool:
        """Fold in one chunk; True when the text or a call grew."""
        if not isinstance(chunk, dict):
            raise MalformedReply(f"a streamed chunk is {type(chunk).__name__}, not an object")
        if chunk.get("error") is not None:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise StreamFailed(str(message)[:500])
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise MalformedReply("a streamed chunk's choices is not a list")
        grew = False
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # Remora asks for one choice
            if choice.get("finish_reason") is not None:
                self.finish_reason = str(choice["finish_reason"])
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
                self.logprobs = (self.logprobs or []) + logprobs["content"]
            delta = choice.get("delta")
            if isinstance(delta, dict):
                grew = self._add_delta(delta) or grew
        return grew

    def _add_delta(self, delta: dict[str, Any]) -> bool:
        grew = False
        if isinstance(delta.get("content"), str) and delta["content"]:
            self.content += delta["content"]
            grew = True
        entries = delta.get("tool_calls") or []
        if not isinstance(entries, list):
            raise MalformedReply("a streamed delta's tool_calls is not a list")
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("index", 0), int):
                raise MalformedReply("a streamed tool call has no integer index")
            call = self.calls.setdefault(entry.get("index", 0), _Call())
            call.id = call.id or (entry.get("id") if isinstance(entry.get("id"), str) else None)
            function = entry.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str) and not call.name:
                    call.name = function["name"]
                if isinstance(function.get("arguments"), str):
                    call.arguments += function["arguments"]
            grew = True
        return grew

    def first_call_whole(self) -> bool:
        """The first call's arguments are a complete JSON object: nothing can follow in it."""
        call = self.calls.get(0)
        if call is None or not call.arguments.rstrip().endswith("}"):
            return False
        try:
            return isinstance(json.loads(call.arguments), dict)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            return False

    def progress(self) -> ReplyProgress:
        ordered = [self.calls[index] for index in sorted(self.calls)]
        return ReplyProgress(self.content, tuple((call.name, call.arguments) for call in ordered))

    def body(self, *, only_first_call: bool = False) -> dict[str, Any]:
        """The reply as a non-streamed body (`choices[0].message`, `usage`, `logprobs`)."""
        indexes = sorted(self.calls)[:1] if only_first_call else sorted(self.calls)
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if indexes:
            message["tool_calls"] = [
                {
                    "id": self.calls[index].id,
                    "type": "function",
                    "function": {
                        "name": self.calls[index].name,
                        "arguments": self.calls[index].arguments,
                    },
                }
                for index in indexes
            ]
        choice: dict[str, Any] = {"index": 0, "message": message}
        choice["finish_reason"] = self.finish_reason or ("tool_calls" if indexes else "stop")
        if self.logprobs is not None:
            choice["logprobs"] = {"content": self.logprobs}
        return {"choices": [choice], "usage": self.usage}


async def read_stream(
    response: aiohttp.ClientResponse,
    *,
    max_bytes: int,
    stall: float,
    on_progress: Callable[[ReplyProgress], None] | None,
    only_first_call: bool,
) -> object:
    """The reply body (parsed JSON) of a streamed request. A server that answers with a plain
    JSON body instead (it does not stream) is read as one."""
    if not response.headers.get("Content-Type", "").startswith("text/event-stream"):
        return parse_json(await read_capped(response, max_bytes))
    if response.headers.get("Content-Encoding", "identity").lower() != "identity":
        raise ReplyRefused("a streamed reply must not be compressed (Remora asks for identity)")
    reply = StreamedReply()
    events = EventSplitter()
    size = 0
    while True:
        try:
            with anyio.fail_after(stall if reply.started else None):
                piece = await response.content.readany()
        except TimeoutError:
            raise Stalled(f"the reply stopped: no event for {stall:g}s (server.timeout)") from None
        if not piece:
            break  # the server closed the stream without [DONE]: keep what came
        size += len(piece)
        if size > max_bytes:
            raise ReplyRefused(f"the streamed reply is larger than {max_bytes >> 20} MiB")
        for event in events.feed(piece):
            if reply.add_event(event, on_progress):
                return reply.body()
            if only_first_call and reply.first_call_whole():
                response.close()  # the server stops generating when the client goes
                return reply.body(only_first_call=True)
    if not reply.started:
        raise MalformedReply("the stream ended before its first event")
    return reply.body()


class EventSplitter:
    """Server-sent events from bytes as they arrive: the data of each complete event."""

    def __init__(self) -> None:
        self.pending = b""
        self.data: list[bytes] = []

    def feed(self, piece: bytes) -> list[bytes]:
        lines = (self.pending + piece).split(b"\n")
        self.pending = lines.pop()
        events = []
        for line in lines:
            line = line.rstrip(b"\r")
            if line.startswith(b"data:"):
                self.data.append(line[5:].removeprefix(b" "))
            elif not line and self.data:  # a blank line ends an event
                events.append(b"\n".join(self.data))
                self.data = []
            # other lines: comments (keep-alives) and fields Remora does not use
        return events
