"""The parent's side of the worker processes: how many, what each is sent, and what becomes
of the jobs of one that dies."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process

from remora.config.settings import RemoraSettings
from remora.events import Events
from remora.findings.results import JobResult
from remora.jobs.job import Job, JobOptions, crashed
from remora.jobs.workers.start import WorkerStart
from remora.jobs.workers.wire import frame, open_stream, receive, send

AUTO_JOBS_PER_WORKER = 200
"""Automatic worker count: one more worker per this many pending jobs (up to the usable cores);
a worker costs about half a second of CPU to start (bench/README.md, "Worker processes")."""
STOP_GRACE_S = 10.0


class WorkerExited(Exception):
    """A worker process ended while it held jobs."""


def worker_count(setting: int, *, jobs: int, concurrency: int) -> int:
    """`setting` > 0: that many processes; 0: automatic, one per usable core, but only as many
    as the run's length repays. Never more than the concurrency (each worker holds at least
    one job) or the jobs."""
    wanted = setting if setting > 0 else min(usable_cores(), jobs // AUTO_JOBS_PER_WORKER)
    return max(1, min(wanted, concurrency, jobs))


def prefetch(share: int) -> int:
    """Jobs a worker holds beyond its share, queued in it: one that ends starts the next at
    once instead of waiting for the parent's round trip."""
    return max(2, share // 4)


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


async def run_in_workers(
    jobs: Sequence[Job],
    pending: list[int],
    *,
    workers: int,
    settings: RemoraSettings,
    root: Path,
    options: JobOptions,
    events: Events,
    finish: Callable[[int, JobResult], None],
) -> None:
    """Run `pending` in `workers` processes, `settings.concurrency` split among them; each job's
    result goes to `finish` as it arrives, an error result for the jobs of a worker that died."""
    queue = deque(pending)
    agents = list({id(agent): agent for agent, _ in jobs}.values())
    position = {id(agent): number for number, agent in enumerate(agents)}
    budget = settings.concurrency
    shares = [budget // workers + (n < budget % workers) for n in range(workers)]

    async def drive(share: int) -> None:
        start = WorkerStart(
            settings=settings,
            agents=agents,
            root=root,
            options=options,
            share=share,
            run_id=events.run_id,
            events=events.active,
            payloads=events.payloads,
            payload_limit=events.payload_limit,
        )
        ours, theirs = socket.socketpair()
        with ours, theirs:
            process = await anyio.open_process(
                [sys.executable, "-m", "remora.jobs.workers.child", str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=None,
                pass_fds=[theirs.fileno()],
                # Ctrl-C reaches the whole terminal's process group; a worker must hear of it
                # from the parent only (SIGTERM), never half-way through starting.
                start_new_session=True,
            )
            theirs.close()
            held: dict[int, Job] = {}
            ended = False
            try:
                stream, incoming = await open_stream(ours)
                await send(stream, ("start", start))
                while True:
                    sent = []
                    while len(held) < share + prefetch(share) and queue:
                        index = queue.popleft()
                        held[index] = jobs[index]
                        agent, node = jobs[index]
                        sent.append(frame(("job", index, position[id(agent)], node)))
                    if sent:
                        await stream.send(b"".join(sent))
                    if not held:
                        await send(stream, ("close",))
                        ended = True
                        break
                    message = await receive(incoming)
                    if message[0] == "event":
                        events.forward(message[1])
                    else:
                        _, index, result = message
                        result.node = held.pop(index)[1]
                        finish(index, result)
            except (EOFError, OSError, anyio.BrokenResourceError):
                ended = True
                code = await _stopped(process, ending=True)
                for index, (agent, node) in held.items():
                    why = WorkerExited(f"worker process {process.pid} exited with code {code}")
                    finish(index, crashed(agent, node, why))
            finally:
                with anyio.CancelScope(shield=True):
                    await _stopped(process, ending=ended)

    async with anyio.create_task_group() as group:
        for share in shares:
            group.start_soon(drive, share)
    while queue:  # every worker died before these were sent
        index = queue.popleft()
        agent, node = jobs[index]
        finish(index, crashed(agent, node, WorkerExited("no worker process was left to run it")))


async def _stopped(process: Process, *, ending: bool) -> int:
    """The worker's exit code once it ended. One that is `ending` (closed, or gone) is given a
    moment; else (the run was cancelled, Ctrl-C) SIGTERM at once: it cancels its jobs and
    removes their workspaces; SIGKILL after `STOP_GRACE_S`."""
    if ending:
        with anyio.move_on_after(2):
            return await process.wait()
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    with anyio.move_on_after(STOP_GRACE_S):
        return await process.wait()
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    return await process.wait()
