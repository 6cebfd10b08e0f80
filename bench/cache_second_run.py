"""Result cache, second run: `remora analyze` again on a project that did not change, and after
one module changed.

    python bench/cache_second_run.py            # 2,000 jobs x 3 turns, L = 50 ms, C = 64
    python bench/cache_second_run.py --quick    # 20 jobs, L = 10 ms: checks that it runs

The project, agent and simulated server are the orchestrator benchmark's. Run 1 starts with no
`.remora_cache`; run 2 is the same command again; before run 3 one module (20 functions) is
edited. Goals (issue "CI-grade CLI..."): run 2 sends no model request and reports the same
results; run 3 re-runs only the edited module's jobs. The wall times of the three runs and
run 1 / run 2 are reported (no goal is set for them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from _common import (
    AGENT_FORMATS,
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

AGENT = AgentSpec("bench", tools=2)
PER_FILE = 20


def prepare(work: Path, jobs: int, server: ModelServer) -> Path:
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
        project = write_project(work / "project", functions=jobs, per_file=PER_FILE)
        write_config(project, paths)
        return project
    raise BenchError("; ".join(errors))


def outcome(run: AnalyzeRun) -> dict[str, tuple[str, int]]:
    """Per node id: status and number of findings."""
    return {r["node"]["id"]: (r["status"], len(r["findings"])) for r in run.results()}


def measure(
    project: Path, server: ModelServer, jobs: int, concurrency: int, *, keep_cache: bool
) -> tuple[AnalyzeRun, dict[str, Any]]:
    server.reset()
    run = run_analyze(
        project,
        base_url=server.base_url,
        concurrency=concurrency,
        timeout=900,
        keep_cache=keep_cache,
    )
    stats = server.stats()
    if run.report is None:
        raise BenchError(f"remora analyze exited {run.returncode}: {run.stderr_tail}")
    if len(run.results()) != jobs:
        raise BenchError(f"expected {jobs} results, got {len(run.results())}")
    return run, {
        "process_wall_s": run.wall_s,
        "client_cpu_s": run.cpu_s,
        "model_requests": stats["chat_requests"],
        "cache_line": next(
            (line for line in run.stderr_tail.splitlines() if "from the cache" in line), None
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--jobs", type=int, help="N (default 2000)")
    parser.add_argument("--concurrency", type=int, default=64, help="C (default 64)")
    parser.add_argument("--latency-ms", type=float, help="L (default 50; 10 with --quick)")
    args = parser.parse_args()
    latency = (args.latency_ms or (10 if args.quick else 50)) / 1000
    jobs = args.jobs or (20 if args.quick else 2000)
    report = Report("cache_second_run", args)
    report.data["size"] = {
        "jobs": jobs,
        "turns_per_job": AGENT.turns,
        "concurrency": args.concurrency,
        "latency_s": latency,
    }
    try:
        with workdir("cache") as work, ModelServer(latency) as server:
            project = prepare(work, jobs, server)
            first_run, first = measure(project, server, jobs, args.concurrency, keep_cache=False)
            first_run.check(jobs=jobs, turns=AGENT.turns)
            second_run, second = measure(project, server, jobs, args.concurrency, keep_cache=True)
            edited = project / "pkg" / "mod00000.py"
            edited.write_text(edited.read_text().replace("return x + ", "return x - "))
            edited_jobs = min(PER_FILE, jobs)
            _, third = measure(project, server, jobs, args.concurrency, keep_cache=True)
    except BenchError as exc:
        report.data["error"] = str(exc)
        report.verdict("second run answers from the cache", False, f"could not run: {exc}")
        report.save()
        return
    report.data["runs"] = {"first": first, "second": second, "one_module_edited": third}
    speedup = first["process_wall_s"] / second["process_wall_s"]
    report.data["second_run_speedup"] = speedup
    print(
        f"{jobs} jobs: run 1 {fmt_s(first['process_wall_s'])} ({first['model_requests']} model "
        f"requests), run 2 {fmt_s(second['process_wall_s'])} ({speedup:.1f}x faster), after "
        f"editing one module {fmt_s(third['process_wall_s'])}"
    )
    same = outcome(first_run) == outcome(second_run)
    report.verdict(
        "second run: no model request, same results",
        second["model_requests"] == 0 and same,
        f"{second['model_requests']} model requests; results "
        f"{'identical' if same else 'DIFFER'}; {fmt_s(second['process_wall_s'])} vs "
        f"{fmt_s(first['process_wall_s'])} ({speedup:.1f}x)",
    )
    expected = edited_jobs * AGENT.turns
    report.verdict(
        "after editing one module only its jobs re-run",
        third["model_requests"] == expected,
        f"{third['model_requests']} model requests (its {edited_jobs} jobs x {AGENT.turns} "
        f"turns = {expected}); {fmt_s(third['process_wall_s'])}",
    )
    report.save()


if __name__ == "__main__":
    main()
    sys.exit(0)
