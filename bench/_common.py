"""What the benchmarks share: the machine's description, results files and verdicts, the
simulated model server process, synthetic projects and agents, and `remora analyze` runs
measured from outside.

Remora is driven only through its command line (`python -m remora analyze ...` in a temporary
project), so the benchmarks measure what users run and do not depend on internal classes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
RESULTS = BENCH / "results"
PYTHON = sys.executable


class BenchError(Exception):
    """The benchmark could not be run (Remora failed, a server did not start, ...)."""


# --------------------------------------------------------------------------- verdicts, results


@dataclass
class Verdict:
    goal: str
    passed: bool | None
    """None: not measured (pending, or the run failed)."""
    figure: str

    def line(self) -> str:
        status = {True: "PASS", False: "FAIL", None: "N/A "}[self.passed]
        return f"{status}  {self.goal}: {self.figure}"


def common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks that the benchmark runs"
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        help="where to write <name>.json (default bench/results, bench/results/quick with --quick)",
    )


class Report:
    """Verdicts and measurements of one benchmark run, written as bench/results/<name>.json."""

    def __init__(self, name: str, args: argparse.Namespace) -> None:
        exit_on_sigterm()
        self.name = name
        self.quick: bool = args.quick
        self.results_dir: Path = args.results_dir or (RESULTS / "quick" if args.quick else RESULTS)
        self.verdicts: list[Verdict] = []
        self.data: dict[str, Any] = {}
        self.started = time.time()
        self.monitor = MachineMonitor()
        self.machine = machine()

    def verdict(self, goal: str, passed: bool | None, figure: str) -> Verdict:
        verdict = Verdict(goal, passed, figure)
        self.verdicts.append(verdict)
        print(verdict.line(), flush=True)
        return verdict

    def save(self) -> Path:
        self.machine["during_run"] = self.monitor.stop()
        document = {
            "benchmark": self.name,
            "command": " ".join(["python", *sys.argv]),
            "quick": self.quick,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started)),
            "duration_s": round(time.time() - self.started, 2),
            "machine": self.machine,
            "verdicts": [asdict(verdict) for verdict in self.verdicts],
            **self.data,
        }
        self.results_dir.mkdir(parents=True, exist_ok=True)
        path = self.results_dir / f"{self.name}.json"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(document, indent=2) + "\n")
        os.replace(tmp, path)
        other = self.machine["during_run"]["other_processes_cores"]
        print(
            f"machine: {self.machine['cpu_model']}, {self.machine['cpus_usable']} usable cores, "
            f"Python {self.machine['python']}; other processes used {other} cores on average "
            f"during the run"
        )
        print(f"results: {path}")
        return path


def exit_on_sigterm() -> None:
    """SIGTERM (`timeout`, `kill`) raises SystemExit, so that `with` blocks and `finally`
    clauses run: the model server, `remora analyze` and temporary directories are cleaned up
    as after Ctrl-C, instead of outliving the benchmark in sessions of their own."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def machine() -> dict[str, Any]:
    """The machine and the code measured."""
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_gb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    affinity = getattr(os, "sched_getaffinity", None)
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "cpus_usable": len(affinity(0)) if affinity else os.cpu_count(),
        "memory_gb": memory_gb,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "remora_commit": git_commit(),
    }


def git_commit() -> str | None:
    """HEAD, with `+dirty` when the working tree has changes (read-only git commands)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(REPO), "--no-optional-locks", "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if status.strip() else head


class MachineMonitor:
    """How busy the machine was with other work while the benchmark ran: all CPU time spent on
    the machine (/proc/stat) minus this process's and its (waited-for) children's."""

    def __init__(self) -> None:
        self.wall = time.monotonic()
        self.busy = _machine_busy_s()
        self.own = _own_cpu_s()

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self.wall
        busy = _machine_busy_s() - self.busy
        own = _own_cpu_s() - self.own
        return {
            "wall_s": round(wall, 2),
            "benchmark_cores": round(own / wall, 2) if wall else None,
            "other_processes_cores": round(max(0.0, busy - own) / wall, 2) if wall else None,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        }


def _machine_busy_s() -> float:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(value) for value in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    # guest time is already counted in user time.
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


# --------------------------------------------------------------------------- temporary files


@contextlib.contextmanager
def workdir(name: str) -> Iterator[Path]:
    """A temporary directory, removed afterwards whatever happens."""
    path = Path(tempfile.mkdtemp(prefix=f"remora-bench-{name}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_project(root: Path, functions: int, per_file: int = 20) -> Path:
    """A project of `functions` small functions, `per_file` to a module."""
    package = root / "pkg"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    for first in range(0, functions, per_file):
        count = min(per_file, functions - first)
        body = "".join(
            f"def f{index}(x):\n    return x + {index}\n\n\n"
            for index in range(first, first + count)
        )
        (package / f"mod{first // per_file:05d}.py").write_text(body)
    return root


@dataclass(frozen=True)
class AgentSpec:
    """An agent of `tools` trivial sandboxed tools: with the scripted server's CallEveryTool
    rule and `max_turns = tools + 1`, a job is exactly `tools + 1` model turns (one call per
    tool, then submit_result on the last turn, where only submit_result is offered)."""

    name: str
    tools: int

    @property
    def turns(self) -> int:
        return self.tools + 1


TOOL_SCRIPT = """\
# /// remora-tool
# description = "Does nothing (benchmark tool)."
# ///
{"outcome": "done", "summary": "nothing to do"}
"""


def write_agent(root: Path, spec: AgentSpec, agent_format: str) -> Path:
    """The agent's YAML and tool scripts under `root/<name>/`; returns the YAML's path.

    `agent_format` "header": tools are listed by script, which declares its inputs in a
    `# /// remora-tool` header; "legacy": tools are declared in the YAML.
    """
    folder = root / spec.name
    (folder / "tools").mkdir(parents=True, exist_ok=True)
    names = [f"{spec.name}_noop{index}" for index in range(spec.tools)]
    for name in names:
        (folder / "tools" / f"{name}.pym").write_text(TOOL_SCRIPT)
    if agent_format == "header":
        tools = "".join(f"  - script: tools/{name}.pym\n" for name in names)
    else:
        tools = "".join(
            f"  - name: {name}\n    script: tools/{name}.pym\n"
            f"    description: Does nothing.\n    inputs: {{}}\n"
            for name in names
        )
    yaml = textwrap.dedent(
        f"""\
        name: {spec.name}
        description: Benchmark agent with {spec.tools} trivial tools.
        node_types: [function]
        max_turns: {spec.turns}
        system_prompt: Call every tool once, then submit_result.
        node_context: "Inspect {{{{ node.qualified_name }}}} in {{{{ node.file }}}}."
        done_when: [done]
        submit_result:
          inputs:
            summary: {{type: string, description: One sentence.}}
        """
    )
    yaml += "tools:\n" + tools if tools else "tools: []\n"
    path = folder / "agent.yaml"
    path.write_text(yaml)
    return path


AGENT_FORMATS = ("header", "legacy")


AGENTS_FILE = ".bench-agents"


def write_config(project: Path, agents: dict[str, Path]) -> None:
    """remora.yaml: the given agents; no retries (errors show instead of being retried); a
    generous timeout (a 2-core machine under load answers slowly). `run_analyze` runs only
    these agents (`--agents`, from the project's .bench-agents): bundled agents that a newer
    Remora enables by default must not join the benchmark."""
    lines = ["server:", "  retries: 0", "  timeout: 300", "agents:"]
    for name, path in agents.items():
        # Inside the project, as a project ships its own agents: a project's configuration
        # may name only files inside it.
        shutil.copytree(path.parent, project / "agents" / name, dirs_exist_ok=True)
        lines.append(f"  {name}: {{definition: agents/{name}/{path.name}}}")
    (project / "remora.yaml").write_text("\n".join(lines) + "\n")
    (project / AGENTS_FILE).write_text(",".join(agents))


# --------------------------------------------------------------------------- model server


class ModelServer:
    """bench/scripted_server.py in its own process: Remora's scripted server answering with
    `rule` (CallEveryTool by default) after `latency` seconds, and a stats endpoint."""

    def __init__(
        self,
        latency: float,
        *,
        rule: str = "call-every-tool",
        capacity: int | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        self.latency = latency
        self.rule = rule
        self.capacity = capacity
        self.start_timeout = start_timeout
        self.base_url = ""
        self.stats_url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by __exit__)

    def __enter__(self) -> ModelServer:
        command = [
            PYTHON,
            str(BENCH / "scripted_server.py"),
            *("--latency", str(self.latency), "--rule", self.rule),
            *(("--capacity", str(self.capacity)) if self.capacity else ()),
        ]
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
        )
        assert self._process.stdout is not None
        # Unbuffered reads from the pipe: a buffered reader could swallow both lines at once
        # while select() waits for more.
        fd = self._process.stdout.fileno()
        output = b""
        deadline = time.monotonic() + self.start_timeout
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"stats_url=" not in output or not output.endswith(b"\n"):
                remaining = deadline - time.monotonic()
                chunk = os.read(fd, 4096) if selector.select(max(0.0, remaining)) else None
                if not chunk:
                    why = "did not start" if chunk is None else "exited"
                    tail = self._log_tail()
                    self.__exit__(None, None, None)
                    raise BenchError(f"the model server {why}: {tail}")
                output += chunk
        for line in output.decode().splitlines():
            key, _, value = line.strip().partition("=")
            if key == "base_url":
                self.base_url = value
            elif key == "stats_url":
                self.stats_url = value
        return self

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.stats_url, timeout=30) as response:
            stats: dict[str, Any] = json.load(response)
        return stats

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.stats_url}/reset", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=30):
            pass

    def _log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-2000:].strip() or "(no output)"

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        process, self._process = self._process, None
        if process is not None:
            stop_process_group(process)
            if process.stdout is not None:
                process.stdout.close()
        self._log.close()


def stop_process_group(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process's group (it was started in a session of its own), then SIGKILL
    whatever is left after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(grace)


# --------------------------------------------------------------------------- remora analyze


@dataclass
class AnalyzeRun:
    returncode: int
    timed_out: bool
    started: float
    """time.monotonic() when the process was started (the same clock as the server's)."""
    ended: float
    cpu_s: float
    """User + system CPU of the process and the children it waited for (Monty workers)."""
    max_rss_mb: float
    """Peak RSS of the largest single process of the tree (getrusage of the waited process)."""
    tree_peak_rss_mb: float | None
    """Peak of the summed RSS of the process and its descendants, sampled; None unsampled."""
    main_peak_rss_mb: float | None
    """VmHWM of the analyze process itself, as last sampled."""
    report: dict[str, Any] | None
    stderr_tail: str
    samples: list[tuple[float, float]] = field(default_factory=list)
    """(seconds since start, tree RSS MB) samples, when sampled."""
    children_cpu_s: dict[str, float] = field(default_factory=dict)
    """Sampled CPU seconds of the descendants, by command name, when sampled."""

    @property
    def wall_s(self) -> float:
        return self.ended - self.started

    def results(self) -> list[dict[str, Any]]:
        return list((self.report or {}).get("results", []))

    def check(self, jobs: int, turns: int | None = None) -> None:
        """Raise BenchError unless all `jobs` jobs succeeded (with `turns` turns each)."""
        if self.timed_out:
            raise BenchError(f"remora analyze timed out after {self.wall_s:.0f} s")
        if self.report is None:
            raise BenchError(
                f"remora analyze exited {self.returncode} without a report: {self.stderr_tail}"
            )
        results = self.results()
        statuses: dict[str, int] = {}
        for result in results:
            statuses[result["status"]] = statuses.get(result["status"], 0) + 1
        if len(results) != jobs or statuses.get("success", 0) != jobs:
            errors = sorted(
                {
                    f"{r['error']['code']}: {r['error']['message']}"[:200]
                    for r in results
                    if r.get("error")
                }
            )
            raise BenchError(
                f"expected {jobs} successful jobs, got {len(results)} results {statuses}; "
                f"errors: {errors[:3]}; stderr: {self.stderr_tail[-500:]}"
            )
        if turns is not None:
            counts = sorted({result["turns"] for result in results})
            if counts != [turns]:
                raise BenchError(f"expected {turns} turns per job, the report says {counts}")


def run_analyze(
    project: Path,
    *,
    base_url: str,
    concurrency: int,
    timeout: float,
    sample_interval: float | None = None,
    extra_args: Sequence[str] = (),
    python_args: Sequence[str] = (),
    keep_cache: bool = False,
) -> AnalyzeRun:
    """`python -m remora analyze .` in `project`, JSON report; killed (with its whole process
    group) after `timeout` seconds. With `sample_interval`, the RSS of its process tree is
    sampled that often.

    The project's cache folder (.remora_cache, results and parsed files) is removed first unless
    `keep_cache`: every run is a first run, with Remora's default settings otherwise."""
    report_path = project / ".bench-report.json"
    report_path.unlink(missing_ok=True)
    if not keep_cache:
        shutil.rmtree(project / ".remora_cache", ignore_errors=True)
    command = [
        PYTHON,
        *python_args,
        "-m",
        "remora",
        "analyze",
        ".",
        "--format",
        "json",
        "--output",
        str(report_path),
        "--base-url",
        base_url,
        "--concurrency",
        str(concurrency),
        *extra_args,
    ]
    if (project / AGENTS_FILE).exists():
        command += ["--agents", (project / AGENTS_FILE).read_text().strip()]
    with tempfile.TemporaryFile("w+") as stderr:
        started = time.monotonic()
        process = subprocess.Popen(
            command,
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        sampler = TreeSampler(process.pid, sample_interval) if sample_interval else None
        timed_out = False
        status, usage = 0, None
        try:
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - started > timeout:
                    timed_out = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    _, status, usage = os.wait4(process.pid, 0)
                    break
                if sampler is not None:
                    sampler.sample()
                time.sleep(sample_interval or 0.02)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.wait4(process.pid, 0)
            raise
        finally:
            process.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4
            # Whatever the process left in its group (it should leave nothing) goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        ended = time.monotonic()
        stderr.seek(0)
        stderr_tail = stderr.read()[-3000:]
    report = None
    with contextlib.suppress(OSError, ValueError):
        report = json.loads(report_path.read_text())
    assert usage is not None
    return AnalyzeRun(
        returncode=process.returncode,
        timed_out=timed_out,
        started=started,
        ended=ended,
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_mb=usage.ru_maxrss / 1024,
        tree_peak_rss_mb=sampler.peak_mb if sampler else None,
        main_peak_rss_mb=sampler.main_hwm_mb if sampler else None,
        report=report,
        stderr_tail=stderr_tail.strip(),
        samples=sampler.samples if sampler else [],
        children_cpu_s=sampler.cpu_by_name() if sampler else {},
    )


class TreeSampler:
    """Samples a process and its descendants (/proc): summed RSS, and each one's CPU time."""

    def __init__(self, pid: int, interval: float) -> None:
        self.pid = pid
        self.started = time.monotonic()
        self.peak_mb = 0.0
        self.main_hwm_mb = 0.0
        self.samples: list[tuple[float, float]] = []
        self.cpu: dict[int, tuple[str, float]] = {}
        """Last seen (command name, user + system CPU seconds) of every process of the tree."""
        self._page_mb = os.sysconf("SC_PAGE_SIZE") / 1024 / 1024
        self._tick = os.sysconf("SC_CLK_TCK")
        self._interval = interval

    def sample(self) -> None:
        total = 0.0
        for pid in self._tree():
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * self._page_mb
                stat = Path(f"/proc/{pid}/stat").read_text()
                name = stat[stat.index("(") + 1 : stat.rindex(")")]
                fields = stat[stat.rindex(")") + 2 :].split()
                self.cpu[pid] = (name, (int(fields[11]) + int(fields[12])) / self._tick)
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.main_hwm_mb = max(self.main_hwm_mb, int(line.split()[1]) / 1024)
        self.peak_mb = max(self.peak_mb, total)
        self.samples.append((round(time.monotonic() - self.started, 2), round(total, 1)))

    def cpu_by_name(self) -> dict[str, float]:
        """CPU seconds of the tree's processes other than the root, by command name (as last
        sampled: a little less than the truth)."""
        totals: dict[str, float] = {}
        for pid, (name, seconds) in self.cpu.items():
            if pid != self.pid:
                totals[name] = totals.get(name, 0.0) + seconds
        return totals

    def _tree(self) -> list[int]:
        found, queue = [], [self.pid]
        while queue:
            pid = queue.pop()
            found.append(pid)
            with contextlib.suppress(OSError, ValueError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                    queue.extend(int(child) for child in children)
        return found


def ideal_wall(jobs: int, concurrency: int, turns: int, latency: float) -> float:
    return math.ceil(jobs / concurrency) * turns * latency


def fmt_s(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 100 else f"{seconds:.0f} s"


class Deadline:
    """The benchmark's own time budget."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()
