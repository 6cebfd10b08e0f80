"""The benchmarks' simulated model server: Remora's scripted OpenAI-compatible server with the
CallEveryTool rule and a fixed latency, in a process of its own, plus a stats endpoint.

    python bench/scripted_server.py --latency 0.05
    base_url=http://127.0.0.1:PORT/v1
    stats_url=http://127.0.0.1:PORT2/stats

`GET stats_url` returns JSON: chat requests answered, peak requests in flight, TCP connections
accepted, when the first request arrived and the last reply left (time.monotonic(), the clock
every process on the machine shares), and this process's CPU seconds since the last
`POST stats_url/reset`. SIGTERM or SIGINT stops it.

Timestamps come from the rule, which the server calls once per chat request after sleeping
the latency: arrival = first call - latency, last reply = last call (rendering the reply takes
microseconds). Only the public API of `ScriptedModelServer` is used.
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from remora.models.scripted import CallEveryTool, Reply, ScriptedModelServer


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Counters:
    """Wraps the rule: counts and timestamps every chat request."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.rule = CallEveryTool()
        self.server: ScriptedModelServer | None = None
        self.reset()

    def reset(self) -> None:
        self.chat_requests = 0
        self.first_call: float | None = None
        self.last_call: float | None = None
        self.cpu_at_reset = cpu_s()
        self.connections_at_reset = self.server.connections if self.server else 0
        if self.server is not None:
            self.server.max_in_flight = self.server.in_flight

    def __call__(self, body: dict[str, Any]) -> Reply:
        now = time.monotonic()
        if self.first_call is None:
            self.first_call = now
        self.last_call = now
        self.chat_requests += 1
        if self.server is not None:
            # The server keeps every request body for tests; a benchmark sends 100,000s.
            self.server.requests.clear()
        return self.rule(body)

    def snapshot(self) -> dict[str, Any]:
        server = self.server
        assert server is not None
        first = None if self.first_call is None else self.first_call - self.latency
        return {
            "latency_s": self.latency,
            "chat_requests": self.chat_requests,
            "max_in_flight": server.max_in_flight,
            "in_flight": server.in_flight,
            "connections": server.connections - self.connections_at_reset,
            "first_request_at": first,
            "last_reply_at": self.last_call,
            "cpu_s": cpu_s() - self.cpu_at_reset,
            "now": time.monotonic(),
        }


def stats_handler(counters: Counters) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._reply(counters.snapshot())

        def do_POST(self) -> None:
            if self.path.rstrip("/").endswith("/reset"):
                counters.reset()
                self._reply({"reset": True})
            else:
                self.send_error(404)

        def _reply(self, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    args = parser.parse_args()

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    counters = Counters(args.latency)
    server = ScriptedModelServer(rule=counters, latency=args.latency)
    counters.server = server
    stats = ThreadingHTTPServer(("127.0.0.1", 0), stats_handler(counters))
    stats.daemon_threads = True
    threading.Thread(target=stats.serve_forever, daemon=True).start()
    with server:
        counters.reset()
        print(f"base_url={server.base_url}", flush=True)
        print(f"stats_url=http://127.0.0.1:{stats.server_address[1]}/stats", flush=True)
        while not stop.wait(0.5):
            pass
    stats.shutdown()


if __name__ == "__main__":
    main()
