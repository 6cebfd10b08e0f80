"""Any OpenAI-compatible chat-completions server (vLLM first) behind the ChatModel interface.

The HTTP client is aiohttp (its connection pool and C parser cost about a sixth of the CPU per
request of the OpenAI SDK on httpx, which made the client the bottleneck for a fast server:
bench/README.md, "Client overhead"). Retries are this module's own, as the SDK had them.

A server's replies are untrusted, and so is its pace:

- **No-progress timeout.** `server.timeout` bounds connecting and, once a reply has started
  (its first byte has arrived), every wait between two received bytes, in the status line and
  headers as in the body (`paced_connector`). The wait for the first byte is not bounded here:
  a busy server queues requests, and a queue is not a fault. The runner bounds the whole job
  (`runner.job_timeout`); the one request outside a job, `GET /models`, is bounded in total
  (`model_entries`). A streamed reply (`runner.stream`) is watched per event instead, from its
  first event on (`remora.models.http.chat_stream`): its headers come before the server has even
  queued the request.
- **Size cap.** Bodies are decompressed here (gzip or deflate, the encodings Remora asks for)
  and refused past `server.max_reply_mb` of decompressed bytes (`read_capped`).
- **Shape.** Bodies are parsed as plain JSON and checked field by field
  (`remora.protocol.messages.parse_chat_reply`); a reply of the wrong shape is a `model_error`
  saying what is wrong, never a crash.
- **Retries** (`server.retries`): a connection refused or dropped, a no-progress timeout, and
  HTTP 408, 409, 429 and 5xx are asked again after an exponential backoff (0.5 s doubling up
  to 8 s, less up to a quarter at random), or after the server's `Retry-After` where it gives
  one of at most 60 s; `x-should-retry: true|false` from the server overrides the status.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any, overload

import aiohttp
import anyio

from remora.config.settings import ServerSettings
from remora.findings.results import ErrorCode
from remora.models.http.chat_stream import Stalled, StreamFailed, read_stream
from remora.models.http.guards import (
    ACCEPT_ENCODING,
    MIB,
    ReplyRefused,
    paced_connector,
    read_capped,
)
from remora.protocol.completion import Completion, CompletionRequest, parse_completion
from remora.protocol.messages import (
    ChatRequest,
    MalformedReply,
    ModelError,
    ModelReply,
    PromptTooLong,
    parse_chat_reply,
    parse_json,
    parse_model_list,
)

SERVER_DOCS = "docs/SERVER_SETUP.md"

StreamReader = Callable[[aiohttp.ClientResponse], Awaitable[object]]

_RETRIED_STATUS = frozenset({408, 409, 429})
_MAX_RETRY_AFTER_S = 60.0


class NoReply(Exception):
    """No answer at all: the connection was refused or dropped, or a timeout ran out."""


class StatusError(Exception):
    """The server answered with an HTTP error status."""

    def __init__(self, status_code: int, body: bytes, headers: dict[str, str]) -> None:
        self.status_code, self.body, self.headers = status_code, body, headers
        super().__init__(f"HTTP {status_code}: {error_text(self)}")


class OpenAIChatModel:
    """One server (`server.base_url`), its connection pool sized to the run's concurrency."""

    def __init__(self, settings: ServerSettings, *, connections: int = 64) -> None:
        """`connections`: how many requests may be in flight (the run's concurrency); the pool
        keeps that many alive instead of closing and reopening them under load."""
        if len(settings.base_urls) != 1:
            raise ValueError("OpenAIChatModel needs exactly one server.base_url")
        self.base_url = settings.base_urls[0].rstrip("/")
        self.timeout = settings.timeout
        self.max_reply_mb = settings.max_reply_mb
        self.retries = settings.retries
        self.connections = max(connections, 1)
        self.headers = {
            "Accept": "application/json",
            "Accept-Encoding": ACCEPT_ENCODING,
            "Authorization": f"Bearer {settings.api_key.get_secret_value() or 'EMPTY'}",
            "Content-Type": "application/json",
        }
        self._stream_headers = {
            **self.headers,
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        self._stream_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.timeout, sock_read=None
        )
        self._session: aiohttp.ClientSession | None = None
        self.paced = True
        """Whether the no-progress timeout is in place (else: a plain read timeout, which also
        ends a request that waits in the server's queue); known once the pool is made."""

    def _pool(self) -> aiohttp.ClientSession:
        """Made on first use: aiohttp binds its pool to the running event loop."""
        if self._session is None:
            connector, self.paced = paced_connector(self.connections, self.timeout)
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,  # `read_capped` decodes, within the size cap
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=self.timeout, sock_read=self.timeout
                ),
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def list_models(self) -> list[str]:
        """Ask the server once which models it serves; tells apart 'unreachable' from the rest."""
        return [str(entry["id"]) for entry in await self.model_entries()]

    async def model_entries(self) -> list[dict[str, Any]]:
        """`GET /models`: the listed entries, each an object with a string `id`.

        The whole listing, retries and backoff included, must end within `server.timeout`: it
        runs before any job (outside `runner.job_timeout`), and a server answers it at once,
        however busy its queue. Raises `ModelError`: `server_unreachable` when the server cannot
        be reached, does not finish in time or answers an HTTP error (`NoReply`, `TimeoutError`
        or `StatusError` is the `__cause__`), `model_error` for a body that is too large or of
        the wrong shape.
        """
        url = self.base_url
        try:
            with anyio.fail_after(self.timeout):
                data = parse_json(await self.request("GET", "/models"))
        except TimeoutError as exc:
            raise ModelError(
                f"cannot reach the model server at {url}: GET /models did not complete within "
                f"server.timeout={self.timeout:g}s. Check that it is up and answering; see "
                f"{SERVER_DOCS}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from exc
        except NoReply as exc:
            raise ModelError(
                f"cannot reach the model server at {url} ({exc}). Start one, or point Remora "
                f"at one with --base-url or server.base_url; see {SERVER_DOCS}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from exc
        except StatusError as exc:
            raise ModelError(
                f"the model server at {url} answered GET /models with HTTP "
                f"{exc.status_code}: {error_text(exc)}; see {SERVER_DOCS}",
                ErrorCode.SERVER_UNREACHABLE,
            ) from exc
        except (ReplyRefused, MalformedReply) as exc:
            raise ModelError(f"unusable reply from {url} to GET /models: {exc}") from exc
        try:
            return parse_model_list(data)
        except MalformedReply as exc:
            raise ModelError(f"malformed reply from {url} to GET /models: {exc}") from exc

    async def complete(self, request: ChatRequest) -> ModelReply:
        if request.stream:
            data = await self.post_json(
                "/chat/completions",
                chat_body(request),
                reader=partial(
                    read_stream,
                    max_bytes=self.max_reply_mb * MIB,
                    stall=self.timeout,
                    on_progress=request.on_progress,
                    only_first_call=not request.parallel_calls,
                ),
            )
        else:
            data = await self.post_json("/chat/completions", chat_body(request))
        try:
            return parse_chat_reply(data)
        except MalformedReply as exc:
            raise ModelError(f"malformed reply from {self.base_url}: {exc}") from exc

    async def complete_text(self, *, model: str, request: CompletionRequest) -> Completion:
        """POST /completions: the model (or adapter) continues `request.prompt`."""
        data = await self.post_json("/completions", completion_body(model, request))
        scored = (
            (len(request.prompt), len(request.prompt) + len(request.score))
            if request.score is not None
            else None
        )
        try:
            return parse_completion(data, request.stop, scored)
        except MalformedReply as exc:
            raise ModelError(f"malformed reply from {self.base_url}: {exc}") from exc

    async def post_json(
        self, path: str, body: dict[str, Any], *, reader: StreamReader | None = None
    ) -> object:
        """POST `body` to `path` (e.g. "/chat/completions") with every guard of this module; the
        reply as plain JSON (read by `reader` when streamed), or `ModelError` (`model_error`)
        saying what went wrong."""
        url = self.base_url
        try:
            if reader is not None:
                return await self.request("POST", path, json.dumps(body).encode(), reader=reader)
            content = await self.request("POST", path, json.dumps(body).encode())
            return parse_json(content)
        except StreamFailed as exc:
            raise ModelError(f"{url} ended the streamed reply with an error: {exc}") from exc
        except NoReply as exc:
            raise ModelError(f"no reply from {url}: {exc}") from exc
        except StatusError as exc:
            too_long = prompt_too_long(exc)
            if too_long is not None:
                raise too_long from exc
            raise ModelError(f"{url} answered HTTP {exc.status_code}: {error_text(exc)}") from exc
        except (ReplyRefused, MalformedReply) as exc:
            raise ModelError(f"unusable reply from {url}: {exc}") from exc

    @overload
    async def request(self, method: str, path: str, body: bytes | None = None) -> bytes: ...
    @overload
    async def request(
        self, method: str, path: str, body: bytes | None, *, reader: StreamReader
    ) -> object: ...
    async def request(
        self, method: str, path: str, body: bytes | None = None, *, reader: Any = None
    ) -> Any:
        """The body of a successful reply (or what `reader` made of a streamed one), after up to
        `server.retries` more tries; else `NoReply`, `StatusError` (the last try's),
        `ReplyRefused` or `StreamFailed`."""
        for attempt in range(self.retries + 1):
            try:
                return await self._once(method, path, body, reader)
            except (NoReply, StatusError) as exc:
                if attempt == self.retries or not _should_retry(exc):
                    raise
                await anyio.sleep(_retry_delay(exc, attempt))
        raise AssertionError("unreachable")

    async def _once(
        self, method: str, path: str, body: bytes | None, reader: StreamReader | None
    ) -> Any:
        # A stream's headers come before the server has even queued the request: its pace is
        # watched per event by `read_stream`, not per byte by the connection.
        options: dict[str, Any] = {"data": body, "headers": self.headers}
        if reader is not None:
            options.update(headers=self._stream_headers, timeout=self._stream_timeout)
        try:
            async with self._pool().request(method, self.base_url + path, **options) as response:
                if response.status >= 400 or reader is None:
                    content = await read_capped(response, self.max_reply_mb * MIB)
                    if response.status >= 400:
                        raise StatusError(response.status, content, dict(response.headers))
                    return content
                return await reader(response)
        except Stalled as exc:
            raise NoReply(str(exc)) from exc
        except aiohttp.ConnectionTimeoutError as exc:
            raise NoReply("Request timed out. (timed out connecting (server.timeout))") from exc
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise NoReply(_words("Request timed out.", str(exc))) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise NoReply(_words("Connection error.", str(exc))) from exc
        except aiohttp.ClientResponseError as exc:  # a reply aiohttp could not parse
            raise NoReply(_words("Connection error.", exc.message)) from exc


def _words(what: str, detail: str) -> str:
    return f"{what} ({detail})" if detail else what


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
    if request.stream:
        # Usage in every chunk (vLLM): a reply closed early still has its token counts.
        body["stream"] = True
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    if request.logprobs:
        body["logprobs"] = True
    if request.seed is not None:
        body["seed"] = request.seed
    if request.grammar:
        # vLLM's structured outputs; the call markers are special tokens, which vLLM would
        # otherwise strip before its tool parser sees them.
        body["structured_outputs"] = {"grammar": request.grammar}
        body["skip_special_tokens"] = False
    return body


def completion_body(model: str, request: CompletionRequest) -> dict[str, Any]:
    """The JSON body of POST /completions for `request`, continued by `model`; a `score`
    request echoes the prompt and its continuation with each token's log-probability."""
    if request.score is not None:
        prompt = request.prompt + request.score
        return {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0,
                "echo": True, "logprobs": 0}  # fmt: skip
    body: dict[str, Any] = {
        "model": model,
        "prompt": request.prompt,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    if request.stop:
        body["stop"] = request.stop
    return body


def _should_retry(error: NoReply | StatusError) -> bool:
    if isinstance(error, NoReply):
        return True
    should = error.headers.get("x-should-retry", error.headers.get("X-Should-Retry", ""))
    if should.lower() in ("true", "false"):
        return should.lower() == "true"
    return error.status_code in _RETRIED_STATUS or error.status_code >= 500


def _retry_delay(error: NoReply | StatusError, attempt: int) -> float:
    """The server's Retry-After (or retry-after-ms) where it gives a usable one, else
    exponential backoff with jitter."""
    if isinstance(error, StatusError):
        headers = {key.lower(): value for key, value in error.headers.items()}
        wait: float | None = None
        try:
            if "retry-after-ms" in headers:
                wait = float(headers["retry-after-ms"]) / 1000
            elif "retry-after" in headers:
                value = headers["retry-after"]
                try:
                    wait = float(value)
                except ValueError:
                    wait = parsedate_to_datetime(value).timestamp() - time.time()
        except (ValueError, TypeError, OverflowError):
            wait = None
        if wait is not None and 0 <= wait <= _MAX_RETRY_AFTER_S:
            return wait
    return min(0.5 * 2.0**attempt, 8.0) * (1 - 0.25 * random.random())


_TOO_LONG = re.compile(
    r"maximum context length is (\d+) tokens\. However, your prompt contains "
    r"(?:at least )?(\d+) input tokens"
)
"""vLLM's words (HTTP 400) for a prompt longer than `--max-model-len`."""


def prompt_too_long(exc: StatusError) -> PromptTooLong | None:
    """The server's refusal of an over-long prompt as the engine's own `PromptTooLong`: the
    runner then ends that job with what its tools verified, instead of failing the run."""
    found = _TOO_LONG.search(error_text(exc)) if exc.status_code == 400 else None
    if found is None:
        return None
    hint = "raise the server's --max-model-len, up to the model's training context"
    return PromptTooLong(int(found[2]), int(found[1]), hint)


def error_text(exc: StatusError) -> str:
    """The server's own message from an error reply, else its status line's words."""
    try:
        body = json.loads(exc.body)
    except (ValueError, RecursionError):
        body = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])[:500]
        if isinstance(inner, str):
            return inner[:500]
    text = exc.body.decode("utf-8", "replace").strip()
    return text[:500] if text else f"HTTP {exc.status_code}"
