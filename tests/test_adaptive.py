"""Adaptive concurrency: against a real HTTP server that answers only `capacity` requests at once
and reports its queue as vLLM does (/metrics), the limit falls to about what the server takes,
so requests stop waiting in its queue while the throughput stays; against a server that does not
queue, the limit stays at the ceiling. The latency rule (servers without the metric) is checked
on given latencies."""

from __future__ import annotations

import time

import anyio
import pytest

from remora.config.settings import RemoraSettings, ServerSettings
from remora.models.http.adaptive import AdaptiveLimit, AdaptiveModel, adapted
from remora.models.http.openai_client import OpenAIChatModel
from remora.models.scripted.server import ScriptedModelServer, text
from remora.protocol.messages import ChatModel, ChatRequest

CEILING = 48
WORKERS = 48
REQUESTS_EACH = 16


def request() -> ChatRequest:
    return ChatRequest(
        model="google/functiongemma-270m-it",
        messages=[{"role": "user", "content": "hi"}],
        tools=[],
        tool_choice="auto",
        max_tokens=8,
        temperature=0.0,
    )


def drive(server: ScriptedModelServer, adaptive: bool) -> tuple[float, float, int]:
    """WORKERS tasks, each REQUESTS_EACH requests in a row; (seconds, mean wait in the server's
    queue per request, the lowest limit)."""

    async def go() -> tuple[float, int]:
        client = OpenAIChatModel(ServerSettings(base_url=[server.base_url]), connections=CEILING)
        settings = RemoraSettings(
            server={"base_url": [server.base_url], "adaptive_concurrency": adaptive},
            concurrency=CEILING,
        )

        async def one(model: ChatModel) -> None:
            for _ in range(REQUESTS_EACH):
                await model.complete(request())

        started = time.monotonic()
        try:
            async with adapted(client, settings) as model, anyio.create_task_group() as group:
                for _ in range(WORKERS):
                    group.start_soon(one, model)
        finally:
            await client.aclose()
        lowest = model.limit.lowest if isinstance(model, AdaptiveModel) else CEILING
        return time.monotonic() - started, lowest

    queued = server.queued_s
    seconds, lowest = anyio.run(go)
    return seconds, (server.queued_s - queued) / (WORKERS * REQUESTS_EACH), lowest


def test_against_a_queueing_server_the_limit_falls_and_requests_stop_waiting() -> None:
    with ScriptedModelServer(rule=lambda body: text("ok"), latency=0.02, capacity=4) as server:
        fixed_s, fixed_wait, _ = drive(server, adaptive=False)
        adaptive_s, adaptive_wait, lowest = drive(server, adaptive=True)
    assert lowest <= 16  # from 48 down to about what the server takes
    print(
        f"wait {fixed_wait:.3f} -> {adaptive_wait:.3f} s, time {fixed_s:.2f} -> {adaptive_s:.2f} s"
    )
    assert adaptive_wait < fixed_wait / 3, (adaptive_wait, fixed_wait)
    assert adaptive_s < fixed_s * 1.3, (adaptive_s, fixed_s)  # the server kept as busy


def test_against_a_server_that_does_not_queue_the_limit_stays_at_the_ceiling() -> None:
    with ScriptedModelServer(rule=lambda body: text("ok"), latency=0.02) as server:
        _, _, lowest = drive(server, adaptive=True)
    assert lowest == CEILING


@pytest.mark.parametrize(
    ("latencies", "expected"),
    [
        ([0.1] * 200, 32),  # steady: stays
        ([0.1] * 16 + [0.5] * 16, 18),  # 5x slower: halved at most, plus sqrt(32) / 2
    ],
)
def test_the_limit_moves_per_window_within_bounds(latencies: list[float], expected: int) -> None:
    limit = AdaptiveLimit(32)
    for latency in latencies:
        limit.sample(latency)
    assert limit.limit == expected


def test_off_switch_and_ceiling() -> None:
    async def go() -> None:
        model = ScriptedModelServer  # any object: adapted() only wraps it
        off = RemoraSettings(server={"adaptive_concurrency": False})
        async with adapted(model, off) as same:  # type: ignore[arg-type]
            assert same is model
        async with adapted(model, RemoraSettings(concurrency=7)) as wrapped:  # type: ignore[arg-type]
            assert isinstance(wrapped, AdaptiveModel) and wrapped.limit.ceiling == 7

    anyio.run(go)
