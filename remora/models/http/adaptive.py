"""Requests in flight to a server, adapted to what it can take: enough to keep it busy, not so
many that they only wait in its queue.

A GPU vLLM wants hundreds of requests in flight, vLLM on two CPU cores a handful; past what the
server runs at once, more requests only wait (adding latency, memory on both sides and, on a
busy server, time-outs). The configured `concurrency` is the ceiling and the start, so a server
that never queues is driven exactly as without adaptation. Two signals, the better first:

- **vLLM's own queue.** Where `GET /metrics` (at the server's root) has
  `vllm:num_requests_waiting`, it is read every `POLL_S`: while requests wait, the limit drops
  to what the server is running of ours (those in flight less those waiting, halved at most per
  reading); while none wait and every slot of ours is taken, it grows by a quarter. vLLM runs
  a larger batch more slowly per token but with more throughput, so latency alone would hold a
  GPU server back.
- **Latency**, for other servers, as TCP Vegas does: the *shortest* reply of a window of replies
  shows whether requests queue (then even the shortest waits), while the spread between short
  and long answers does not move it. A window (about half the limit in replies) whose shortest
  reply is within `TOLERANCE` times the shortest of the last `BASE_WINDOWS` windows lets the
  limit grow by half its square root; a slower one shrinks it in proportion, by half at most.

Jobs still run `concurrency` at a time: between model requests they run tools, which need no
server slot.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

import aiohttp
import anyio

from remora.config.settings import RemoraSettings
from remora.protocol.completion import Completion, CompletionModel, CompletionRequest
from remora.protocol.messages import ChatModel, ChatRequest, ModelReply

T = TypeVar("T")

TOLERANCE = 2.0
"""A window's shortest reply up to this many times the base is the server's pace, not a queue."""
BASE_WINDOWS = 8
MIN_WINDOW = 8
POLL_S = 0.5
_WAITING = re.compile(r"^vllm:num_requests_waiting(?:\{[^}]*\})?\s+([0-9.eE+-]+)", re.MULTILINE)


class AdaptiveLimit:
    def __init__(self, ceiling: int) -> None:
        self.ceiling = max(1, ceiling)
        self.limiter = anyio.CapacityLimiter(self.ceiling)
        self.estimate = float(self.ceiling)
        self.window: list[float] = []
        self.bases: deque[float] = deque(maxlen=BASE_WINDOWS)
        self.queue_known = False
        """Whether the server reports its queue (then latency does not move the limit)."""
        self.lowest = self.ceiling
        """The lowest the limit went (for benchmarks and tests)."""

    @property
    def limit(self) -> int:
        return int(self.limiter.total_tokens)

    async def run(self, request: Callable[[], Awaitable[T]]) -> T:
        async with self.limiter:
            started = time.perf_counter()
            result = await request()
        if not self.queue_known:
            self.sample(time.perf_counter() - started)
        return result

    def sample(self, latency: float) -> None:
        """One reply's latency; the limit moves once a window is complete."""
        self.window.append(latency)
        if len(self.window) < max(MIN_WINDOW, self.limit // 2):
            return
        shortest = max(min(self.window), 1e-6)
        self.window = []
        self.bases.append(shortest)
        gradient = max(0.5, min(1.0, TOLERANCE * min(self.bases) / shortest))
        self._set(self.estimate * gradient + math.sqrt(self.estimate) / 2)

    def queue(self, waiting: float) -> None:
        """The server's queue, as it reports it."""
        self.queue_known = True
        ours = self.limiter.borrowed_tokens
        if waiting > 0:  # halved at most per reading: other clients' requests queue there too
            self._set(min(self.estimate, max(ours - waiting, ours / 2)))
        elif ours >= self.limit:
            self._set(self.estimate * 1.25)

    def _set(self, estimate: float) -> None:
        self.estimate = min(float(self.ceiling), max(1.0, estimate))
        self.limiter.total_tokens = max(1, int(self.estimate))
        self.lowest = min(self.lowest, self.limit)


class AdaptiveModel:
    """A server's model with its requests (chat and completion) under an `AdaptiveLimit`."""

    def __init__(self, model: ChatModel, ceiling: int) -> None:
        self.model = model
        self.limit = AdaptiveLimit(ceiling)

    async def complete(self, request: ChatRequest) -> ModelReply:
        return await self.limit.run(lambda: self.model.complete(request))

    async def complete_text(self, *, model: str, request: CompletionRequest) -> Completion:
        inner = self.model
        if not isinstance(inner, CompletionModel):
            raise RuntimeError("complete: this model server does not offer completions")
        return await self.limit.run(lambda: inner.complete_text(model=model, request=request))


@asynccontextmanager
async def adapted(
    model: ChatModel, settings: RemoraSettings, ceiling: int | None = None
) -> AsyncIterator[ChatModel]:
    """A server's model under an adaptive limit of `ceiling` (default `settings.concurrency`)
    requests, its servers' queues watched while it is open; the model as it is when
    `server.adaptive_concurrency` is off."""
    if not settings.server.adaptive_concurrency:
        yield model
        return
    wrapped = AdaptiveModel(model, settings.concurrency if ceiling is None else ceiling)
    async with anyio.create_task_group() as group:
        group.start_soon(watch_queues, wrapped.limit, settings.server.base_urls)
        yield wrapped
        group.cancel_scope.cancel()


async def watch_queues(limit: AdaptiveLimit, base_urls: Sequence[str]) -> None:
    """Read vLLM's queue length from each server's /metrics every `POLL_S`; return at once
    (latency alone then steers) where a server does not report it."""
    roots = [re.sub(r"/v1/?$", "", url.rstrip("/")) for url in base_urls]
    timeout = aiohttp.ClientTimeout(total=POLL_S * 4)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            waiting = 0.0
            for root in roots:
                try:
                    async with session.get(f"{root}/metrics") as response:
                        text = await response.text() if response.status == 200 else ""
                except (aiohttp.ClientError, TimeoutError, UnicodeDecodeError):
                    text = ""
                found = _WAITING.findall(text[: 1 << 20])
                if not found and not limit.queue_known:
                    return
                waiting += sum(float(value) for value in found)
            limit.queue(waiting)
            await anyio.sleep(POLL_S)
