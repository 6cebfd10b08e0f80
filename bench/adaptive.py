"""Adaptive concurrency: against a server that answers only K requests at once (the others
queue, as in vLLM past its batch), `remora analyze` at a large concurrency with
`server.adaptive_concurrency` off and on.

    python bench/adaptive.py            # 1,000 jobs x 3 turns, C = 256, K = 16, L = 50 ms
    python bench/adaptive.py --quick    # 40 jobs, C = 16, K = 4, L = 10 ms

The server (bench/scripted_server.py --capacity K) reports its queue on /metrics as vLLM does;
per run: turns/s over the server's busy span, the mean time a request waited in the server's
queue, and the peak of requests in flight at the server. Goal: adaptation cuts the queue wait
at least 4-fold for at most 10 % less throughput.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from _common import BenchError, ModelServer, Report, common_arguments, run_analyze, workdir
from orchestrator import AGENT, prepare

GOAL_WAIT_CUT = 4.0
GOAL_THROUGHPUT_KEPT = 0.9


def measure(
    project: Path, server: ModelServer, jobs: int, concurrency: int, adaptive: bool
) -> dict[str, Any]:
    server.reset()
    run = run_analyze(
        project,
        base_url=server.base_url,
        concurrency=concurrency,
        timeout=900,
        extra_args=["--workers", "1", "-c", f"server.adaptive_concurrency={str(adaptive).lower()}"],
    )
    stats = server.stats()
    run.check(jobs=jobs, turns=AGENT.turns)
    busy = stats["last_reply_at"] - stats["first_request_at"]
    return {
        "adaptive": adaptive,
        "turns_per_s": stats["chat_requests"] / busy,
        "busy_span_s": busy,
        "mean_queue_wait_s": stats["queued_s"] / stats["chat_requests"],
        "max_in_flight": stats["max_in_flight"],
        "process_wall_s": run.wall_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    args = parser.parse_args()
    jobs, concurrency, capacity, latency = (
        (40, 16, 4, 0.01) if args.quick else (1000, 256, 16, 0.05)
    )
    report = Report("adaptive", args)
    report.data["setup"] = {
        "jobs": jobs,
        "concurrency": concurrency,
        "capacity": capacity,
        "latency_s": latency,
    }
    goal = (
        f"queue wait cut >= {GOAL_WAIT_CUT:g}x, throughput >= {GOAL_THROUGHPUT_KEPT:.0%} "
        f"(C={concurrency}, server capacity {capacity}, L={latency * 1000:g} ms)"
    )
    try:
        with workdir("adaptive") as work, ModelServer(latency, capacity=capacity) as server:
            project = prepare(work, jobs, server, [AGENT])
            off = measure(project, server, jobs, concurrency, adaptive=False)
            on = measure(project, server, jobs, concurrency, adaptive=True)
    except BenchError as exc:
        report.data["error"] = str(exc)
        report.verdict(goal, False, f"could not run: {exc}")
        report.save()
        return
    report.data["runs"] = [off, on]
    for run in (off, on):
        print(
            f"  adaptive {'on ' if run['adaptive'] else 'off'}: {run['turns_per_s']:.0f} turns/s, "
            f"mean queue wait {run['mean_queue_wait_s'] * 1000:.0f} ms, peak "
            f"{run['max_in_flight']} in flight at the server"
        )
    cut = off["mean_queue_wait_s"] / max(on["mean_queue_wait_s"], 1e-9)
    kept = on["turns_per_s"] / off["turns_per_s"]
    report.verdict(
        goal,
        cut >= GOAL_WAIT_CUT and kept >= GOAL_THROUGHPUT_KEPT,
        f"wait {off['mean_queue_wait_s'] * 1000:.0f} -> {on['mean_queue_wait_s'] * 1000:.0f} ms "
        f"({cut:.1f}x less), throughput {kept:.0%} of fixed, peak in flight "
        f"{off['max_in_flight']} -> {on['max_in_flight']}",
    )
    report.save()


if __name__ == "__main__":
    main()
