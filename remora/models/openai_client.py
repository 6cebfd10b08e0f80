"""Any OpenAI-compatible chat-completions server (vLLM first) behind the ChatModel interface.

A server's replies are untrusted, and so is its pace:

- **No-progress timeout.** `server.timeout` bounds connecting, sending the request and, once a
  reply has started (its first byte has arrived), every wait between two received bytes, in the
  status line and headers as in the body (`_PacedStream`, under httpcore). The wait for the
  first byte is not bounded here: a busy server queues requests, and a queue is not a fault. The
  runner bounds the whole job (`runner.job_timeout`); the one request outside a job,
  `GET /models`, is bounded in total (`model_entries`).
- **Size cap.** Bodies are decompressed here (gzip or deflate, the encodings Remora asks for)
  and refused past `server.max_reply_mb` of decompressed bytes, so a small compressed body
  cannot unpack to gigabytes.
- **Shape.** Bodies are parsed as plain JSON and checked field by field
  (`remora.protocol.messages.parse_chat_reply`); a reply of the wrong shape is a `model_error`
  saying what is wrong, never a crash.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

import anyio
import openai
from openai import AsyncOpenAI

from remora.config import ServerSettings
from remora.models.http_guards import (
    ACCEPT_ENCODING,
    MIB,
    ReplyRefused,
    _pace,
    _ReplyGuard,
)
from remora.protocol.completion import Completion, CompletionRequest, parse_completion
from remora.protocol.messages import (
    ChatRequest,
    MalformedReply,
    ModelError,
    ModelReply,
    parse_chat_reply,
    parse_model_list,
)
from remora.results import ErrorCode

if TYPE_CHECKING:
    import httpcore2 as httpcore
    import httpx2 as httpx
else:  # the HTTP library this openai release is built on: httpx2 (openai 3), else httpx
    httpx = importlib.import_module(type(openai.DEFAULT_CONNECTION_LIMITS).__module__.split(".")[0])
    httpcore = importlib.import_module("httpcore2" if httpx.__name__ == "httpx2" else "httpcore")

SERVER_DOCS = "docs/SERVER_SETUP.md"


class OpenAIChatModel:
    """Retries with exponential backoff (connection errors, no-progress timeouts, 429 honouring
    Retry-After, 5xx) are the OpenAI client's own; `server.retries` sets how many."""

    def __init__(self, settings: ServerSettings, *, connections: int = 64) -> None:
        """`connections`: how many requests may be in flight (the run's concurrency); the pool
        keeps that many alive instead of closing and reopening them under load."""
        if len(settings.base_urls) != 1:
            raise ValueError("OpenAIChatModel needs exactly one server.base_url")
        self.base_url = settings.base_urls[0]
        self.timeout = settings.timeout
        self.max_reply_mb = settings.max_reply_mb
        limits = httpx.Limits(
            max_connections=max(connections, 1), max_keepalive_connections=max(connections, 1)
        )
        http_client = openai.DefaultAsyncHttpxClient(
            limits=limits,
            headers={"Accept-Encoding": ACCEPT_ENCODING},
            event_hooks={"response": [_ReplyGuard(settings.max_reply_mb * MIB)]},
        )
        self.paced = _pace(http_client, settings.timeout)
        """Whether the no-progress timeout is in place (else: a plain read timeout, as httpx
        has it, which also ends a request that waits in the server's queue)."""
        self.client = AsyncOpenAI(
            base_url=self.base_url,
            api_key=settings.api_key.get_secret_value() or "EMPTY",
            # The read timeout is `_PacedStream`'s. The pool is this client's own (sized to the
            # run's concurrency): waiting for a connection from it is a queue, not a fault.
            timeout=httpx.Timeout(
                settings.timeout, read=None if self.paced else settings.timeout, pool=None
            ),
            max_retries=settings.retries,
            http_client=http_client,
        )

    async def aclose(self) -> None:
        await self.client.close()

    async def list_models(self) -> list[str]:
        """Ask the server once which models it serves; tells apart 'unreachable' from the rest."""
        return [str(entry["id"]) for entry in await self.model_entries()]

    async def model_entries(self) -> list[dict[str, Any]]:
        """`GET /models`: the listed entries, each an object with a string `id`.

        The whole listing, retries and backoff included, must end within `server.timeout`: it
        runs before any job (outside `runner.job_timeout`), and a server answers it at once,
        however busy its queue. Raises `ModelError`: `server_unreachable` when the server cannot
        be reached, does not finish in time or answers an HTTP error (the `openai` error is the
        `__cause__`), `model_error` for a body that is too large or of the wrong shape.
        """
        url = self.base_url
        try:
            with anyio.fail_after(self.timeout):
                data = await self._get_json("/models")
        except TimeoutError as exc:
            raise ModelError(
                f"cannot reach the model server at {url}: GET /models did not complete within "
                f"server.timeout={self.timeout:g}s. Check that it is up and answering; see "
                f"{SERVER_DOCS}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from exc
        except openai.APIConnectionError as exc:  # APITimeoutError is one
            raise ModelError(
                f"cannot reach the model server at {url} ({_no_reply(exc)}). Start one, or "
                f"point Remora at one with --base-url or server.base_url; see {SERVER_DOCS}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from exc
        except openai.APIStatusError as exc:
            raise ModelError(
                f"the model server at {url} answered GET /models with HTTP "
                f"{exc.status_code}: {error_text(exc)}; see {SERVER_DOCS}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from exc
        except (ReplyRefused, MalformedReply, openai.APIError) as exc:
            raise ModelError(f"unusable reply from {url} to GET /models: {exc}") from exc
        try:
            return parse_model_list(data)
        except MalformedReply as exc:
            raise ModelError(f"malformed reply from {url} to GET /models: {exc}") from exc

    async def complete(self, request: ChatRequest) -> ModelReply:
        data = await self.post_json("/chat/completions", chat_body(request))
        try:
            return parse_chat_reply(data)
        except MalformedReply as exc:
            raise ModelError(f"malformed reply from {self.base_url}: {exc}") from exc

    async def complete_text(self, *, model: str, request: CompletionRequest) -> Completion:
        """POST /completions: the model (or adapter) continues `request.prompt`."""
        data = await self.post_json("/completions", completion_body(model, request))
        try:
            return parse_completion(data, request.stop)
        except MalformedReply as exc:
            raise ModelError(f"malformed reply from {self.base_url}: {exc}") from exc

    async def post_json(self, path: str, body: dict[str, Any]) -> object:
        """POST `body` to `path` (e.g. "/chat/completions") with every guard of this module; the
        reply as plain JSON, or `ModelError` (`model_error`) saying what went wrong."""
        url = self.base_url
        try:
            # Posted as it is: the messages and schemas are plain JSON already, and the SDK's
            # per-request transform of typed params cost a quarter of the client's CPU. Its
            # retries, timeouts and errors still apply.
            response = await self.client.post(path, body=body, cast_to=httpx.Response)
        except openai.APIConnectionError as exc:  # APITimeoutError is one
            raise ModelError(f"no reply from {url}: {_no_reply(exc)}") from exc
        except openai.APIStatusError as exc:
            raise ModelError(f"{url} answered HTTP {exc.status_code}: {error_text(exc)}") from exc
        except (ReplyRefused, openai.APIError) as exc:
            raise ModelError(f"unusable reply from {url}: {exc}") from exc
        return _json_body(response, url)

    async def _get_json(self, path: str) -> object:
        response = await self.client.get(path, cast_to=httpx.Response)
        try:
            return json.loads(response.content)
        except (ValueError, RecursionError) as exc:
            raise MalformedReply(f"not JSON: {response.content[:120]!r}") from exc


def chat_body(request: ChatRequest) -> dict[str, Any]:
    """The JSON body of POST /chat/completions for `request`."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": request.messages,
        "tools": request.tools,
        "tool_choice": request.tool_choice,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    if not request.parallel_calls:
        # Remora's server plugin then stops where the first call ends.
        body["parallel_tool_calls"] = False
    if request.grammar:
        # vLLM's structured outputs; the call markers are special tokens, which vLLM would
        # otherwise strip before its tool parser sees them.
        body["structured_outputs"] = {"grammar": request.grammar}
        body["skip_special_tokens"] = False
    return body


def completion_body(model: str, request: CompletionRequest) -> dict[str, Any]:
    """The JSON body of POST /completions for `request`, continued by `model`."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": request.prompt,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    if request.stop:
        body["stop"] = request.stop
    return body


def _json_body(response: httpx.Response, url: str) -> object:
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to parse
        raise ModelError(
            f"unusable reply from {url}: not JSON: {response.content[:120]!r}"
        ) from exc


def _no_reply(exc: openai.APIConnectionError) -> str:
    """The OpenAI error's words, and what lay under them where they say more."""
    cause = exc.__cause__
    detail = str(cause) if cause is not None else ""
    if isinstance(cause, httpx.ConnectTimeout):
        detail = "timed out connecting (server.timeout)"
    elif isinstance(cause, httpx.WriteTimeout):
        detail = "timed out sending the request (server.timeout)"
    text = str(exc)
    return f"{text} ({detail})" if detail and detail not in text else text


def error_text(exc: openai.APIStatusError) -> str:
    """The server's own message from an error reply, else the client's."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])[:500]
    return str(exc.message)[:500]


# --------------------------------------------------------------------------- reading replies


# --------------------------------------------------------------------------- pacing
