"""What the scripted model answers: reply values (tool calls, text, HTTP errors, raw bytes,
delays, paced streams), their constructors, and the rule that calls every offered tool with
arguments made from its schema."""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeAlias

SUBMIT_TOOL = "submit_result"
_MAX_SCHEMA_DEPTH = 32
JSON: TypeAlias = Any
Headers: TypeAlias = tuple[tuple[str, str], ...]


DEFAULT_MODEL = "google/functiongemma-270m-it"
"""Served by default, so Remora's default server.model works against the scripted server."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call; ``arguments`` is the JSON string sent on the wire, verbatim.
    ``confidence``: the probability the model gave the tokens that spell ``name``, shown in its
    log-probabilities when asked (where Remora reads a call's confidence); None: sure."""

    name: str
    arguments: str
    confidence: float | None = None

    def __post_init__(self) -> None:
        if self.confidence is not None and not 0 < self.confidence <= 1:
            raise ValueError(f"confidence must be in (0, 1], got {self.confidence!r}")


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

    reply: ToolCallsReply | TextReply | HttpErrorReply | RawReply | PacedReply
    seconds: float


@dataclass(frozen=True, slots=True)
class PacedReply:
    """A streamed reply's pace, for tests of idle timeouts: `every` seconds before each event after
    the first, and `stall` more once after `stall_after` events (a reply that stops making
    progress). Not streamed, it comes whole after the same waits in all."""

    reply: ToolCallsReply | TextReply
    every: float = 0.0
    stall_after: int | None = None
    stall: float = 0.0


Reply: TypeAlias = (
    ToolCallsReply | TextReply | HttpErrorReply | RawReply | DelayedReply | PacedReply
)
Rule: TypeAlias = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]
Arguments: TypeAlias = Mapping[str, Any] | str


def _encode_arguments(arguments: Arguments | None) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments or {}))


def _headers(headers: Mapping[str, str] | None) -> Headers:
    return tuple((str(k), str(v)) for k, v in (headers or {}).items())


def tool_call(
    name: str,
    arguments: Arguments | None = None,
    *,
    content: str | None = None,
    confidence: float | None = None,
) -> Reply:
    """Reply with a single tool call; a str ``arguments`` is sent verbatim (may be invalid).
    ``confidence``: the probability the model's log-probabilities give the call's name."""
    return ToolCallsReply((ToolCall(name, _encode_arguments(arguments), confidence),), content)


def tool_calls(
    *calls: tuple[str, Arguments] | tuple[str, Arguments, float | None], content: str | None = None
) -> Reply:
    """Reply with parallel tool calls, each given as ``(name, arguments)`` or
    ``(name, arguments, confidence)``."""
    if not calls:
        raise ValueError("tool_calls() needs at least one (name, arguments) pair")
    return ToolCallsReply(
        tuple(ToolCall(call[0], _encode_arguments(call[1]), *call[2:]) for call in calls), content
    )


def paced(
    reply: Reply, *, every: float = 0.0, stall_after: int | None = None, stall: float = 0.0
) -> Reply:
    """`reply` (tool calls or text) streamed at the pace `PacedReply` describes."""
    if not isinstance(reply, ToolCallsReply | TextReply):
        raise TypeError(f"only tool calls and text can be paced, not {reply!r}")
    if every < 0 or stall < 0 or (stall_after is not None and stall_after < 0):
        raise ValueError("paced() takes no negative waits or counts")
    return PacedReply(reply, every, stall_after, stall)


def text(content: str, *, finish_reason: str = "stop") -> Reply:
    """Reply with plain assistant text."""
    return TextReply(content, finish_reason)


def http_error(
    status: int, message: str | None = None, headers: Mapping[str, str] | None = None
) -> Reply:
    """Reply with an error status, e.g. ``http_error(429, headers={"Retry-After": "1"})``."""
    return HttpErrorReply(status, message or status_phrase(status), _headers(headers))


def raw(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> Reply:
    """Reply with anything, verbatim.

    Content-Type defaults to JSON and Content-Length to ``len(body)``; declaring a longer
    Content-Length makes the server drop the connection mid-body.
    """
    return RawReply(status, body, _headers(headers))


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


def status_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def check_reply(item: object, what: str) -> Reply:
    if not isinstance(item, Reply):
        raise TypeError(f"{what} is not a reply: {item!r}")
    return item


def _error_body(status: int, message: str) -> bytes:
    code = status_phrase(status).lower().replace(" ", "_").replace("-", "_")
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


@dataclass(slots=True)
class Response:
    """`events`: a stream's events, each sent after its wait (s); `body` holds them all too."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[float, bytes]] | None = None


def json_response(status: int, payload: JSON) -> Response:
    return Response(status, json.dumps(payload).encode(), [("Content-Type", "application/json")])


def error_response(status: int, message: str, headers: Headers = ()) -> Response:
    return Response(
        status, _error_body(status, message), [("Content-Type", "application/json"), *headers]
    )


def completion_response(body: dict[str, Any], text: str, completion_id: str) -> Response:
    """A text_completion reply continuing `body["prompt"]` with `text`, cut at the first of
    `body["stop"]` as a server does (the client cuts again:
    remora.protocol.completion.cut_at_stop; this module imports nothing of Remora's)."""
    stops = [stop for stop in body.get("stop") or [] if isinstance(stop, str) and stop]
    cuts = [at for at in (text.find(stop) for stop in stops) if at != -1]
    text = text[: min(cuts)] if cuts else text
    prompt_tokens, completion_tokens = len(body["prompt"]) // 4, len(text) // 4 + 1
    payload = {
        "id": completion_id,
        "object": "text_completion",
        "created": 0,
        "model": body.get("model", DEFAULT_MODEL),
        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return json_response(200, payload)


def metrics_response(waiting: int, running: int) -> Response:
    """GET /metrics as vLLM answers it (Prometheus text), with the two gauges of its queue."""
    labels = f'{{engine="0",model_name="{DEFAULT_MODEL}"}}'
    body = (
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{labels} {float(running)}\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{labels} {float(waiting)}\n"
    )
    return Response(200, body.encode(), [("Content-Type", "text/plain; version=0.0.4")])


def models_response(models: list[str]) -> Response:
    """GET /v1/models: the served models."""
    data = [
        {"id": m, "object": "model", "created": 0, "owned_by": "remora-scripted"} for m in models
    ]
    return json_response(200, {"object": "list", "data": data})
