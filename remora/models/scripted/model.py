"""The scripted model in process: the same scripts and rules as `ScriptedModelServer` (it is
one, never listening) behind the `ChatModel` and `CompletionModel` interfaces, so unit tests of
the runner need no server. Requests reach it as the same JSON bodies the HTTP client sends, and
replies come back through the same parser; end-to-end tests keep the real HTTP server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from remora.models.http.chat_stream import EventSplitter, StreamedReply
from remora.models.http.openai_client import chat_body, completion_body
from remora.models.scripted.replies import Reply, Response, Rule
from remora.models.scripted.server import DEFAULT_MODEL, ScriptedModelServer
from remora.protocol.completion import Completion, CompletionRequest, parse_completion
from remora.protocol.messages import (
    ChatRequest,
    MalformedReply,
    ModelError,
    ModelReply,
    parse_chat_reply,
)


class ScriptedModel:
    def __init__(
        self,
        script: Iterable[Reply] | None = None,
        *,
        rule: Rule | None = None,
        completion: Callable[[dict[str, Any]], str] | None = None,
        models: Sequence[str] = (DEFAULT_MODEL,),
    ) -> None:
        self.server = ScriptedModelServer(
            script=script, rule=rule, completion=completion, models=models
        )

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat request's body, as the HTTP client would have sent it."""
        return self.server.requests

    @property
    def completion_requests(self) -> list[dict[str, Any]]:
        return self.server.completion_requests

    async def complete(self, request: ChatRequest) -> ModelReply:
        response = await self.server.answer_chat(json.dumps(chat_body(request)).encode())
        try:
            if response.status == 200 and _streamed(response):
                return parse_chat_reply(_fold(response.body, request))
            return parse_chat_reply(_json_of(response))
        except MalformedReply as exc:
            raise ModelError(f"malformed reply from the scripted model: {exc}") from exc

    async def complete_text(self, *, model: str, request: CompletionRequest) -> Completion:
        body = completion_body(model, request)
        response = self.server.answer_completion(json.dumps(body).encode())
        try:
            scored = (
                (len(request.prompt), len(request.prompt) + len(request.score))
                if request.score is not None
                else None
            )
            return parse_completion(_json_of(response), request.stop, scored)
        except MalformedReply as exc:
            raise ModelError(f"malformed reply from the scripted model: {exc}") from exc

    async def list_models(self) -> list[str]:
        return list(self.server.models)

    async def aclose(self) -> None:
        return None


def _streamed(response: Response) -> bool:
    return any(
        name.lower() == "content-type" and value.startswith("text/event-stream")
        for name, value in response.headers
    )


def _fold(body: bytes, request: ChatRequest) -> object:
    """A streamed reply's events folded as the HTTP client folds them (progress included)."""
    reply = StreamedReply()
    for event in EventSplitter().feed(body):
        if reply.add_event(event, request.on_progress):
            break
    return reply.body()


def _json_of(response: Response) -> object:
    """The reply's JSON, or the ModelError the HTTP client would end with (without retries)."""
    try:
        data = json.loads(response.body)
    except ValueError:
        raise ModelError(
            f"scripted model: the reply is not JSON (HTTP {response.status})"
        ) from None
    if response.status != 200:
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else response.body.decode()
        raise ModelError(f"scripted model answered HTTP {response.status}: {message}")
    return data
