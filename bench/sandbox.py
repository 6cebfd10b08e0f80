"""Sandbox benchmark: tool-call latency, workspace cost, and leaks under 1,000 concurrent jobs.

    python bench/sandbox.py            # full run (about a minute on 2 cores)
    python bench/sandbox.py --quick    # smoke run with tiny sizes

Goals (issue "Sandboxed tool scripts and isolated workspaces"):
  - a warm tool call (150-line script, two host calls) p50 <= 5 ms, reported against the same
    logic run as a fresh `python3` subprocess in the same run;
  - workspace setup + teardown for a job touching one file of a 10,000-file repository:
    p50 <= 20 ms;
  - 1,000 concurrent jobs x 3 tool calls leave no Monty worker, file descriptor or temporary
    directory behind.
Prints a PASS/FAIL line per goal, exits 0 either way, writes bench/results/sandbox.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from remora.agents.limits import resolve_limits
from remora.agents.toolscript import load_tool
from remora.config.settings import CommandSettings, SandboxLimits
from remora.discovery.nodes import Node, NodeType
from remora.edits.workspace import Workspace
from remora.host.context import HostContext
from remora.host.library import shared_functions
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox

RESULTS = Path(__file__).parent / "results" / "sandbox.json"
HEADER = '# /// remora-tool\n# description = "benchmark tool"\n# ///\n'


def tool_logic(lines: int) -> str:
    """About `lines` lines of ordinary Python around two host calls."""
    body = [
        "text = read_file('target.py')",
        "exists = file_exists('other.py')",
        "counts = {}",
    ]
    for i in range(lines - 6):
        body.append(f"counts['k{i % 40}'] = counts.get('k{i % 40}', 0) + len(text) % {i + 7}")
    body += [
        "words = [w for w in text.split() if w.isidentifier()]",
        "summary = {'n': len(words), 'exists': exists, 'keys': len(counts)}",
        "summary",
    ]
    return "\n".join(body) + "\n"


def subprocess_version(logic: str, root: Path) -> str:
    """The same logic as a standalone script: host calls become plain file access."""
    prelude = (
        "import os, json\n"
        f"ROOT = {str(root)!r}\n"
        "def read_file(p):\n    return open(os.path.join(ROOT, p)).read()\n"
        "def file_exists(p):\n    return os.path.exists(os.path.join(ROOT, p))\n"
    )
    lines = logic.rstrip("\n").split("\n")
    return prelude + "\n".join(lines[:-1]) + f"\nprint(json.dumps({lines[-1]}))\n"


def sample_node() -> Node:
    return Node(
        id="target.py::f",
        type=NodeType.FUNCTION,
        name="f",
        qualified_name="f",
        file="target.py",
        start_line=1,
        start_column=1,
        end_line=2,
        start_byte=0,
        end_byte=10,
        text="def f():\n    pass\n",
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def sandbox_latencies(work: Path, logic: str, calls: int) -> list[float]:
    project = work / "call"
    script = work / "bench_tool.pym"
    script.write_text(HEADER + logic)
    tool = load_tool(script)
    node = sample_node()
    limits = resolve_limits(SandboxLimits())
    latencies = []
    async with ToolSandbox() as sandbox:
        for i in range(calls + 20):
            host = shared_functions(
                HostContext(Workspace(project), node, CommandRunner(CommandSettings()))
            )
            started = time.perf_counter()
            outcome = await sandbox.run(tool, {"node": {}, "options": {}}, host, limits)
            elapsed = time.perf_counter() - started
            assert outcome.ok, outcome.error
            if i >= 20:  # the first calls start workers
                latencies.append(elapsed)
    return latencies


def bench_tool_call(work: Path, calls: int, baseline_runs: int) -> dict[str, Any]:
    project = work / "call"
    project.mkdir()
    (project / "target.py").write_text("def f():\n    return 1\n" * 50)
    logic = tool_logic(150)
    latencies = anyio.run(sandbox_latencies, work, logic, calls)
    standalone = work / "standalone.py"
    standalone.write_text(subprocess_version(logic, project))
    baseline = []
    for _ in range(baseline_runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, str(standalone)], check=True, capture_output=True)
        baseline.append(time.perf_counter() - started)
    p50 = statistics.median(latencies)
    base = statistics.median(baseline)
    return {
        "script_lines": len(logic.splitlines()),
        "calls": calls,
        "p50_ms": p50 * 1000,
        "p95_ms": percentile(latencies, 0.95) * 1000,
        "subprocess_p50_ms": base * 1000,
        "speedup_vs_subprocess": base / p50,
    }


def bench_workspace(work: Path, files: int, rounds: int) -> dict[str, Any]:
    repo = work / "repo"
    per_dir = 100
    for index in range(files):
        folder = repo / f"pkg{index // per_dir:03d}"
        if index % per_dir == 0:
            folder.mkdir(parents=True)
        (folder / f"mod{index % per_dir:03d}.py").write_text(f"x = {index}\n")
    timings = []
    for round_no in range(rounds):
        target = f"pkg{round_no % (files // per_dir):03d}/mod{round_no % per_dir:03d}.py"
        started = time.perf_counter()
        workspace = Workspace(repo)
        text = workspace.read_text(target)
        workspace.write_text(target, text + "y = 2\n")
        with workspace.command_directory() as directory:
            assert (directory / target).read_text().endswith("y = 2\n")
        workspace.diff()
        timings.append(time.perf_counter() - started)
    return {
        "repository_files": files,
        "rounds": rounds,
        "p50_ms": statistics.median(timings) * 1000,
        "p95_ms": percentile(timings, 0.95) * 1000,
    }


def resource_counts() -> dict[str, int]:
    me = os.getpid()
    workers = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().split()[3])
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == me and b"monty" in cmdline:
            workers += 1
    temp_dirs = sum(1 for p in Path(tempfile.gettempdir()).glob("remora-ws-*"))
    return {
        "monty_workers": workers,
        "open_fds": len(os.listdir("/proc/self/fd")),
        "workspace_dirs": temp_dirs,
    }


async def bench_concurrent_jobs(work: Path, jobs: int) -> dict[str, Any]:
    project = work / "jobs"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "target.py").write_text("def f():\n    return 1\n")
    script = work / "job_tool.pym"
    script.write_text(
        HEADER
        + "text = read_file('pkg/target.py')\n"
        + "write_file('pkg/target.py', text + '# touched\\n')\n"
        + "r = await run_command('true', [])\n"
        + "r['exit_code']\n"
    )
    tool = load_tool(script)
    node = sample_node()
    limits = resolve_limits(SandboxLimits())
    commands = CommandRunner(CommandSettings(allowed=["true"]))
    before = resource_counts()
    failures = 0
    started = time.perf_counter()
    async with ToolSandbox() as sandbox:

        async def job() -> None:
            nonlocal failures
            workspace = Workspace(project)
            host = shared_functions(HostContext(workspace, node, commands))
            try:
                for _ in range(3):
                    outcome = await sandbox.run(tool, {"node": {}, "options": {}}, host, limits)
                    failures += 0 if outcome.ok and outcome.value == 0 else 1
            finally:
                workspace.close()

        async with anyio.create_task_group() as group:
            for _ in range(jobs):
                group.start_soon(job)
        during = resource_counts()
    elapsed = time.perf_counter() - started
    await anyio.sleep(0.5)  # let exited workers be reaped
    after = resource_counts()
    return {
        "jobs": jobs,
        "tool_calls": jobs * 3,
        "failed_calls": failures,
        "wall_s": elapsed,
        "before": before,
        "during_pool": during,
        "after": after,
        "leaked": {key: after[key] - before[key] for key in before},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    args = parser.parse_args()
    calls, baseline_runs, files, rounds, jobs = (
        (20, 3, 500, 10, 20) if args.quick else (500, 30, 10_000, 200, 1_000)
    )
    with tempfile.TemporaryDirectory(prefix="remora-bench-") as tmp:
        work = Path(tmp)
        tool_call = bench_tool_call(work, calls, baseline_runs)
        workspace = bench_workspace(work, files, rounds)
        concurrent = anyio.run(bench_concurrent_jobs, work, jobs)
    verdicts = [
        (
            "warm tool call p50 <= 5 ms",
            tool_call["p50_ms"] <= 5.0,
            f"{tool_call['p50_ms']:.2f} ms (fresh python3: {tool_call['subprocess_p50_ms']:.1f} ms,"
            f" {tool_call['speedup_vs_subprocess']:.0f}x faster)",
        ),
        (
            "workspace setup+teardown p50 <= 20 ms",
            workspace["p50_ms"] <= 20.0,
            f"{workspace['p50_ms']:.2f} ms in a {workspace['repository_files']}-file repository",
        ),
        (
            "no leaks after concurrent jobs",
            not any(concurrent["leaked"].values()) and concurrent["failed_calls"] == 0,
            f"{concurrent['jobs']} jobs x 3 calls in {concurrent['wall_s']:.1f} s, "
            f"leaked {concurrent['leaked']}, failed calls {concurrent['failed_calls']}",
        ),
    ]
    for goal, passed, figure in verdicts:
        print(f"{'PASS' if passed else 'FAIL'}  {goal}: {figure}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": {
                    "cpus": os.cpu_count(),
                    "processor": platform.processor() or platform.machine(),
                    "python": platform.python_version(),
                },
                "quick": args.quick,
                "tool_call": tool_call,
                "workspace": workspace,
                "concurrent_jobs": concurrent,
                "verdicts": [{"goal": g, "pass": p, "figure": f} for g, p, f in verdicts],
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
