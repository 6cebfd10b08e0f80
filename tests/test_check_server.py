"""check_server against scripted servers that behave like the setups users run: Remora's kit,
stock vLLM with and without the parser flags, a missing adapter, nothing listening."""

from __future__ import annotations

import socket
from typing import Any

import h11
import pytest

from remora.models.http.server_check import CheckLine, CheckReport, check_server, render_text
from remora.models.http.server_probe import PROBE_TOOL_NAME
from remora.models.scripted.replies import Response, json_response
from remora.models.scripted.server import ScriptedModelServer, http_error, text, tool_call

pytestmark = pytest.mark.anyio

GEMMA = "google/functiongemma-270m-it"
QWEN = "Qwen/Qwen2.5-0.5B-Instruct"
NATIVE_CALL = "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>"
JSON_FORCING_400 = (
    "1 validation error for list[function-wrap[__log_extra_fields__()]]\n"
    "  Invalid JSON: EOF while parsing a list at line 1 column 1"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class VllmLikeServer(ScriptedModelServer):
    """Lists models the way vLLM does: `root` and `parent`, adapters with `parent` set to their
    base model. `models_status` answers GET /v1/models with that error instead."""

    def __init__(
        self,
        *,
        adapters: dict[str, str] | None = None,
        models_status: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.adapters = adapters or {}
        self.models_status = models_status

    async def _dispatch(self, request: h11.Request, body: bytes) -> Response:
        if request.method == b"GET" and request.target.rstrip(b"/").endswith(b"/models"):
            if self.models_status is not None:
                return json_response(
                    self.models_status, {"error": {"message": "Unauthorized", "type": "auth"}}
                )
            card = {"object": "model", "created": 0, "owned_by": "vllm"}
            data = [{**card, "id": m, "root": m, "parent": None} for m in self.models]
            data += [
                {**card, "id": name, "root": f"/adapters/{name}", "parent": base}
                for name, base in self.adapters.items()
            ]
            return json_response(200, {"object": "list", "data": data})
        return await super()._dispatch(request, body)


def kit(body: dict[str, Any]) -> Any:
    """Remora's kit: a structured call under auto and under required."""
    return tool_call(PROBE_TOOL_NAME, {"city": "Paris"})


def stock_without_flags(body: dict[str, Any]) -> Any:
    """Stock vLLM without --enable-auto-tool-choice/--tool-call-parser: calls stay text;
    forcing goes through plain JSON, which FunctionGemma fails."""
    if body.get("tool_choice") == "required":
        return http_error(400, JSON_FORCING_400)
    return text(NATIVE_CALL)


def stock_with_parser(body: dict[str, Any]) -> Any:
    """Stock vLLM with its functiongemma parser: auto works, required is forced into JSON."""
    if body.get("tool_choice") == "required":
        return http_error(400, JSON_FORCING_400)
    return tool_call(PROBE_TOOL_NAME, {"city": "Paris"})


def refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def statuses(report: CheckReport) -> list[tuple[str, str]]:
    return [(line.check, line.status) for line in report.lines]


def line(report: CheckReport, check: str) -> CheckLine:
    return next(found for found in report.lines if found.check == check)


async def check(*urls: str, agents: dict[str, str] | None = None) -> CheckReport:
    return await check_server(
        list(urls),
        api_key="EMPTY",
        agent_models={"lint": GEMMA} if agents is None else agents,
        request_timeout=5,
    )


async def test_kit_server_with_adapters_is_all_ok_and_gets_the_kit_profile() -> None:
    with VllmLikeServer(rule=kit, models=[GEMMA], adapters={"lint": GEMMA}) as server:
        report = await check(server.base_url, agents={"lint": "lint", "docstring": GEMMA})
        requests = server.requests
    assert statuses(report) == [
        ("connect", "ok"),
        ("agent lint", "ok"),
        ("agent docstring", "ok"),
        ("tool_choice=auto", "ok"),
        ("tool_choice=required", "ok"),
        ("profile", "ok"),
    ]
    assert report.ok and report.profile == "functiongemma-kit"
    assert line(report, "connect").message == (f"serves {GEMMA}; LoRA adapters: lint (on {GEMMA})")
    assert line(report, "agent lint").message == f"lint: a LoRA adapter on {GEMMA}"
    assert "structured call get_weather" in line(report, "tool_choice=auto").message
    assert "runner.model_profile: functiongemma-kit" in line(report, "profile").message
    assert [m.id for m in report.models[server.base_url] if m.is_adapter] == ["lint"]
    # The probes are real tool-call requests, to the first agent's adapter.
    assert [(r["model"], r["tool_choice"]) for r in requests] == [
        ("lint", "auto"),
        ("lint", "required"),
    ]
    assert requests[0]["tools"][0]["function"]["name"] == "get_weather"
    assert "Paris" in requests[0]["messages"][-1]["content"]


async def test_stock_vllm_without_parser_flags_returns_calls_as_text() -> None:
    with ScriptedModelServer(rule=stock_without_flags) as server:
        report = await check(server.base_url)
    assert statuses(report) == [
        ("connect", "ok"),
        ("agent lint", "ok"),
        ("tool_choice=auto", "problem"),
        ("tool_choice=required", "problem"),
        ("profile", "problem"),
    ]
    auto = line(report, "tool_choice=auto")
    assert "text instead of a tool call" in auto.message and "<start_function_call>" in auto.message
    assert auto.fix is not None
    assert "--enable-auto-tool-choice" in auto.fix and "remora_functiongemma" in auto.fix
    assert report.profile is None
    assert all(problem.fix for problem in report.problems)


async def test_stock_vllm_that_400s_on_required_gets_the_functiongemma_profile() -> None:
    with ScriptedModelServer(rule=stock_with_parser) as server:
        report = await check(server.base_url)
    assert statuses(report) == [
        ("connect", "ok"),
        ("agent lint", "ok"),
        ("tool_choice=auto", "ok"),
        ("tool_choice=required", "problem"),
        ("profile", "ok"),
    ]
    required = line(report, "tool_choice=required")
    assert "HTTP 400" in required.message and "EOF while parsing a list" in required.message
    assert "plain JSON" in required.message
    assert required.fix is not None and "server/entrypoint.sh" in required.fix
    assert "runner.model_profile: functiongemma" in required.fix
    assert report.profile == "functiongemma"
    assert "runner.model_profile: functiongemma (" in line(report, "profile").message


async def test_server_refusing_auto_without_flags_is_told_the_flags() -> None:
    message = (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )

    def rule(body: dict[str, Any]) -> Any:
        return http_error(400, message) if body["tool_choice"] == "auto" else kit(body)

    with ScriptedModelServer(rule=rule) as server:
        report = await check(server.base_url)
    auto = line(report, "tool_choice=auto")
    assert auto.status == "problem" and auto.fix is not None
    assert "--tool-call-parser remora_functiongemma" in auto.fix


async def test_stripped_special_tokens_are_named() -> None:
    def rule(body: dict[str, Any]) -> Any:
        return text("call:get_weather{city:<escape>Paris<escape>}")

    with ScriptedModelServer(rule=rule) as server:
        report = await check(server.base_url)
    auto = line(report, "tool_choice=auto")
    assert auto.status == "problem" and auto.fix is not None
    assert "special tokens are stripped" in auto.fix


async def test_a_bad_call_and_plain_text_are_problems() -> None:
    def rule(body: dict[str, Any]) -> Any:
        if body["tool_choice"] == "auto":
            return text("It is sunny in Paris.")
        return tool_call(PROBE_TOOL_NAME, '{"city": 3}')

    with ScriptedModelServer(rule=rule) as server:
        report = await check(server.base_url)
    assert (
        "text without a call: 'It is sunny in Paris.'" in line(report, "tool_choice=auto").message
    )
    assert "lacks a string city" in line(report, "tool_choice=required").message
    assert line(report, "profile").status == "problem"


async def test_missing_adapter_names_the_agent_and_the_fix() -> None:
    with VllmLikeServer(rule=kit, models=[GEMMA], adapters={"lint": GEMMA}) as server:
        report = await check(server.base_url, agents={"lint": "lint", "docstring": "docstring"})
    missing = line(report, "agent docstring")
    assert missing.status == "problem"
    assert missing.message == f"docstring is not served (served: {GEMMA}, lint)"
    assert missing.fix is not None
    assert "REMORA_LORA_MODULES" in missing.fix and "agents.docstring.model" in missing.fix
    assert line(report, "agent lint").status == "ok"
    assert report.profile == "functiongemma-kit"  # the probes still run on a served model


async def test_unreachable_url_gets_only_a_connect_problem() -> None:
    url = refused_url()
    report = await check(url)
    assert statuses(report) == [("connect", "problem")]
    problem = report.lines[0]
    assert problem.base_url == url and url in problem.message
    assert problem.fix is not None and "server/entrypoint.sh" in problem.fix
    assert report.profile is None and report.models == {}


async def test_unauthorized_server_is_told_the_api_key_setting() -> None:
    with VllmLikeServer(rule=kit, models_status=401) as server:
        report = await check(server.base_url)
    assert statuses(report) == [("connect", "problem")]
    assert "HTTP 401" in report.lines[0].message
    assert report.lines[0].fix is not None and "server.api_key" in report.lines[0].fix


async def test_a_model_other_than_gemma_that_handles_required_gets_openai() -> None:
    with ScriptedModelServer(rule=kit, models=[QWEN]) as server:
        report = await check(server.base_url, agents={"lint": QWEN})
    assert report.ok and report.profile == "openai"


async def test_replicas_that_disagree_are_a_problem() -> None:
    with (
        ScriptedModelServer(rule=kit) as one,
        ScriptedModelServer(rule=stock_with_parser) as two,
    ):
        report = await check(one.base_url, two.base_url)
    assert report.profiles == {one.base_url: "functiongemma-kit", two.base_url: "functiongemma"}
    replicas = report.lines[-1]
    assert (replicas.check, replicas.status, replicas.base_url) == ("replicas", "problem", "")
    assert report.profile is None


async def test_replicas_that_agree_share_a_profile_and_unreachable_ones_are_listed() -> None:
    dead = refused_url()
    with ScriptedModelServer(rule=kit) as one, ScriptedModelServer(rule=kit) as two:
        report = await check(one.base_url, dead, two.base_url)
    assert [found.base_url for found in report.lines if found.check == "connect"] == [
        one.base_url,
        dead,
        two.base_url,
    ]
    assert report.profile == "functiongemma-kit"
    assert report.lines[-1] == CheckLine(
        "", "replicas", "ok", "every reachable replica fits functiongemma-kit"
    )
    assert len(report.problems) == 1


async def test_render_text() -> None:
    with ScriptedModelServer(rule=stock_with_parser) as server:
        report = await check(server.base_url)
    rendered = render_text(report)
    lines = rendered.splitlines()
    assert lines[0] == server.base_url
    assert lines[1].split() == ["ok", "connect", "serves", f"{GEMMA};", "no", "LoRA", "adapters"]
    assert any(text.lstrip().startswith("fix: ") for text in lines)
    assert lines[-2] == "recommended: runner.model_profile: functiongemma"
    assert lines[-1] == "1 problem"
