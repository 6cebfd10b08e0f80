"""A job's drafts of one prompt through a model server (`complete_drafts`): a server has no
drafts request, so it is sent one `/v1/completions` per temperature, all at once, over real HTTP
to the scripted model server. (The embedded engine's batch: tests/test_local_engine.py.)"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from remora.config.settings import ServerSettings
from remora.models.http.openai_client import OpenAIChatModel
from remora.models.scripted.replies import http_error
from remora.models.scripted.server import ScriptedModelServer, tool_call
from remora.protocol.completion import Completion, DraftsRequest, complete_drafts
from remora.protocol.messages import PromptTooLong

REQUEST = DraftsRequest(
    prompt="def f(a):\n    return a\n\n\ndef test_f():\n    result = f(",
    stop=["\n"],
    max_tokens=16,
    temperatures=[0.0, 0.7, 1.0],
)


def drafts_from(
    server: ScriptedModelServer, answered: list[Completion] | None = None
) -> list[Completion]:
    async def ask() -> list[Completion]:
        model = OpenAIChatModel(ServerSettings(base_url=[server.base_url], retries=0))
        seen = answered if answered is not None else []
        try:
            return await complete_drafts(
                model, "google/functiongemma-270m-it", REQUEST, seen.append
            )
        finally:
            await model.aclose()

    return anyio.run(ask)


def test_one_request_per_temperature_sent_at_once_texts_in_order() -> None:
    def completion(body: dict[str, Any]) -> str:
        return f"{body['temperature']})\nmore"

    with ScriptedModelServer(
        rule=lambda body: tool_call("noop"), completion=completion, latency=0.2
    ) as server:
        answered: list[Completion] = []  # each counted in the job's usage as it comes
        drafts = drafts_from(server, answered)
        sent = sorted(body["temperature"] for body in server.completion_requests)
        together = server.max_in_flight
    assert sorted(answer.text for answer in answered) == ["0.0)", "0.7)", "1.0)"]
    assert [draft.text for draft in drafts] == ["0.0)", "0.7)", "1.0)"]
    assert sent == [0.0, 0.7, 1.0]
    assert together == 3  # all three were in flight at once


def test_a_refused_prompt_is_raised_as_the_engines_refusal() -> None:
    """The first failure comes out as itself (here vLLM's over-long prompt, read as
    PromptTooLong), not wrapped in a task group's exception group."""
    too_long = (
        "This model's maximum context length is 8192 tokens. However, your prompt contains "
        "9001 input tokens, which exceeds this limit even without any output tokens."
    )

    def completion(body: dict[str, Any]) -> Any:
        return http_error(400, too_long) if body["temperature"] == 0.7 else "1)"

    with (
        ScriptedModelServer(rule=lambda body: tool_call("noop"), completion=completion) as server,
        pytest.raises(PromptTooLong, match="9001"),
    ):
        drafts_from(server)
