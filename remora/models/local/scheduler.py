"""Which request gets a context, and which context it gets: the conversation furthest along first,
and the idle context holding most of the prompt."""

from __future__ import annotations

import contextlib
import heapq
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import anyio.from_thread
import anyio.to_thread

from remora.models.local.decoder import EVAL_CHUNK, Slot, Use
from remora.protocol.messages import ModelError

_USES: tuple[Use, ...] = ("chat", "text")


class Contexts:
    """The idle contexts, by use. Chat prompts and text completions keep separate KV caches, so
    a job's completions do not evict the agent's shared chat prefix (system prompt, tool
    declarations, examples), and a request gets the idle context where it costs least (`cost`):
    jobs taking turns do not evict each other's conversation or code."""

    def __init__(self) -> None:
        self._idle: dict[Use, list[Slot]] = {use: [] for use in _USES}
        self._count = 0
        self._uses = 0
        self._changed = threading.Condition()

    def add(self, use: Use, slot: Slot) -> None:
        slot.use = use
        with self._changed:
            self._idle[use].append(slot)
            self._count += 1

    def take(
        self, use: Use, prompt_text: str, new_tokens: int, adapter: str | None = None
    ) -> tuple[Slot, list[int]]:
        """An idle context for `prompt_text` followed by `new_tokens` generated tokens (all
        the rows' of a drafts request), and the prompt's tokens."""
        with self._changed:
            idle = self._idle[use]
            if not idle:
                raise ModelError("the local model was closed")
            prompt = idle[0].tokenize(prompt_text)
            if use == "text" and len(prompt) + new_tokens > idle[0].n_ctx:
                idle = self._idle["chat"]  # one per slot, so one is idle as well
            latest = max(slot.used for slot in idle)
            best = min(
                idle,
                key=lambda slot: (cost(slot, prompt, adapter, slot.used == latest), slot.used),
            )
            idle.remove(best)
            self._uses += 1
            best.used = self._uses
            return best, prompt

    def give_back(self, slot: Slot) -> None:
        with self._changed:
            self._idle[slot.use].append(slot)
            self._changed.notify_all()

    def take_all(self) -> list[Slot]:
        """Every context, once the generations in flight have given theirs back."""
        with self._changed:
            self._changed.wait_for(lambda: sum(map(len, self._idle.values())) == self._count)
            slots = [slot for idle in self._idle.values() for slot in idle]
            for idle in self._idle.values():
                idle.clear()
            self._count = 0
            return slots


REASKS = 2
"""Completions a job asks for after its first (the test agent drafts three, greedy then two
sampled): how often overwritten tokens would be evaluated again."""


def cost(slot: Slot, prompt: list[int], adapter: str | None, latest: bool) -> int:
    """What answering `prompt` in `slot` costs in prompt tokens: those evaluated, plus, in the
    context the latest request used (which holds the prompt of the other job in flight, the
    next to ask again), those of its held prompt that would be overwritten, once for each
    time that job is likely to ask again (`REASKS`).

    Counting only the tokens evaluated, two jobs whose prompts share a prefix (a module's
    imports, a class's constructor) both pick the context holding the other's prompt and
    overwrite it: every completion of both evaluates its own part again, while the other
    context holds a finished job's prompt. Ties go to the context used least recently."""
    reused = slot.reusable(prompt, adapter) // EVAL_CHUNK * EVAL_CHUNK
    lost = max(0, slot.held() - reused) if latest else 0
    return len(prompt) - reused + REASKS * lost


@dataclass(order=True)
class _Waiting:
    rank: tuple[int, int]
    """(-turns already taken, arrival): the sort order."""
    granted: anyio.Event = field(compare=False, default_factory=anyio.Event)
    cancelled: bool = field(compare=False, default=False)


class TurnOrder:
    """Hands the slots to waiting requests, the conversation furthest along first (ties: first
    come, first served).

    With plain FIFO order, the orchestrator's 64 jobs would advance in lockstep: every job's
    first turn, then every job's second turn... so each job would take as long as the whole
    run (64 jobs x 4 turns x 2.5 s: more than the default `runner.job_timeout` of 300 s), and
    all of them would finish at the end. Serving later turns first finishes started jobs while
    new ones fill the gaps their tool calls leave. Used from the event loop thread only.
    """

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiting: list[_Waiting] = []
        self._arrivals = 0

    @contextlib.asynccontextmanager
    async def turn(self, depth: int) -> AsyncIterator[None]:
        self._arrivals += 1
        if self._free and not self._waiting:
            self._free -= 1
        else:
            waiting = _Waiting(rank=(-depth, self._arrivals))
            heapq.heappush(self._waiting, waiting)
            try:
                await waiting.granted.wait()
            except BaseException:  # cancelled while waiting, or just after being granted
                if waiting.granted.is_set():
                    self._release()
                else:
                    waiting.cancelled = True
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiting:
            waiting = heapq.heappop(self._waiting)
            if not waiting.cancelled:
                waiting.granted.set()
                return
        self._free += 1
