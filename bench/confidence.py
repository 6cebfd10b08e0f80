"""Does a tool-choice confidence threshold pay? Every bundled agent on the agent-quality corpus
(bench/corpus/agent_quality) with the embedded engine (the packaged Gemma 3 270M GGUF), once per
policy: confidence only recorded, then each threshold with `below: resample` and with
`below: not_done`. Measured per policy: verified successes (status `success`: a tool verified
the outcome), model requests (chat turns, resamples and tools' completions, from the JSON
report's usage) and successes per 100 requests; from the recorded run, how the jobs' lowest
confidence relates to their outcome.

    python bench/confidence.py               # thresholds 0.5 and 0.8 (about 15 minutes)
    python bench/confidence.py --quick       # lint and docstring, threshold 0.5

Goal (issue "Streaming replies and tool-choice confidence"): pick the default from this
measurement; a policy is worth making the default only if it raises verified successes per
model request without lowering verified successes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from _common import Report, common_arguments, workdir

CORPUS = Path(__file__).resolve().parent / "corpus" / "agent_quality"


def run_policy(
    folder: Path, name: str, agents: str, policy: dict[str, Any] | None
) -> dict[str, Any]:
    project = folder / name
    shutil.copytree(CORPUS, project, ignore=shutil.ignore_patterns("__pycache__"))
    if policy is not None:
        config = {"agents": {agent: {"confidence": policy} for agent in agents.split(",")}}
        (project / "remora.yaml").write_text(yaml.safe_dump(config))
    events = project / "events.jsonl"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "remora", "analyze", ".", "--engine", "local", "--no-cache",
         "--format", "json", "--agents", agents, "--events", str(events)],
        cwd=project, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if not done.stdout.strip():
        raise SystemExit(f"remora analyze failed (exit {done.returncode}): {done.stderr[-2000:]}")
    results = json.loads(done.stdout)["results"]
    chat = completions = 0
    rated: list[float] = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "model_request":
            chat += 1
        elif event["event"] == "completion":
            completions += 1
        elif event["event"] == "model_response" and event.get("confidence") is not None:
            rated.append(float(event["confidence"]))
    successes = sum(result["status"] == "success" for result in results)
    requests = sum(result["usage"]["requests"] for result in results)
    measured = {
        "policy": policy,
        "jobs": len(results),
        "successes": successes,
        "requests": requests,
        "chat_requests": chat,
        "completions": completions,
        "resamples": sum(result["resamples"] for result in results),
        "successes_per_100_requests": round(100 * successes / max(requests, 1), 1),
        "rated_replies": len(rated),
        "wall_s": round(wall, 1),
        "jobs_by_confidence": [
            [result["agent"], result["status"], result["confidence"]]
            for result in results
            if result["confidence"] is not None
        ],
    }
    print(f"{name}: {json.dumps({k: v for k, v in measured.items() if k != 'jobs_by_confidence'})}")
    return measured


def outcome_by_confidence(jobs: list[list[Any]], threshold: float) -> dict[str, Any]:
    """Of the jobs whose lowest confidence is below `threshold` and of the rest: how many
    succeeded (the recorded run, where nothing acted on confidence)."""
    low = [status for _, status, confidence in jobs if confidence < threshold]
    high = [status for _, status, confidence in jobs if confidence >= threshold]
    return {
        "below": [low.count("success"), len(low)],
        "at_or_above": [high.count("success"), len(high)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    args = parser.parse_args()
    report = Report("confidence", args)
    agents = "lint,docstring" if args.quick else "lint,docstring,sample_data,test"
    thresholds = [0.5] if args.quick else [0.5, 0.8]
    with workdir("confidence") as folder:
        runs = {"recorded": run_policy(folder, "recorded", agents, None)}
        for threshold in thresholds:
            for below in ("resample", "not_done"):
                policy = {"threshold": threshold, "below": below}
                runs[f"{below}@{threshold}"] = run_policy(
                    folder, f"{below}-{threshold}", agents, policy
                )
    recorded = runs["recorded"]
    report.data["runs"] = runs
    report.data["recorded_outcome_by_confidence"] = {
        str(t): outcome_by_confidence(recorded["jobs_by_confidence"], t)
        for t in (0.3, 0.5, 0.8, 0.95)
    }
    print(f"recorded, by confidence: {json.dumps(report.data['recorded_outcome_by_confidence'])}")
    best = max(
        (name for name in runs if name != "recorded"),
        key=lambda name: runs[name]["successes_per_100_requests"],
    )
    better = (
        runs[best]["successes"] >= recorded["successes"]
        and runs[best]["successes_per_100_requests"] > recorded["successes_per_100_requests"]
    )
    report.data["default"] = best if better else "recorded (no threshold)"
    report.verdict(
        "the default is the policy with the most verified successes per model request",
        None,
        f"recorded: {recorded['successes']}/{recorded['jobs']} successes, "
        f"{recorded['successes_per_100_requests']} per 100 requests; best threshold policy "
        f"{best}: {runs[best]['successes']}/{runs[best]['jobs']}, "
        f"{runs[best]['successes_per_100_requests']} per 100 requests -> default: "
        f"{report.data['default']}",
    )
    report.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
