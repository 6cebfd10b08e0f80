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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio
from pydantic import SecretStr

from remora.config.settings import ServerSettings
from remora.models.http.openai_client import (
    SERVER_DOCS,
    NoReply,
    OpenAIChatModel,
    StatusError,
    error_text,
)
from remora.models.http.server_probe import (
    PROBE_MESSAGES,
    PROBE_TOOL,
    PROFILE_FUNCTIONGEMMA,
    PROFILE_KIT,
    PROFILE_OPENAI,
    ServedModel,
    auto_fix,
    probe_server,
    probe_target,
    profile_name,
    required_problem,
    why,
)
from remora.protocol.messages import ModelError

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

        target = probe_target(models, agent_models, probe_model)
        gemma = target.looks_like_gemma()
        auto = await probe_server(client, target.id, "auto")
        if auto.valid:
            add("tool_choice=auto", "ok", f"{target.id}: {auto.message}")
        else:
            add(
                "tool_choice=auto",
                "problem",
                f"{target.id}: {auto.message}",
                auto_fix(auto, gemma),
            )
        required = await probe_server(client, target.id, "required")
        if required.valid:
            add("tool_choice=required", "ok", f"{target.id}: {required.message}")
        else:
            message, fix = required_problem(required, gemma)
            add("tool_choice=required", "problem", f"{target.id}: {message}", fix)

        profile = profile_name(gemma=gemma, auto=auto.valid, required=required.valid)
        if profile is None:
            add(
                "profile",
                "problem",
                "no model profile works until the tool-call problems above are fixed",
                "fix the tool_choice problems above, then run remora check-server again",
            )
        else:
            add("profile", "ok", f"runner.model_profile: {profile} ({why(profile)})")
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
        if isinstance(cause, StatusError):
            message = f"GET /models answered HTTP {cause.status_code}: {error_text(cause)}"
            if cause.status_code in (401, 403):
                fix = "set server.api_key (REMORA_SERVER__API_KEY) to the server's REMORA_API_KEY"
            elif cause.status_code == 404:
                fix = "the base URL should end in /v1, e.g. http://127.0.0.1:8000/v1"
            else:
                fix = "check the server log"
            raise _Unreachable(message, fix) from exc
        if isinstance(cause, NoReply):
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
        f"serve it (an adapter made by `remora train`: put its folder in the server kit's "
        f"adapters folder, or add {name}=ADAPTER/peft to REMORA_LORA_MODULES; see "
        f"{SERVER_DOCS}) or set agents.{agent}.model to a served name"
    )
