"""A hostile model server on 127.0.0.1: drip-fed bytes, stalls, queues, compression bombs,
replies of the wrong shape, and alias bombs in remora.yaml. Each is answered within its bound,
with a code and a message naming what went wrong; nothing hangs, nothing balloons."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import socketserver
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from remora.cli.main import main
from remora.config.settings import ServerSettings
from remora.config.yamlfile import MAX_EXPANDED_NODES, YamlFile
from remora.errors import UserInputError
from remora.findings.results import ErrorCode
from remora.models.http.openai_client import OpenAIChatModel
from remora.models.http.router import ReplicaRouter, is_connection_error
from remora.models.http.server_check import check_server
from remora.models.scripted.server import ScriptedModelServer, raw
from remora.protocol.messages import ChatRequest, ModelError, ModelReply

MODEL = "google/functiongemma-270m-it"
MODELS_BODY = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
MIB = 1 << 20


# --------------------------------------------------------------------------- the server


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Wire:
    """One connection, as the hostile server's handler sees it."""

    def __init__(self, sock: socket.socket, stopping: threading.Event) -> None:
        self.sock, self.stopping = sock, stopping

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(
        self, body: bytes, *, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        """A whole response; Content-Length is the body's unless `headers` says otherwise."""
        fields = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        fields.update(headers or {})
        self.send(head(status, fields) + body)

    def chunked(self, pieces: Iterator[bytes], headers: dict[str, str] | None = None) -> None:
        fields = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
        self.send(head(200, {**fields, **(headers or {})}))
        for piece in pieces:
            self.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.send(b"0\r\n\r\n")

    def drip(self, data: bytes, interval: float) -> None:
        """`data` one byte at a time, `interval` seconds apart, until the client goes away."""
        for index in range(len(data)):
            if self.stopping.wait(interval):
                return
            self.send(data[index : index + 1])

    def hold(self, seconds: float) -> None:
        """Send nothing for `seconds` (or until the server stops)."""
        self.stopping.wait(seconds)


def head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


Handler = Callable[[Request, Wire], None]


class HostileServer:
    """A real HTTP/1.1 server on 127.0.0.1, one thread per connection, whose `handler` answers
    each request by writing what it likes to the socket (or nothing at all)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        outer = self

        class Connection(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with contextlib.suppress(OSError):
                    outer._serve(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Connection)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        wire = Wire(sock, self.stopping)
        while not self.stopping.is_set():
            line = reader.readline()
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers: dict[str, str] = {}
            while (field := reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = field.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = reader.read(int(headers.get("content-length", "0")))
            request = Request(method, target.split("?", 1)[0], headers, body)
            self.requests.append(request)
            self.handler(request, wire)


def chat_body(
    content: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None
) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ]
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    body = {"id": "x", "object": "chat.completion", "choices": [choice], "usage": usage}
    return json.dumps(body).encode()


def serving(chat: Handler) -> Handler:
    """`GET /v1/models` answered properly, chat requests by `chat`."""

    def handler(request: Request, wire: Wire) -> None:
        if request.method == "GET" and request.path.endswith("/models"):
            wire.reply(MODELS_BODY)
        else:
            chat(request, wire)

    return handler


def conversation(request: Request) -> bytes:
    """The probe agent's work: find_todos on the first turn, then submit_result."""
    if len(request.json["messages"]) == 2:
        return chat_body(calls=[("find_todos", {"marker": "FIXME"})])
    return chat_body(calls=[("submit_result", {"summary": "ok", "todo_count": 0})])


def client(url: str, **settings: Any) -> OpenAIChatModel:
    return OpenAIChatModel(ServerSettings(base_url=[url], **{"retries": 0, **settings}))


async def ask(model: OpenAIChatModel | ReplicaRouter, **options: Any) -> ModelReply:
    """A small chat request; `options` sets other `ChatRequest` fields (stream=True...)."""
    return await model.complete(
        ChatRequest(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            tools=[],
            tool_choice="auto",
            max_tokens=16,
            temperature=0.0,
            **options,
        )
    )


def complete_once(url: str, **settings: Any) -> ModelReply:
    async def go() -> ModelReply:
        model = client(url, **settings)
        try:
            return await ask(model)
        finally:
            await model.aclose()

    return anyio.run(go)


@pytest.fixture
def one(project: Path, probe_config: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One function to analyse with the probe agent; cwd = the project."""
    (project / "pkg" / "shout.py").write_text("def alpha():\n    return 1\n")
    monkeypatch.chdir(project)
    return project


def run_analyze(
    capsys: pytest.CaptureFixture[str], url: str, *settings: str
) -> tuple[int, dict[str, Any], str, float]:
    """`remora analyze pkg` against `url` with `-c` settings: code, report, stderr, seconds."""
    flags = [part for setting in settings for part in ("-c", setting)]
    started = time.monotonic()
    code = main(["analyze", "pkg", "--format", "json", "--no-cache", "--base-url", url, *flags])
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err, elapsed


# --------------------------------------------------------------------------- 1. GET /models


@pytest.mark.parametrize("where", ["status_line", "body"])
def test_a_drip_fed_model_list_stops_analyze_within_the_timeout(
    where: str, one: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One byte every 0.2 s forever, from the status line on or after the headers: the check
    before any job ends at server.timeout, whatever runner.job_timeout says."""

    def drip(request: Request, wire: Wire) -> None:
        response = head(200, {"Content-Length": "100000"}) + b'{"data": [' + b" " * 99_990
        if where == "body":
            wire.send(response[:60])
            response = response[60:]
        wire.drip(response, 0.2)

    with HostileServer(drip) as server:
        code, _, err, elapsed = run_analyze(
            capsys, server.base_url, "server.timeout=1", "runner.job_timeout=15"
        )
    assert code == 2
    assert elapsed < 3
    assert f"cannot reach the model server at {server.base_url}" in err
    assert "GET /models did not complete within server.timeout=1s" in err


def test_check_server_bounds_a_drip_fed_model_list_and_drip_fed_probes() -> None:
    def handler(request: Request, wire: Wire) -> None:
        if request.path.endswith("/models") and len(server.requests) == 1:
            wire.drip(head(200, {"Content-Length": "5000"}) + b" " * 5000, 0.1)
        elif request.path.endswith("/models"):
            wire.reply(MODELS_BODY)
        else:  # a tool-call probe: a reply that starts, then trickles forever
            wire.send(head(200, {"Content-Length": "5000"}))
            wire.drip(b" " * 5000, 0.1)

    async def check() -> tuple[list[Any], list[Any], float]:
        started = time.monotonic()
        first = await check_server([server.base_url], agent_models={}, request_timeout=0.8)
        second = await check_server([server.base_url], agent_models={}, request_timeout=0.8)
        return first.lines, second.lines, time.monotonic() - started

    with HostileServer(handler) as server:
        first, second, elapsed = anyio.run(check)
    assert elapsed < 5  # 0.8 s for the listing, then the listing and 2 probes of 0.8 s
    assert [(line.check, line.status) for line in first] == [("connect", "problem")]
    assert "did not complete GET /models within 0.8s" in first[0].message
    probes = {line.check: line for line in second}
    assert probes["connect"].status == "ok"
    for check_name in ("tool_choice=auto", "tool_choice=required"):
        assert probes[check_name].status == "problem"
        assert "no complete reply within 0.8s" in probes[check_name].message


# --------------------------------------------------------------------------- 2. timeouts


def test_a_reply_queued_longer_than_the_timeout_is_waited_for() -> None:
    """No byte for three times server.timeout (the request waits in the server's queue), then
    the reply: not an error."""

    def queued(request: Request, wire: Wire) -> None:
        wire.hold(1.2)
        wire.reply(chat_body("done at last"))

    assert client("http://127.0.0.1:9/v1").paced  # the no-progress timeout is in place
    with HostileServer(queued) as server:
        started = time.monotonic()
        reply = complete_once(server.base_url, timeout=0.4)
        elapsed = time.monotonic() - started
    assert reply.content == "done at last"
    assert elapsed >= 1.2
    assert len(server.requests) == 1  # not abandoned and sent again


def test_a_reply_that_stalls_after_it_started_fails_at_the_timeout_and_is_retried() -> None:
    def stall(request: Request, wire: Wire) -> None:
        wire.send(head(200, {"Content-Length": "500"}) + b'{"id": "x", "choi')
        wire.hold(30)

    with HostileServer(stall) as server:
        started = time.monotonic()
        with pytest.raises(ModelError) as caught:
            complete_once(server.base_url, timeout=0.4, retries=1)
        elapsed = time.monotonic() - started
    assert caught.value.code is ErrorCode.MODEL_ERROR
    message = caught.value.message
    assert message.startswith(f"no reply from {server.base_url}: Request timed out.")
    assert "the reply stalled: no byte for 0.4s (server.timeout)" in message
    assert len(server.requests) == 2  # server.retries=1: once more, after a backoff
    assert 0.8 <= elapsed < 3


def test_a_stall_in_the_middle_of_the_headers_counts_too() -> None:
    def stall(request: Request, wire: Wire) -> None:
        wire.send(b"HTTP/1.1 200 OK\r\nContent-Le")
        wire.hold(30)

    with HostileServer(stall) as server:
        started = time.monotonic()
        with pytest.raises(ModelError, match="timed out"):
            complete_once(server.base_url, timeout=0.4)
    assert time.monotonic() - started < 2


def test_a_drip_fed_reply_is_progress_and_ends_at_the_job_timeout(
    one: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A byte every 0.1 s never trips a 1 s no-progress timeout; the runner's job_timeout ends
    the job (time_limit), and the run goes on to report it."""

    def drip(request: Request, wire: Wire) -> None:
        wire.send(head(200, {"Content-Length": "100000"}))
        wire.drip(b" " * 100_000, 0.1)

    with HostileServer(serving(drip)) as server:
        code, report, _, elapsed = run_analyze(
            capsys, server.base_url, "server.timeout=1", "runner.job_timeout=2"
        )
    (result,) = report["results"]
    assert result["error"]["code"] == "time_limit"
    assert "runner.job_timeout=2.0s" in result["error"]["message"]
    assert code == 1
    assert 2 <= elapsed < 5


def test_a_busy_server_that_queues_every_request_is_not_an_error(
    one: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The vLLM-on-CPU case: each reply starts only after 0.8 s in the queue, twice the
    no-progress timeout; the job still succeeds."""

    def busy(request: Request, wire: Wire) -> None:
        wire.hold(0.8)
        wire.reply(conversation(request))

    with HostileServer(serving(busy)) as server:
        code, report, _, _ = run_analyze(capsys, server.base_url, "server.timeout=0.4")
    (result,) = report["results"]
    assert result["status"] == "success", result["error"]
    assert code == 0


def test_the_router_fails_over_from_a_stalled_replica_but_waits_for_a_queueing_one() -> None:
    def stalled(request: Request, wire: Wire) -> None:
        wire.send(head(200, {"Content-Length": "500"}))
        wire.hold(30)

    def queueing(request: Request, wire: Wire) -> None:
        wire.hold(0.8)
        wire.reply(chat_body("queued"))

    async def route(*urls: str) -> tuple[ModelReply, ReplicaRouter]:
        router = ReplicaRouter([client(url, timeout=0.3) for url in urls])
        try:
            return await ask(router), router
        finally:
            await router.aclose()

    with HostileServer(stalled) as stuck, HostileServer(queueing) as busy:
        reply, router = anyio.run(route, stuck.base_url, busy.base_url)
        assert reply.content == "queued"
        first, second = router.stats()
        assert first.down and "stalled" in (first.last_error or "")
        assert not second.down and second.failures == 0
        assert router.rerouted == 1


def test_a_stall_is_a_connection_error_for_the_router() -> None:
    def stalled(request: Request, wire: Wire) -> None:
        wire.send(head(200, {"Content-Length": "500"}))
        wire.hold(30)

    with HostileServer(stalled) as server, pytest.raises(ModelError) as caught:
        complete_once(server.base_url, timeout=0.3)
    assert is_connection_error(caught.value)


# --------------------------------------------------------------------------- 3. size caps


def deflate_bomb(size: int, wbits: int) -> bytes:
    """`size` zero bytes, compressed about 1000 to 1."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zeros = bytes(MIB)
    return b"".join([*(compressor.compress(zeros) for _ in range(size // MIB)), compressor.flush()])


GZIP_BOMB = deflate_bomb(64 * MIB, zlib.MAX_WBITS | 16)
DEFLATE_BOMB = deflate_bomb(64 * MIB, zlib.MAX_WBITS)


@pytest.mark.parametrize(
    "send",
    [
        pytest.param(lambda w: w.reply(GZIP_BOMB, headers={"Content-Encoding": "gzip"}), id="gzip"),
        pytest.param(
            lambda w: w.reply(DEFLATE_BOMB, headers={"Content-Encoding": "deflate"}), id="deflate"
        ),
        pytest.param(lambda w: w.reply(b" " * (2 * MIB)), id="plain"),
        pytest.param(lambda w: w.chunked(iter([b" " * 65536] * 40)), id="chunked"),
        pytest.param(
            lambda w: w.chunked(
                iter([GZIP_BOMB[i : i + 4096] for i in range(0, 65536, 4096)]),
                {"Content-Encoding": "gzip"},
            ),
            id="chunked-gzip",
        ),
    ],
)
def test_a_reply_larger_than_the_cap_after_decompression_is_refused(
    send: Callable[[Wire], None],
) -> None:
    with HostileServer(lambda request, wire: send(wire)) as server:
        tracemalloc.start()
        try:
            with pytest.raises(ModelError) as caught:
                complete_once(server.base_url, max_reply_mb=1, retries=2)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert caught.value.code is ErrorCode.MODEL_ERROR
    assert caught.value.message == (
        f"unusable reply from {server.base_url}: the reply body is larger than "
        "server.max_reply_mb=1 (1 MiB after decompression)"
    )
    assert len(server.requests) == 1  # refused, not retried
    assert peak < 8 * MIB  # held: at most the cap and a piece, never the 64 MiB


def test_a_compressed_model_list_over_the_cap_stops_analyze(
    one: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def bomb(request: Request, wire: Wire) -> None:
        wire.reply(GZIP_BOMB, headers={"Content-Encoding": "gzip"})

    with HostileServer(bomb) as server:
        code, _, err, elapsed = run_analyze(capsys, server.base_url, "server.max_reply_mb=1")
    assert code == 2 and elapsed < 3
    assert "GET /models: the reply body is larger than server.max_reply_mb=1" in err


def test_compressed_replies_within_the_cap_are_read() -> None:
    def gzipped(request: Request, wire: Wire) -> None:
        wire.reply(gzip.compress(chat_body("x" * 500_000)), headers={"Content-Encoding": "gzip"})

    with HostileServer(gzipped) as server:
        reply = complete_once(server.base_url)
    assert reply.content == "x" * 500_000
    assert server.requests[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({"Content-Encoding": "br"}, b"\x1b\x00", "a Content-Encoding Remora did not ask for (br;"),
        ({"Content-Encoding": "gzip, gzip"}, b"", "did not ask for (gzip, gzip;"),
        (
            {"Content-Encoding": "gzip"},
            b"\x1f\x8bnot gzip at all",
            "the reply's gzip data is corrupt",
        ),
    ],
)
def test_encodings_not_asked_for_and_corrupt_data_are_refused(
    headers: dict[str, str], body: bytes, expected: str
) -> None:
    def handler(request: Request, wire: Wire) -> None:
        wire.reply(body, headers=headers)

    with HostileServer(handler) as server, pytest.raises(ModelError) as caught:
        complete_once(server.base_url, retries=2)
    assert caught.value.code is ErrorCode.MODEL_ERROR
    assert expected in caught.value.message
    assert len(server.requests) == 1


# --------------------------------------------------------------------------- 5. reply shapes


def reply_with(message: Any = None, **top: Any) -> bytes:
    body: dict[str, Any] = {"id": "x", "object": "chat.completion"}
    if message is not None:
        body["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
    body.update(top)
    return json.dumps(body).encode()


def with_call(**call: Any) -> dict[str, Any]:
    base = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [{**base, **call}]}


CALL = "choices[0].message.tool_calls[0]"
MALFORMED = [
    (
        with_call(function={"name": "f", "arguments": [1, 2]}),
        f"{CALL}.function.arguments is a list of 2, not a string",
    ),
    (with_call(function=None), f"{CALL}.function is null or missing"),
    (with_call(id=7), f"{CALL}.id is an integer (7), not a string"),
    (
        with_call(function={"name": {"x": 1}, "arguments": "{}"}),
        f"{CALL}.function.name is an object, not a string",
    ),
    (with_call(type=3), f"{CALL}.type is an integer (3), not a string"),
    (with_call(function="f()"), f"{CALL}.function is a string ('f()'), not an object"),
    (
        {"role": "assistant", "tool_calls": {"0": {}}},
        "choices[0].message.tool_calls is an object, not a list",
    ),
    ({"role": "assistant", "tool_calls": ["call"]}, f"{CALL} is a string ('call'), not an object"),
    (
        {"role": "assistant", "content": 42},
        "choices[0].message.content is an integer (42), not a string",
    ),
    ("just text", "choices[0].message is a string ('just text'), not an object"),
]


def malformed_bodies() -> list[Any]:
    cases = [pytest.param(reply_with(m), e, id=e.split(" is ")[0]) for m, e in MALFORMED]
    cases += [
        pytest.param(reply_with(), "it has no message (no choices)", id="choices missing"),
        pytest.param(
            reply_with(choices={"0": {}}), "choices is an object, not a list", id="choices object"
        ),
        pytest.param(
            reply_with(choices=[7]), "choices[0] is an integer (7), not an object", id="choice int"
        ),
        pytest.param(b"[1, 2]", "the reply is a list of 2, not an object", id="top-level list"),
        pytest.param(b'"ok"', "the reply is a string ('ok'), not an object", id="top-level string"),
        pytest.param(
            reply_with({"role": "assistant", "content": "x"}, usage={"prompt_tokens": "12"}),
            "usage.prompt_tokens is a string ('12'), not a count",
            id="usage string",
        ),
        pytest.param(
            reply_with({"role": "assistant", "content": "x"}, usage=[]),
            "usage is a list of 0, not an object",
            id="usage list",
        ),
    ]
    return cases


@pytest.mark.parametrize(("body", "expected"), malformed_bodies())
def test_replies_of_the_wrong_shape_are_model_errors_saying_what_is_wrong(
    body: bytes, expected: str
) -> None:
    with (
        ScriptedModelServer(script=[raw(200, body)]) as server,
        pytest.raises(ModelError) as caught,
    ):
        complete_once(server.base_url)
    assert caught.value.code is ErrorCode.MODEL_ERROR
    assert caught.value.message == f"malformed reply from {server.base_url}: {expected}"


def test_lenient_where_servers_differ_harmlessly() -> None:
    message = {
        "role": "assistant",
        "content": "bad \\ud800 surrogate",
        "tool_calls": [
            {"function": {"name": "f", "arguments": None}},  # no id, no type, null arguments
            {"id": "c2", "type": "custom", "custom": {"name": "g"}},  # not a function call
        ],
    }
    body = reply_with(message).replace(b"\\\\ud800", b"\\ud800")
    with ScriptedModelServer(script=[raw(200, body)]) as server:
        reply = complete_once(server.base_url)
    assert reply.content == "bad \ufffd surrogate"
    assert [(call.id, call.name, call.arguments) for call in reply.tool_calls] == [
        ("call_0", "f", "")
    ]
    assert reply.usage.prompt_tokens == 0


def test_a_malformed_reply_errors_that_job_end_to_end(
    one: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = raw(200, reply_with(with_call(function={"name": "find_todos", "arguments": ["x"]})))
    with ScriptedModelServer(script=[bad]) as server:
        code, report, err, _ = run_analyze(capsys, server.base_url)
    (result,) = report["results"]
    assert code == 2
    assert result["status"] == "error"
    assert result["error"]["code"] == "model_error"
    assert f"{CALL}.function.arguments is a list of 1, not a string" in result["error"]["message"]
    assert "internal_error" not in err


@pytest.mark.parametrize(
    ("listing", "expected"),
    [
        ({"data": [{"id": 5}]}, "data[0].id is an integer (5), not a string"),
        ({"data": {"id": MODEL}}, "data is an object, not a list"),
        ({"object": "list"}, "data is null, not a list"),
        ({"data": [None]}, "data[0] is null, not an object"),
    ],
)
def test_a_malformed_model_list_stops_analyze_with_a_clear_message(
    listing: Any, expected: str, one: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = json.dumps(listing).encode()
    with HostileServer(lambda request, wire: wire.reply(body)) as server:
        code, _, err, _ = run_analyze(capsys, server.base_url)
    assert code == 2
    assert f"malformed reply from {server.base_url} to GET /models: {expected}" in err
    assert "internal" not in err.lower()


# --------------------------------------------------------------------------- 4. YAML


def billion_laughs(levels: int = 9) -> str:
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    names = "abcdefghijklmnop"
    for level in range(1, levels):
        aliases = ", ".join([f"*{names[level - 1]}"] * 9)
        lines.append(f"{names[level]}: &{names[level]} [{aliases}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_remora_yaml_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "remora.yaml"
    config.write_text("server:\n  model: x\n" + billion_laughs())
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    assert main(["config"]) == 2
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert elapsed < 0.5
    assert f"{config}:8: this value expands to more than 100,000 nodes" in err
    assert "YAML aliases" in err


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("name: x\nloop: &loop\n  - 1\n  - *loop\n")
    with pytest.raises(UserInputError, match=r"agent\.yaml:2: a YAML alias refers to a value that"):
        YamlFile.load(path)


def test_ordinary_anchors_and_a_document_just_under_the_budget_load(tmp_path: Path) -> None:
    path = tmp_path / "remora.yaml"
    path.write_text(
        "defaults: &base {enabled: true, model: m}\n"
        "agents:\n  lint: *base\n  docstring:\n    <<: *base\n    enabled: false\n"
        + billion_laughs(5)  # 9**5 = 59,049 leaves
    )
    started = time.monotonic()
    loaded = YamlFile.load(path)
    assert time.monotonic() - started < 1
    assert loaded.data["agents"]["docstring"] == {"enabled": False, "model": "m"}
    assert MAX_EXPANDED_NODES > 9**5
    assert loaded.line_of(["agents", "docstring", "enabled"]) == 6


def test_duplicate_keys_are_still_found_under_an_alias(tmp_path: Path) -> None:
    path = tmp_path / "remora.yaml"
    path.write_text("base: &b\n  x: 1\n  x: 2\nother: *b\n")
    with pytest.raises(
        UserInputError, match=r"remora.yaml:3: x: duplicate key \(first at line 2\)"
    ):
        YamlFile.load(path)


def test_values_nested_too_deeply_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "remora.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(UserInputError, match=r"remora\.yaml: refused: values nested too deeply"):
        YamlFile.load(path)
