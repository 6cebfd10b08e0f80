"""A real OpenAI-compatible chat-completions server that replies from a script or a rule.

Tests and benchmarks point Remora's own client (and, in its fidelity tests, the OpenAI SDK)
at it instead of mocking a client, so the whole HTTP path (serialisation, status codes,
retries, keep-alive) is exercised.

Run as a process with ``python -m remora.models.scripted``; it serves the
:class:`CallEveryTool` rule and prints ``base_url=...`` once listening.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
import h11
from anyio.abc import ByteStream, SocketAttribute, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal

from remora.models.scripted.replies import (
    DEFAULT_MODEL,
    CallEveryTool,
    DelayedReply,
    HttpErrorReply,
    PacedReply,
    RawReply,
    Reply,
    Response,
    Rule,
    TextReply,
    ToolCall,
    ToolCallsReply,
    arguments_from_schema,
    check_reply,
    completion_response,
    error_response,
    http_error,
    metrics_response,
    models_response,
    paced,
    raw,
    status_phrase,
    text,
    tool_call,
    tool_calls,
)
from remora.models.scripted.scoring import score_response
from remora.models.scripted.stream import chat_response, request_problem

__all__ = [
    "DEFAULT_MODEL",
    "CallEveryTool",
    "DelayedReply",
    "HttpErrorReply",
    "PacedReply",
    "RawReply",
    "Reply",
    "Rule",
    "ScriptedModelServer",
    "TextReply",
    "ToolCall",
    "ToolCallsReply",
    "arguments_from_schema",
    "http_error",
    "paced",
    "raw",
    "text",
    "tool_call",
    "tool_calls",
]

log = logging.getLogger(__name__)

DEFAULT_COMPLETION = "A scripted completion."
"""What /v1/completions answers when a test gives no `completion` function."""
SCRIPT_EXHAUSTED = "scripted model: script exhausted"
_RECEIVE_SIZE = 65536


class ScriptedModelServer:
    """OpenAI-compatible chat-completions server answering from ``script`` or ``rule``. Use
    ``with ScriptedModelServer(...) as server:`` to run it on a background thread, or
    ``await task_group.start(server.serve)`` to run it in the current event loop."""

    def __init__(
        self,
        script: Iterable[Reply] | None = None,
        *,
        rule: Rule | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        capacity: int | None = None,
        models: Sequence[str] = (DEFAULT_MODEL,),
        completion: Callable[[dict[str, Any]], str | float | HttpErrorReply] | None = None,
    ) -> None:
        """`capacity`: requests answered at once (a server's batch); the rest queue, and their
        time in the queue adds up in `queued_s`. None: no limit."""
        if (script is None) == (rule is None):
            raise ValueError("give exactly one of script= or rule=")
        self._script: Iterator[Reply] | None = iter(script) if script is not None else None
        self._rule = rule
        self.host = host
        self.port = port
        self.latency, self.capacity, self.queued_s = latency, capacity, 0.0
        self._slots: anyio.CapacityLimiter | None = None
        self.models = list(models) or [DEFAULT_MODEL]
        self.requests: list[dict[str, Any]] = []
        self.completion = completion or (lambda body: DEFAULT_COMPLETION)
        """Answers POST /v1/completions: the continuation of `body["prompt"]`; for a scoring
        request (`echo`), a float: the log-probability of each echoed token (a text: -1.0); an
        `http_error(...)` is sent as that error."""
        self.completion_requests: list[dict[str, Any]] = []
        self.model_list_requests = 0
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._bound_port: int | None = None
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)
        self._exit_stack: contextlib.ExitStack | None = None

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``; only known once the server is listening."""
        if self._bound_port is None:
            raise RuntimeError("the server is not listening yet")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._bound_port}/v1"

    # -- lifecycle

    async def serve(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; reports ``base_url`` through ``task_status``."""
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
        async with listener:
            self._bound_port = listener.extra(SocketAttribute.local_port)
            task_status.started(self.base_url)
            await listener.serve(self._serve_connection)

    def start(self) -> Self:
        """Start serving on a background thread; returns once listening."""
        if self._exit_stack is not None:
            raise RuntimeError("the server is already running")
        with contextlib.ExitStack() as stack:
            portal: BlockingPortal = stack.enter_context(
                start_blocking_portal(name=f"scripted-model-{id(self):x}")
            )
            # Cancel the serve task before the portal waits for its tasks to finish.
            stack.callback(portal.call, portal.stop, True)
            portal.start_task(self.serve)
            self._exit_stack = stack.pop_all()
        return self

    def stop(self) -> None:
        """Stop the background server and join its thread."""
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            stack.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- HTTP

    async def _serve_connection(self, stream: ByteStream) -> None:
        self.connections += 1
        # An exception escaping here would cancel the listener's task group, i.e. the server.
        try:
            async with stream:
                await self._serve_requests(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            pass  # the client went away, e.g. it timed out while we slept on latency
        except Exception:
            log.exception("scripted model: connection failed")

    async def _serve_requests(self, stream: ByteStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            try:
                received = await self._receive_request(conn, stream)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await self._send(conn, stream, error_response(exc.error_status_hint, str(exc)))
                return
            if received is None:
                return
            response = await self._dispatch(*received)
            try:
                await self._send(conn, stream, response)
            except h11.LocalProtocolError:
                # A raw reply whose framing h11 refuses: closing mid-body is the intended fault.
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    async def _receive_request(
        self, conn: h11.Connection, stream: ByteStream
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        chunks: list[bytes] = []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if conn.they_are_waiting_for_100_continue:
                    await self._write(
                        conn,
                        stream,
                        h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue"),
                    )
                try:
                    data = await stream.receive(_RECEIVE_SIZE)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    data = b""
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage) and request is not None:
                return request, b"".join(chunks)
            else:  # ConnectionClosed, or PAUSED which cannot happen before EndOfMessage
                return None

    async def _write(self, conn: h11.Connection, stream: ByteStream, event: h11.Event) -> None:
        data = conn.send(event)
        if data:
            await stream.send(data)

    async def _send(self, conn: h11.Connection, stream: ByteStream, response: Response) -> None:
        names = {name.lower() for name, _ in response.headers}
        headers = list(response.headers)
        if "content-type" not in names:
            headers.append(("Content-Type", "application/json"))
        if response.events is None and not names & {"content-length", "transfer-encoding"}:
            headers.append(("Content-Length", str(len(response.body))))
        reason = status_phrase(response.status).encode()
        await self._write(
            conn, stream, h11.Response(status_code=response.status, headers=headers, reason=reason)
        )
        # A stream goes without a length (h11 chunks it), each event sent as soon as it is due.
        for wait, data in response.events or [(0.0, response.body)]:
            if wait:
                await anyio.sleep(wait)
            if data:
                await self._write(conn, stream, h11.Data(data=data))
        await self._write(conn, stream, h11.EndOfMessage())

    async def _dispatch(self, request: h11.Request, body: bytes) -> Response:
        method = request.method.decode("ascii", "replace").upper()
        path = request.target.decode("ascii", "replace").split("?", 1)[0].rstrip("/")
        if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
            return await self.answer_chat(body)
        if method == "POST" and path in ("/v1/completions", "/completions"):
            with self._counted():  # as for chat: a model takes time for every request
                await self._model_time()
            return self.answer_completion(body)
        if method == "GET" and path == "/metrics":  # vLLM's, at the root: what queues
            return metrics_response(self.in_flight - self.running, self.running)
        if method == "GET" and path in ("/v1/models", "/models"):
            self.model_list_requests += 1
            return models_response(self.models)
        return error_response(404, f"no route for {method} {path or '/'}")

    # -- text completions

    def answer_completion(self, raw_body: bytes) -> Response:
        """POST /v1/completions, over HTTP or in process (`ScriptedModel`)."""
        try:
            body = json.loads(raw_body)
        except ValueError as exc:
            return error_response(400, f"request body is not valid JSON: {exc}")
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            return error_response(400, "request body must be an object with a 'prompt' string")
        self.completion_requests.append(body)
        try:
            text = self.completion(body)
        except Exception as exc:
            return error_response(500, f"scripted model: {type(exc).__name__}: {exc}")
        if isinstance(text, HttpErrorReply):
            return error_response(text.status, text.message, text.headers)
        if body.get("echo"):
            value = text if isinstance(text, int | float) else -1.0
            return score_response(body, float(value), f"cmpl-{next(self._completion_ids)}")
        return completion_response(body, str(text), f"cmpl-{next(self._completion_ids)}")

    # -- chat completions

    async def answer_chat(self, raw_body: bytes) -> Response:
        """POST /v1/chat/completions, over HTTP or in process (`ScriptedModel`)."""
        try:
            body = json.loads(raw_body)
        except ValueError as exc:
            return error_response(400, f"request body is not valid JSON: {exc}")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error_response(400, "request body must be an object with a 'messages' list")
        if (problem := request_problem(body)) is not None:
            return error_response(400, problem)

        self.requests.append(body)
        try:
            with self._counted():
                # The script is consumed on arrival so that request n always gets item n.
                reply = self._next_script_item() if self._script is not None else None
                await self._model_time()
                if self._rule is not None:
                    reply = check_reply(await self._apply_rule(self._rule, body), "rule result")
                if reply is None:
                    return error_response(500, SCRIPT_EXHAUSTED)
                return await chat_response(
                    body,
                    reply,
                    call_ids=self._call_ids,
                    completion_ids=self._completion_ids,
                    model=self.models[0],
                )
        except Exception as exc:
            return error_response(500, f"scripted model: {type(exc).__name__}: {exc}")

    async def _model_time(self) -> None:
        if self.capacity is None:
            return await anyio.sleep(self.latency)
        self._slots = self._slots or anyio.CapacityLimiter(self.capacity)
        arrived = time.monotonic()
        async with self._slots:
            self.queued_s += time.monotonic() - arrived
            await anyio.sleep(self.latency)

    @property
    def running(self) -> int:
        """Requests being answered (the rest of `in_flight` waits for a slot)."""
        return self.in_flight if self._slots is None else int(self._slots.borrowed_tokens)

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        """A request in flight (chat or completion), for `in_flight` and `max_in_flight`."""
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1

    def _next_script_item(self) -> Reply | None:
        assert self._script is not None
        item = next(self._script, None)
        return None if item is None else check_reply(item, "script item")

    @staticmethod
    async def _apply_rule(rule: Rule, body: dict[str, Any]) -> object:
        result = rule(body)
        return await result if inspect.isawaitable(result) else result
