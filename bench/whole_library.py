"""A whole library, every bundled agent, the embedded engine: the first run a new user meets, a
second run after editing one function, and the lint step alone beside `ruff check`.

    python bench/whole_library.py            # rich 13.9.4 from PyPI (26,600 lines, 1,156 nodes)
    python bench/whole_library.py --quick    # examples/demo's pricing module: checks that it runs

The library's sdist is downloaded from PyPI (`pip download --no-binary :all:`, as
bench/lint_step.py does, with the same `ruff.toml` written next to its sources) into a
temporary folder. Three `python -m remora analyze PKG --engine local` runs follow, each in a
fresh process with the project's Python the one running the benchmark (its virtual
environment holds the library's dependencies), stderr kept as a CI log would keep it:

1. the first run: every bundled agent (`--agents lint,docstring,test,sample_data`), the result
   cache in a fresh folder, `--events FILE --events-payloads`: wall time, jobs and outcomes per
   agent, model requests and tokens per agent, the engine's line, the progress lines on stderr,
   how many of the model's completion prompts were distinct;
2. the same command after one function was edited (a comment line added to its body), with
   the cache of run 1: wall time, jobs answered from the cache and jobs run again;
3. the lint step alone (`--agents lint --no-cache`) and `ruff check` on the same package in the
   same run (best of 3): wall time, findings compared (file, line, column, rule);
4. the lint step's default text report (what a user reads on stdout) beside `ruff check
   --output-format concise`: its lines, findings and the rest.

Goals (issue "A first run in minutes", 2 cores, embedded engine): run 1 <= 15 minutes with
progress lines in the log; run 2 <= 30 s; the lint step <= 5 s with findings = ruff's;
its report no longer than ruff's plus 15 lines. Each phase records how busy the machine was
meanwhile (other processes' cores).
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PYTHON,
    REPO,
    BenchError,
    MachineMonitor,
    Report,
    common_arguments,
    fmt_s,
    workdir,
)
from lint_step import RUFF_TOML, download, key_of, ruff_check
from lint_step import Library as Sdist

AGENTS = "lint,docstring,test,sample_data"
FIRST_GOAL_S = 15 * 60.0
SECOND_GOAL_S = 30.0
LINT_GOAL_S = 5.0
PROGRESS = re.compile(r"^remora: [\d,]+ of [\d,]+ jobs finished")


@dataclass(frozen=True)
class Library:
    name: str
    version: str | None
    """None: not from PyPI (the quick run's demo, copied from the repository)."""
    package: str
    """What is analysed, relative to the project root."""
    edit: tuple[str, str]
    """The function edited before run 2: (file relative to the project root, its name)."""


FULL = Library("rich", "13.9.4", "rich", ("rich/cells.py", "cell_len"))
QUICK = Library("demo", None, "inventory/pricing.py", ("inventory/pricing.py", "apply_discount"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument(
        "--library",
        metavar="NAME==VERSION:PATH:FILE::FUNCTION",
        help="another sdist from PyPI: what to analyse and the function to edit",
    )
    parser.add_argument("--agents", default=AGENTS, help=f"run 1's agents (default {AGENTS})")
    parser.add_argument(
        "--timeout-s", type=float, default=3 * 3600.0, help="run 1 is killed after this long"
    )
    parser.add_argument(
        "--skip", default="", help="phases left out, comma-separated: first, second, lint"
    )
    parser.add_argument(
        "--remora-args", default="", help="more arguments for every `remora analyze` run"
    )
    parser.add_argument(
        "--keep", type=Path, help="copy each run's report, events and stderr into this folder"
    )
    args = parser.parse_args()
    library = QUICK if args.quick else FULL
    if args.library:
        spec, package, where = args.library.split(":", 2)
        name, _, version = spec.partition("==")
        file, _, function = where.partition("::")
        library = Library(name, version, package, (file, function))
    report = Report("whole_library", args)
    report.data["library"] = {"name": library.name, "version": library.version}
    report.data["ruff_toml"] = RUFF_TOML
    skip = {phase.strip() for phase in args.skip.split(",") if phase.strip()}
    try:
        with workdir("whole-library") as work:
            measure(report, library, work, args, skip)
    except BenchError as exc:
        report.verdict(f"whole library ({library.name})", None, str(exc))
    report.save()
    return 0


def measure(
    report: Report, library: Library, work: Path, args: argparse.Namespace, skip: set[str]
) -> None:
    root = project(library, work)
    (root / "ruff.toml").write_text(RUFF_TOML)
    target = root / library.package
    files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
    nodes = count_nodes(root, library.package)
    report.data["library"].update(
        package=library.package, files=len(files), lines=lines, nodes=nodes
    )
    print(f"{library.name} {library.version or ''}: {len(files)} files, {lines:,} lines, {nodes:,} "
          f"nodes", flush=True)  # fmt: skip
    try:
        phases(report, library, root, work, args, skip)
    finally:
        for key in ("first_run", "second_run", "lint_step"):
            report.data.get(key, {}).pop("report", None)
        if args.keep is not None:
            for run in ("run1", "run2", "lint"):
                if (work / run).is_dir():
                    shutil.copytree(work / run, args.keep / run, dirs_exist_ok=True)


def phases(
    report: Report,
    library: Library,
    root: Path,
    work: Path,
    args: argparse.Namespace,
    skip: set[str],
) -> None:
    nodes = report.data["library"]["nodes"]
    extra = args.remora_args.split()
    cache = work / "cache"
    first: dict[str, Any] | None = None
    if "first" not in skip:
        first = analyze(root, library.package, work / "run1", timeout=args.timeout_s,
                        flags=["--agents", args.agents, "--cache-dir", str(cache),
                               "--events-payloads", "--events-payload-limit", "1000000",
                               *extra])  # fmt: skip
        report.data["first_run"] = first
        print(f"run 1: {fmt_s(first['wall_s'])}, exit {first['exit_code']}, {first['jobs']} "
              f"jobs, {len(first['progress_lines'])} progress lines", flush=True)  # fmt: skip
        report.verdict(
            f"first run of every agent <= {FIRST_GOAL_S / 60:.0f} min, progress lines in the log",
            first["wall_s"] <= FIRST_GOAL_S and bool(first["progress_lines"])
            and not first["timed_out"],
            f"{fmt_s(first['wall_s'])} for {first['jobs']:,} jobs on {nodes:,} nodes "
            f"(exit {first['exit_code']}); {len(first['progress_lines'])} progress lines"
            + (f", the last: {first['progress_lines'][-1]}" if first["timed_out"]
               and first["progress_lines"] else "") + "; "
            f"other processes used {first['machine']['other_processes_cores']} cores",
        )  # fmt: skip
        report.verdict("jobs and outcomes per agent", None, per_agent_line(first))
        report.verdict("engine", None, first["engine_line"] or "no engine line")
        report.verdict("distinct completion prompts", None, distinct_line(first))
    if "second" not in skip and first is not None and first["report_ok"]:
        edited = edit_function(root, *library.edit)
        flags = ["--agents", args.agents, "--cache-dir", str(cache), *extra]
        second = analyze(root, library.package, work / "run2", timeout=600, flags=flags)
        second["edited"] = edited
        report.data["second_run"] = second
        report.verdict(
            f"second run after editing one function <= {SECOND_GOAL_S:.0f} s",
            second["wall_s"] <= SECOND_GOAL_S and not second["timed_out"],
            f"{fmt_s(second['wall_s'])} (exit {second['exit_code']}); {second['cached']:,} of "
            f"{second['jobs']:,} jobs from the cache, {second['jobs'] - second['cached']} run "
            f"({edited}); other processes used {second['machine']['other_processes_cores']} "
            "cores",
        )
    if "lint" not in skip:
        lint_phase(report, root, library.package, work, extra)


def project(library: Library, work: Path) -> Path:
    """The project root: the sdist unpacked, or the repository's demo copied."""
    if library.version is None:
        root = work / "demo"
        shutil.copytree(REPO / "examples" / "demo", root)
        return root
    return download(Sdist(library.name, library.version, library.package), work)


def count_nodes(root: Path, package: str) -> int:
    done = subprocess.run(
        [PYTHON, "-m", "remora", "nodes", package, "--format", "json"],
        cwd=root, capture_output=True, text=True, timeout=300, check=False, env=clean_env(),
    )  # fmt: skip
    try:
        return len(json.loads(done.stdout))
    except ValueError as exc:
        raise BenchError(f"remora nodes failed: {done.stderr.strip()[-300:]}") from exc


def clean_env() -> dict[str, str]:
    """The benchmark's environment without REMORA_* settings; the project's Python is the
    one running the benchmark (its environment has the library's dependencies)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("REMORA_")}
    env["VIRTUAL_ENV"] = sys.prefix
    return env


def analyze(
    root: Path, package: str, out: Path, *, timeout: float, flags: list[str]
) -> dict[str, Any]:
    """One `remora analyze PACKAGE --engine local --format json` in a fresh process, its stderr
    a file (not a terminal: the progress comes as lines, as in CI); what it said and reported."""
    out.mkdir(parents=True, exist_ok=True)
    report_path, events_path = out / "report.json", out / "events.jsonl"
    command = [PYTHON, "-m", "remora", "analyze", package, "--engine", "local", "--format",
               "json", "-o", str(report_path), "--events", str(events_path), *flags]  # fmt: skip
    monitor = MachineMonitor()
    with (out / "stderr.txt").open("w+") as stderr:
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=root, env=clean_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
        )  # fmt: skip
        timed_out = False
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        wall = time.monotonic() - started
        stderr.seek(0)
        said = stderr.read()
    report = None
    with contextlib.suppress(OSError, ValueError):
        report = json.loads(report_path.read_text())
    measured = summarize(report, events_path)
    engine = [line for line in said.splitlines() if line.startswith("remora: engine:")]
    return {
        "command": " ".join(command[1:]).replace(str(out), "OUT"),
        "exit_code": None if timed_out else process.returncode,
        "timed_out": timed_out,
        "wall_s": round(wall, 2),
        "machine": monitor.stop(),
        "report_ok": report is not None,
        "progress_lines": [line for line in said.splitlines() if PROGRESS.match(line)],
        "engine_line": engine[-1] if engine else None,
        "stderr_tail": said[-2000:],
        **measured,
    }


def summarize(report: dict[str, Any] | None, events: Path) -> dict[str, Any]:
    """Jobs, statuses, outcomes and model usage per agent from the report; the completion
    prompts (with --events-payloads) and job durations from the events."""
    results = list((report or {}).get("results", []))
    agents: dict[str, dict[str, Any]] = {}
    for result in results:
        entry = agents.setdefault(
            result["agent"],
            {"jobs": 0, "statuses": collections.Counter(), "outcomes": collections.Counter(),
             "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached": 0,
             "jobs_asking": 0, "duration_s": 0.0},
        )  # fmt: skip
        entry["jobs"] += 1
        entry["statuses"][result["status"]] += 1
        entry["outcomes"][str(result["outcome"])] += 1
        usage = result["usage"]
        entry["requests"] += usage["requests"]
        entry["prompt_tokens"] += usage["prompt_tokens"]
        entry["completion_tokens"] += usage["completion_tokens"]
        entry["jobs_asking"] += 1 if usage["requests"] else 0
        entry["cached"] += 1 if result.get("cached") else 0
        entry["duration_s"] = round(entry["duration_s"] + (result.get("duration_s") or 0.0), 2)
    for entry in agents.values():
        entry["statuses"], entry["outcomes"] = dict(entry["statuses"]), dict(entry["outcomes"])
    prompts: dict[str, collections.Counter[str]] = {}
    spans: dict[str, list[float]] = {}
    first = None
    with contextlib.suppress(OSError):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            first = event["ts"] if first is None else first
            if event.get("event") in ("job_started", "job_finished") and not event.get("cached"):
                span = spans.setdefault(str(event["agent"]), [event["ts"], event["ts"]])
                span[0], span[1] = min(span[0], event["ts"]), max(span[1], event["ts"])
            if event.get("event") == "suite_checked":
                span = spans.setdefault("suite check", [event["ts"], event["ts"]])
                span[1] = max(span[1], event["ts"])
            payload = event.get("payload")
            if event.get("event") == "completion" and isinstance(payload, str):
                # {"prompt": ..., "text": ...} as a JSON string (whole: a large payload limit)
                with contextlib.suppress(ValueError):
                    payload = json.loads(payload).get("prompt", payload)
                digest = hashlib.sha256(str(payload).encode()).hexdigest()
                prompts.setdefault(str(event.get("agent")), collections.Counter())[digest] += 1
    everywhere: collections.Counter[str] = sum(prompts.values(), collections.Counter())
    summary = (report or {}).get("summary", {})
    if "suite check" in spans:  # from the last job's end to the check's
        ends = [end for name, (_, end) in spans.items() if name != "suite check"]
        spans["suite check"][0] = max(ends, default=spans["suite check"][0])
    return {
        # Seconds from the run's first event: when each agent's first job started and its last
        # job finished (jobs run agent after agent), and the suite check after the test jobs.
        "phases_s": {
            name: [round(start - (first or start), 1), round(end - (first or start), 1)]
            for name, (start, end) in spans.items()
        },
        "jobs": len(results),
        "cached": sum(1 for result in results if result.get("cached")),
        "agents": agents,
        "engine": summary.get("engine"),
        "findings": sum(len(result["findings"]) for result in results),
        # A drafts request counts once per draft (as the jobs count it), its prompt once.
        "completion_prompts": {
            **{
                agent: {"requests": sum(seen.values()), "distinct": len(seen)}
                for agent, seen in prompts.items()
            },
            "all agents": {"requests": sum(everywhere.values()), "distinct": len(everywhere)},
        },
        "report": report,
    }


def per_agent_line(run: dict[str, Any]) -> str:
    parts = []
    phases = run["phases_s"]
    for name, entry in run["agents"].items():
        outcomes = ", ".join(f"{count} {outcome}" for outcome, count in entry["outcomes"].items())
        start, end = phases.get(name, [0.0, 0.0])
        parts.append(
            f"{name}: {entry['jobs']} jobs ({outcomes}) in {end - start:.0f} s, "
            f"{entry['requests']} model requests from {entry['jobs_asking']} jobs"
        )
    if "suite check" in phases:
        start, end = phases["suite check"]
        parts.append(f"the generated tests checked together: {end - start:.0f} s")
    return "; ".join(parts)


def distinct_line(run: dict[str, Any]) -> str:
    prompts = run["completion_prompts"]
    if not prompts:
        return "no completion requests"
    return "; ".join(
        f"{agent}: {entry['distinct']:,} distinct of {entry['requests']:,}"
        for agent, entry in prompts.items()
    )


def edit_function(root: Path, file: str, name: str) -> str:
    """A comment line added as the first line of the function's body: its node (and the nodes
    around it: its file) change, nothing else."""
    path = root / file
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    found = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
             and node.name == name]  # fmt: skip
    if not found:
        raise BenchError(f"{file} has no function {name}")
    first = found[0].body[0]
    lines = text.split("\n")
    indent = lines[first.lineno - 1][: first.col_offset]
    lines.insert(first.lineno - 1, f"{indent}# edited by bench/whole_library.py")
    path.write_text("\n".join(lines), encoding="utf-8")
    return f"{file}::{name}, a comment line added"


def lint_phase(report: Report, root: Path, package: str, work: Path, extra: list[str]) -> None:
    ruff_times, problems = [], []
    for _ in range(3):
        started = time.monotonic()
        problems = ruff_check(root, package)
        ruff_times.append(time.monotonic() - started)
    ruff_s = min(ruff_times)
    expected = collections.Counter(key_of(problem, root) for problem in problems)
    lint = analyze(root, package, work / "lint", timeout=900,
                   flags=["--agents", "lint", "--no-cache", *extra])  # fmt: skip
    found = collections.Counter(
        (finding["file"], finding["line"], finding["column"], finding["rule"])
        for result in (lint["report"] or {}).get("results", [])
        for finding in result["findings"]
    )
    missing, extra_found = expected - found, found - expected
    lint["ruff"] = {"wall_s": [round(t, 4) for t in ruff_times], "problems": len(problems)}
    lint["comparison"] = {
        "ruff": sum(expected.values()),
        "remora": sum(found.values()),
        "missing": [list(key) for key in sorted(missing)][:20],
        "extra": [list(key) for key in sorted(extra_found)][:20],
    }
    report.data["lint_step"] = lint
    lint_agent = lint["agents"].get("lint", {})
    report.verdict(
        f"lint step <= {LINT_GOAL_S:.0f} s, findings = ruff's",
        lint["wall_s"] <= LINT_GOAL_S and not missing and not extra_found
        and lint["exit_code"] in (0, 1),
        f"{fmt_s(lint['wall_s'])} (exit {lint['exit_code']}), ruff check {ruff_s:.3f} s; "
        f"{sum(found.values())} findings, ruff {sum(expected.values())}: "
        f"{sum(missing.values())} missing, {sum(extra_found.values())} extra; jobs "
        f"{lint_agent.get('outcomes')}; other processes used "
        f"{lint['machine']['other_processes_cores']} cores",
    )  # fmt: skip
    report_lines(report, root, package, extra)


def report_lines(report: Report, root: Path, package: str, extra: list[str]) -> None:
    """The default text report of the lint step (stdout, as a user reads it) beside ruff's own
    concise output: findings as ruff prints them, then at most 15 lines more."""
    ruff = Path(PYTHON).with_name("ruff")
    ruff_out = subprocess.run(
        [str(ruff) if ruff.exists() else "ruff", "check", "--output-format", "concise",
         "--no-fix", package],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    ).stdout.splitlines()  # fmt: skip
    done = subprocess.run(
        [PYTHON, "-m", "remora", "analyze", package, "--agents", "lint", "--engine", "local",
         "--no-cache", *extra],
        cwd=root, capture_output=True, text=True, timeout=900, env=clean_env(), check=False,
    )  # fmt: skip
    ours = done.stdout.splitlines()
    ruff_findings = [line for line in ruff_out if re.match(r"^\S+:\d+:\d+: ", line)]
    our_findings = [line for line in ours if re.match(r"^\S+:\d+:\d+: ", line)]
    report.data["report_lines"] = {
        "remora": len(ours),
        "remora_findings": len(our_findings),
        "ruff": len(ruff_out),
        "ruff_findings": len(ruff_findings),
        "remora_tail": ours[len(our_findings) :][:40],
        "exit_code": done.returncode,
    }
    report.verdict(
        "default text report of the lint step <= ruff's output + 15 lines",
        len(ours) <= len(ruff_out) + 15 and len(our_findings) == len(ruff_findings),
        f"{len(ours)} lines ({len(our_findings)} findings + {len(ours) - len(our_findings)} "
        f"more); ruff check --output-format concise: {len(ruff_out)} lines "
        f"({len(ruff_findings)} findings)",
    )


if __name__ == "__main__":
    sys.exit(main())
