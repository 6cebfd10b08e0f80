"""What a generation of the embedded engine becomes: the reply, and while it decodes, the
progress a streamed reply reports."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio.from_thread

from remora.findings.results import Usage
from remora.models.local.decoder import _Generation
from remora.protocol.functiongemma import ParsedOutput, StreamingParser, parse_output
from remora.protocol.messages import ModelReply, ReplyProgress, ToolCall


def generation_reply(generation: _Generation, first_id: int) -> ModelReply:
    parsed: ParsedOutput = parse_output(generation.text)
    calls = [
        ToolCall(id=f"call_{first_id + index}", name=call.name, arguments=call.arguments_json())
        for index, call in enumerate(parsed.calls)
    ]
    content = parsed.content
    if calls and parsed.errors:
        # A call cut off by max_tokens after complete ones: the cut is ours, not the model's,
        # and its text would only confuse the next turn.
        content = generation.text[: parsed.calls[0].start]
    content = content.strip()
    return ModelReply(
        content=content or None,
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=generation.prompt_tokens,
            completion_tokens=generation.completion_tokens,
        ),
        logprobs=generation.logprobs,
    )


class DecodingProgress:
    """A reply decoding in a worker thread, reported to the event loop's `on_progress` each
    time a call's name or arguments grow (the server kit's streaming parser decides when)."""

    def __init__(self, on_progress: Callable[[ReplyProgress], None]) -> None:
        self.on_progress = on_progress
        self.parser = StreamingParser()
        self.content = ""
        self.calls: list[list[str]] = []

    def update(self, text: str) -> None:
        delta = self.parser.update(text)
        if not delta.content and not delta.tool_calls:
            return
        self.content += delta.content
        for call in delta.tool_calls:
            if call.index >= len(self.calls):
                self.calls.append([call.name or "", ""])
            self.calls[call.index][1] += call.arguments
        progress = ReplyProgress(self.content, tuple((name, args) for name, args in self.calls))
        anyio.from_thread.run_sync(self.on_progress, progress)


def calls_so_far(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tool calls already in the conversation: new ids continue from there, so ids are unique
    within a conversation and the same for the same conversation (no global counter)."""
    return sum(
        len(message.get("tool_calls") or ())
        for message in messages
        if message.get("role") == "assistant"
    )
