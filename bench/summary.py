"""Rewrite the results section of bench/README.md from bench/results/*.json.

    python bench/summary.py

Only the text between `<!-- results:start -->` and `<!-- results:end -->` is replaced; the
analysis around it is written by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
START, END = "<!-- results:start -->", "<!-- results:end -->"
ORDER = [
    "agent_quality",
    "confidence",
    "train-docstring",
    "train-test",
    "orchestrator",
    "client_overhead",
    "reference_workload",
    "adaptive",
    "discovery",
    "memory",
    "sandbox",
    "cache_second_run",
]
TITLES = {
    "agent_quality": 'Agent quality with the real model (issue "Agents that do real work...")',
    "confidence": 'Tool-choice confidence (issue "Streaming replies and tool-choice...")',
    "train-docstring": 'Training an adapter: docstring (issue "Agents that learn...")',
    "train-test": 'Training an adapter: test (issue "Agents that learn...")',
    "orchestrator": "Orchestrator efficiency",
    "client_overhead": "Client overhead",
    "reference_workload": "Reference workload (lint + docstring, 23 jobs; 43 with lint per node)",
    "adaptive": "Adaptive concurrency",
    "discovery": "Discovery",
    "memory": "Memory",
    "sandbox": 'Sandbox (issue "Sandboxed tool scripts...", bench/sandbox.py)',
    "cache_second_run": 'Result cache, second run (issue "CI-grade CLI...")',
}


def status(verdict: dict[str, Any]) -> str:
    passed = verdict.get("passed", verdict.get("pass"))
    return {True: "PASS", False: "**FAIL**", None: "n/a"}[passed]


def machine_line(results: dict[str, Any]) -> str:
    machine = results.get("machine", {})
    if "cpu_model" not in machine:  # a benchmark with its own format (bench/sandbox.py)
        return f"{machine.get('cpus', '?')} CPUs, Python {machine.get('python', '?')}"
    during = machine.get("during_run", {})
    return (
        f"{machine['cpu_model']}, {machine['cpus_usable']} usable cores, "
        f"{machine.get('memory_gb')} GB, Python {machine['python']}, commit "
        f"{machine.get('remora_commit')}; load average at start "
        f"{machine.get('load_average_at_start')}, other processes used "
        f"{during.get('other_processes_cores')} cores on average during the run"
    )


def orchestrator_table(results: dict[str, Any]) -> list[str]:
    rows = [
        "",
        "| C | L | ideal | analysis (server) | efficiency | whole process | start-up | "
        "peak in flight | turns/s | client CPU/turn | client cores | connections |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in results.get("runs", []):
        if "efficiency" not in run:
            rows.append(
                f"| {run['concurrency']} | {run['latency_s'] * 1000:.0f} ms | "
                f"{run.get('error', 'failed')} |||||||||"
            )
            continue
        rows.append(
            f"| {run['concurrency']} | {run['latency_s'] * 1000:.0f} ms | "
            f"{run['ideal_s']:.2f} s | {run['analysis_s']:.2f} s | {run['efficiency']:.2f} | "
            f"{run['process_wall_s']:.2f} s ({run['efficiency_whole_process']:.2f}) | "
            f"{run['startup_s']:.2f} s | {run['max_in_flight']} | {run['turns_per_s']:.0f} | "
            f"{run['client_cpu_ms_per_turn']:.2f} ms | {run['client_cores_busy']:.2f} | "
            f"{run['tcp_connections']} |"
        )
    return rows


def section(name: str, results: dict[str, Any] | None) -> list[str]:
    lines = [f"### {TITLES.get(name, name)}", ""]
    if results is None:
        return [*lines, f"No results yet: run `python bench/{name}.py`.", ""]
    command = results.get("command", f"python bench/{name}.py")
    when = results.get("started", "")
    lines += [f"`{command}` ({when}; {machine_line(results)})", ""]
    lines += ["| | goal | measured |", "|---|---|---|"]
    for verdict in results.get("verdicts", []):
        figure = str(verdict["figure"]).replace("|", "\\|")
        lines.append(f"| {status(verdict)} | {verdict['goal']} | {figure} |")
    if name == "orchestrator":
        lines += orchestrator_table(results)
    if results.get("quick"):
        lines += ["", "(a --quick run: sizes too small for the figures to mean anything)"]
    return [*lines, ""]


def main() -> None:
    readme = BENCH / "README.md"
    text = readme.read_text()
    if START not in text or END not in text:
        sys.exit(f"{readme}: no {START} ... {END} block")
    body = []
    others = sorted(path.stem for path in (BENCH / "results").glob("*.json"))
    for name in ORDER + [name for name in others if name not in ORDER]:
        path = BENCH / "results" / f"{name}.json"
        body += section(name, json.loads(path.read_text()) if path.exists() else None)
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    readme.write_text(head + START + "\n\n" + "\n".join(body) + "\n" + END + tail)
    print(f"updated {readme}")


if __name__ == "__main__":
    main()
