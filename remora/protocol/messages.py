"""The chat-completions shapes the runner speaks, independent of any client library."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from remora.findings.results import ErrorCode, Usage

Message = dict[str, Any]
"""An OpenAI chat message, kept as a plain dict so transcripts are exactly what is sent."""

ToolChoice = Literal["auto", "required"] | dict[str, Any]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str
    """Raw JSON text as the model wrote it; the runner parses and validates it."""


TokenLogprob = tuple[str, float]
"""One generated token's text and its log-probability under the model's own (unconstrained)
distribution."""


class ModelReply(BaseModel):
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    logprobs: list[TokenLogprob] | None = None
    """The reply's tokens with their log-probabilities, when they were asked for and given."""

    def as_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


class ModelError(Exception):
    """The model could not be asked (after retries) or answered something unusable."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.MODEL_ERROR) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class PromptTooLong(ModelError):
    """The request was not made: its prompt does not fit the model's context. Not a failure of
    the model or the run: the runner refuses that request and ends the job with what its tools
    verified (docs/LOCAL_ENGINE.md, "Prompts longer than the context")."""

    def __init__(self, tokens: int, context: int, hint: str = "") -> None:
        message = f"the prompt has {tokens} tokens, more than the context of {context}"
        super().__init__(f"{message} ({hint})" if hint else message)
        self.tokens = tokens
        self.context = context


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """One chat-completions request, as every engine and the router take it."""

    model: str
    messages: list[Message]
    tools: list[dict[str, Any]]
    tool_choice: ToolChoice
    max_tokens: int
    temperature: float
    grammar: str | None = None
    """A structured-outputs grammar the reply must match (FunctionGemma's native call syntax,
    from the protocol module); engines that constrain decoding themselves may ignore it."""
    parallel_calls: bool = True
    """False: at most one call, and the reply ends with it (the model profile decides)."""
    stream: bool = False
    """Have the reply sent as it forms (server-sent events; the embedded engine reports each
    token): `on_progress` sees it grow, and a reply that stops making progress is given up."""
    logprobs: bool = False
    """Ask for each generated token's log-probability (`ModelReply.logprobs`)."""
    seed: int | None = None
    """Sampling seed, so a reply sampled at a temperature above 0 can be asked for again."""
    on_progress: Callable[[ReplyProgress], None] | None = None
    """Called as a streamed reply grows (never for a reply that is not streamed)."""


@dataclass(frozen=True, slots=True)
class ReplyProgress:
    """A streamed reply so far: its text, and its calls as (name, arguments so far)."""

    content: str
    calls: tuple[tuple[str, str], ...]


class ChatModel(Protocol):
    """Anything that answers chat completions with tool calls: a server or an embedded engine."""

    async def complete(self, request: ChatRequest) -> ModelReply: ...


class MalformedReply(ValueError):
    """A reply that is JSON but not of the chat-completions shape; the message says what is
    wrong, e.g. "choices[0].message.tool_calls[0].function.arguments is a list, not a string"."""


def parse_json(content: bytes) -> object:
    """A reply body as plain JSON, or `MalformedReply` quoting its start."""
    try:
        return json.loads(content)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to parse
        raise MalformedReply(f"not JSON: {content[:120]!r}") from exc


def parse_chat_reply(data: object) -> ModelReply:
    """A chat-completions reply body (parsed JSON), checked field by field.

    Lenient only where servers differ harmlessly: a missing or null `content`, `tool_calls`,
    call `id` (numbered instead), function `name` or `arguments` (empty), a missing call `type`
    (a function), or `usage`; calls of another `type` are left out. Everything else of the
    wrong shape raises `MalformedReply`.
    """
    body = _object(data, "the reply")
    choices = body.get("choices")
    if choices is None or choices == []:
        raise MalformedReply("it has no message (no choices)")
    if not isinstance(choices, list):
        raise MalformedReply(f"choices is {_kind(choices)}, not a list")
    choice = _object(choices[0], "choices[0]")
    if choice.get("message") is None:
        raise MalformedReply("it has no message (choices[0].message is null or missing)")
    message = _object(choice["message"], "choices[0].message")
    content = _text(message.get("content"), "choices[0].message.content")
    raw_calls = _list(message.get("tool_calls"), "choices[0].message.tool_calls") or []
    calls: list[ToolCall] = []
    for index, raw_call in enumerate(raw_calls):
        where = f"choices[0].message.tool_calls[{index}]"
        call = _object(raw_call, where)
        kind = call.get("type", "function")
        if kind is None:
            kind = "function"
        if not isinstance(kind, str):
            raise MalformedReply(f"{where}.type is {_kind(kind)}, not a string")
        if kind != "function":
            continue  # not a function call: nothing Remora could run
        call_id = _text(call.get("id"), f"{where}.id") or f"call_{index}"
        if call.get("function") is None:
            raise MalformedReply(f"{where}.function is null or missing")
        function = _object(call["function"], f"{where}.function")
        name = _text(function.get("name"), f"{where}.function.name") or ""
        arguments = _text(function.get("arguments"), f"{where}.function.arguments") or ""
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return ModelReply(
        content=content,
        tool_calls=calls,
        usage=_usage(body.get("usage")),
        logprobs=_logprobs(choice.get("logprobs")),
    )


def _logprobs(value: object) -> list[TokenLogprob] | None:
    """`choices[0].logprobs.content[]`'s tokens and log-probabilities (alternatives unread)."""
    if value is None:
        return None
    entries = _list(
        _object(value, "choices[0].logprobs").get("content"), "choices[0].logprobs.content"
    )
    if entries is None:
        return None
    tokens: list[TokenLogprob] = []
    for index, entry in enumerate(entries):
        where = f"choices[0].logprobs.content[{index}]"
        item = _object(entry, where)
        token = _text(item.get("token"), f"{where}.token") or ""
        logprob = item.get("logprob")
        if (
            isinstance(logprob, bool)
            or not isinstance(logprob, int | float)
            or not logprob <= 1e-6  # NaN too
        ):
            raise MalformedReply(f"{where}.logprob is {_kind(logprob)}, not a log-probability")
        tokens.append((token, min(float(logprob), 0.0)))
    return tokens


def parse_model_list(data: object) -> list[dict[str, Any]]:
    """A `GET /models` reply body (parsed JSON): its entries, each an object with a non-empty
    string `id`; `MalformedReply` otherwise."""
    body = _object(data, "the model list")
    entries = body.get("data")
    if not isinstance(entries, list):
        raise MalformedReply(f"data is {_kind(entries)}, not a list")
    listed: list[dict[str, Any]] = []
    for index, entry in enumerate(entries):
        item = _object(entry, f"data[{index}]")
        if not _text(item.get("id"), f"data[{index}].id"):
            raise MalformedReply(f"data[{index}].id is null, missing or empty")
        listed.append(item)
    return listed


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedReply(f"{where} is {_kind(value)}, not an object")
    return value


def _list(value: object, where: str) -> list[Any] | None:
    """A list, or None for null or missing."""
    if value is not None and not isinstance(value, list):
        raise MalformedReply(f"{where} is {_kind(value)}, not a list")
    return value


def _text(value: object, where: str) -> str | None:
    """A string, or None for null or missing. Lone surrogates (JSON allows `\\ud800`, UTF-8
    does not) become U+FFFD, so the text can be sent back and written."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedReply(f"{where} is {_kind(value)}, not a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def _usage(value: object) -> Usage:
    if value is None:
        return Usage()
    usage = _object(value, "usage")
    counts: dict[str, int] = {}
    for name in ("prompt_tokens", "completion_tokens"):
        count = usage.get(name)
        if count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise MalformedReply(f"usage.{name} is {_kind(count)}, not a count")
        counts[name] = count
    return Usage(**counts)


def _kind(value: object) -> str:
    """What a JSON value is, in words, with a short excerpt."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({str(value)[:20]})"
    if isinstance(value, float):
        return f"a number ({value!r:.20})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def tool_message(call: ToolCall, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
