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

Folding costs time linear in the bytes read (pieces are appended in place, never copied whole
per event), and a reply is refused as malformed past `MAX_STREAM_EVENTS` events or
log-probability entries, or `MAX_STREAMED_CALLS` calls: within the byte cap a server could
otherwise keep the client parsing for the whole job timeout.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from typing import Any

import aiohttp
import anyio

from remora.models.http.guards import ReplyRefused, read_capped
from remora.protocol.messages import MalformedReply, ReplyProgress, parse_json

MAX_STREAM_EVENTS = 65_536
"""Most events, and most log-probability entries, one streamed reply may have. A server sends
about one event (and one entry) per generated token: twice a 32K context, and 128 times
Remora's default `runner.max_tokens`. More means the server is not generating a reply."""

MAX_STREAMED_CALLS = 256
"""Most tool calls one streamed reply may hold (each event reports every call so far)."""


class Stalled(Exception):
    """A streamed reply that started and then sent nothing for `server.timeout` seconds."""


class StreamFailed(Exception):
    """The server reported an error inside the stream (vLLM sends `data: {"error": ...}`)."""


class _Text:
    """Text that grows piece by piece. `str +=` on an attribute copies the whole text on every
    event (quadratic over a reply of many small pieces); here pieces are kept and joined when
    the text is read. What progress shows is joined again only once the text has grown by an
    eighth, so reporting on every event stays linear too (it may lag by that much)."""

    __slots__ = ("_joined", "_pieces", "length")

    def __init__(self) -> None:
        self._joined = ""
        self._pieces: list[str] = []
        self.length = 0

    def add(self, piece: str) -> None:
        self._pieces.append(piece)
        self.length += len(piece)

    def value(self) -> str:
        if self._pieces:
            self._joined = "".join([self._joined, *self._pieces])
            self._pieces.clear()
        return self._joined

    def shown(self) -> str:
        if self.length - len(self._joined) >= max(len(self._joined) >> 3, 1):
            return self.value()
        return self._joined


_JSON_MARK = re.compile(r'[{}"\\]')


class _ObjectEnd:
    """Whether arguments streamed in pieces are one whole JSON object, found with each character
    looked at once (parsing the whole text after every event is quadratic). Outside strings,
    braces in JSON only open and close objects, so the text of a valid object closes where its
    brace depth first returns to 0: only that text is parsed. Text that closed there and does
    not parse can never become one object, whatever follows."""

    __slots__ = ("_carried_escape", "_depth", "_in_string", "_started", "whole")

    def __init__(self) -> None:
        self._started = False
        self._depth = 0
        self._in_string = False
        self._carried_escape = False
        """The previous piece ended with a backslash inside a string."""
        self.whole: bool | None = None
        """Decided once the first object closes (or the text cannot start one)."""

    def feed(self, piece: str, text: _Text) -> None:
        """`piece` has just been added to `text`."""
        if self.whole is not None or not piece:
            return
        start = 0
        if not self._started:
            start = len(piece) - len(piece.lstrip())
            if start == len(piece):
                return  # whitespace only, so far
            if piece[start] != "{":
                self.whole = False
                return
            self._started = True
        closed = self._scan(piece, start)
        if closed is None:
            return
        if piece[closed:].strip():
            self.whole = False  # something after the object: not one object
            return
        try:
            self.whole = isinstance(json.loads(text.value()), dict)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            self.whole = False

    def _scan(self, piece: str, start: int) -> int | None:
        """Where in `piece` the object closed (just past its brace), or None."""
        escaped = 0 if self._carried_escape else -1
        self._carried_escape = False
        for mark in _JSON_MARK.finditer(piece, start):
            at = mark.start()
            if at == escaped:
                continue
            char = mark.group()
            if self._in_string:
                if char == '"':
                    self._in_string = False
                elif char == "\\":
                    escaped = at + 1
                    self._carried_escape = escaped == len(piece)
            elif char == '"':
                self._in_string = True
            elif char == "{":
                self._depth += 1
            elif char == "}":
                self._depth -= 1
                if self._depth == 0:
                    return at + 1
        return None


class _Call:
    __slots__ = ("arguments", "end", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments = _Text()
        self.end = _ObjectEnd()


class StreamedReply:
    """Chunks (`chat.completion.chunk` objects) folded into one reply."""

    def __init__(self) -> None:
        self.content = _Text()
        self.calls: dict[int, _Call] = {}
        self._order: list[int] = []
        """The calls' indexes, sorted: the order progress lists them in."""
        self._shown: list[tuple[str, str]] = []
        """What progress showed of each call, in that order; after an event only the calls it
        touched are read again (all of them on every event is calls x events)."""
        self._touched: set[int] = set()
        self.finish_reason: str | None = None
        self.usage: object = None
        self.logprobs: list[object] | None = None
        self.events = 0
        self.started = False
        """An event has come: the server is generating (before, it may be queueing)."""

    def add_event(self, event: bytes, on_progress: Callable[[ReplyProgress], None] | None) -> bool:
        """Fold in one event's data; True at the end (`[DONE]`)."""
        if event == b"[DONE]":
            return True
        self.started = True
        self.events += 1
        if self.events > MAX_STREAM_EVENTS:
            raise MalformedReply(
                f"the streamed reply has more than {MAX_STREAM_EVENTS} events (about one per "
                "token is expected)"
            )
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
                self._add_logprobs(logprobs["content"])
            delta = choice.get("delta")
            if isinstance(delta, dict):
                grew = self._add_delta(delta) or grew
        return grew

    def _add_logprobs(self, entries: list[object]) -> None:
        if self.logprobs is None:
            self.logprobs = []
        if len(self.logprobs) + len(entries) > MAX_STREAM_EVENTS:
            raise MalformedReply(
                f"the streamed reply has more than {MAX_STREAM_EVENTS} log-probability entries "
                "(one per token is expected)"
            )
        self.logprobs.extend(entries)  # in place: a new list per event is quadratic

    def _add_delta(self, delta: dict[str, Any]) -> bool:
        grew = False
        if isinstance(delta.get("content"), str) and delta["content"]:
            self.content.add(delta["content"])
            grew = True
        entries = delta.get("tool_calls") or []
        if not isinstance(entries, list):
            raise MalformedReply("a streamed delta's tool_calls is not a list")
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("index", 0), int):
                raise MalformedReply("a streamed tool call has no integer index")
            call = self._call(entry.get("index", 0))
            self._touched.add(entry.get("index", 0))
            call.id = call.id or (entry.get("id") if isinstance(entry.get("id"), str) else None)
            function = entry.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str) and not call.name:
                    call.name = function["name"]
                if isinstance(function.get("arguments"), str):
                    call.arguments.add(function["arguments"])
                    call.end.feed(function["arguments"], call.arguments)
            grew = True
        return grew

    def _call(self, index: int) -> _Call:
        call = self.calls.get(index)
        if call is None:
            if len(self.calls) == MAX_STREAMED_CALLS:
                raise MalformedReply(
                    f"the streamed reply has more than {MAX_STREAMED_CALLS} tool calls"
                )
            call = self.calls[index] = _Call()
            position = bisect.bisect(self._order, index)
            self._order.insert(position, index)
            self._shown.insert(position, ("", ""))
        return call

    def first_call_whole(self) -> bool:
        """The first call's arguments are a complete JSON object: nothing can follow in it."""
        call = self.calls.get(0)
        return call is not None and call.end.whole is True

    def progress(self) -> ReplyProgress:
        for index in self._touched:
            call = self.calls[index]
            self._shown[bisect.bisect_left(self._order, index)] = (
                call.name,
                call.arguments.shown(),
            )
        self._touched.clear()
        return ReplyProgress(self.content.shown(), tuple(self._shown))

    def body(self, *, only_first_call: bool = False) -> dict[str, Any]:
        """The reply as a non-streamed body (`choices[0].message`, `usage`, `logprobs`)."""
        indexes = sorted(self.calls)[:1] if only_first_call else sorted(self.calls)
        message: dict[str, Any] = {"role": "assistant", "content": self.content.value() or None}
        if indexes:
            message["tool_calls"] = [
                {
                    "id": self.calls[index].id,
                    "type": "function",
                    "function": {
                        "name": self.calls[index].name,
                        "arguments": self.calls[index].arguments.value(),
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
        self.pending: list[bytes] = []
        """Bytes after the last line break, in pieces: joined only once a line is complete, so
        a long line sent in many small pieces is not copied once per piece."""
        self.data: list[bytes] = []

    def feed(self, piece: bytes) -> list[bytes]:
        self.pending.append(piece)
        if b"\n" not in piece:
            return []
        lines = b"".join(self.pending).split(b"\n")
        self.pending = [lines.pop()]
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
