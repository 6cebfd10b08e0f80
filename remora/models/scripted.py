"""A real OpenAI-compatible chat-completions server that replies from a script or a rule.

Tests and benchmarks point the ordinary OpenAI client at it instead of mocking the client,
so the whole HTTP path (serialisation, status codes, retries, keep-alive) is exercised.

Run as a process with ``python -m remora.models.scripted``; it serves the
:class:`CallEveryTool` rule and prints ``base_url=...`` once listening.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import inspect
import itertools
import json
import logging
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self, TypeAlias

import anyio
import h11
from anyio.abc import ByteStream, SocketAttribute, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal

__all__ = [
    "CallEveryTool",
    "HttpErrorReply",
    "RawReply",
    "Reply",
    "Rule",
    "ScriptedModelServer",
    "TextReply",
    "ToolCall",
    "ToolCallsReply",
    "arguments_from_schema",
    "http_error",
    "main",
    "raw",
    "text",
    "tool_call",
    "tool_calls",
]

log = logging.getLogger(__name__)

SUBMIT_TOOL = "submit_result"
DEFAULT_MODEL = "google/functiongemma-270m-it"
"""Served by default, so Remora's default server.model works against the scripted server."""
DEFAULT_COMPLETION = "A scripted completion."
"""What /v1/completions answers when a test gives no `completion` function."""
SCRIPT_EXHAUSTED = "scripted model: script exhausted"
_RECEIVE_SIZE = 65536
_MAX_SCHEMA_DEPTH = 32

JSON: TypeAlias = Any
Headers: TypeAlias = tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call; ``arguments`` is the JSON string sent on the wire, verbatim."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolCallsReply:
    """An assistant message carrying one or more (parallel) tool calls."""

    calls: tuple[ToolCall, ...]
    content: str | None = None


@dataclass(frozen=True, slots=True)
class TextReply:
    """A plain assistant message."""

    content: str
    finish_reason: str = "stop"


@dataclass(frozen=True, slots=True)
class HttpErrorReply:
    """An error status with an OpenAI-style ``{"error": {...}}`` body."""

    status: int
    message: str
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class RawReply:
    """Status, headers and body sent as given, for fault injection."""

    status: int
    body: bytes
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class DelayedReply:
    """Another reply, sent after `seconds` (a server slower than the client's timeout)."""

    reply: ToolCallsReply | TextReply | HttpErrorReply | RawReply
    seconds: float


Reply: TypeAlias = ToolCallsReply | TextReply | HttpErrorReply | RawReply | DelayedReply
Rule: TypeAlias = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]
Arguments: TypeAlias = Mapping[str, Any] | str


def _encode_arguments(arguments: Arguments | None) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments or {}))


def _headers(headers: Mapping[str, str] | None) -> Headers:
    return tuple((str(k), str(v)) for k, v in (headers or {}).items())


def tool_call(
    name: str, arguments: Arguments | None = None, *, content: str | None = None
) -> Reply:
    """Reply with a single tool call; a str ``arguments`` is sent verbatim (may be invalid)."""
    return ToolCallsReply((ToolCall(name, _encode_arguments(arguments)),), content)


def tool_calls(*calls: tuple[str, Arguments], content: str | None = None) -> Reply:
    """Reply with parallel tool calls, each given as ``(name, arguments)``."""
    if not calls:
        raise ValueError("tool_calls() needs at least one (name, arguments) pair")
    return ToolCallsReply(tuple(ToolCall(n, _encode_arguments(a)) for n, a in calls), content)


def text(content: str, *, finish_reason: str = "stop") -> Reply:
    """Reply with plain assistant text."""
    return TextReply(content, finish_reason)


def http_error(
    status: int, message: str | None = None, headers: Mapping[str, str] | None = None
) -> Reply:
    """Reply with an error status, e.g. ``http_error(429, headers={"Retry-After": "1"})``."""
    return HttpErrorReply(status, message or _phrase(status), _headers(headers))


def raw(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> Reply:
    """Reply with anything, verbatim.

    Content-Type defaults to JSON and Content-Length to ``len(body)``; declaring a longer
    Content-Length makes the server drop the connection mid-body.
    """
    return RawReply(status, body, _headers(headers))


# --------------------------------------------------------------------------- rules


def arguments_from_schema(schema: Mapping[str, Any]) -> JSON:
    """Build a small value that validates against ``schema`` (local ``$ref``s resolved)."""
    return _example(schema, schema, 0)


def _resolve_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#"):
        raise ValueError(f"only local $ref is supported, got {ref!r}")
    node: Any = root
    for part in ref.lstrip("#").strip("/").split("/"):
        if part:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    if not isinstance(node, Mapping):
        raise ValueError(f"$ref {ref!r} does not point at a schema")
    return node


def _merge_all_of(schema: Mapping[str, Any]) -> dict[str, Any]:
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    properties: dict[str, Any] = dict(merged.get("properties", {}))
    required: list[str] = list(merged.get("required", []))
    for part in schema["allOf"]:
        for key, value in part.items():
            if key == "properties":
                properties.update(value)
            elif key == "required":
                required += [r for r in value if r not in required]
            else:
                merged.setdefault(key, value)
    if properties:
        merged["properties"] = properties
    if required:
        merged["required"] = required
    return merged


def _number(schema: Mapping[str, Any], zero: float) -> float:
    value = zero
    if "minimum" in schema:
        value = max(value, schema["minimum"])
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        value = schema["exclusiveMinimum"] + 1
    if "maximum" in schema:
        value = min(value, schema["maximum"])
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        value = schema["exclusiveMaximum"] - 1
    return value


def _example(schema: Mapping[str, Any] | bool, root: Mapping[str, Any], depth: int) -> JSON:
    if isinstance(schema, bool) or depth > _MAX_SCHEMA_DEPTH:
        return None
    if "$ref" in schema:
        return _example(_resolve_ref(schema["$ref"], root), root, depth + 1)
    if "default" in schema:
        return copy.deepcopy(schema["default"])
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if schema.get("enum"):
        return copy.deepcopy(schema["enum"][0])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _example(schema[key][0], root, depth + 1)
    if schema.get("allOf"):
        return _example(_merge_all_of(schema), root, depth + 1)

    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None:
        if "properties" in schema or "required" in schema:
            kind = "object"
        elif "items" in schema or "prefixItems" in schema:
            kind = "array"

    if kind == "string":
        length = max(1, schema.get("minLength", 1))
        return "a" * min(length, schema.get("maxLength", length))
    if kind == "integer":
        return int(_number(schema, 0))
    if kind == "number":
        return float(_number(schema, 0.0))
    if kind == "boolean":
        return False
    if kind == "array":
        prefix = [_example(s, root, depth + 1) for s in schema.get("prefixItems", [])]
        wanted = max(schema.get("minItems", 0) - len(prefix), 0)
        items = schema.get("items", {})
        return prefix + [_example(items, root, depth + 1) for _ in range(wanted)]
    if kind == "object":
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", {})
        return {
            name: _example(properties.get(name, extra), root, depth + 1)
            for name in schema.get("required", [])
        }
    return None


class CallEveryTool:
    """Call every offered tool once, then ``submit_result`` (like pydantic-ai's TestModel).

    Arguments are generated from each tool's JSON schema unless overridden per tool name
    in ``arguments`` (a str override is sent verbatim). A ``tool_choice`` that names a
    function is honoured; ``tool_choice="none"`` gets text.
    """

    def __init__(
        self,
        arguments: Mapping[str, Arguments] | None = None,
        *,
        submit_tool: str = SUBMIT_TOOL,
        final_text: str = "done",
    ) -> None:
        self.arguments = dict(arguments or {})
        self.submit_tool = submit_tool
        self.final_text = final_text

    def __call__(self, body: dict[str, Any]) -> Reply:
        schemas: dict[str, Mapping[str, Any]] = {}
        for tool in body.get("tools") or []:
            function = tool.get("function") or {}
            if tool.get("type", "function") == "function" and "name" in function:
                schemas[function["name"]] = function.get("parameters") or {}

        choice = body.get("tool_choice")
        if choice == "none" or not schemas:
            return text(self.final_text)
        if isinstance(choice, Mapping) and (forced := (choice.get("function") or {}).get("name")):
            return self._call(forced, schemas.get(forced, {}))

        called = {
            (call.get("function") or {}).get("name")
            for message in body.get("messages") or []
            if isinstance(message, Mapping) and message.get("role") == "assistant"
            for call in message.get("tool_calls") or []
        }
        for name, schema in schemas.items():
            if name != self.submit_tool and name not in called:
                return self._call(name, schema)
        if self.submit_tool in schemas:
            return self._call(self.submit_tool, schemas[self.submit_tool])
        return text(self.final_text)

    def _call(self, name: str, schema: Mapping[str, Any]) -> Reply:
        if name in self.arguments:
            return tool_call(name, self.arguments[name])
        generated = arguments_from_schema(schema)
        return tool_call(name, generated if isinstance(generated, dict) else {})


# --------------------------------------------------------------------------- server


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def _check_reply(item: object, what: str) -> Reply:
    if not isinstance(item, ToolCallsReply | TextReply | HttpErrorReply | RawReply | DelayedReply):
        raise TypeError(f"{what} is not a reply: {item!r}")
    return item


def _error_body(status: int, message: str) -> bytes:
    code = _phrase(status).lower().replace(" ", "_").replace("-", "_")
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


@dataclass(slots=True)
class _Response:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)


def _json_response(status: int, payload: JSON) -> _Response:
    return _Response(status, json.dumps(payload).encode(), [("Content-Type", "application/json")])


def _error_response(status: int, message: str, headers: Headers = ()) -> _Response:
    return _Response(
        status, _error_body(status, message), [("Content-Type", "application/json"), *headers]
    )


class ScriptedModelServer:
    """OpenAI-compatible chat-completions server answering from ``script`` or ``rule``.

    Use ``with ScriptedModelServer(...) as server:`` to run it on a background thread, or
    ``await task_group.start(server.serve)`` to run it in the current event loop.
    """

    def __init__(
        self,
        script: Iterable[Reply] | None = None,
        *,
        rule: Rule | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        models: Sequence[str] = (DEFAULT_MODEL,),
        completion: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        if (script is None) == (rule is None):
            raise ValueError("give exactly one of script= or rule=")
        self._script: Iterator[Reply] | None = iter(script) if script is not None else None
        self._rule = rule
        self.host = host
        self.port = port
        self.latency = latency
        self.models = list(models) or [DEFAULT_MODEL]
        self.requests: list[dict[str, Any]] = []
        self.completion = completion or (lambda body: DEFAULT_COMPLETION)
        """Answers POST /v1/completions: the continuation of `body["prompt"]`."""
        self.completion_requests: list[dict[str, Any]] = []
        self.model_list_requests = 0
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._bound_port: int | None = None
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)
        self._exit_stack: contextlib.ExitStack | None = None

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``; only known once the server is listening."""
        if self._bound_port is None:
            raise RuntimeError("the server is not listening yet")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._bound_port}/v1"

    # -- lifecycle

    async def serve(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; reports ``base_url`` through ``task_status``."""
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
        async with listener:
            self._bound_port = listener.extra(SocketAttribute.local_port)
            task_status.started(self.base_url)
            await listener.serve(self._serve_connection)

    def start(self) -> Self:
        """Start serving on a background thread; returns once listening."""
        if self._exit_stack is not None:
            raise RuntimeError("the server is already running")
        with contextlib.ExitStack() as stack:
            portal: BlockingPortal = stack.enter_context(
                start_blocking_portal(name=f"scripted-model-{id(self):x}")
            )
            # Cancel the serve task before the portal waits for its tasks to finish.
            stack.callback(portal.call, portal.stop, True)
            portal.start_task(self.serve)
            self._exit_stack = stack.pop_all()
        return self

    def stop(self) -> None:
        """Stop the background server and join its thread."""
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            stack.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- HTTP

    async def _serve_connection(self, stream: ByteStream) -> None:
        self.connections += 1
        # An exception escaping here would cancel the listener's task group, i.e. the server.
        try:
            async with stream:
                await self._serve_requests(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            pass  # the client went away, e.g. it timed out while we slept on latency
        except Exception:
            log.exception("scripted model: connection failed")

    async def _serve_requests(self, stream: ByteStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            try:
                received = await self._receive_request(conn, stream)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await self._send(conn, stream, _error_response(exc.error_status_hint, str(exc)))
                return
            if received is None:
                return
            response = await self._dispatch(*received)
            try:
                await self._send(conn, stream, response)
            except h11.LocalProtocolError:
                # A raw reply whose framing h11 refuses: closing mid-body is the intended fault.
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    async def _receive_request(
        self, conn: h11.Connection, stream: ByteStream
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        chunks: list[bytes] = []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if conn.they_are_waiting_for_100_continue:
                    await self._write(
                        conn,
                        stream,
                        h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue"),
                    )
                try:
                    data = await stream.receive(_RECEIVE_SIZE)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    data = b""
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage) and request is not None:
                return request, b"".join(chunks)
            else:  # ConnectionClosed, or PAUSED which cannot happen before EndOfMessage
                return None

    async def _write(self, conn: h11.Connection, stream: ByteStream, event: h11.Event) -> None:
        data = conn.send(event)
        if data:
            await stream.send(data)

    async def _send(self, conn: h11.Connection, stream: ByteStream, response: _Response) -> None:
        names = {name.lower() for name, _ in response.headers}
        headers = list(response.headers)
        if "content-type" not in names:
            headers.append(("Content-Type", "application/json"))
        if not names & {"content-length", "transfer-encoding"}:
            headers.append(("Content-Length", str(len(response.body))))
        reason = _phrase(response.status).encode()
        await self._write(
            conn, stream, h11.Response(status_code=response.status, headers=headers, reason=reason)
        )
        if response.body:
            await self._write(conn, stream, h11.Data(data=response.body))
        await self._write(conn, stream, h11.EndOfMessage())

    async def _dispatch(self, request: h11.Request, body: bytes) -> _Response:
        method = request.method.decode("ascii", "replace").upper()
        path = request.target.decode("ascii", "replace").split("?", 1)[0].rstrip("/")
        if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
            return await self._chat(body)
        if method == "POST" and path in ("/v1/completions", "/completions"):
            return self._completion(body)
        if method == "GET" and path in ("/v1/models", "/models"):
            self.model_list_requests += 1
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "remora-scripted"}
                for m in self.models
            ]
            return _json_response(200, {"object": "list", "data": data})
        return _error_response(404, f"no route for {method} {path or '/'}")

    # -- text completions

    def _completion(self, raw_body: bytes) -> _Response:
        try:
            body = json.loads(raw_body)
        except ValueError as exc:
            return _error_response(400, f"request body is not valid JSON: {exc}")
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            return _error_response(400, "request body must be an object with a 'prompt' string")
        self.completion_requests.append(body)
        try:
            text = self.completion(body)
        except Exception as exc:
            return _error_response(500, f"scripted model: {type(exc).__name__}: {exc}")
        # As a server does (the client cuts again: remora.protocol.completion.cut_at_stop); this
        # module imports nothing of Remora's, so the three lines stand here too.
        stops = [stop for stop in body.get("stop") or [] if isinstance(stop, str) and stop]
        cuts = [at for at in (text.find(stop) for stop in stops) if at != -1]
        text = text[: min(cuts)] if cuts else text
        payload = {
            "id": f"cmpl-{next(self._completion_ids)}",
            "object": "text_completion",
            "created": 0,
            "model": body.get("model", DEFAULT_MODEL),
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
            "usage": {
                "prompt_tokens": len(body["prompt"]) // 4,
                "completion_tokens": len(text) // 4 + 1,
                "total_tokens": len(body["prompt"]) // 4 + len(text) // 4 + 1,
            },
        }
        return _json_response(200, payload)

    # -- chat completions

    async def _chat(self, raw_body: bytes) -> _Response:
        try:
            body = json.loads(raw_body)
        except ValueError as exc:
            return _error_response(400, f"request body is not valid JSON: {exc}")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error_response(400, "request body must be an object with a 'messages' list")
        if body.get("stream"):
            return _error_response(400, "scripted model: streaming is not supported")

        self.requests.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            # The script is consumed on arrival so that request n always gets item n.
            reply = self._next_script_item() if self._script is not None else None
            if self.latency > 0:
                await anyio.sleep(self.latency)
            if self._rule is not None:
                reply = _check_reply(await self._apply_rule(self._rule, body), "rule result")
            if isinstance(reply, DelayedReply):
                await anyio.sleep(reply.seconds)
                reply = reply.reply
        except Exception as exc:
            return _error_response(500, f"scripted model: {type(exc).__name__}: {exc}")
        finally:
            self.in_flight -= 1
        if reply is None:
            return _error_response(500, SCRIPT_EXHAUSTED)
        return self._render(body, reply)

    def _next_script_item(self) -> Reply | None:
        assert self._script is not None
        item = next(self._script, None)
        return None if item is None else _check_reply(item, "script item")

    @staticmethod
    async def _apply_rule(rule: Rule, body: dict[str, Any]) -> object:
        result = rule(body)
        return await result if inspect.isawaitable(result) else result

    def _render(self, body: dict[str, Any], reply: Reply) -> _Response:
        if isinstance(reply, DelayedReply):  # already waited for in _chat
            reply = reply.reply
        if isinstance(reply, RawReply):
            return _Response(reply.status, reply.body, list(reply.headers))
        if isinstance(reply, HttpErrorReply):
            return _error_response(reply.status, reply.message, reply.headers)

        message: dict[str, Any] = {"role": "assistant"}
        if isinstance(reply, TextReply):
            message["content"] = reply.content
            finish_reason = reply.finish_reason
        else:
            message["content"] = reply.content
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._call_ids)}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in reply.calls
            ]
            finish_reason = "tool_calls"

        # A deterministic stand-in for token counts: about four characters per token.
        prompt_tokens = max(1, len(json.dumps(body, sort_keys=True)) // 4)
        completion_tokens = max(1, len(json.dumps(message, sort_keys=True)) // 4)
        model = body.get("model")
        return _json_response(
            200,
            {
                "id": f"chatcmpl-scripted-{next(self._completion_ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model if isinstance(model, str) else self.models[0],
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )


# --------------------------------------------------------------------------- faults

FAULTS = (
    "drop",
    "429",
    "500",
    "502",
    "503",
    "slow",
    "truncated",
    "not_json",
    "no_choices",
    "null_message",
    "huge",
)
"""Every fault `FaultInjector` can produce."""


class FaultInjector:
    """Wraps a rule: each request gets, with probability `rate`, a fault instead of the rule's
    reply. Seeded, so a run is reproducible; `injected` counts what was sent."""

    def __init__(
        self,
        rule: Rule,
        *,
        rate: float,
        seed: int = 0,
        faults: Sequence[str] = FAULTS,
        slow_seconds: float = 30.0,
        huge_bytes: int = 2_000_000,
    ) -> None:
        unknown = sorted(set(faults) - set(FAULTS))
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
        self.rule, self.rate, self.faults = rule, rate, list(faults)
        self.slow_seconds, self.huge_bytes = slow_seconds, huge_bytes
        self._random = random.Random(seed)
        self.injected: Counter[str] = Counter()

    async def __call__(self, body: dict[str, Any]) -> Reply:
        if self._random.random() >= self.rate:
            result = self.rule(body)
            return _check_reply(await result if inspect.isawaitable(result) else result, "rule")
        fault = self._random.choice(self.faults)
        self.injected[fault] += 1
        return self.fault_reply(fault)

    def fault_reply(self, fault: str) -> Reply:
        json_type = (("content-type", "application/json"),)
        if fault == "drop":  # promises more bytes than it sends: the connection drops
            return RawReply(200, b'{"id": "x", "choi', (*json_type, ("content-length", "4096")))
        if fault == "429":
            return HttpErrorReply(429, "rate limited (injected)", (("retry-after", "0"),))
        if fault in ("500", "502", "503"):
            return HttpErrorReply(int(fault), f"injected {fault}")
        if fault == "slow":
            return DelayedReply(TextReply("too late"), self.slow_seconds)
        if fault == "truncated":
            return RawReply(200, b'{"id": "x", "object": "chat.completion", "choices": [{"in')
        if fault == "not_json":
            return RawReply(200, b"<html>502 Bad Gateway</html>", (("content-type", "text/html"),))
        if fault == "no_choices":
            return RawReply(
                200,
                json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [],
                    }
                ).encode(),
            )
        if fault == "null_message":
            payload = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": None, "finish_reason": "stop"}],
            }
            return RawReply(200, json.dumps(payload).encode())
        return TextReply("x" * self.huge_bytes)  # huge


# --------------------------------------------------------------------------- process


async def _run_process(server: ScriptedModelServer) -> None:
    # The signal receiver is installed before announcing the URL, so a SIGTERM sent as
    # soon as the line is read still ends in a clean exit.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            base_url = await tg.start(server.serve)
            print(f"base_url={base_url}", flush=True)
            async for _ in signals:
                break
            tg.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the CallEveryTool rule until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m remora.models.scripted",
        description="OpenAI-compatible test model server that calls every offered tool once.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument(
        "--model",
        dest="models",
        action="extend",
        nargs="+",
        metavar="NAME",
        help=f"model ids listed by GET /v1/models (default: {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="probability that a chat request gets an injected fault instead of a reply",
    )
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault sequence")
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"comma-separated faults to draw from (default: all: {','.join(FAULTS)})",
    )
    parser.add_argument(
        "--slow-seconds", type=float, default=30.0, help="delay of the 'slow' fault"
    )
    args = parser.parse_args(argv)
    rule: Rule = CallEveryTool()
    if args.fault_rate > 0:
        rule = FaultInjector(
            rule,
            rate=args.fault_rate,
            seed=args.fault_seed,
            faults=[fault for fault in args.faults.split(",") if fault],
            slow_seconds=args.slow_seconds,
        )
    server = ScriptedModelServer(
        rule=rule,
        host=args.host,
        port=args.port,
        latency=args.latency,
        models=args.models or (DEFAULT_MODEL,),
    )
    # SIGINT before the signal receiver is installed still means "stop", not a traceback.
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(_run_process, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
