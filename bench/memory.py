"""Memory: peak RSS of `remora analyze` planning and running 10,000 nodes x 3 agents against
the simulated server (L = 0).

    python bench/memory.py                 # 10,000 functions x 3 agents = 30,000 jobs
    python bench/memory.py --quick         # 40 functions x 2 agents: checks that it runs
    python bench/memory.py --tracemalloc   # also: where the memory goes (slow: ~3x)

The project is generated: 10,000 small functions, 20 to a module. Each agent has one trivial
sandboxed tool and max_turns 2 (a job = 2 model turns and 1 tool call). Measured: the peak
RSS of the `remora analyze` process (getrusage of the waited process: the largest single
process of its tree, exact), its VmHWM and the summed RSS of its process tree (Monty workers
included), sampled every 0.1 s. Goal: <= 600 MB.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from _common import (
    AGENT_FORMATS,
    BENCH,
    AgentSpec,
    AnalyzeRun,
    BenchError,
    ModelServer,
    Report,
    common_arguments,
    fmt_s,
    run_analyze,
    workdir,
    write_agent,
    write_config,
    write_project,
)

GOAL_MB = 600.0


def prepare(work: Path, functions: int, agents: list[AgentSpec], server: ModelServer) -> Path:
    probe = write_project(work / "probe", functions=1)
    errors = []
    for agent_format in AGENT_FORMATS:
        paths = {a.name: write_agent(work / agent_format, a, agent_format) for a in agents}
        write_config(probe, paths)
        run = run_analyze(probe, base_url=server.base_url, concurrency=4, timeout=120)
        try:
            run.check(jobs=len(agents), turns=agents[0].turns)
        except BenchError as exc:
            errors.append(f"{agent_format} agent format: {exc}")
            continue
        project = write_project(work / "project", functions=functions)
        write_config(project, paths)
        return project
    raise BenchError("; ".join(errors))


def traced(
    project: Path, server: ModelServer, concurrency: int, timeout: float, out: Path
) -> AnalyzeRun:
    """The same run under tracemalloc (bench/_tracemalloc_run.py), which writes the largest
    allocation sites at the traced peak to `out`."""
    return run_analyze(
        project,
        base_url=server.base_url,
        concurrency=concurrency,
        timeout=timeout,
        python_args=[str(BENCH / "_tracemalloc_run.py"), str(out)],
    )


def timed_out(
    report: Report, run: AnalyzeRun, stats: dict[str, Any], expected: int, limit: float
) -> None:
    """The run was killed at the time limit: the peak so far, and how far it got."""
    report.data["timed_out"] = {
        "after_s": run.wall_s,
        "chat_requests_answered": stats["chat_requests"],
        "chat_requests_expected": expected,
        "peak_rss_mb_so_far": run.max_rss_mb,
        "tree_peak_rss_mb_so_far": run.tree_peak_rss_mb,
        "rss_samples_s_mb": run.samples[:: max(1, len(run.samples) // 200)],
    }
    progress = f"{stats['chat_requests']} of {expected} model requests answered"
    print(f"killed after {run.wall_s:.0f} s: {progress}")
    report.verdict(
        f"peak RSS <= {GOAL_MB:.0f} MB",
        None if run.max_rss_mb <= GOAL_MB else False,
        f"not measured to the end: {run.max_rss_mb:.0f} MB so far (process tree "
        f"{run.tree_peak_rss_mb or 0:.0f} MB), {progress}",
    )
    report.verdict(f"the run finishes within --timeout {limit:.0f} s", False, progress)
    report.save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--functions", type=int, help="nodes analysed (default 10,000)")
    parser.add_argument("--agents", type=int, help="agents (default 3)")
    parser.add_argument("--tools", type=int, default=1, help="trivial tools per agent (1)")
    parser.add_argument("--concurrency", type=int, default=64, help="C (default 64)")
    parser.add_argument("--timeout", type=float, default=1500, help="seconds for the run")
    parser.add_argument("--tracemalloc", action="store_true", help="also trace allocations")
    args = parser.parse_args()
    functions = args.functions or (40 if args.quick else 10_000)
    agents = [
        AgentSpec(f"agent{i}", tools=args.tools)
        for i in range(args.agents or (2 if args.quick else 3))
    ]
    jobs = functions * len(agents)

    report = Report("memory", args)
    report.data["goal"] = {"peak_rss_mb_max": GOAL_MB}
    report.data["size"] = {
        "functions": functions,
        "agents": len(agents),
        "jobs": jobs,
        "turns_per_job": agents[0].turns,
        "concurrency": args.concurrency,
    }
    try:
        with workdir("memory") as work, ModelServer(0.0) as server:
            project = prepare(work, functions, agents, server)
            server.reset()
            run = run_analyze(
                project,
                base_url=server.base_url,
                concurrency=args.concurrency,
                timeout=args.timeout,
                sample_interval=0.1,
            )
            stats = server.stats()
            if run.timed_out:
                timed_out(report, run, stats, jobs * agents[0].turns, args.timeout)
                return
            run.check(jobs=jobs, turns=agents[0].turns)
            trace: dict[str, Any] | None = None
            if args.tracemalloc:
                out = report.results_dir / "memory-tracemalloc.txt"
                report.results_dir.mkdir(parents=True, exist_ok=True)
                traced_run = traced(project, server, args.concurrency, args.timeout * 4, out)
                trace = {"report": str(out), "returncode": traced_run.returncode}
    except BenchError as exc:
        report.data["error"] = str(exc)
        report.verdict(f"peak RSS <= {GOAL_MB:.0f} MB", False, str(exc))
        report.save()
        return
    assert run.tree_peak_rss_mb is not None and run.main_peak_rss_mb is not None
    # The samples, thinned to ~200 points: how memory grows over the run.
    step = max(1, len(run.samples) // 200)
    report.data["run"] = {
        "process_wall_s": run.wall_s,
        "analysis_s": stats["last_reply_at"] - stats["first_request_at"],
        "startup_s": stats["first_request_at"] - run.started,
        "server_chat_requests": stats["chat_requests"],
        "peak_rss_mb": run.max_rss_mb,
        "main_vm_hwm_mb": run.main_peak_rss_mb,
        "tree_peak_rss_mb": run.tree_peak_rss_mb,
        "rss_samples_s_mb": run.samples[::step],
        "tracemalloc": trace,
    }
    print(
        f"{jobs} jobs ({functions} functions x {len(agents)} agents) in "
        f"{fmt_s(run.wall_s)}: peak RSS {run.max_rss_mb:.0f} MB (analyze process; VmHWM "
        f"{run.main_peak_rss_mb:.0f} MB as sampled), process tree {run.tree_peak_rss_mb:.0f} MB "
        f"with the Monty workers"
    )
    report.verdict(
        f"peak RSS <= {GOAL_MB:.0f} MB",
        run.max_rss_mb <= GOAL_MB,
        f"{run.max_rss_mb:.0f} MB for {jobs} jobs (process tree {run.tree_peak_rss_mb:.0f} MB)",
    )
    report.save()


if __name__ == "__main__":
    main()
    sys.exit(0)
