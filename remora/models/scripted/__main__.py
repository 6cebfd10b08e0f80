"""`python -m remora.models.scripted`: serve the CallEveryTool rule (optionally with injected
faults) until SIGINT or SIGTERM, printing `base_url=...` once listening."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Sequence

import anyio

from remora.models.scripted.faults import FAULTS, FaultInjector
from remora.models.scripted.replies import (
    CallEveryTool,
    Rule,
)
from remora.models.scripted.server import DEFAULT_MODEL, ScriptedModelServer


async def _run_process(server: ScriptedModelServer) -> None:
    # The signal receiver is installed before announcing the URL, so a SIGTERM sent as
    # soon as the line is read still ends in a clean exit.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            base_url = await tg.start(server.serve)
            print(f"base_url={base_url}", flush=True)
            async for _ in signals:
                break
            tg.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the CallEveryTool rule until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m remora.models.scripted",
        description="OpenAI-compatible test model server that calls every offered tool once.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument(
        "--model",
        dest="models",
        action="extend",
        nargs="+",
        metavar="NAME",
        help=f"model ids listed by GET /v1/models (default: {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="probability that a chat request gets an injected fault instead of a reply",
    )
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault sequence")
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"comma-separated faults to draw from (default: all: {','.join(FAULTS)})",
    )
    parser.add_argument(
        "--slow-seconds", type=float, default=30.0, help="delay of the 'slow' fault"
    )
    args = parser.parse_args(argv)
    rule: Rule = CallEveryTool()
    if args.fault_rate > 0:
        rule = FaultInjector(
            rule,
            rate=args.fault_rate,
            seed=args.fault_seed,
            faults=[fault for fault in args.faults.split(",") if fault],
            slow_seconds=args.slow_seconds,
        )
    server = ScriptedModelServer(
        rule=rule,
        host=args.host,
        port=args.port,
        latency=args.latency,
        models=args.models or (DEFAULT_MODEL,),
    )
    # SIGINT before the signal receiver is installed still means "stop", not a traceback.
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(_run_process, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
