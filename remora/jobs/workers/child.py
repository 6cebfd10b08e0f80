"""A worker process, `python -m remora.jobs.workers.child FD`: runs the jobs its parent sends over
the socket FD, in its own event loop with its own model client and sandbox pool, and sends
back each job's events (when the parent has listeners) and result.

The parent sends ("start", WorkerStart), then ("job", index, agent position, node) messages,
never more in flight than the worker's share of the concurrency, and ("close",) once it has
every result. Ctrl-C is the parent's to handle (the terminal sends it to the whole process
group); SIGTERM from the parent, or the parent going away, cancels the jobs in flight, whose
workspaces are removed as they unwind.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any

import anyio
from anyio.abc import ByteSendStream

from remora.events import Events
from remora.jobs.job import job_id, run_job
from remora.jobs.workers.start import WorkerStart
from remora.jobs.workers.wire import frame, open_stream, receive
from remora.models.http.adaptive import adapted
from remora.models.http.engine import server_model
from remora.protocol.messages import ChatModel
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox, pool_size


class Outbox:
    """Messages for the parent, sent in order by one task: events are emitted from sync code."""

    def __init__(self, stream: ByteSendStream) -> None:
        self.stream = stream
        self.pending: list[bytes] = []
        self.ready = anyio.Event()

    def put(self, message: Any) -> None:
        self.pending.append(frame(message))
        self.ready.set()

    async def run(self) -> None:
        while True:
            await self.ready.wait()
            self.ready = anyio.Event()
            await self.flush()

    async def flush(self) -> None:
        while self.pending:
            batch, self.pending = self.pending, []
            await self.stream.send(b"".join(batch))


async def serve(fd: int) -> None:
    stream, incoming = await open_stream(socket.socket(fileno=fd))
    start: WorkerStart = (await receive(incoming))[1]
    outbox = Outbox(stream)
    events = Events(run_id=start.run_id, payloads=start.payloads, payload_limit=start.payload_limit)
    if start.events:
        events.listeners.append(lambda record: outbox.put(("event", record)))
    settings = start.settings
    client = server_model(settings.server, connections=start.share)
    commands = CommandRunner(settings.sandbox.commands)
    limiter = anyio.CapacityLimiter(start.share)  # the parent sends a few more, queued here

    async def one(
        index: int, position: int, node: Any, sandbox: ToolSandbox, model: ChatModel
    ) -> None:
        agent = start.agents[position]
        async with limiter:
            result = await run_job(
                agent,
                node,
                model=model,
                sandbox=sandbox,
                commands=commands,
                settings=settings,
                root=start.root,
                options=start.options,
                events=events.for_job(job_id(agent, node), node.id, agent.name),
            )
        outbox.put(("result", index, result))

    async def stop_on_sigterm(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                scope.cancel()
                return

    try:
        async with anyio.create_task_group() as outer:
            outer.start_soon(stop_on_sigterm, outer.cancel_scope)
            outer.start_soon(outbox.run)
            pool = ToolSandbox(pool_size(start.share))
            steered = adapted(client, settings, start.share)
            async with pool as sandbox, steered as model, anyio.create_task_group() as jobs:
                while True:
                    try:
                        message = await receive(incoming)
                    except EOFError:  # the parent is gone: nobody wants the results
                        outer.cancel_scope.cancel()
                        break
                    if message[0] == "close":
                        break
                    _, index, position, node = message
                    jobs.start_soon(one, index, position, node, sandbox, model)
            await outbox.flush()
            outer.cancel_scope.cancel()
    finally:
        await client.aclose()
        await stream.aclose()


class Stopped(Exception):
    """SIGTERM before the event loop listens for it (while the worker starts: the sandbox's
    check runs then): raised where the worker is, so what it made (a temporary folder) is
    removed on the way out."""


def stopped(signum: int, frame: object) -> None:
    raise Stopped


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stopped)  # until serve's own receiver takes SIGTERM over
    code = 0
    try:
        anyio.run(serve, int(sys.argv[1]))
    except Stopped:
        code = 143
    except BaseExceptionGroup as group:  # Stopped inside a task group before it listened
        _, rest = group.split(Stopped)
        if rest is not None:
            sys.stderr.write(f"remora worker {os.getpid()}: {rest!r}\n")
        code = 143 if rest is None else 2
    except BaseException as exc:  # a crash: the parent makes its jobs errors
        sys.stderr.write(f"remora worker {os.getpid()}: {type(exc).__name__}: {exc}\n")
        code = 2
    # As the remora command does (remora.__main__.exit_now): Monty's pool threads may still be
    # winding down, and interpreter finalisation then aborts the process now and then.
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
