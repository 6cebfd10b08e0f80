"""One turn's reply from the model: streamed with its calls shown as they form, its tokens'
log-probabilities turned into the model's confidence in the tool it chose, and, when the agent
asks for it, the turn asked again while the model is unsure (docs/CONFIDENCE.md)."""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections.abc import Callable
from typing import Any

from remora.config.settings import ConfidencePolicy, RunnerSettings
from remora.events import JobEvents
from remora.findings.results import ErrorCode, Usage
from remora.jobs.endings import JobEnded
from remora.protocol.confidence import call_confidence
from remora.protocol.messages import ChatModel, ChatRequest, ModelReply, ReplyProgress

PROGRESS_INTERVAL_S = 0.25
"""A call's growing arguments are reported at most this often per job (a new call at once)."""
_PROGRESS_CHARS = 200


class TurnReply:
    """Asks the model for a job's turns; keeps the job's usage, lowest confidence, resamples."""

    def __init__(
        self,
        model: ChatModel,
        settings: RunnerSettings,
        policy: ConfidencePolicy,
        events: JobEvents,
        seed_key: str,
    ) -> None:
        self.model, self.settings, self.policy, self.events = model, settings, policy, events
        self.seed_key = seed_key
        """Seeds of resamples derive from it (the job's node and agent): reruns sample alike."""
        self.usage = Usage()
        self.confidence: float | None = None
        self.resamples = 0

    async def ask(self, request: ChatRequest, turn: int) -> ModelReply:
        """The reply to keep for `turn`; JobEnded when the agent ends unsure jobs."""
        # Log-probabilities only where the model chooses a tool: a forced turn has no confidence
        # to measure, and they cost the server bandwidth and the embedded engine a pass over
        # the vocabulary per token.
        choice = isinstance(request.tool_choice, str) and len(request.tools) > 1
        request = dataclasses.replace(
            request,
            stream=self.settings.stream,
            logprobs=choice,
            on_progress=self._reporter(turn) if self.settings.stream else None,
        )
        reply, confidence = await self._once(request, turn, choice, attempt=0)
        threshold = self.policy.threshold
        if confidence is not None and threshold is not None and confidence < threshold:
            if self.policy.below == "not_done":
                raise JobEnded(
                    ErrorCode.LOW_CONFIDENCE,
                    f"turn {turn}: the model chose {reply.tool_calls[0].name[:80]} with "
                    f"confidence {confidence:.2f}, below confidence.threshold={threshold:g}",
                )
            for attempt in range(1, self.policy.resamples + 1):
                seed = zlib.crc32(f"{self.seed_key}\0{turn}\0{attempt}".encode())
                again = dataclasses.replace(request, temperature=self.policy.temperature, seed=seed)
                other, other_confidence = await self._once(again, turn, choice, attempt=attempt)
                self.resamples += 1
                if other_confidence is not None and other_confidence > confidence:
                    reply, confidence = other, other_confidence
                if confidence >= threshold:
                    break
        if confidence is not None:
            self.confidence = (
                confidence if self.confidence is None else min(confidence, self.confidence)
            )
        return reply

    async def _once(
        self, request: ChatRequest, turn: int, choice: bool, *, attempt: int
    ) -> tuple[ModelReply, float | None]:
        self.events.emit(
            "model_request",
            turn=turn,
            attempt=attempt,
            messages=len(request.messages),
            tools=[schema["function"]["name"] for schema in request.tools],
            payload=self.events.payload(request.messages),
        )
        started = time.perf_counter()
        reply = await self.model.complete(request)
        if not request.parallel_calls and len(reply.tool_calls) > 1:
            # The profile asked for one call: a streamed reply ends with it, so a whole reply
            # from a server that sent more keeps it alone too (what is run never depends on
            # whether the reply was streamed).
            reply = reply.model_copy(update={"tool_calls": reply.tool_calls[:1]})
        self.usage.prompt_tokens += reply.usage.prompt_tokens
        self.usage.completion_tokens += reply.usage.completion_tokens
        self.usage.requests += 1
        confidence = None
        if choice and reply.logprobs and reply.tool_calls:
            confidence = call_confidence(reply.logprobs, reply.tool_calls)
        self.events.emit(
            "model_response",
            turn=turn,
            attempt=attempt,
            latency_s=time.perf_counter() - started,
            prompt_tokens=reply.usage.prompt_tokens,
            completion_tokens=reply.usage.completion_tokens,
            tool_calls=[call.name[:80] for call in reply.tool_calls],
            confidence=None if confidence is None else round(confidence, 4),
            payload=self.events.payload(reply.as_message()),
        )
        return reply, confidence

    def _reporter(self, turn: int) -> Callable[[ReplyProgress], None] | None:
        """`model_progress` events while a reply streams: each new call at once, its growing
        arguments at most every `PROGRESS_INTERVAL_S`. None when nobody listens."""
        if not self.events.events.active:
            return None
        shown: dict[str, Any] = {"calls": 0, "at": 0.0}

        def report(progress: ReplyProgress) -> None:
            now = time.monotonic()
            if len(progress.calls) == shown["calls"] and now - shown["at"] < PROGRESS_INTERVAL_S:
                return
            shown.update(calls=len(progress.calls), at=now)
            self.events.emit(
                "model_progress",
                turn=turn,
                calls=[
                    {"name": name[:80], "arguments": arguments[:_PROGRESS_CHARS]}
                    for name, arguments in progress.calls
                ],
                content_chars=len(progress.content),
            )

        return report
