"""Client overhead: model turns per second and client CPU per turn when the model answers at
once (the simulated server with L = 0), tool dispatch of a trivial sandboxed tool included.

    python bench/client_overhead.py            # 2,000 jobs x 3 turns (and 200 for the margin)
    python bench/client_overhead.py --quick    # 20 and 10 jobs: checks that it runs

The agent is the orchestrator benchmark's: two trivial sandboxed tools, max_turns 3, so a job
is 3 model turns and 2 tool calls. Turns per second = turns / the analysis phase the server
sees (first request to last reply). Client CPU is the `remora analyze` process's user + system
time and that of its Monty workers (getrusage of the waited process); per turn it is given
both as the whole run's CPU / turns and as the margin between a large and a small run
((CPU_large - CPU_small) / (turns_large - turns_small)), which leaves out start-up. The
server's CPU (a separate process on the same cores) is reported apart. Goal: >= 300 turns/s
on a 2-core machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from _common import (
    AGENT_FORMATS,
    AgentSpec,
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

AGENT = AgentSpec("bench", tools=2)
GOAL_TURNS_PER_S = 300.0


def make_projects(work: Path, sizes: list[int], server: ModelServer) -> dict[int, Path]:
    """One project per size; the agent format this checkout of Remora reads is found with a
    one-function run first."""
    probe = write_project(work / "probe", functions=1)
    errors = []
    for agent_format in AGENT_FORMATS:
        paths = {AGENT.name: write_agent(work / agent_format, AGENT, agent_format)}
        write_config(probe, paths)
        run = run_analyze(probe, base_url=server.base_url, concurrency=1, timeout=120)
        try:
            run.check(jobs=1, turns=AGENT.turns)
        except BenchError as exc:
            errors.append(f"{agent_format} agent format: {exc}")
            continue
        projects = {}
        for size in sizes:
            projects[size] = write_project(work / f"project{size}", functions=size)
            write_config(projects[size], paths)
        return projects
    raise BenchError("; ".join(errors))


def measure(
    project: Path, server: ModelServer, jobs: int, concurrency: int, extra: list[str]
) -> dict[str, Any]:
    server.reset()
    run = run_analyze(
        project,
        base_url=server.base_url,
        concurrency=concurrency,
        timeout=900,
        sample_interval=0.25,
        extra_args=extra,
    )
    stats = server.stats()
    run.check(jobs=jobs, turns=AGENT.turns)
    turns = jobs * AGENT.turns
    if stats["chat_requests"] != turns or stats["first_request_at"] is None:
        raise BenchError(f"the server answered {stats['chat_requests']} requests, not {turns}")
    analysis = stats["last_reply_at"] - stats["first_request_at"]
    workers = sum(s for name, s in run.children_cpu_s.items() if "monty" in name.lower())
    return {
        "jobs": jobs,
        "turns": turns,
        "tool_calls": jobs * AGENT.tools,
        "concurrency": concurrency,
        "analysis_s": analysis,
        "process_wall_s": run.wall_s,
        "startup_s": stats["first_request_at"] - run.started,
        "turns_per_s": turns / analysis,
        "turns_per_s_whole_process": turns / run.wall_s,
        "client_cpu_s": run.cpu_s,
        "client_cpu_ms_per_turn": 1000 * run.cpu_s / turns,
        "sandbox_workers_cpu_s_sampled": workers,
        "children_cpu_s_sampled": run.children_cpu_s,
        "server_cpu_s": stats["cpu_s"],
        "server_cpu_ms_per_turn": 1000 * stats["cpu_s"] / turns,
        "client_cores_busy": run.cpu_s / run.wall_s,
        "server_cores_busy": stats["cpu_s"] / analysis,
        "max_in_flight": stats["max_in_flight"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--jobs", type=int, help="jobs in the large run (default 2000)")
    parser.add_argument("--concurrency", type=int, default=64, help="C (default 64)")
    parser.add_argument("--remora-args", default="", help="extra `remora analyze` arguments")
    args = parser.parse_args()
    large = args.jobs or (20 if args.quick else 2000)
    small = max(1, large // 10) if not args.quick else 10

    report = Report("client_overhead", args)
    report.data["goal"] = {"turns_per_s_min": GOAL_TURNS_PER_S}
    try:
        with workdir("client") as work, ModelServer(0.0) as server:
            projects = make_projects(work, [small, large], server)
            runs = {
                size: measure(
                    projects[size], server, size, args.concurrency, args.remora_args.split()
                )
                for size in (small, large)
            }
    except BenchError as exc:
        report.data["error"] = str(exc)
        report.verdict(f"turns/s >= {GOAL_TURNS_PER_S:.0f}", False, f"could not run: {exc}")
        report.save()
        return
    big, little = runs[large], runs[small]
    margin = (
        1000 * (big["client_cpu_s"] - little["client_cpu_s"]) / (big["turns"] - little["turns"])
    )
    workers_ms = 1000 * big["sandbox_workers_cpu_s_sampled"] / big["turns"]
    report.data["runs"] = {"small": little, "large": big}
    report.data["client_cpu_ms_per_turn_marginal"] = margin
    print(
        f"{large} jobs, {big['turns']} turns, C={args.concurrency}: analysis "
        f"{fmt_s(big['analysis_s'])} (process {fmt_s(big['process_wall_s'])}); client CPU "
        f"{big['client_cpu_ms_per_turn']:.2f} ms/turn over the run, {margin:.2f} ms/turn at "
        f"the margin, of which Monty workers ~{workers_ms:.2f}; "
        f"client {big['client_cores_busy']:.2f} cores busy; server "
        f"{big['server_cpu_ms_per_turn']:.2f} ms/turn ({big['server_cores_busy']:.2f} cores)"
    )
    report.verdict(
        f"turns/s >= {GOAL_TURNS_PER_S:.0f}",
        big["turns_per_s"] >= GOAL_TURNS_PER_S,
        f"{big['turns_per_s']:.0f} turns/s ({big['turns_per_s_whole_process']:.0f} over the "
        f"whole process); client {margin:.2f} ms CPU/turn at the margin, server "
        f"{big['server_cpu_ms_per_turn']:.2f} ms CPU/turn",
    )
    report.save()


if __name__ == "__main__":
    main()
    sys.exit(0)
