"""`remora check-server`: is each model server ready for Remora, and which model profile fits it.

Per base URL, in order (a URL that cannot be listed gets only its `connect` line):

1. `connect`: `GET /v1/models`; lists the served models and the LoRA adapters (vLLM lists an
   adapter with `parent` set to its base model).
2. `agent NAME`, one per configured agent: its model or adapter is served.
3. `tool_choice=auto`: one real round trip with a tiny tool (`get_weather(city)`); a structured
   `tool_calls` object must come back. FunctionGemma's call syntax in the text means the server
   runs without the tool-call parser flags.
4. `tool_choice=required`: the same request, forced. Remora's server kit constrains the call in
   FunctionGemma's own syntax and answers with a valid call; stock vLLM forces FunctionGemma into
   plain JSON, which it was not trained to write (HTTP 400 "EOF while parsing", or garbage).
   The server's flags cannot be seen from outside, so this behaviour decides the profile.
5. `profile`: the `runner.model_profile` that fits what the server did:
   `functiongemma-kit` (a Gemma model answering `required` with a valid call), `functiongemma`
   (a Gemma model, or any model, that calls tools under `auto` but not under `required`) or
   `openai` (another model answering `required` with a valid call).

With several URLs (replicas), a last `replicas` line says whether they need the same profile.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import openai
from pydantic import SecretStr

from remora.config import ServerSettings
from remora.models.openai_client import SERVER_DOCS, OpenAIChatModel, error_text
from remora.protocol.messages import ChatRequest, Message, ModelError, ModelReply

__all__ = [
    "PROBE_MESSAGES",
    "PROBE_TOOL",
    "PROFILE_FUNCTIONGEMMA",
    "PROFILE_KIT",
    "PROFILE_OPENAI",
    "CheckLine",
    "CheckReport",
    "CheckStatus",
    "ServedModel",
    "check_server",
    "render_text",
]

CheckStatus = Literal["ok", "problem"]

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
class CheckLine:
    base_url: str
    """The server checked; empty for the `replicas` line about all of them."""
    check: str
    """`connect`, `agent NAME`, `tool_choice=auto`, `tool_choice=required`, `profile`,
    `replicas`."""
    status: CheckStatus
    message: str
    fix: str | None = None
    """One line saying what to do; set for every problem."""


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


@dataclass
class CheckReport:
    lines: list[CheckLine] = field(default_factory=list)
    models: dict[str, list[ServedModel]] = field(default_factory=dict)
    """What each reachable URL serves."""
    profiles: dict[str, str | None] = field(default_factory=dict)
    """The profile each reachable URL's behaviour calls for (None: none works yet)."""

    @property
    def problems(self) -> list[CheckLine]:
        return [line for line in self.lines if line.status == "problem"]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def profile(self) -> str | None:
        """The profile every reachable URL calls for, if they agree and one works."""
        found = set(self.profiles.values())
        if len(found) != 1:
            return None
        return found.pop()


async def check_server(
    base_urls: Sequence[str],
    *,
    api_key: str = "EMPTY",
    agent_models: Mapping[str, str],
    request_timeout: float = 30.0,
    probe_model: str | None = None,
) -> CheckReport:
    """Check every URL at once; lines come back in URL order, then the `replicas` line.

    `agent_models` maps agent name to the model (or adapter) it sends. The tool-call probes use
    `probe_model`, else the first agent model the server serves, else its first base model.
    `request_timeout` bounds each request in total, from connecting to the last byte (no
    retries: a check should answer fast; a server too busy to answer a probe in that time is
    reported as such).
    """
    reports: list[_UrlReport | None] = [None] * len(base_urls)

    async def check_one(index: int, url: str) -> None:
        reports[index] = await _check_url(url, api_key, agent_models, request_timeout, probe_model)

    async with anyio.create_task_group() as group:
        for index, url in enumerate(base_urls):
            group.start_soon(check_one, index, url)
    report = CheckReport()
    for url, found in zip(base_urls, reports, strict=True):
        assert found is not None
        report.lines += found.lines
        if found.models is not None:
            report.models[url] = found.models
            report.profiles[url] = found.profile
    if len(report.profiles) > 1 and len(set(report.profiles.values())) > 1:
        listed = ", ".join(f"{url}: {p or 'none'}" for url, p in report.profiles.items())
        report.lines.append(
            CheckLine(
                "",
                "replicas",
                "problem",
                f"the replicas behave differently ({listed})",
                "serve every replica with the same model, adapters and flags (the same "
                "server/entrypoint.sh settings)",
            )
        )
    elif len(base_urls) > 1 and report.profile is not None:
        report.lines.append(
            CheckLine("", "replicas", "ok", f"every reachable replica fits {report.profile}")
        )
    return report


def render_text(report: CheckReport) -> str:
    """One line per check, `fix:` lines under problems, the recommended profile last."""
    out: list[str] = []
    width = max((len(line.check) for line in report.lines), default=0)
    current: str | None = None
    for line in report.lines:
        if line.base_url != current:
            current = line.base_url
            out.append(current or "all replicas")
        out.append(f"  {line.status:<7} {line.check:<{width}}  {line.message}")
        if line.fix:
            out.append(f"  {'':<7} {'':<{width}}  fix: {line.fix}")
    if report.profile is not None:
        out.append(f"recommended: runner.model_profile: {report.profile}")
    out.append(f"{len(report.problems)} problem{'' if len(report.problems) == 1 else 's'}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- one URL


@dataclass
class _UrlReport:
    lines: list[CheckLine]
    models: list[ServedModel] | None = None
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class _Probe:
    """What one tool-call round trip showed."""

    valid: bool
    message: str
    kind: Literal["call", "bad_call", "marker_text", "bare_call_text", "text", "error"]
    status: int | None = None


async def _check_url(
    url: str,
    api_key: str,
    agent_models: Mapping[str, str],
    request_timeout: float,
    probe_model: str | None,
) -> _UrlReport:
    settings = ServerSettings(
        base_url=[url], api_key=SecretStr(api_key), timeout=request_timeout, retries=0
    )
    client = OpenAIChatModel(settings)
    lines: list[CheckLine] = []

    def add(check: str, status: CheckStatus, message: str, fix: str | None = None) -> None:
        lines.append(CheckLine(url, check, status, message, fix))

    try:
        try:
            models = await _list_models(client)
        except _Unreachable as exc:
            add("connect", "problem", exc.message, exc.fix)
            return _UrlReport(lines)
        if not models:
            add("connect", "problem", "the server serves no models", "check the server log")
            return _UrlReport(lines, models)
        add("connect", "ok", _describe(models))

        by_id = {model.id: model for model in models}
        for agent, name in agent_models.items():
            served = by_id.get(name)
            if served is None:
                add(f"agent {agent}", "problem", _missing(name, models), _missing_fix(agent, name))
            elif served.is_adapter:
                add(f"agent {agent}", "ok", f"{name}: a LoRA adapter on {served.parent}")
            else:
                add(f"agent {agent}", "ok", f"{name}: served")

        target = _probe_target(models, agent_models, probe_model)
        gemma = target.looks_like_gemma()
        auto = await _probe(client, target.id, "auto")
        if auto.valid:
            add("tool_choice=auto", "ok", f"{target.id}: {auto.message}")
        else:
            add(
                "tool_choice=auto",
                "problem",
                f"{target.id}: {auto.message}",
                _auto_fix(auto, gemma),
            )
        required = await _probe(client, target.id, "required")
        if required.valid:
            add("tool_choice=required", "ok", f"{target.id}: {required.message}")
        else:
            message, fix = _required_problem(required, gemma)
            add("tool_choice=required", "problem", f"{target.id}: {message}", fix)

        profile = _profile(gemma=gemma, auto=auto.valid, required=required.valid)
        if profile is None:
            add(
                "profile",
                "problem",
                "no model profile works until the tool-call problems above are fixed",
                "fix the tool_choice problems above, then run remora check-server again",
            )
        else:
            add("profile", "ok", f"runner.model_profile: {profile} ({_why(profile)})")
        return _UrlReport(lines, models, profile)
    finally:
        await client.aclose()


class _Unreachable(Exception):
    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message, self.fix = message, fix


async def _list_models(client: OpenAIChatModel) -> list[ServedModel]:
    """`GET /models`, within the request timeout in total (`OpenAIChatModel.model_entries`)."""
    url = client.base_url
    try:
        entries = await client.model_entries()
    except ModelError as exc:
        cause = exc.__cause__
        if isinstance(cause, openai.APIStatusError):
            message = f"GET /models answered HTTP {cause.status_code}: {error_text(cause)}"
            if cause.status_code in (401, 403):
                fix = "set server.api_key (REMORA_SERVER__API_KEY) to the server's REMORA_API_KEY"
            elif cause.status_code == 404:
                fix = "the base URL should end in /v1, e.g. http://127.0.0.1:8000/v1"
            else:
                fix = "check the server log"
            raise _Unreachable(message, fix) from exc
        if isinstance(cause, openai.APIConnectionError):
            raise _Unreachable(f"cannot reach {url} ({cause})", _START_FIX) from exc
        if isinstance(cause, TimeoutError):
            raise _Unreachable(
                f"{url} did not complete GET /models within {client.timeout:g}s",
                "check that the server is up and not stalled (its log); raise server.timeout",
            ) from exc
        raise _Unreachable(
            f"GET /models gave an unusable reply: {cause or exc.message}",
            "check that the URL points at an OpenAI-compatible server (vLLM), ending in /v1",
        ) from exc
    models: list[ServedModel] = []
    for item in entries:
        parent, root = item.get("parent"), item.get("root")
        models.append(
            ServedModel(
                str(item["id"]),
                parent if isinstance(parent, str) and parent else None,
                root if isinstance(root, str) and root else None,
            )
        )
    return models


_START_FIX = (
    "start the server (server/entrypoint.sh, or docker compose -f server/docker-compose.yml up "
    "-d) and check the host, the port and the /v1 suffix"
)


def _describe(models: list[ServedModel]) -> str:
    bases = [model.id for model in models if not model.is_adapter]
    adapters = [f"{model.id} (on {model.parent})" for model in models if model.is_adapter]
    text = f"serves {', '.join(bases) or 'no base model'}"
    return text + (f"; LoRA adapters: {', '.join(adapters)}" if adapters else "; no LoRA adapters")


def _missing(name: str, models: list[ServedModel]) -> str:
    return f"{name} is not served (served: {', '.join(model.id for model in models)})"


def _missing_fix(agent: str, name: str) -> str:
    return (
        f"serve it (an adapter: add {name}=/path/to/adapter to REMORA_LORA_MODULES, see "
        f"{SERVER_DOCS}) or set agents.{agent}.model to a served name"
    )


def _probe_target(
    models: list[ServedModel], agent_models: Mapping[str, str], probe_model: str | None
) -> ServedModel:
    by_id = {model.id: model for model in models}
    if probe_model is not None and probe_model in by_id:
        return by_id[probe_model]
    for name in agent_models.values():
        if name in by_id:
            return by_id[name]
    return next((model for model in models if not model.is_adapter), models[0])


async def _probe(
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
        status = cause.status_code if isinstance(cause, openai.APIStatusError) else None
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


def _auto_fix(probe: _Probe, gemma: bool) -> str:
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


def _required_problem(probe: _Probe, gemma: bool) -> tuple[str, str]:
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


def _profile(*, gemma: bool, auto: bool, required: bool) -> str | None:
    if required:
        return PROFILE_KIT if gemma else PROFILE_OPENAI
    if auto:
        return PROFILE_FUNCTIONGEMMA
    return None


def _why(profile: str) -> str:
    if profile == PROFILE_KIT:
        return (
            "FunctionGemma answers tool_choice=required with a valid call: the server "
            "constrains calls in its own syntax, as Remora's kit does"
        )
    if profile == PROFILE_OPENAI:
        return "the model answers tool_choice=required with a valid call"
    return "tool calls work with tool_choice=auto but not forced: Remora will never force one"
