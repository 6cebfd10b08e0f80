"""Orchestrator efficiency: how close `remora analyze` comes to the ideal wall time when the
model server answers after a fixed latency.

    python bench/orchestrator.py            # N = 2,000 jobs, C in {16, 64, 256}, L in {50, 200} ms
    python bench/orchestrator.py --quick    # N = 20, C = 4, L = 10 ms: checks that it runs
    python bench/orchestrator.py --profile  # also profile a run (C = 64, L = 50 ms) with cProfile

Each job is one agent on one function: the agent has two trivial sandboxed tools and
max_turns 3, and the server (bench/scripted_server.py, a separate process) calls every
offered tool and then submit_result, so every job is exactly 3 model turns (checked in the
report). With N jobs at capacity C (--concurrency C), the ideal wall time is
ceil(N / C) x 3 x L. Efficiency = ideal / measured, where measured is the analysis phase as
the server sees it: from the first request's arrival to the last reply. Start-up (interpreter,
configuration, discovery, sandbox pool) and shutdown (report) are reported separately, with
the whole process's wall time. Goal: efficiency >= 0.90 and peak requests in flight = C, for
every C and L.
"""

from __future__ import annotations

import argparse
import pstats
import sys
import time
from collections.abc import Sequence
from io import StringIO
from pathlib import Path
from typing import Any

from _common import (
    AGENT_FORMATS,
    BENCH,
    AgentSpec,
    AnalyzeRun,
    BenchError,
    Deadline,
    ModelServer,
    Report,
    common_arguments,
    fmt_s,
    ideal_wall,
    run_analyze,
    workdir,
    write_agent,
    write_config,
    write_project,
)

AGENT = AgentSpec("bench", tools=2)
GOAL_EFFICIENCY = 0.90


def prepare(work: Path, jobs: int, server: ModelServer, agents: list[AgentSpec]) -> Path:
    """The project, its remora.yaml and agents; a one-function run first picks the agent format
    this checkout of Remora reads and checks that a job takes the expected turns."""
    probe = write_project(work / "probe", functions=1)
    errors = []
    for agent_format in AGENT_FORMATS:
        paths = {a.name: write_agent(work / agent_format, a, agent_format) for a in agents}
        write_config(probe, paths)
        run = run_analyze(probe, base_url=server.base_url, concurrency=1, timeout=120)
        try:
            run.check(jobs=len(agents), turns=agents[0].turns)
        except BenchError as exc:
            errors.append(f"{agent_format} agent format: {exc}")
            continue
        project = write_project(work / "project", functions=jobs)
        write_config(project, paths)
        server.reset()
        return project
    raise BenchError("; ".join(errors))


def measure(
    project: Path,
    server: ModelServer,
    jobs: int,
    concurrency: int,
    timeout: float,
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    server.reset()
    run = run_analyze(
        project,
        base_url=server.base_url,
        concurrency=concurrency,
        timeout=timeout,
        extra_args=extra,
    )
    stats = server.stats()
    run.check(jobs=jobs, turns=AGENT.turns)
    if stats["chat_requests"] != jobs * AGENT.turns or stats["first_request_at"] is None:
        raise BenchError(
            f"the server answered {stats['chat_requests']} chat requests, expected "
            f"{jobs * AGENT.turns}"
        )
    return summarize(run, stats, jobs, concurrency, server.latency)


def summarize(
    run: AnalyzeRun, stats: dict[str, Any], jobs: int, concurrency: int, latency: float
) -> dict[str, Any]:
    turns = sum(result["turns"] for result in run.results())
    turns_per_job = turns / jobs
    first, last = stats["first_request_at"], stats["last_reply_at"]
    analysis = last - first
    ideal = ideal_wall(jobs, concurrency, round(turns_per_job), latency)
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "latency_s": latency,
        "turns_per_job": turns_per_job,
        "server_chat_requests": stats["chat_requests"],
        "ideal_s": ideal,
        "analysis_s": analysis,
        "efficiency": ideal / analysis,
        "process_wall_s": run.wall_s,
        "efficiency_whole_process": ideal / run.wall_s,
        "startup_s": first - run.started,
        "shutdown_s": run.ended - last,
        "max_in_flight": stats["max_in_flight"],
        "tcp_connections": stats["connections"],
        "client_cpu_s": run.cpu_s,
        "client_cpu_ms_per_turn": 1000 * run.cpu_s / turns,
        "server_cpu_s": stats["cpu_s"],
        "client_cores_busy": run.cpu_s / run.wall_s,
        "server_cores_busy": stats["cpu_s"] / analysis,
        "turns_per_s": turns / analysis,
    }


def profile_run(
    project: Path, server: ModelServer, concurrency: int, out: Path, extra: Sequence[str] = ()
) -> str:
    """Run analyze under cProfile (the parent process only); the top functions by own time,
    and the profile's path."""
    profile = out.with_suffix(".prof")
    run = run_analyze(
        project,
        base_url=server.base_url,
        concurrency=concurrency,
        timeout=600,
        extra_args=extra,
        python_args=[str(BENCH / "_cprofile_run.py"), str(profile)],
    )
    if not profile.exists():
        raise BenchError(f"no profile written: {run.stderr_tail}")
    text = StringIO()
    stats = pstats.Stats(str(profile), stream=text)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)
    out.write_text(text.getvalue())
    return str(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--jobs", type=int, help="N (default 2000)")
    parser.add_argument("--concurrency", type=int, nargs="+", help="C values (16 64 256)")
    parser.add_argument("--latency-ms", type=float, nargs="+", help="L values (50 200)")
    parser.add_argument("--budget", type=float, default=1500, help="seconds for the whole run")
    parser.add_argument("--remora-args", default="", help="extra `remora analyze` arguments")
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=64,
        metavar="C",
        help="also profile a run at capacity C (default 64) and the first latency",
    )
    args = parser.parse_args()
    jobs = args.jobs or (20 if args.quick else 2000)
    capacities = args.concurrency or ([4] if args.quick else [16, 64, 256])
    latencies = [ms / 1000 for ms in (args.latency_ms or ([10] if args.quick else [50, 200]))]

    report = Report("orchestrator", args)
    report.data["goal"] = {"efficiency_min": GOAL_EFFICIENCY, "max_in_flight": "= C"}
    deadline = Deadline(args.budget)
    runs: list[dict[str, Any]] = []
    report.data["runs"] = runs
    print(f"{jobs} jobs x {AGENT.turns} turns; C = {capacities}; L = {latencies} s", flush=True)
    with workdir("orchestrator") as work:
        project: Path | None = None
        for latency in latencies:
            try:
                with ModelServer(latency) as server:
                    if project is None:
                        project = prepare(work, jobs, server, [AGENT])
                    for concurrency in capacities:
                        label = f"C={concurrency}, L={latency * 1000:.0f} ms"
                        ideal = ideal_wall(jobs, concurrency, AGENT.turns, latency)
                        timeout = min(deadline.left(), 4 * ideal + 180)
                        if timeout < ideal + 30:
                            report.verdict(f"efficiency {label}", None, "skipped: out of budget")
                            continue
                        try:
                            result = measure(
                                project,
                                server,
                                jobs,
                                concurrency,
                                timeout,
                                args.remora_args.split(),
                            )
                        except BenchError as exc:
                            runs.append(
                                {
                                    "concurrency": concurrency,
                                    "latency_s": latency,
                                    "error": str(exc),
                                }
                            )
                            report.verdict(f"efficiency {label}", False, f"run failed: {exc}")
                            continue
                        runs.append(result)
                        describe(report, label, result)
                    if args.profile and project is not None and latency == latencies[0]:
                        out = report.results_dir / "orchestrator-profile.txt"
                        report.results_dir.mkdir(parents=True, exist_ok=True)
                        server.reset()
                        report.data["profile"] = profile_run(
                            project, server, args.profile, out, args.remora_args.split()
                        )
                        print(f"profile: {out}")
            except BenchError as exc:
                report.data.setdefault("errors", []).append(str(exc))
                report.verdict(f"efficiency at L={latency * 1000:.0f} ms", False, f"{exc}")
    measured = [run for run in runs if "efficiency" in run]
    if measured:
        worst = min(measured, key=lambda run: run["efficiency"])
        report.data["worst_efficiency"] = worst["efficiency"]
        report.verdict(
            f"efficiency >= {GOAL_EFFICIENCY} everywhere",
            worst["efficiency"] >= GOAL_EFFICIENCY and len(measured) == len(runs),
            f"lowest {worst['efficiency']:.2f} (C={worst['concurrency']}, "
            f"L={worst['latency_s'] * 1000:.0f} ms)",
        )
    report.save()


def describe(report: Report, label: str, run: dict[str, Any]) -> None:
    print(
        f"  {label}: analysis {fmt_s(run['analysis_s'])} vs ideal {fmt_s(run['ideal_s'])}; "
        f"process {fmt_s(run['process_wall_s'])} (start-up {fmt_s(run['startup_s'])}, "
        f"shutdown {fmt_s(run['shutdown_s'])}); {run['turns_per_s']:.0f} turns/s; client "
        f"{run['client_cores_busy']:.2f} cores, {run['client_cpu_ms_per_turn']:.2f} ms/turn; "
        f"server {run['server_cores_busy']:.2f} cores; {run['tcp_connections']} connections",
        flush=True,
    )
    report.verdict(
        f"efficiency {label} >= {GOAL_EFFICIENCY}",
        run["efficiency"] >= GOAL_EFFICIENCY,
        f"{run['efficiency']:.2f} (whole process {run['efficiency_whole_process']:.2f})",
    )
    report.verdict(
        f"peak in flight {label} = C",
        run["max_in_flight"] >= run["concurrency"],
        f"{run['max_in_flight']} of {run['concurrency']}",
    )


if __name__ == "__main__":
    start = time.monotonic()
    main()
    print(f"done in {time.monotonic() - start:.0f} s")
    sys.exit(0)
