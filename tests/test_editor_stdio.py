"""`remora server` fed raw LSP frames over stdio, as a broken or hostile editor could send them:
a request before `initialize`, a frame whose `Content-Length` is far over the cap (declared
only, or really sent). A real subprocess; the test is the editor, byte for byte."""

from __future__ import annotations

import io
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from remora.editor.server import MAX_MESSAGE_BYTES, BoundedStdin

CODE_ACTION = {
    "textDocument": {"uri": "file:///nowhere/a.py"},
    "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
    "context": {"diagnostics": []},
}


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def request(number: int, method: str, params: Any = None) -> bytes:
    return frame({"jsonrpc": "2.0", "id": number, "method": method, "params": params})


def notification(method: str, params: Any = None) -> bytes:
    return frame({"jsonrpc": "2.0", "method": method, "params": params})


class Server:
    """`python -m remora server` in `folder`; what it sends, parsed, arrives on `received`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.process = subprocess.Popen(
            [sys.executable, "-m", "remora", "server", "--stdio"],
            cwd=folder,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.received: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._log: list[bytes] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        self._logging = threading.Thread(target=self._log.extend, args=(self.process.stderr,))
        self._logging.start()

    def _read(self, stdout: IO[bytes]) -> None:
        while True:
            length = None
            while (line := stdout.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                self.received.put(None)
                return
            self.received.put(json.loads(stdout.read(length)))

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def next(self, within: float = 30) -> dict[str, Any]:
        message = self.received.get(timeout=within)
        assert message is not None, "the server closed its output"
        return message

    def initialize(self, number: int = 1) -> dict[str, Any]:
        params = {"processId": None, "rootUri": self.folder.as_uri(), "capabilities": {}}
        self.send(request(number, "initialize", params))
        return self.next()

    def ended(self) -> tuple[int, str]:
        """Once the process has ended: its exit code and its log (stderr)."""
        code = self.process.wait(timeout=30)
        self._logging.join(timeout=30)
        return code, b"".join(self._log).decode()

    def finish(self) -> tuple[int, str]:
        """`shutdown` and `exit`, as an editor ends a session: the exit code and the log."""
        self.send(request(99, "shutdown") + notification("exit"))
        assert self.next()["id"] == 99
        return self.ended()


def test_a_request_before_initialize_is_answered_server_not_initialized(tmp_path: Path) -> None:
    server = Server(tmp_path)
    server.send(request(1, "textDocument/codeAction", CODE_ACTION))
    server.send(notification("textDocument/didClose", {"textDocument": {"uri": "file:///a.py"}}))
    answer = server.next()
    assert answer["id"] == 1 and "result" not in answer
    assert answer["error"]["code"] == -32002  # ServerNotInitialized
    assert answer["error"]["message"] == (
        "textDocument/codeAction: the server is not initialized yet (send initialize first)"
    )
    assert "data" not in answer["error"] or answer["error"]["data"] is None  # no traceback
    # It still serves, in order: initialize, then the same request is answered.
    assert "capabilities" in server.initialize(2)["result"]
    server.send(notification("initialized", {}))
    server.send(request(3, "textDocument/codeAction", CODE_ACTION))
    assert server.next() == {"jsonrpc": "2.0", "id": 3, "result": []}
    code, log = server.finish()
    assert code == 0
    assert "Traceback" not in log
    assert "ignored textDocument/didClose: sent before initialize" in log


def test_a_run_node_command_with_bad_arguments_is_invalid_params_not_a_traceback(
    tmp_path: Path,
) -> None:
    """A client's malformed command is its mistake (-32602, saying what is expected), not an
    internal error carrying the server's traceback."""
    server = Server(tmp_path)
    server.initialize()
    server.send(notification("initialized", {}))
    for number, arguments in enumerate(([{"bad": 1}], [123], ["file:///a.py"]), start=2):
        params = {"command": "remora.runNode", "arguments": arguments}
        server.send(request(number, "workspace/executeCommand", params))
        answer = server.next()
        assert answer["id"] == number
        assert answer["error"] == {
            "code": -32602,
            "message": "remora.runNode takes the file's URI and the node's id",
        }
    code, _ = server.finish()
    assert code == 0


def test_a_frame_declaring_99999999999_bytes_ends_the_server_cleanly(tmp_path: Path) -> None:
    """The brief's frame: pygls would allocate the declared size (a MemoryError and a
    traceback). It is skipped unread, and when the editor closes the stream inside it the
    server ends, saying why."""
    server = Server(tmp_path)
    server.send(b"Content-Length: 99999999999\r\n\r\n{}")
    assert server.process.stdin is not None
    server.process.stdin.close()
    code, log = server.ended()
    assert code == 0
    assert "skipping a message of 99999999999 bytes from the editor: larger than the 64 MiB" in log
    assert "the editor closed the connection inside that message: ending" in log
    assert "Traceback" not in log and "MemoryError" not in log


def test_an_oversized_message_is_skipped_and_the_editor_still_served(tmp_path: Path) -> None:
    """A message really sent, one byte over the cap: skipped in pieces, said in the editor once
    it is initialized, and the messages after it are read in step."""
    server = Server(tmp_path)
    oversized = b"Content-Length: %d\r\n\r\n" % (MAX_MESSAGE_BYTES + 1)
    oversized += b" " * (MAX_MESSAGE_BYTES + 1)
    server.send(oversized)  # before initialize: logged only
    assert "capabilities" in server.initialize()["result"]
    server.send(oversized)
    server.send(b"X-Long: " + b"x" * 100_000 + b"\r\n")  # a header line over its own bound
    server.send(request(2, "textDocument/codeAction", CODE_ACTION))
    shown = server.next()
    assert shown["method"] == "window/showMessage"
    assert shown["params"]["message"] == (
        f"Remora skipped a message of {MAX_MESSAGE_BYTES + 1} bytes from the editor: larger "
        "than the 64 MiB a message may have"
    )
    assert server.next() == {"jsonrpc": "2.0", "id": 2, "result": []}
    code, log = server.finish()
    assert code == 0
    assert log.count("skipping a message of 67108865 bytes") == 2
    assert "skipped a header line longer than 4096 bytes from the editor" in log
    assert "Traceback" not in log


def test_a_frame_declaring_99999999999_bytes_then_a_request_gets_the_answer(
    tmp_path: Path,
) -> None:
    """The declared bytes never come: the next message follows at once. Skipping 99999999999
    bytes would wait for them forever (a server alive that answers nothing more); the next
    message's header, which no JSON body can hold, ends the skip there."""
    server = Server(tmp_path)
    assert "capabilities" in server.initialize()["result"]
    server.send(notification("initialized", {}))
    server.send(b"Content-Length: 99999999999\r\n\r\n")
    server.send(request(2, "textDocument/codeAction", CODE_ACTION))
    shown = server.next(within=5)
    assert shown["method"] == "window/showMessage"
    assert shown["params"]["message"] == (
        "Remora skipped a message from the editor that declared 99999999999 bytes: the next "
        "message began after 0 of them"
    )
    assert server.next(within=5) == {"jsonrpc": "2.0", "id": 2, "result": []}
    # A part of a body sent, then the next message: the same.
    server.send(b'Content-Length: 99999999999\r\n\r\n{"jsonrpc": "2.0", ')
    server.send(request(3, "textDocument/codeAction", CODE_ACTION))
    assert "after 19 of them" in server.next(within=5)["params"]["message"]
    assert server.next(within=5) == {"jsonrpc": "2.0", "id": 3, "result": []}
    code, log = server.finish()
    assert code == 0
    assert "declared 99999999999 bytes" in log and "Traceback" not in log


def test_a_frame_declaring_more_bytes_than_it_holds_does_not_stall_the_next(
    tmp_path: Path,
) -> None:
    """Under the cap too: a frame that declares 1,000 bytes and holds 2 is followed by a
    request, which is answered (the server used to wait for the 998 bytes, forever)."""
    server = Server(tmp_path)
    assert "capabilities" in server.initialize()["result"]
    server.send(notification("initialized", {}))
    server.send(b"Content-Length: 1000\r\n\r\n{}")
    server.send(request(2, "textDocument/codeAction", CODE_ACTION))
    assert "declared 1000 bytes" in server.next(within=5)["params"]["message"]
    assert server.next(within=5) == {"jsonrpc": "2.0", "id": 2, "result": []}
    code, _ = server.finish()
    assert code == 0


class Trickle:
    """stdin as a slow pipe gives it: one byte per read."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readline(self, size: int | None = -1, /) -> bytes:
        return self._data.readline(size)

    def read1(self, size: int = -1, /) -> bytes:
        return self._data.read(min(size, 1))


def test_the_next_message_is_found_in_a_short_body_however_it_arrives() -> None:
    """The reader as pygls drives it (header lines, then the body), the bytes one at a time: a
    header split between reads is still found; a body that only quotes a header (as JSON
    text, its CR LF escaped) is read whole."""
    quoting = request(3, "x", {"text": "Content-Length: 5\r\n\r\n{}"})
    assert b"Content-Length: 5\\r\\n" in quoting
    reader = BoundedStdin(Trickle(b"Content-Length: 1000\r\n\r\n{}" + request(2, "x") + quoting))

    def next_body() -> bytes:
        length = 0
        while (line := reader.readline()) != b"\r\n":
            length = int(line.split(b":")[1])
        return reader.read(length)

    assert json.loads(next_body()) == {
        "jsonrpc": "2.0",
        "method": "$/remora/refusedMessage",
        "params": {"bytes": 1000, "sent": 2},
    }
    assert json.loads(next_body())["id"] == 2
    assert json.loads(next_body())["params"]["text"] == "Content-Length: 5\r\n\r\n{}"
    assert reader.readline() == b""
