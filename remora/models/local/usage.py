"""What the embedded engine counts (`EngineStats`: per request, and its totals for the run's
report) and the completions it answers again for identical requests (`ReplayedReplies`)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

from remora.findings.results import EngineUsage
from remora.protocol.completion import Completion

REPLAYED_REPLIES = 8192
"""Completions kept for identical requests, by a digest of the request: a reply is a few hundred
bytes, so a whole library's worth fits in a few MB. Enough to span a run: the sample_data and
test agents ask the same call prompt for a function, one agent's jobs after the other's (256,
the count before, held about a hundred jobs' requests)."""


@dataclass
class EngineStats:
    """Totals over every generation, for benchmarks and the report's `summary.engine`."""

    generations: int = 0
    prompt_tokens: int = 0
    """Tokens of all prompts, reused or not."""
    prompt_tokens_evaluated: int = 0
    """Prompt tokens actually run through the model (the rest came from a slot's KV cache)."""
    prompt_seconds: float = 0.0
    completion_tokens: int = 0
    completion_seconds: float = 0.0
    grammar_full_checks: int = 0
    """Tokens for which the grammar had to be applied to the whole vocabulary."""
    replayed: int = 0
    """Completions answered with the reply to an identical earlier request (nothing run)."""
    scored: int = 0
    """Score requests (a continuation's likelihood: prompt evaluation only)."""

    def add(self, other: EngineStats) -> None:
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)

    def usage(self) -> EngineUsage:
        """These totals as the run's report states them."""
        return EngineUsage(
            requests=self.generations + self.scored + self.replayed,
            replayed=self.replayed,
            prompt_tokens=self.prompt_tokens,
            prompt_tokens_evaluated=self.prompt_tokens_evaluated,
            prompt_tokens_reused=self.prompt_tokens - self.prompt_tokens_evaluated,
            completion_tokens=self.completion_tokens,
            prompt_seconds=round(self.prompt_seconds, 3),
            completion_seconds=round(self.completion_seconds, 3),
        )


class ReplayedReplies:
    """The latest completions by request. Jobs of one class or module often send the same
    prompt (the constructor a test starts with), and decoding is deterministic: the same
    request gets the same reply, so it need not be decoded again. Used from the event loop."""

    def __init__(self, size: int = REPLAYED_REPLIES) -> None:
        self.size = size
        self._replies: OrderedDict[bytes, tuple[Completion, ...]] = OrderedDict()

    def get(self, key: tuple[object, ...]) -> tuple[Completion, ...] | None:
        digest = _digest(key)
        reply = self._replies.get(digest)
        if reply is not None:
            self._replies.move_to_end(digest)
        return reply

    def put(self, key: tuple[object, ...], reply: tuple[Completion, ...]) -> None:
        self._replies[_digest(key)] = reply
        if len(self._replies) > self.size:
            self._replies.popitem(last=False)

    def clear(self) -> None:
        self._replies.clear()


def _digest(key: tuple[object, ...]) -> bytes:
    """The request's key (its prompt among it) as 32 bytes: what is kept is the reply, not the
    prompt. repr of a tuple of strings, numbers and None is the same for equal keys."""
    return hashlib.sha256(repr(key).encode("utf-8", "surrogatepass")).digest()
