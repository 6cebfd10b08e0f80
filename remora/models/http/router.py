"""Several replicas of one model server behind one `ChatModel`.

`ReplicaRouter` answers the same calls as `OpenAIChatModel` (`complete`, `list_models`,
`aclose`) and sends each request to one of its replicas:

- **Least outstanding requests.** A new conversation goes to the replica with the fewest
  requests in flight (ties: the one that was sent fewer requests so far, then list order).
- **Affinity.** Requests that share a prefix are kept on one replica so its prefix cache stays
  warm. A request's keys are its conversation (model + first two messages: the agent's system
  prompt and the node's context, the same on every turn of a job) and its agent (model + first
  message: every job of an agent shares it). A later turn goes to the replica its conversation
  went to, a new job to the replica its agent's last new job went to, unless that replica has
  more than `affinity_slack(n)` requests in flight beyond the least-loaded replica's `n`; then
  the request goes to the least-loaded one, which becomes the conversation's (and, for a new
  job, the agent's) replica from then on.
- **Dead replicas.** A connection-level failure (`is_connection_error`) marks the replica down
  for a cooldown (doubling on consecutive failures, up to `max_cooldown`) and the request is
  sent again to another replica; each replica is tried at most once per request, so with two
  replicas that is one retry. Replicas that are down are used only when every live one has
  been tried. Errors the server answered (HTTP 4xx/5xx after the client's own retries, unusable
  bodies) are raised as they are: another replica of the same model would answer the same.
  A timeout here is `server.timeout`, a no-progress timeout: a replica that has accepted a
  request but not started its reply (it is queueing it) is busy, not down, and is waited for
  (the runner's `job_timeout` bounds the job); one whose reply stalls after it started is down.
- **Model listing.** `list_models` asks every replica at once and returns the union. Replicas
  that cannot be reached are marked down; one that answers with a client error (a wrong API key
  or path) is left out until a later `list_models` succeeds. After a listing, a request goes
  only to replicas that listed its model (an adapter loaded on some replicas only), unless none
  did.

`stats()` gives requests, requests in flight and health per replica, for tests and benchmarks.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import anyio

from remora.findings.results import ErrorCode
from remora.models.http.openai_client import NoReply, StatusError
from remora.protocol.completion import Completion, CompletionModel, CompletionRequest
from remora.protocol.messages import ChatModel, ChatRequest, Message, ModelError, ModelReply

T = TypeVar("T")

__all__ = [
    "DEFAULT_COOLDOWN",
    "MAX_COOLDOWN",
    "Replica",
    "ReplicaRouter",
    "ReplicaStats",
    "affinity_slack",
    "is_connection_error",
]

DEFAULT_COOLDOWN = 5.0
"""Seconds a replica stays down after its first connection failure."""
MAX_COOLDOWN = 60.0
"""Longest cooldown after consecutive failures (a replica being restarted)."""
MAX_AFFINITY_KEYS = 8192
"""Keys remembered (least recently used dropped first); a few per agent and per job in flight."""
_CONNECTION_MESSAGE = "no reply from"


class Replica(ChatModel, CompletionModel, Protocol):
    """One server: `OpenAIChatModel` (or another router)."""

    @property
    def base_url(self) -> str: ...

    async def list_models(self) -> list[str]: ...

    async def aclose(self) -> None: ...


def is_connection_error(error: ModelError) -> bool:
    """Whether the replica gave no answer at all: refused or dropped connection, or a
    no-progress timeout (no connection, or a reply that stalled after it started).

    `OpenAIChatModel` raises these (after its own retries) from its `NoReply`, with a message
    starting "no reply from"; a router raises
    the same message when all its replicas failed, so routers nest. HTTP errors the server
    answered ("URL answered HTTP 503: ...") and unusable bodies are not connection errors.
    """
    if isinstance(error.__cause__, NoReply):
        return True
    return error.code is ErrorCode.MODEL_ERROR and error.message.startswith(_CONNECTION_MESSAGE)


def affinity_slack(least_outstanding: int) -> int:
    """How many more requests in flight than the least-loaded replica a sticky replica may have.

    max(2, 25% of the least-loaded replica's count): vLLM batches continuously, so a few more
    sequences on one replica cost little time per step while a prefix-cache miss costs a full
    prefill of the shared prompt (system prompt, tool declarations, earlier turns). The floor of
    2 keeps a lightly loaded run from hopping between replicas on every request; the 25% keeps a
    heavily loaded run within a quarter of even.
    """
    return max(2, least_outstanding // 4)


@dataclass(frozen=True, slots=True)
class ReplicaStats:
    base_url: str
    requests: int
    """Requests sent to this replica (retries on it included)."""
    outstanding: int
    """Requests in flight now."""
    max_outstanding: int
    failures: int
    """Connection-level failures (of requests and of model listings)."""
    down: bool
    """Marked down now (in its cooldown)."""
    excluded: bool
    """Left out: it answered `list_models` with a client error (401, 404...)."""
    last_error: str | None


class _Slot:
    """A replica with its counters and health."""

    def __init__(self, index: int, model: Replica) -> None:
        self.index = index
        self.model = model
        self.requests = 0
        self.outstanding = 0
        self.max_outstanding = 0
        self.failures = 0
        self.streak = 0
        self.down_until = 0.0
        self.excluded = False
        self.served: frozenset[str] | None = None
        """What its last `list_models` listed; None: not asked yet (assumed to serve all)."""
        self.last_error: str | None = None

    def is_down(self, now: float) -> bool:
        return now < self.down_until


class ReplicaRouter:
    """One `ChatModel` over several replicas serving the same models (see the module doc)."""

    def __init__(
        self,
        replicas: Sequence[Replica],
        *,
        cooldown: float = DEFAULT_COOLDOWN,
        max_cooldown: float = MAX_COOLDOWN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not replicas:
            raise ValueError("ReplicaRouter needs at least one replica")
        self._slots = [_Slot(index, model) for index, model in enumerate(replicas)]
        self._cooldown = cooldown
        self._max_cooldown = max(cooldown, max_cooldown)
        self._clock = clock
        self._affinity: OrderedDict[bytes, int] = OrderedDict()
        self.base_url = ", ".join(slot.model.base_url for slot in self._slots)
        """Every replica's URL, for messages."""
        self.rerouted = 0
        """Requests sent again to another replica after a connection failure."""

    @property
    def base_urls(self) -> list[str]:
        return [slot.model.base_url for slot in self._slots]

    @property
    def replicas(self) -> list[Replica]:
        return [slot.model for slot in self._slots]

    def stats(self) -> list[ReplicaStats]:
        now = self._clock()
        return [
            ReplicaStats(
                base_url=slot.model.base_url,
                requests=slot.requests,
                outstanding=slot.outstanding,
                max_outstanding=slot.max_outstanding,
                failures=slot.failures,
                down=slot.is_down(now),
                excluded=slot.excluded,
                last_error=slot.last_error,
            )
            for slot in self._slots
        ]

    # -- ChatModel

    async def complete(self, request: ChatRequest) -> ModelReply:
        keys = _affinity_keys(request.model, request.messages)
        return await self._routed(request.model, keys, lambda replica: replica.complete(request))

    async def complete_text(self, *, model: str, request: CompletionRequest) -> Completion:
        """A completion from a live replica serving `model`, chosen and rerouted as for
        `complete`."""
        keys = _affinity_keys(model, [{"role": "user", "content": request.prompt}])
        return await self._routed(
            model, keys, lambda replica: replica.complete_text(model=model, request=request)
        )

    async def _routed(
        self, model: str, keys: tuple[bytes, bytes], ask: Callable[[Replica], Awaitable[T]]
    ) -> T:
        """`ask` the chosen replica; on a connection failure mark it down and ask the next."""
        tried: set[int] = set()
        failures: list[ModelError] = []
        while True:
            slot = self._choose(model, keys, tried)
            if slot is None:
                raise self._no_replica(model, failures)
            if failures:
                self.rerouted += 1
            tried.add(slot.index)
            slot.requests += 1
            slot.outstanding += 1
            slot.max_outstanding = max(slot.max_outstanding, slot.outstanding)
            try:
                answer = await ask(slot.model)
            except ModelError as exc:
                if len(self._slots) == 1 or not is_connection_error(exc):
                    raise
                self._mark_down(slot, exc)
                failures.append(exc)
                continue
            finally:
                slot.outstanding -= 1
            self._mark_up(slot)
            return answer

    async def list_models(self) -> list[str]:
        """Ask every replica at once. The union of what they serve, or `ModelError`
        (`server_unreachable`) naming every URL if none answers.

        A replica that cannot be reached (or answers 5xx) is marked down; one that answers with
        a client error (401 wrong API key, 404 wrong path) would fail every request the same way,
        so it is left out until a later `list_models` succeeds. Afterwards a request goes only to
        replicas that listed its model, while any does."""
        answers: list[list[str] | ModelError] = [[] for _ in self._slots]

        async def ask(slot: _Slot) -> None:
            try:
                served = await slot.model.list_models()
            except ModelError as exc:
                answers[slot.index] = exc
                if _client_error(exc) and len(self._slots) > 1:
                    slot.excluded = True
                    slot.last_error = exc.message
                else:
                    self._mark_down(slot, exc)
            else:
                answers[slot.index] = served
                slot.served = frozenset(served)
                slot.excluded = False
                self._mark_up(slot)

        async with anyio.create_task_group() as group:
            for slot in self._slots:
                group.start_soon(ask, slot)
        errors = [answer for answer in answers if isinstance(answer, ModelError)]
        if len(errors) == len(self._slots):
            if len(errors) == 1:
                raise errors[0]
            reasons = "; ".join(
                f"{slot.model.base_url}: {error.message}"
                for slot, error in zip(self._slots, errors, strict=True)
            )
            raise ModelError(
                f"none of the {len(errors)} model server replicas answered: {reasons}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from errors[0]
        served: dict[str, None] = {}
        for answer in answers:
            if not isinstance(answer, ModelError):
                served.update(dict.fromkeys(answer))
        return list(served)

    async def aclose(self) -> None:
        async with anyio.create_task_group() as group:
            for slot in self._slots:
                group.start_soon(slot.model.aclose)

    # -- choosing

    def _choose(self, model: str, keys: tuple[bytes, bytes], tried: set[int]) -> _Slot | None:
        now = self._clock()
        usable = [slot for slot in self._slots if not slot.excluded]
        serving = [slot for slot in usable if slot.served is None or model in slot.served]
        # No replica listed the model: send it anyway and let a server answer why.
        untried = [slot for slot in serving or usable if slot.index not in tried]
        live = [slot for slot in untried if not slot.is_down(now)]
        if not live:
            if not untried:
                return None
            # Every live replica failed for this request, or none is live: try a down one.
            chosen = min(untried, key=lambda slot: (slot.outstanding, slot.down_until, slot.index))
        else:
            least = min(live, key=lambda slot: (slot.outstanding, slot.requests, slot.index))
            chosen = least
            limit = least.outstanding + affinity_slack(least.outstanding)
            for level, key in enumerate(keys):
                index = self._affinity.get(key)
                if index is None:
                    continue
                sticky = self._slots[index]
                if sticky in live and sticky.outstanding <= limit:
                    chosen = sticky
                    if level == 0:
                        # A later turn kept on its conversation's replica says nothing about
                        # where the agent's new jobs should go: the agent's replica stays.
                        self._touch(keys[0], chosen.index)
                        self._touch(keys[1], None)
                        return chosen
                    break
        for key in keys:
            self._touch(key, chosen.index)
        return chosen

    def _touch(self, key: bytes, index: int | None) -> None:
        """Point `key` at replica `index` (None: keep it), most recently used first to stay."""
        if index is not None:
            self._affinity[key] = index
        elif key not in self._affinity:
            return
        self._affinity.move_to_end(key)
        while len(self._affinity) > MAX_AFFINITY_KEYS:
            self._affinity.popitem(last=False)

    def _mark_down(self, slot: _Slot, error: ModelError) -> None:
        now = self._clock()
        slot.failures += 1
        slot.last_error = error.message
        if slot.is_down(now):
            return  # one outage seen by several requests in flight: not a longer cooldown
        slot.streak += 1
        cooldown = min(self._max_cooldown, self._cooldown * 2 ** (slot.streak - 1))
        slot.down_until = now + cooldown

    @staticmethod
    def _mark_up(slot: _Slot) -> None:
        slot.streak = 0
        slot.down_until = 0.0

    def _no_replica(self, model: str, failures: list[ModelError]) -> ModelError:
        if failures:
            reasons = "; ".join(failure.message for failure in failures)
            error = ModelError(
                f"{_CONNECTION_MESSAGE} any of the {len(failures)} model server "
                f"replica{'' if len(failures) == 1 else 's'} tried: {reasons}"
            )
            error.__cause__ = failures[-1]
            return error
        reasons = "; ".join(
            f"{slot.model.base_url}: {slot.last_error}" for slot in self._slots if slot.excluded
        )
        return ModelError(f"no model server replica can take a request for {model}: {reasons}")


def _client_error(error: ModelError) -> bool:
    """An HTTP 4xx the server answered: asking again will not help."""
    cause = error.__cause__
    return isinstance(cause, StatusError) and 400 <= cause.status_code < 500


def _affinity_keys(model: str, messages: list[Message]) -> tuple[bytes, bytes]:
    """(conversation key, agent key): digests of the model and the first two / first message."""
    first = [_content(message) for message in messages[:2]]
    agent = _digest(model, first[:1])
    conversation = _digest(model, first)
    return conversation, agent


def _content(message: Message) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    return json.dumps(content, sort_keys=True, default=str)


def _digest(model: str, parts: list[str]) -> bytes:
    hasher = hashlib.blake2b(digest_size=16)
    hasher.update(model.encode())
    for part in parts:
        hasher.update(b"\x00")
        hasher.update(part.encode("utf-8", "surrogatepass"))
    return hasher.digest()
