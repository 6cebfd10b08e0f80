"""`remora train` with the real model: does an adapter learnt from verified runs lift the agent
on code it never saw? The agent-quality corpus and the README's demo, split by file into
training and held-out parts; the embedded engine (the packaged Gemma 3 270M GGUF). Results:
bench/results/train-AGENT.json.

    python bench/train.py                      # docstring, then test (about 30 min on 2 cores)
    python bench/train.py --agents docstring   # one agent (about 15 min)
    python bench/train.py --quick              # docstring, 1 attempt, 1 epoch: checks it runs

Per agent, one `remora train AGENT corpus demo --held-out 0.25` in a copy of both: sampled
runs (rejection sampling), examples kept / attempted, training time and peak memory (from the
adapter's card), held-out loss before and after, and the agent's verified successes on the
held-out files, greedy, without and with the adapter. Goals (issue "Agents that learn"): the
adapter lifts the docstring and test agents' verified-success rate on held-out nodes by >= 20
points; ~100 examples train in <= 30 minutes on 2 cores. The base weights are converted once
before (timed apart, not counted as training).
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

from _common import Report, common_arguments, workdir

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "corpus" / "agent_quality"
DEMO = REPO / "examples" / "demo"


def convert_base() -> dict[str, Any]:
    """The embedded engine's GGUF as training weights (once per machine, then reused)."""
    code = (
        "import json, time\n"
        "from remora.config.loading import load_settings\n"
        "from remora.training.base_model import base_weights\n"
        "from remora.models.local.resolve import models_dir, resolve_model\n"
        "started = time.perf_counter(); said = []\n"
        "base = base_weights(resolve_model().path, models_dir(None) / 'training', "
        "say=said.append)\n"
        "print(json.dumps({'converted': bool(said), 'seconds': time.perf_counter() - started, "
        "'folder': str(base.folder)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=1800
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def train_agent(folder: Path, agent: str, attempts: int, epochs: int) -> dict[str, Any]:
    out = folder / "adapters" / agent
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "remora", "train", agent, "corpus", "demo", "--engine", "local",
         "--out", str(out), "--attempts", str(attempts), "--epochs", str(epochs),
         "--held-out", "0.25", "--min-examples", "5"],
        cwd=folder, capture_output=True, text=True, timeout=3 * 3600, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    said = [line for line in done.stderr.splitlines() if line.startswith("remora:")]
    print(f"{agent}: exit {done.returncode} in {wall:.0f} s", flush=True)
    for line in said:
        print(f"  {line}", flush=True)
    if done.returncode != 0:
        return {"agent": agent, "exit": done.returncode, "wall_s": round(wall, 1), "said": said}
    card = json.loads((out / "card.json").read_text())
    return {"agent": agent, "exit": 0, "wall_s": round(wall, 1), "said": said, "card": card}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument("--agents", default="docstring,test")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    agents = ["docstring"] if args.quick else args.agents.split(",")
    attempts, epochs = (1, 1) if args.quick else (args.attempts, args.epochs)
    base = convert_base()
    print(f"base weights: {json.dumps(base)}", flush=True)
    for agent in agents:  # one results file per agent: train-AGENT.json
        report = Report(f"train-{agent}", args)
        report.data["base"] = base
        with workdir("train") as folder:
            shutil.copytree(CORPUS, folder / "corpus")
            shutil.copytree(DEMO, folder / "demo")
            run = train_agent(folder, agent, attempts, epochs)
        report.data["run"] = run
        verdicts(report, agent, run, epochs)
        report.save()
    return 0


def verdicts(report: Report, agent: str, run: dict[str, Any], epochs: int) -> None:
    card = run.get("card")
    if card is None:
        report.verdict(f"{agent}: adapter trained", False, f"exit {run['exit']}: {run['said']}")
        return
    scores, data, training = card["scores"], card["data"], card["training"]
    jobs = scores["held_out_jobs"]
    before, after = scores["held_out_success_before"], scores["held_out_success_after"]
    lift = None if not jobs else 100 * (after - before) / jobs
    loss_before, loss_after = scores["held_out_loss_before"], scores["held_out_loss_after"]
    report.verdict(
        f"{agent}: held-out verified success +20 points",
        None if lift is None else lift >= 20,
        f"{before}/{jobs} -> {after}/{jobs} ({lift:+.0f} points); held-out loss "
        f"{loss_before:.3f} -> {loss_after:.3f}; {data['train_examples']} examples from "
        f"{data['verified_jobs']}/{data['jobs']} verified jobs ({data['turns']} kept turns)"
        if lift is not None and loss_before is not None and loss_after is not None
        else "no held-out jobs scored",
    )
    per_100 = training["seconds"] * 100 / max(data["train_examples"], 1) / epochs * 2
    report.verdict(
        f"{agent}: ~100 examples x 2 epochs in <= 30 min on 2 cores",
        per_100 <= 1800,
        f"{data['train_examples']} examples x {epochs} epochs in {training['seconds']:.0f} s "
        f"({per_100 / 60:.1f} min per 100 x 2), peak memory {training['peak_memory_mb']:.0f}"
        f" MB, {training['threads']} threads; the whole command {run['wall_s']:.0f} s",
    )


if __name__ == "__main__":
    sys.exit(main())
