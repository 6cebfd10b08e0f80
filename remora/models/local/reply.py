"""What a reply of the embedded engine may be (the grammar it is decoded under) and what a
generation becomes: the chat reply (and, while it decodes, the progress a streamed reply
reports) or the text completion."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio.from_thread

from remora.findings.results import Usage
from remora.models.local.decoder import Generation
from remora.protocol.completion import Completion
from remora.protocol.functiongemma import (
    ParsedOutput,
    StreamingParser,
    gbnf_grammar,
    parse_output,
)
from remora.protocol.messages import ModelError, ModelReply, ReplyProgress, ToolCall, ToolChoice


def reply_grammar(
    tools: Sequence[Mapping[str, Any]], tool_choice: ToolChoice, *, parallel: bool
) -> str | None:
    """The GBNF grammar a chat request is decoded under (None: no tools, free text)."""
    if not tools:
        return None
    if isinstance(tool_choice, Mapping):
        function = tool_choice.get("function")
        wanted = function.get("name") if isinstance(function, Mapping) else None
        chosen = [tool for tool in tools if _tool_name(tool) == wanted]
        if not chosen:
            offered = ", ".join(str(_tool_name(tool)) for tool in tools)
            raise ModelError(f"tool_choice names {wanted!r}, which is not offered ({offered})")
        return gbnf_grammar(chosen, tool_choice="forced", marker_free_strings=True)
    # "auto" is decoded as "required": the runner needs a call every turn.
    return gbnf_grammar(tools, tool_choice="required", parallel=parallel, marker_free_strings=True)


def _tool_name(tool: Mapping[str, Any]) -> object:
    function = tool.get("function")
    return function.get("name") if isinstance(function, Mapping) else tool.get("name")


def text_completion(generation: Generation) -> Completion:
    return Completion(
        text=generation.text,
        finish="length" if generation.finish == "length" else "stop",
        usage=Usage(
            prompt_tokens=generation.prompt_tokens,
            completion_tokens=generation.completion_tokens,
        ),
    )


def generation_reply(generation: Generation, first_id: int) -> ModelReply:
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
