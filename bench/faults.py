"""Many jobs against a faulty server: every job ends, the counts add up, memory stays bounded.

    python bench/faults.py                 # 10,000 jobs at capacity 512, 5 % faults
    python bench/faults.py --jobs 500      # a smaller run

The server (a separate process: `python -m remora.models.scripted --fault-rate 0.05`) answers
5 % of requests with a fault of every kind (dropped connection, 429, 500/502/503, a reply slower
than the client's timeout, truncated or non-JSON bodies, no choices, a null message, a huge
reply). Goals (issue "Reliability and security"): every job ends with a result or an error, the
summary's counts add up to the jobs, no deadlock (the run ends within its time bound), peak RSS
bounded (<= 600 MB, the memory goal of bench/memory.py). Prints PASS/FAIL lines, exits 0 either
way, writes bench/results/faults.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

AGENT = """\
name: bench
description: One trivial tool, then submit_result.
node_types: [function]
max_turns: 3
system_prompt: Call echo, then submit_result.
node_context: "{{ node.qualified_name }}"
tools:
  - script: echo.pym
done_when: [echoed]
submit_result:
  inputs:
    summary: {type: string}
"""
TOOL = (
    '# /// remora-tool\n# description = "Echo the node name."\n# ///\n'
    '{"outcome": "echoed", "summary": node["name"]}\n'
)


def write_project(root: Path, jobs: int) -> None:
    per_file = 50
    for index in range(0, jobs, per_file):
        body = "".join(
            f"def f{n}():\n    return {n}\n\n\n" for n in range(index, min(index + per_file, jobs))
        )
        (root / "pkg" / f"m{index // per_file:04d}.py").write_text(body)
    agent = root / "agents" / "bench"
    agent.mkdir(parents=True)
    (agent / "agent.yaml").write_text(AGENT)
    (agent / "echo.pym").write_text(TOOL)
    bundled = ["docstring", "lint", "sample_data", "test"]
    (root / "remora.yaml").write_text(
        "agents:\n"
        + "".join(f"  {name}: {{enabled: false}}\n" for name in bundled)
        + "  bench: {definition: agents/bench/agent.yaml}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--fault-rate", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=1800, help="bound on the whole run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="remora-bench-faults-") as tmp:
        root = Path(tmp)
        (root / "pkg").mkdir()
        write_project(root, args.jobs)
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "remora.models.scripted",
                "--fault-rate",
                str(args.fault_rate),
                "--fault-seed",
                "1",
                "--slow-seconds",
                "4",
            ],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip().removeprefix("base_url=")
            started = time.monotonic()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "remora",
                    "analyze",
                    "pkg",
                    "--format",
                    "json",
                    "-o",
                    "report.json",
                    "--no-cache",
                    "--concurrency",
                    str(args.concurrency),
                    "--base-url",
                    base_url,
                    "-c",
                    "server.timeout=2",
                    "-c",
                    "server.retries=1",
                ],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            wall = time.monotonic() - started
            peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            report = json.loads((root / "report.json").read_text())
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=10)
    summary = report["summary"]
    statuses = summary["success"] + summary["failed"] + summary["error"] + summary["skipped"]
    ended = len(report["results"]) == args.jobs == summary["jobs"] == statuses
    consistent = all((r["error"] is None) == (r["status"] == "success") for r in report["results"])
    verdicts = [
        (
            "every job ends with a result or an error",
            ended and consistent,
            f"{summary['jobs']} jobs: {summary['success']} success, {summary['failed']} failed, "
            f"{summary['error']} error",
        ),
        ("no deadlock", True, f"ended in {wall:.0f} s (exit {done.returncode})"),
        ("peak RSS <= 600 MB", peak_mb <= 600, f"{peak_mb:.0f} MB"),
    ]
    for goal, passed, figure in verdicts:
        print(f"{'PASS' if passed else 'FAIL'}  {goal}: {figure}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "faults.json").write_text(
        json.dumps(
            {
                "jobs": args.jobs,
                "concurrency": args.concurrency,
                "fault_rate": args.fault_rate,
                "wall_s": wall,
                "peak_rss_mb": peak_mb,
                "summary": summary,
                "exit_code": done.returncode,
                "cpus": os.cpu_count(),
                "verdicts": [{"goal": g, "pass": p, "figure": f} for g, p, f in verdicts],
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
