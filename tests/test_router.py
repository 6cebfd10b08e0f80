"""ReplicaRouter over real OpenAI clients and real scripted servers: spread, affinity, dead
replicas, model listing."""

from __future__ import annotations

import contextlib
import socket
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from remora.config.settings import ServerSettings
from remora.findings.results import ErrorCode
from remora.models.http.openai_client import OpenAIChatModel
from remora.models.http.router import ReplicaRouter, affinity_slack, is_connection_error
from remora.models.scripted.server import (
    DelayedReply,
    ScriptedModelServer,
    TextReply,
    http_error,
    text,
)
from remora.protocol.completion import CompletionRequest
from remora.protocol.messages import ChatRequest, Message, ModelError, ModelReply

pytestmark = pytest.mark.anyio

MODEL = "google/functiongemma-270m-it"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def echo(body: dict[str, Any]) -> Any:
    """Replies with the turn number, so a test can tell a job's turns apart."""
    return text(f"turn {len(body['messages'])}")


@contextlib.contextmanager
def servers(count: int, *, rule: Any = echo, latency: float = 0.0) -> Iterator[list[Any]]:
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(ScriptedModelServer(rule=rule, latency=latency))
            for _ in range(count)
        ]


def refused_url() -> str:
    """A port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def client(url: str, *, timeout: float = 5.0) -> OpenAIChatModel:
    return OpenAIChatModel(ServerSettings(base_url=url, retries=0, timeout=timeout))


def router_for(*urls: str, **options: Any) -> ReplicaRouter:
    return ReplicaRouter([client(url) for url in urls], **options)


def chat(model: str, messages: list[Message]) -> ChatRequest:
    return ChatRequest(
        model=model, messages=messages, tools=[], tool_choice="auto", max_tokens=16, temperature=0
    )


async def ask(router: ReplicaRouter, messages: list[Message]) -> ModelReply:
    return await router.complete(chat(MODEL, messages))


async def job(router: ReplicaRouter, system: str, user: str, turns: int = 1) -> list[Message]:
    """One agent's job: `turns` requests, each with the whole conversation so far."""
    messages: list[Message] = [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]
    for _ in range(turns):
        reply = await ask(router, messages)
        messages.append(reply.as_message())
        messages.append({"role": "user", "content": "go on"})
    return messages


def users_seen(server: ScriptedModelServer) -> Counter[str]:
    return Counter(request["messages"][1]["content"] for request in server.requests)


async def test_concurrent_conversations_spread_by_least_outstanding() -> None:
    with servers(2, latency=0.1) as (one, two):
        router = router_for(one.base_url, two.base_url)
        try:
            async with anyio.create_task_group() as group:
                for index in range(40):  # every job its own agent: nothing to stick to
                    group.start_soon(job, router, f"agent {index}", f"node {index}")
        finally:
            await router.aclose()
        assert len(one.requests) == len(two.requests) == 20
        assert min(one.max_in_flight, two.max_in_flight) > 10  # really concurrent on both
        stats = router.stats()
        assert [s.requests for s in stats] == [20, 20]
        assert [s.outstanding for s in stats] == [0, 0]
        assert [s.max_outstanding for s in stats] == [20, 20]


async def test_one_agent_under_load_still_uses_every_replica_within_the_slack() -> None:
    with servers(2, latency=0.1) as (one, two):
        router = router_for(one.base_url, two.base_url)
        try:
            async with anyio.create_task_group() as group:
                for index in range(40):
                    group.start_soon(job, router, "the lint agent", f"node {index}")
        finally:
            await router.aclose()
        assert len(one.requests) + len(two.requests) == 40
        most = [s.max_outstanding for s in router.stats()]
        assert abs(most[0] - most[1]) <= affinity_slack(min(most)) + 1
        assert min(most) >= 15


async def test_each_agent_and_each_conversation_stays_on_one_replica() -> None:
    with servers(2, latency=0.05) as (one, two):
        router = router_for(one.base_url, two.base_url)
        try:
            async with anyio.create_task_group() as group:
                for index in range(10):  # two agents, their jobs interleaved, three turns each
                    group.start_soon(job, router, "agent A", f"A node {index}", 3)
                    group.start_soon(job, router, "agent B", f"B node {index}", 3)
        finally:
            await router.aclose()
        systems = [
            Counter(request["messages"][0]["content"] for request in server.requests)
            for server in (one, two)
        ]
        assert systems == [Counter({"agent A": 30}), Counter({"agent B": 30})]
        for server in (one, two):  # every turn of a job went where its first turn went
            assert set(users_seen(server).values()) == {3}


async def test_a_conversation_follows_its_replica_when_the_agent_moves() -> None:
    def rule(body: dict[str, Any]) -> Any:
        if body["messages"][1]["content"].startswith("hold"):
            return DelayedReply(TextReply("held"), 0.3)
        return echo(body)

    with servers(2, rule=rule) as (one, two):
        router = router_for(one.base_url, two.base_url)
        try:
            first = await job(router, "agent", "node 1")
            async with anyio.create_task_group() as group:
                for index in range(3):  # the agent's next jobs stick to replica one...
                    group.start_soon(job, router, "agent", f"hold {index}")
                await anyio.sleep(0.1)
                # ...until it has more than the slack in flight: this job goes to two,
                await job(router, "agent", "node 2")
            # the agent now sticks to two, while the first job's next turn goes to one.
            await ask(router, first)
            await job(router, "agent", "node 3")
        finally:
            await router.aclose()
        assert users_seen(one) == Counter({"node 1": 2, "hold 0": 1, "hold 1": 1, "hold 2": 1})
        assert users_seen(two) == Counter({"node 2": 1, "node 3": 1})


async def test_a_refused_replica_is_marked_down_and_its_requests_move() -> None:
    dead = refused_url()
    with servers(1, latency=0.02) as (live,):
        router = router_for(dead, live.base_url)
        try:
            async with anyio.create_task_group() as group:
                for index in range(10):
                    group.start_soon(job, router, f"agent {index}", f"node {index}")
            stats = router.stats()
            assert stats[0].failures == stats[0].requests == 5  # the first wave, in flight
            assert stats[0].down and "no reply from" in (stats[0].last_error or "")
            assert router.rerouted == 5
            # Later requests skip the dead replica while it cools down.
            async with anyio.create_task_group() as group:
                for index in range(10):
                    group.start_soon(job, router, f"agent {index}", f"again {index}")
        finally:
            await router.aclose()
        assert router.stats()[0].requests == 5
        assert len(live.requests) == 20


async def test_a_replica_stopped_mid_run_hands_its_jobs_to_the_live_one() -> None:
    with servers(2, latency=0.05) as (doomed, live):
        router = router_for(doomed.base_url, live.base_url)
        done: list[list[Message]] = []

        async def run(index: int) -> None:
            done.append(await job(router, f"agent {index % 4}", f"node {index}", 4))

        try:
            async with anyio.create_task_group() as group:
                for index in range(16):
                    group.start_soon(run, index)
                await anyio.sleep(0.08)
                await anyio.to_thread.run_sync(doomed.stop)
        finally:
            await router.aclose()
        assert len(done) == 16
        assert all(len(messages) == 2 + 4 * 2 for messages in done)
        stats = router.stats()
        assert stats[0].down and stats[0].failures >= 1
        assert router.rerouted >= 1
        # Every job's last turn was answered by the live replica.
        assert all(count >= 1 for count in users_seen(live).values())
        assert len(users_seen(live)) == 16


async def test_http_errors_are_not_retried_on_another_replica() -> None:
    with (
        ScriptedModelServer(rule=lambda body: http_error(500, "boom")) as failing,
        servers(1) as (live,),
    ):
        router = router_for(failing.base_url, live.base_url)
        try:
            with pytest.raises(ModelError, match="answered HTTP 500: boom") as caught:
                await ask(router, [{"role": "user", "content": "hi"}])
        finally:
            await router.aclose()
        assert not is_connection_error(caught.value)
        assert live.requests == []
        assert not router.stats()[0].down and router.rerouted == 0


async def test_cooldown_ends_and_doubles_after_another_failure() -> None:
    now = [0.0]
    dead = refused_url()
    with servers(1) as (live,):
        router = router_for(dead, live.base_url, cooldown=5.0, clock=lambda: now[0])
        try:
            await ask(router, [{"role": "user", "content": "1"}])  # tries dead first
            assert router.stats()[0].failures == 1 and router.stats()[0].down
            now[0] = 4.0
            await ask(router, [{"role": "user", "content": "2"}])
            assert router.stats()[0].requests == 1  # still cooling down
            now[0] = 6.0
            await ask(router, [{"role": "user", "content": "3"}])  # tried again: fails again
            assert router.stats()[0].requests == 2
            now[0] = 14.0  # the second cooldown is 10 s: still down
            assert router.stats()[0].down
            now[0] = 16.5
            assert not router.stats()[0].down
        finally:
            await router.aclose()
        assert len(live.requests) == 3


async def test_all_replicas_dead_raises_naming_every_url() -> None:
    first, second = refused_url(), refused_url()
    router = router_for(first, second)
    try:
        with pytest.raises(ModelError) as caught:
            await ask(router, [{"role": "user", "content": "hi"}])
        assert caught.value.code is ErrorCode.MODEL_ERROR
        assert caught.value.message.startswith(
            "no reply from any of the 2 model server replicas tried"
        )
        assert first in caught.value.message and second in caught.value.message
        assert is_connection_error(caught.value)  # so routers nest

        with pytest.raises(ModelError) as listed:
            await router.list_models()
        assert listed.value.code is ErrorCode.SERVER_UNREACHABLE
        assert first in listed.value.message and second in listed.value.message
    finally:
        await router.aclose()


async def test_one_replica_raises_its_own_errors_unchanged() -> None:
    url = refused_url()
    router = router_for(url)
    try:
        with pytest.raises(ModelError, match=f"^no reply from {url}"):
            await ask(router, [{"role": "user", "content": "hi"}])
        with pytest.raises(ModelError, match=f"cannot reach the model server at {url}"):
            await router.list_models()
    finally:
        await router.aclose()


async def test_list_models_is_the_union_and_marks_unreachable_replicas_down() -> None:
    dead = refused_url()
    with (
        ScriptedModelServer(rule=echo, models=[MODEL, "lint"]) as one,
        ScriptedModelServer(rule=echo, models=[MODEL, "docstring"]) as two,
    ):
        router = router_for(one.base_url, dead, two.base_url)
        try:
            assert await router.list_models() == [MODEL, "lint", "docstring"]
            assert [s.down for s in router.stats()] == [False, True, False]
            assert one.model_list_requests == two.model_list_requests == 1
            assert router.base_urls == [one.base_url, dead, two.base_url]
        finally:
            await router.aclose()


async def test_after_listing_requests_go_only_to_replicas_serving_their_model() -> None:
    with (
        ScriptedModelServer(rule=echo, models=[MODEL, "lint"], latency=0.05) as one,
        ScriptedModelServer(rule=echo, models=[MODEL], latency=0.05) as two,
    ):
        router = router_for(one.base_url, two.base_url)

        async def ask_for(model: str, index: int) -> None:
            await router.complete(chat(model, [{"role": "user", "content": f"{model} {index}"}]))

        try:
            await router.list_models()
            async with anyio.create_task_group() as group:
                for index in range(8):
                    group.start_soon(ask_for, "lint", index)
                    group.start_soon(ask_for, MODEL, index)
        finally:
            await router.aclose()
        models_seen = [Counter(r["model"] for r in server.requests) for server in (one, two)]
        assert models_seen[0]["lint"] == 8 and models_seen[1]["lint"] == 0
        assert models_seen[1][MODEL] == 8  # the other model balances the load


async def test_a_replica_answering_list_models_with_a_client_error_is_left_out() -> None:
    with servers(2) as (good, misconfigured):
        wrong_path = misconfigured.base_url.replace("/v1", "/v2")  # GET /v2/models: 404
        router = router_for(wrong_path, good.base_url)
        try:
            assert await router.list_models() == [MODEL]
            stats = router.stats()
            assert stats[0].excluded and not stats[0].down
            assert "HTTP 404" in (stats[0].last_error or "")
            async with anyio.create_task_group() as group:
                for index in range(6):
                    group.start_soon(job, router, f"agent {index}", f"node {index}")
        finally:
            await router.aclose()
        assert misconfigured.requests == [] and len(good.requests) == 6


async def test_a_model_served_by_one_dead_replica_is_not_sent_to_the_others() -> None:
    with (
        ScriptedModelServer(rule=echo, models=[MODEL, "lint"]) as one,
        servers(1) as (two,),
    ):
        router = router_for(one.base_url, two.base_url)
        try:
            await router.list_models()
            await anyio.to_thread.run_sync(one.stop)
            with pytest.raises(ModelError, match="no reply from any of the 1 model server"):
                await router.complete(chat("lint", [{"role": "user", "content": "hi"}]))
        finally:
            await router.aclose()
        assert two.requests == []


def test_a_router_needs_a_replica() -> None:
    with pytest.raises(ValueError, match="at least one replica"):
        ReplicaRouter([])


async def test_text_completions_are_routed_and_rerouted_like_chat() -> None:
    """The `complete` host function through the router: a dead replica is skipped, the
    live one answers POST /v1/completions (stop strings applied)."""
    dead = refused_url()
    with servers(1) as (live,):
        live.completion = lambda body: "Apply a discount.\n    more"
        router = router_for(dead, live.base_url)
        try:
            answers = [
                await router.complete_text(
                    model="google/functiongemma-270m-it",
                    request=CompletionRequest(prompt=f"def f{i}():\n    '''", stop=["\n"]),
                )
                for i in range(4)
            ]
        finally:
            await router.aclose()
    assert [answer.text for answer in answers] == ["Apply a discount."] * 4
    assert len(live.completion_requests) == 4
    assert router.stats()[0].down
