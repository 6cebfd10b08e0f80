"""The CI lint step on a real library: `remora analyze PKG --agents lint` with the embedded engine,
side by side with `ruff check` in the same run.

    python bench/lint_step.py            # jinja2 3.1.6 from PyPI (14,400 lines, 960 nodes), ~2 min
    python bench/lint_step.py --quick    # sqlparse 0.6.1 (4,400 lines): checks that it runs

The library's sdist is downloaded from PyPI (`pip download --no-binary :all:`) into a temporary
folder and linted there with one ruff configuration written next to its sources (`ruff.toml`,
recorded in the results): the library's own configuration finds nothing in jinja2, and a lint
step is interesting where there are problems, fixable and not. `ruff check --output-format json
--no-fix PKG` is timed (best of 3), then `python -m remora analyze PKG --agents lint --engine
local --no-cache --format json -o report.json` once, from a fresh process, model load included.

Goals (issue "Real code at the machine's limit", part 0): the lint step in <= 60 s with the
embedded engine; exit code 1 (ruff's findings), never 2; the report's findings exactly ruff's
(file, line, column, rule, each once). Also reported: the ratio to `ruff check`, jobs, model
requests and tokens (from the report's usage), how many jobs applied ruff's safe fixes. The
full run then lints once more with `--unsafe-fixes` (the model chooses among ruff's unsafe
fixes; no goal, reported for what the model path costs).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, BenchError, Report, common_arguments, fmt_s, workdir

GOAL_S = 60.0
TIMEOUT_S = 900.0
"""A lint run is killed (with its process group) after this long."""


@dataclass(frozen=True)
class Library:
    name: str
    version: str
    package: str
    """The package's folder inside the sdist, what is linted."""


FULL = Library("jinja2", "3.1.6", "src/jinja2")
QUICK = Library("sqlparse", "0.6.1", "sqlparse")
RUFF_TOML = """\
# Written by bench/lint_step.py: the rules a CI lint step commonly enables.
line-length = 88
target-version = "py310"

[lint]
select = ["E", "F", "W", "B", "UP", "I", "SIM", "C4", "RUF"]
"""

Key = tuple[str, int, int, str]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument(
        "--library", metavar="NAME==VERSION:PACKAGE_DIR", help="another sdist from PyPI"
    )
    args = parser.parse_args()
    library = QUICK if args.quick else FULL
    if args.library:
        spec, _, package = args.library.partition(":")
        name, _, version = spec.partition("==")
        library = Library(name, version, package or name)
    report = Report("lint_step", args)
    report.data["library"] = {"name": library.name, "version": library.version}
    report.data["ruff_toml"] = RUFF_TOML
    try:
        with workdir("lint-step") as work:
            measure(report, library, work, unsafe_run=not args.quick)
    except BenchError as exc:
        report.verdict(f"lint step on {library.name} {library.version}", None, str(exc))
    report.save()
    return 0


def measure(report: Report, library: Library, work: Path, *, unsafe_run: bool) -> None:
    root = download(library, work)
    (root / "ruff.toml").write_text(RUFF_TOML)
    package = root / library.package
    if not package.is_dir():
        raise BenchError(f"{library.package} is not a folder of the {library.name} sdist")
    files = sorted(package.rglob("*.py"))
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
    report.data["library"].update(files=len(files), lines=lines, package=library.package)
    print(f"{library.name} {library.version}: {len(files)} files, {lines:,} lines", flush=True)

    ruff_times, problems = [], []
    for _ in range(3):
        started = time.monotonic()
        problems = ruff_check(root, library.package)
        ruff_times.append(time.monotonic() - started)
    ruff_s = min(ruff_times)
    expected = collections.Counter(key_of(problem, root) for problem in problems)
    fixable = collections.Counter(
        (problem["fix"] or {}).get("applicability", "none") for problem in problems
    )
    report.data["ruff"] = {
        "wall_s": [round(t, 4) for t in ruff_times],
        "problems": len(problems),
        "by_fix": dict(fixable),
    }
    print(f"ruff check: {len(problems)} problems in {ruff_s:.3f} s ({dict(fixable)})", flush=True)

    run = lint(root, library.package)
    report.data["remora"] = run
    print(
        f"remora analyze: exit {run['exit_code']} in {fmt_s(run['wall_s'])}; "
        f"{run['jobs']} jobs {run['statuses']}; {run['model_requests']} model requests",
        flush=True,
    )
    if run["report"] is None:
        raise BenchError(f"remora analyze exited {run['exit_code']}: {run['stderr_tail']}")
    found = collections.Counter(
        (f["file"], f["line"], f["column"], f["rule"])
        for result in run["report"]["results"]
        for f in result["findings"]
    )
    missing, extra = expected - found, found - expected
    report.data["comparison"] = {
        "ruff": sum(expected.values()),
        "remora": sum(found.values()),
        "missing": [list(key) for key in sorted(missing)][:20],
        "extra": [list(key) for key in sorted(extra)][:20],
    }
    del run["report"]
    ratio = run["wall_s"] / ruff_s if ruff_s else float("inf")
    run["ratio_to_ruff"] = round(ratio)

    report.verdict(
        f"lint step <= {GOAL_S:.0f} s with the embedded engine",
        run["wall_s"] <= GOAL_S and not run["timed_out"],
        f"{fmt_s(run['wall_s'])} for {lines:,} lines, {run['jobs']} jobs (model load "
        f"{run['model_load_s']} s); ruff check {ruff_s:.3f} s: {ratio:,.0f}x",
    )
    report.verdict(
        "exit 1 with ruff's findings, never 2",
        run["exit_code"] == 1,
        f"exit {run['exit_code']}; jobs {run['statuses']}; errors {run['errors'][:3]}",
    )
    report.verdict(
        "findings = ruff check's (file, line, column, rule), each once",
        not missing and not extra,
        f"{sum(found.values())} reported, ruff {sum(expected.values())}; "
        f"{sum(missing.values())} missing, {sum(extra.values())} extra",
    )
    report.verdict(
        "model requests",
        None,
        f"{run['model_requests']} ({run['prompt_tokens']:,} prompt, "
        f"{run['completion_tokens']:,} generated tokens); {run['outcomes'].get('fixed', 0)} "
        f"jobs applied ruff's safe fixes, {run['jobs_asking']} asked the model",
    )
    if unsafe_run:
        unsafe = lint(root, library.package, "--unsafe-fixes")
        unsafe.pop("report", None)
        report.data["remora_unsafe_fixes"] = unsafe
        report.verdict(
            "with --unsafe-fixes (the model chooses among ruff's unsafe fixes)",
            None,
            f"{fmt_s(unsafe['wall_s'])}, exit {unsafe['exit_code']}; {unsafe['jobs_asking']} "
            f"jobs asked the model, {unsafe['model_requests']} requests "
            f"({unsafe['prompt_tokens']:,} prompt, {unsafe['completion_tokens']:,} generated "
            f"tokens, at most {unsafe['most_prompt_tokens_of_a_job']:,} in a job); the model "
            f"applied the unsafe fixes in {unsafe['unsafe_applied']} of them; "
            f"jobs {unsafe['statuses']}",
        )


def download(library: Library, work: Path) -> Path:
    """The library's sdist from PyPI, unpacked; its root folder."""
    target = work / "sdist"
    done = subprocess.run(
        [PYTHON, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
         "--dest", str(target), f"{library.name}=={library.version}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    archives = sorted(target.glob("*.tar.gz")) if target.is_dir() else []
    if done.returncode != 0 or not archives:
        raise BenchError(f"pip download failed: {(done.stderr or done.stdout).strip()[-300:]}")
    with tarfile.open(archives[0]) as archive:
        archive.extractall(work / "src", filter="data")
    (root,) = (work / "src").iterdir()
    return root


def ruff_check(root: Path, package: str) -> list[dict[str, Any]]:
    ruff = Path(PYTHON).with_name("ruff")
    command = [str(ruff) if ruff.exists() else "ruff", "check", "--output-format", "json"]
    done = subprocess.run(
        [*command, "--exit-zero", "--no-fix", package],
        cwd=root, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return list(json.loads(done.stdout))


def key_of(problem: dict[str, Any], root: Path) -> Key:
    file = Path(problem["filename"]).relative_to(root).as_posix()
    return (file, problem["location"]["row"], problem["location"]["column"], problem["code"])


def lint(root: Path, package: str, *flags: str) -> dict[str, Any]:
    """One `remora analyze PACKAGE --agents lint --engine local` in a fresh process, timed from
    outside; what its report says."""
    out = Path(tempfile.mkdtemp(prefix="report-", dir=root.parent)) / "report.json"
    command = [PYTHON, "-m", "remora", "analyze", package, "--agents", "lint", "--engine", "local",
               "--no-cache", "--format", "json", "-o", str(out), *flags]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if not key.startswith("REMORA_")}
    with tempfile.TemporaryFile("w+") as stderr:
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=stderr, start_new_session=True,
        )  # fmt: skip
        timed_out = False
        try:
            process.wait(timeout=TIMEOUT_S)
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
        report = json.loads(out.read_text())
    results = list((report or {}).get("results", []))
    statuses = collections.Counter(result["status"] for result in results)
    outcomes = collections.Counter(result["outcome"] for result in results if result["outcome"])
    usage = [result["usage"] for result in results]
    asking = [result for result in results if result["usage"]["requests"]]
    load = re.search(r"model loaded in ([\d.]+) s", said)
    return {
        "command": " ".join(command[1:]),
        "exit_code": None if timed_out else process.returncode,
        "timed_out": timed_out,
        "wall_s": round(wall, 2),
        "model_load_s": float(load[1]) if load else None,
        "jobs": len(results),
        "statuses": dict(statuses),
        "outcomes": dict(outcomes),
        "errors": sorted(
            {f"{r['error']['code']}: {r['error']['message']}"[:160] for r in results if r["error"]}
        )[:10],
        "model_requests": sum(u["requests"] for u in usage),
        "prompt_tokens": sum(u["prompt_tokens"] for u in usage),
        "completion_tokens": sum(u["completion_tokens"] for u in usage),
        "jobs_asking": len(asking),
        "most_prompt_tokens_of_a_job": max((u["prompt_tokens"] for u in usage), default=0),
        "unsafe_applied": sum(1 for r in asking if "unsafe fixes, chosen" in r["summary"]),
        "job_duration_s_median": round(
            statistics.median([r["duration_s"] for r in results]) if results else 0.0, 4
        ),
        "stderr_tail": said[-1500:],
        "report": report,
    }


if __name__ == "__main__":
    sys.exit(main())
