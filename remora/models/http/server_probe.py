"""The tool-call round trip check-server makes, and what its replies say about the server: whether
forced calls work, and which runner.model_profile fits."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from remora.models.http.openai_client import SERVER_DOCS, OpenAIChatModel, StatusError
from remora.protocol.messages import ChatRequest, Message, ModelError, ModelReply

PROFILE_KIT = "functiongemma-kit"


PROFILE_FUNCTIONGEMMA = "functiongemma"


PROFILE_OPENAI = "openai"


PROBE_TOOL_NAME = "get_weather"


PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": PROBE_TOOL_NAME,
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city, e.g. Paris."}},
            "required": ["city"],
        },
    },
}


PROBE_MESSAGES: list[Message] = [
    {"role": "user", "content": "What is the weather in Paris right now? Call get_weather."}
]


PROBE_MAX_TOKENS = 96
"""Enough for a call; short enough that a model writing whitespace under JSON forcing stops soon."""


CALL_MARKER = "<start_function_call>"


_BARE_CALL = re.compile(r"\bcall:[A-Za-z0-9_.\-]+\{")


_STATUS = re.compile(r"answered HTTP (\d{3})")


KIT_PARSER_FLAGS = (
    "--enable-auto-tool-choice --tool-parser-plugin server/remora_functiongemma_parser.py "
    "--tool-call-parser remora_functiongemma"
)


KIT_HINT = f"start the server with server/entrypoint.sh (Remora's kit; see {SERVER_DOCS})"


@dataclass(frozen=True, slots=True)
class ServedModel:
    id: str
    parent: str | None = None
    """The base model, for a LoRA adapter."""
    root: str | None = None

    @property
    def is_adapter(self) -> bool:
        return self.parent is not None

    def looks_like_gemma(self) -> bool:
        return any("gemma" in (name or "").lower() for name in (self.id, self.parent, self.root))


@dataclass(frozen=True, slots=True)
class _Probe:
    """What one tool-call round trip showed."""

    valid: bool
    message: str
    kind: Literal["call", "bad_call", "marker_text", "bare_call_text", "text", "error"]
    status: int | None = None


def probe_target(
    models: list[ServedModel], agent_models: Mapping[str, str], probe_model: str | None
) -> ServedModel:
    by_id = {model.id: model for model in models}
    if probe_model is not None and probe_model in by_id:
        return by_id[probe_model]
    for name in agent_models.values():
        if name in by_id:
            return by_id[name]
    return next((model for model in models if not model.is_adapter), models[0])


async def probe_server(
    client: OpenAIChatModel, model: str, tool_choice: Literal["auto", "required"]
) -> _Probe:
    try:
        # Outside any job, so bounded here in total: the client itself never gives up on a
        # reply that has not started (a queue) or that keeps trickling in.
        with anyio.fail_after(client.timeout):
            reply = await client.complete(
                ChatRequest(
                    model=model,
                    messages=PROBE_MESSAGES,
                    tools=[PROBE_TOOL],
                    tool_choice=tool_choice,
                    max_tokens=PROBE_MAX_TOKENS,
                    temperature=0.0,
                )
            )
    except TimeoutError:
        return _Probe(
            False,
            f"no complete reply within {client.timeout:g}s (the server is busy or stalled)",
            "error",
        )
    except ModelError as exc:
        cause = exc.__cause__
        status = cause.status_code if isinstance(cause, StatusError) else None
        if status is None and (found := _STATUS.search(exc.message)):
            status = int(found.group(1))
        url = client.base_url  # said once per URL already: keep the lines short
        message = exc.message.replace(f" from {url}", "").replace(f"{url} ", "")
        return _Probe(False, message, "error", status)
    return _judge(reply)


def _judge(reply: ModelReply) -> _Probe:
    if reply.tool_calls:
        call = reply.tool_calls[0]
        shown = f"{call.name}({call.arguments[:120]})"
        if call.name != PROBE_TOOL_NAME:
            return _Probe(False, f"called {shown}, not {PROBE_TOOL_NAME}", "bad_call")
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            return _Probe(False, f"the call's arguments are not JSON: {shown}", "bad_call")
        if not isinstance(arguments, dict):
            return _Probe(False, f"the call's arguments are not an object: {shown}", "bad_call")
        city = arguments.get("city")
        if not isinstance(city, str) or not city:
            return _Probe(False, f"the call lacks a string city: {shown}", "bad_call")
        return _Probe(True, f"structured call {shown}", "call")
    content = (reply.content or "").strip()
    excerpt = content[:120] + ("..." if len(content) > 120 else "")
    if CALL_MARKER in content:
        return _Probe(False, f"text instead of a tool call: {excerpt!r}", "marker_text")
    if _BARE_CALL.search(content):
        return _Probe(False, f"text instead of a tool call: {excerpt!r}", "bare_call_text")
    if content:
        return _Probe(False, f"text without a call: {excerpt!r}", "text")
    return _Probe(False, "an empty reply: no text, no call", "text")


def auto_fix(probe: _Probe, gemma: bool) -> str:
    if probe.kind == "marker_text" or (
        probe.kind == "error" and "enable-auto-tool-choice" in probe.message
    ):
        if gemma:
            return f"the server parses no tool calls: start vLLM with {KIT_PARSER_FLAGS}"
        return (
            "the server parses no tool calls: start vLLM with --enable-auto-tool-choice "
            "--tool-call-parser <the parser for this model, e.g. hermes>"
        )
    if probe.kind == "bare_call_text":
        return (
            "special tokens are stripped, so the calls go unparsed: use Remora's parser "
            f"({KIT_PARSER_FLAGS}), which keeps them"
        )
    if probe.kind == "error":
        if probe.status is None:
            return "check that the server is up and not overloaded; raise server.timeout"
        return "check the server log for this request"
    if probe.kind == "bad_call":
        if gemma:
            return f"use Remora's parser, which keeps FunctionGemma's values intact: {KIT_HINT}"
        return "check that --tool-call-parser matches the model"
    if gemma:
        return (
            "check the chat template: --chat-template server/functiongemma_chat_template.jinja "
            "--chat-template-content-format string (server/entrypoint.sh sets both)"
        )
    return "check the server's chat template and --tool-call-parser for this model"


def required_problem(probe: _Probe, gemma: bool) -> tuple[str, str]:
    if gemma:
        return (
            f"{probe.message} (stock vLLM forces FunctionGemma into plain JSON under "
            "tool_choice=required)",
            f"{KIT_HINT} to force calls in FunctionGemma's own syntax, or use "
            "runner.model_profile: functiongemma, which never forces a call",
        )
    return (
        probe.message,
        "use runner.model_profile: functiongemma (tool_choice=auto; only submit_result "
        "offered on the last turn), which never forces a call",
    )


def profile_name(*, gemma: bool, auto: bool, required: bool) -> str | None:
    if required:
        return PROFILE_KIT if gemma else PROFILE_OPENAI
    if auto:
        return PROFILE_FUNCTIONGEMMA
    return None


def why(profile: str) -> str:
    if profile == PROFILE_KIT:
        return (
            "FunctionGemma answers tool_choice=required with a valid call: the server "
            "constrains calls in its own syntax, as Remora's kit does"
        )
    if profile == PROFILE_OPENAI:
        return "the model answers tool_choice=required with a valid call"
    return "tool calls work with tool_choice=auto but not forced: Remora will never force one"
