"""Any OpenAI-compatible chat-completions server (vLLM first) behind the ChatModel interface."""

from __future__ import annotations

from typing import Any

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from remora.config import ServerSettings
from remora.protocol.messages import Message, ModelError, ModelReply, ToolCall, ToolChoice
from remora.results import ErrorCode, Usage

SERVER_DOCS = "docs/SERVER_SETUP.md"


class OpenAIChatModel:
    """Retries with exponential backoff (connection errors, timeouts, 429 honouring Retry-After,
    5xx) are the OpenAI client's own; `server.retries` sets how many."""

    def __init__(self, settings: ServerSettings, *, connections: int = 64) -> None:
        """`connections`: how many requests may be in flight (the run's concurrency); the pool
        keeps that many alive instead of closing and reopening them under load."""
        if len(settings.base_urls) != 1:
            raise ValueError("OpenAIChatModel needs exactly one server.base_url")
        self.base_url = settings.base_urls[0]
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
            max_connections=max(connections, 1), max_keepalive_connections=max(connections, 1)
        )
        self.client = AsyncOpenAI(
            base_url=self.base_url,
            api_key=settings.api_key.get_secret_value() or "EMPTY",
            timeout=settings.timeout,
            max_retries=settings.retries,
            http_client=openai.DefaultAsyncHttpxClient(limits=limits),
        )

    async def aclose(self) -> None:
        await self.client.close()

    async def list_models(self) -> list[str]:
        """Ask the server once which models it serves; tells apart 'unreachable' from the rest."""
        try:
            page = await self.client.models.list()
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise ModelError(
                f"cannot reach the model server at {self.base_url} ({exc}). Start one, or point "
                f"Remora at one with --base-url or server.base_url; see {SERVER_DOCS}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from exc
        except openai.APIStatusError as exc:
            raise ModelError(
                f"the model server at {self.base_url} answered GET /models with HTTP "
                f"{exc.status_code}: {_error_text(exc)}; see {SERVER_DOCS}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from exc
        return [model.id for model in page.data]

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
        # vLLM's structured outputs; the call markers are special tokens, which vLLM would
        # otherwise strip before its tool parser sees them.
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "tools": tools,
            "tool_choice": tool_choice,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if grammar:
            body["structured_outputs"] = {"grammar": grammar}
            body["skip_special_tokens"] = False
        try:
            # Posted as it is: the messages and schemas are plain JSON already, and the SDK's
            # per-request transform of typed params cost a quarter of the client's CPU. Its
            # retries, timeouts and errors still apply.
            response = await self.client.post(
                "/chat/completions", body=body, cast_to=ChatCompletion
            )
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise ModelError(f"no reply from {self.base_url}: {exc}") from exc
        except openai.APIStatusError as exc:
            raise ModelError(
                f"{self.base_url} answered HTTP {exc.status_code}: {_error_text(exc)}"
            ) from exc
        except (openai.APIError, ValueError) as exc:  # e.g. a body that is not JSON
            raise ModelError(f"unusable reply from {self.base_url}: {exc}") from exc
        received: object = response
        if isinstance(received, str | bytes):  # the client hands back bodies that are not JSON
            raise ModelError(f"unusable reply from {self.base_url}: not JSON: {received[:120]!r}")
        choices = getattr(response, "choices", None)
        if not choices or choices[0].message is None:
            raise ModelError(f"reply from {self.base_url} has no message (no choices)")
        message = choices[0].message
        calls = [
            ToolCall(
                id=call.id or f"call_{index}",
                name=call.function.name or "",
                arguments=call.function.arguments or "",
            )
            for index, call in enumerate(message.tool_calls or [])
            if call.type == "function"
        ]
        usage = response.usage
        return ModelReply(
            content=message.content,
            tool_calls=calls,
            usage=Usage(
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
            ),
        )


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])
    return str(exc.message)
