"""The benchmarks' simulated model server: Remora's scripted OpenAI-compatible server with the
CallEveryTool rule and a fixed latency, in a process of its own, plus a stats endpoint.

    python bench/scripted_server.py --latency 0.05 [--rule bundled]
    base_url=http://127.0.0.1:PORT/v1
    stats_url=http://127.0.0.1:PORT2/stats

`--capacity K` answers K requests at once (a server's batch); the others queue, and their time
in the queue is reported (`queued_s`). `--rule call-every-tool` (the default) calls every
offered tool, then submit_result;
`--rule bundled` plays a sensible model for the bundled lint and docstring agents (fix each
rule ruff lists as fixable; write the docstring inspect_docstring asks for; continue prompts
as a base model would). Completions wait the latency too.

`GET stats_url` returns JSON: chat requests answered, completion requests answered, peak
requests in flight, TCP connections accepted, when the first request arrived and the last
reply left (time.monotonic(), the clock every process on the machine shares), and this
process's CPU seconds since the last `POST stats_url/reset`. SIGTERM or SIGINT stops it.

Timestamps come from the rule, which the server calls once per chat request after sleeping
the latency: arrival = first call - latency, last reply = last call (rendering the reply takes
microseconds). Only the public API of `ScriptedModelServer` is used.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from remora.models.scripted.server import (
    CallEveryTool,
    Reply,
    ScriptedModelServer,
    tool_call,
    tool_calls,
)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class BundledAgents:
    """A sensible model for the bundled lint and docstring agents, as their tests script it."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        offered = {tool["function"]["name"] for tool in body["tools"]}
        results = {
            m["name"]: json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"
        }
        if "apply_fix" in offered and "apply_fix" not in results:
            rules = results.get("run_ruff", {}).get("fixable_rules", [])
            if rules:
                return tool_calls(*[("apply_fix", {"rule": code}) for code in rules])
        inspected = results.get("inspect_docstring", {})
        if (
            "write_docstring" in offered
            and "write_docstring" not in results
            and inspected.get("status") in ("missing", "outdated")
        ):
            return tool_call("write_docstring", {})
        return tool_call("submit_result", {"summary": "Done."})

    @staticmethod
    def complete(body: dict[str, Any]) -> str:
        prompt = body["prompt"]
        if prompt.endswith('"""'):
            names = re.findall(r"(?:def|class) ([A-Za-z_]\w*)", prompt)
            return f"\n    Summary of {names[-1] if names else 'it'}.\n    "
        # An entry line may carry the annotation ("price (float):"); sentences name the code,
        # as the docstring agent grounds them.
        parameter = re.search(r"\n +\**(\w+)(?: \([^)]*\))?:$", prompt)
        if parameter:
            return f" The {parameter[1]} to use.\n"
        if prompt.endswith("The"):
            names = re.findall(r"(?:def|class) ([A-Za-z_]\w*)", prompt)
            return f" value of {names[-1] if names else 'it'}.\n"
        return ""


class Counters:
    """Wraps the rule: counts and timestamps every chat and completion request."""

    def __init__(self, latency: float, rule: str = "call-every-tool") -> None:
        self.latency = latency
        self.bundled = BundledAgents() if rule == "bundled" else None
        self.rule: Any = self.bundled or CallEveryTool()
        self.server: ScriptedModelServer | None = None
        self.reset()

    def reset(self) -> None:
        self.chat_requests = 0
        self.completion_requests = 0
        self.first_call: float | None = None
        self.last_call: float | None = None
        self.cpu_at_reset = cpu_s()
        self.connections_at_reset = self.server.connections if self.server else 0
        self.queued_at_reset = self.server.queued_s if self.server else 0.0
        if self.server is not None:
            self.server.max_in_flight = self.server.in_flight

    def __call__(self, body: dict[str, Any]) -> Reply:
        self._stamp()
        self.chat_requests += 1
        if self.server is not None:
            # The server keeps every request body for tests; a benchmark sends 100,000s.
            self.server.requests.clear()
        return self.rule(body)  # type: ignore[no-any-return]

    def complete(self, body: dict[str, Any]) -> str:
        self._stamp()
        self.completion_requests += 1
        if self.server is not None:
            self.server.completion_requests.clear()
        return BundledAgents.complete(body)

    def _stamp(self) -> None:
        now = time.monotonic()
        if self.first_call is None:
            self.first_call = now
        self.last_call = now

    def snapshot(self) -> dict[str, Any]:
        server = self.server
        assert server is not None
        first = None if self.first_call is None else self.first_call - self.latency
        return {
            "latency_s": self.latency,
            "chat_requests": self.chat_requests,
            "completion_requests": self.completion_requests,
            "max_in_flight": server.max_in_flight,
            "in_flight": server.in_flight,
            "connections": server.connections - self.connections_at_reset,
            "first_request_at": first,
            "last_reply_at": self.last_call,
            "cpu_s": cpu_s() - self.cpu_at_reset,
            "queued_s": server.queued_s - self.queued_at_reset,
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
    parser.add_argument("--rule", choices=["call-every-tool", "bundled"], default="call-every-tool")
    parser.add_argument(
        "--capacity", type=int, help="requests answered at once (a server's batch); others queue"
    )
    args = parser.parse_args()

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    counters = Counters(args.latency, args.rule)
    server = ScriptedModelServer(
        rule=counters, latency=args.latency, capacity=args.capacity, completion=counters.complete
    )
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
