"""The chat-completions shapes the runner speaks, independent of any client library."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from remora.results import ErrorCode, Usage

Message = dict[str, Any]
"""An OpenAI chat message, kept as a plain dict so transcripts are exactly what is sent."""

ToolChoice = Literal["auto", "required"] | dict[str, Any]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str
    """Raw JSON text as the model wrote it; the runner parses and validates it."""


class ModelReply(BaseModel):
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)

    def as_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


class ModelError(Exception):
    """The model could not be asked (after retries) or answered something unusable."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.MODEL_ERROR) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ChatModel(Protocol):
    """Anything that answers chat completions with tool calls: a server or an embedded engine."""

    async def complete(
        self,
        *,
        model: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        tool_choice: ToolChoice,
        max_tokens: int,
        temperature: float,
        grammar: str | None = None,
    ) -> ModelReply:
        """`grammar`: a structured-outputs grammar the reply must match (FunctionGemma's native
        call syntax, from the protocol module); engines that constrain decoding themselves may
        ignore it."""
        ...


def tool_message(call: ToolCall, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
