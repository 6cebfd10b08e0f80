"""Faults for the scripted model: a rule that answers a seeded share of requests with an injected
failure (HTTP errors, malformed bodies, slow or cut replies) instead of the real reply."""

from __future__ import annotations

import inspect
import json
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from remora.models.scripted.replies import (
    DelayedReply,
    HttpErrorReply,
    RawReply,
    Reply,
    Rule,
    TextReply,
    check_reply,
)

FAULTS = (
    "drop",
    "429",
    "500",
    "502",
    "503",
    "slow",
    "truncated",
    "not_json",
    "no_choices",
    "null_message",
    "huge",
)
"""Every fault `FaultInjector` can produce."""


class FaultInjector:
    """Wraps a rule: each request gets, with probability `rate`, a fault instead of the rule's
    reply. Seeded, so a run is reproducible; `injected` counts what was sent."""

    def __init__(
        self,
        rule: Rule,
        *,
        rate: float,
        seed: int = 0,
        faults: Sequence[str] = FAULTS,
        slow_seconds: float = 30.0,
        huge_bytes: int = 2_000_000,
    ) -> None:
        unknown = sorted(set(faults) - set(FAULTS))
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
        self.rule, self.rate, self.faults = rule, rate, list(faults)
        self.slow_seconds, self.huge_bytes = slow_seconds, huge_bytes
        self._random = random.Random(seed)
        self.injected: Counter[str] = Counter()

    async def __call__(self, body: dict[str, Any]) -> Reply:
        if self._random.random() >= self.rate:
            result = self.rule(body)
            return check_reply(await result if inspect.isawaitable(result) else result, "rule")
        fault = self._random.choice(self.faults)
        self.injected[fault] += 1
        return self.fault_reply(fault)

    def fault_reply(self, fault: str) -> Reply:
        json_type = (("content-type", "application/json"),)
        if fault == "drop":  # promises more bytes than it sends: the connection drops
            return RawReply(200, b'{"id": "x", "choi', (*json_type, ("content-length", "4096")))
        if fault == "429":
            return HttpErrorReply(429, "rate limited (injected)", (("retry-after", "0"),))
        if fault in ("500", "502", "503"):
            return HttpErrorReply(int(fault), f"injected {fault}")
        if fault == "slow":
            return DelayedReply(TextReply("too late"), self.slow_seconds)
        if fault == "truncated":
            return RawReply(200, b'{"id": "x", "object": "chat.completion", "choices": [{"in')
        if fault == "not_json":
            return RawReply(200, b"<html>502 Bad Gateway</html>", (("content-type", "text/html"),))
        if fault == "no_choices":
            return RawReply(
                200,
                json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [],
                    }
                ).encode(),
            )
        if fault == "null_message":
            payload = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": None, "finish_reason": "stop"}],
            }
            return RawReply(200, json.dumps(payload).encode())
        return TextReply("x" * self.huge_bytes)  # huge
