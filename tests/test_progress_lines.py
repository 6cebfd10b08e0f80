"""Progress when stderr is not a terminal (a CI log): a plain line at a steady pace with jobs
finished of total, per agent, and the time so far (remora/report/progress.py).

The pace and the content are driven with a fake clock and a StringIO; the timer thread with a
short interval; the whole command as a subprocess whose stderr is a pipe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from io import StringIO
from pathlib import Path

import anyio
import pytest

from remora.analysis.request import AnalysisHooks, AnalyzeRequest
from remora.analysis.run import analyze
from remora.cli.main import main
from remora.config.loading import load_settings
from remora.discovery.nodes import Node, NodeType
from remora.events import Events
from remora.findings.results import JobResult, JobStatus
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer
from remora.report import progress
from remora.report.progress import ProgressLines, duration
from tests.test_agent_test import calls_write_tests, completions

NODE = Node(
    id="pkg/mod.py::f",
    type=NodeType.FUNCTION,
    name="f",
    qualified_name="f",
    file="pkg/mod.py",
    start_line=1,
    start_column=1,
    end_line=2,
    start_byte=0,
    end_byte=20,
    text="def f():\n    pass\n",
)

THREE_FUNCTIONS = '"""Module."""\n' + "".join(
    f"\n\ndef f{n}(text):\n    # TODO: case {n}\n    return text\n" for n in range(3)
)

RULE = CallEveryTool(arguments={"replace_text": {"old": "zzz", "new": "zzz"}})
"""Every tool once, then submit_result: 3 model requests per probe job, nothing changed."""


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def result(agent: str, status: JobStatus = JobStatus.SUCCESS, *, cached: bool = False) -> JobResult:
    return JobResult(node=NODE, agent=agent, status=status, cached=cached)


def lines_of(stream: StringIO) -> list[str]:
    return stream.getvalue().splitlines()


# --- the pace ------------------------------------------------------------------------------


def test_the_first_line_comes_after_one_interval_then_one_every_interval() -> None:
    clock, out = FakeClock(), StringIO()
    lines = ProgressLines({"lint": 4}, stream=out, interval=20, clock=clock)
    printed_at = []
    for second in range(101):  # a tick every second, as if the timer woke far too often
        clock.now = 1000.0 + second
        if lines.tick():
            printed_at.append(second)
    assert printed_at == [20, 40, 60, 80, 100]
    assert len(lines_of(out)) == 5


def test_a_late_line_never_brings_the_next_one_closer_than_the_interval() -> None:
    clock, out = FakeClock(), StringIO()
    lines = ProgressLines({"lint": 4}, stream=out, interval=20, clock=clock)
    clock.now += 47  # the machine was busy: the line due at 20 s comes at 47 s
    assert lines.tick()
    clock.now += 19.5
    assert not lines.tick()  # not at 60 s, 13 s after the last one
    clock.now += 0.5
    assert lines.tick()
    assert [line.rsplit(" in ", 1)[1] for line in lines_of(out)] == ["47s", "1m 07s"]


def test_lines_go_on_when_no_job_finishes() -> None:
    """A slow job (or a model still loading) must not look like a hung run."""
    clock, out = FakeClock(), StringIO()
    lines = ProgressLines({"test": 2}, stream=out, interval=15, clock=clock)
    lines.count(result("test"))
    for _ in range(3):
        clock.now += 15
        assert lines.tick()
    assert lines_of(out) == [
        "remora: 1 of 2 jobs finished (test 1/2) in 15s",
        "remora: 1 of 2 jobs finished (test 1/2) in 30s",
        "remora: 1 of 2 jobs finished (test 1/2) in 45s",
    ]


# --- the content ---------------------------------------------------------------------------


def test_the_line_counts_jobs_per_agent_the_cache_and_what_went_wrong() -> None:
    clock, out = FakeClock(), StringIO()
    jobs = {"lint": 1045, "docstring": 1015, "test": 1010, "sample_data": 134, "unused": 0}
    lines = ProgressLines(jobs, stream=out, interval=20, clock=clock)
    for n in range(1045):
        lines.count(result("lint", cached=n < 300))
    for n in range(512):
        status = JobStatus.FAILED if n < 41 else JobStatus.ERROR if n < 43 else JobStatus.SUCCESS
        lines.count(result("docstring", status))
    clock.now += 250
    assert lines.tick()
    # An agent without jobs is left out; the others keep the order they were given in.
    assert out.getvalue() == (
        "remora: 1,557 of 3,204 jobs finished (lint 1,045/1,045, docstring 512/1,015, "
        "test 0/1,010, sample_data 0/134; 300 from the cache, 41 not done, 2 errors) "
        "in 4m 10s\n"
    )


def test_one_error_is_singular_and_nothing_is_said_of_what_did_not_happen() -> None:
    lines = ProgressLines({"lint": 2}, stream=StringIO(), clock=FakeClock())
    assert lines.line() == "remora: 0 of 2 jobs finished (lint 0/2) in 0s"
    lines.count(result("lint", JobStatus.ERROR))
    assert lines.line() == "remora: 1 of 2 jobs finished (lint 1/2; 1 error) in 0s"


def test_skipped_jobs_count_as_finished_and_the_count_never_passes_the_total() -> None:
    lines = ProgressLines({"lint": 1}, stream=StringIO(), clock=FakeClock())
    lines.count(result("lint", JobStatus.SKIPPED))
    lines.count(result("other"))  # an agent the plan did not announce: shown, never n/0
    assert lines.line() == "remora: 2 of 2 jobs finished (lint 1/1, other 1/1) in 0s"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (59.9, "59s"), (60, "1m 00s"), (250, "4m 10s"), (3599, "59m 59s"),
     (3600, "1h 00m 00s"), (3725, "1h 02m 05s"), (36000, "10h 00m 00s")],
)  # fmt: skip
def test_durations_are_whole_seconds_largest_unit_first(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_lines_are_plain_text() -> None:
    """No colour, no escape codes, no carriage returns: a CI log shows them as they are."""
    clock, out = FakeClock(), StringIO()
    lines = ProgressLines({"lint": 3, "docstring": 3}, stream=out, interval=10, clock=clock)
    for status in JobStatus:
        lines.count(result("lint", status, cached=status is JobStatus.SUCCESS))
        clock.now += 10
        lines.tick()
    text = out.getvalue()
    assert len(text.splitlines()) == len(JobStatus)
    assert text.endswith("\n") and "\r" not in text and "\x1b" not in text
    assert all(char.isprintable() for char in text.replace("\n", ""))


# --- the timer thread ----------------------------------------------------------------------


class Lines(StringIO):
    """A stream whose lines a test can wait for (written from the timer thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Semaphore(0)

    def write(self, text: str) -> int:
        written = super().write(text)
        self.written.release()
        return written


def test_the_timer_prints_on_its_own_and_nothing_after_stop() -> None:
    out = Lines()
    lines = ProgressLines({"lint": 2}, stream=out, interval=0.05).start()
    try:
        for _ in range(3):  # nothing counts meanwhile: the timer alone prints
            assert out.written.acquire(timeout=10)
    finally:
        lines.stop()
    printed = out.getvalue()
    time.sleep(0.2)  # four more intervals
    assert out.getvalue() == printed
    assert all(line.startswith("remora: 0 of 2 jobs finished") for line in printed.splitlines())


def test_no_timer_without_jobs() -> None:
    lines = ProgressLines({"lint": 0}, stream=StringIO(), interval=0.01).start()
    assert "remora-progress-lines" not in {thread.name for thread in threading.enumerate()}
    lines.stop()


# --- what the analysis tells it ------------------------------------------------------------


def test_the_analysis_announces_every_job_and_each_as_it_ends_cache_hits_first(
    project: Path, probe_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    (project / "pkg" / "shout.py").write_text(THREE_FUNCTIONS)
    request = AnalyzeRequest(paths=(Path("pkg"),))

    def run(base_url: str) -> tuple[list[dict[str, int]], list[JobResult], list[JobResult]]:
        planned: list[dict[str, int]] = []
        ended: list[JobResult] = []
        final: list[JobResult] = []
        hooks = AnalysisHooks(planned=planned.append, ended=ended.append, result=final.append)
        loaded = load_settings(None, cli={"server": {"base_url": base_url}}, cwd=project)
        anyio.run(lambda: analyze(request, loaded, hooks=hooks))
        return planned, ended, final

    with ScriptedModelServer(rule=RULE) as server:
        planned, ended, final = run(server.base_url)
        assert planned == [{"probe": 3}]
        assert len(ended) == 3 and not any(r.cached for r in ended)
        assert sorted(r.node.id for r in ended) == sorted(r.node.id for r in final)
        # One function changed: two jobs come from the cache, announced before the one run.
        (project / "pkg" / "shout.py").write_text(THREE_FUNCTIONS.replace("case 2", "case two"))
        planned, ended, _ = run(server.base_url)
    assert planned == [{"probe": 3}]
    assert [r.cached for r in ended] == [True, True, False]
    assert ended[-1].node.name == "f2"


def test_jobs_skipped_before_the_run_end_at_once_and_generated_tests_before_their_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test agent's results wait for the suite check before `result` gets them: progress
    counted from `result` would show the agent at 0 until the very end of the run."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n')
    (root / "app.py").write_text("def shout(text: str) -> str:\n    return text.upper()\n")
    (root / "broken.py").write_text(
        "import nosuchlib\n\n\ndef whisper(text: str) -> str:\n    return nosuchlib.f(text)\n"
    )
    monkeypatch.chdir(root)
    seen: list[tuple[str, ...]] = []
    events = Events()
    events.listeners.append(
        lambda record: seen.append(("check",)) if record["event"] == "suite_checked" else None
    )
    hooks = AnalysisHooks(
        planned=lambda jobs: seen.append(("planned", *(f"{a} {n}" for a, n in jobs.items()))),
        ended=lambda r: seen.append(("ended", r.node.name, r.status)),
        result=lambda r: seen.append(("result", r.node.name, r.status)),
    )
    request = AnalyzeRequest(paths=(Path("."),), agents=("test",), use_cache=False)
    completion = completions({"shout": ['"hi")']})
    with ScriptedModelServer(rule=calls_write_tests, completion=completion) as server:
        python = {"commands": {"python": sys.executable}}  # where broken.py does not import
        cli = {"server": {"base_url": server.base_url}, "sandbox": python}
        loaded = load_settings(None, cli=cli, cwd=root)
        anyio.run(lambda: analyze(request, loaded, hooks=hooks, events=events))
    skipped, success = JobStatus.SKIPPED, JobStatus.SUCCESS
    assert seen == [
        ("planned", "test 2"),
        ("ended", "whisper", skipped),  # skipped before the run: ended with the plan
        ("ended", "shout", success),  # as soon as the job finished
        ("result", "whisper", skipped),
        ("check",),  # the generated test file checked with the project's tests
        ("result", "shout", success),
    ]


# --- the command ---------------------------------------------------------------------------

PROGRESS = re.compile(r"remora: (\d+) of 3 jobs finished \(probe (\d+)/3\) in (\d+)s")


def test_a_piped_stderr_gets_progress_lines_from_the_command(
    project: Path, probe_config: Path
) -> None:
    """`python -m remora analyze` with stderr a pipe, as in CI, and FORCE_COLOR set, as many CI
    jobs set it: rich would then take the pipe for a terminal and draw its bar into the log.
    Three jobs of three model requests at 0.4 s each, one at a time: at least 3.6 s, while the
    interval is 0.3 s (set in the child process before `python -m remora` runs)."""
    (project / "pkg" / "shout.py").write_text(THREE_FUNCTIONS)
    child = (
        "import runpy, remora.report.progress as progress; progress.INTERVAL_S = 0.3; "
        "runpy.run_module('remora', run_name='__main__', alter_sys=True)"
    )
    env = {**os.environ, "FORCE_COLOR": "1"}
    env.pop("TTY_COMPATIBLE", None)
    with ScriptedModelServer(rule=RULE, latency=0.4) as server:
        done = subprocess.run(
            [sys.executable, "-c", child, "analyze", "pkg", "--format", "json",
             "--concurrency", "1", "--base-url", server.base_url],
            cwd=project, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr  # findings: the TODOs
    assert json.loads(done.stdout)["summary"]["jobs"] == 3  # stdout: the report, only it
    assert "\x1b" not in done.stderr and "\r" not in done.stderr  # no bar, no colour
    shown = [PROGRESS.fullmatch(line) for line in done.stderr.splitlines()]
    counts = [(int(m[1]), int(m[2]), int(m[3])) for m in shown if m is not None]
    assert len(counts) >= 2, done.stderr
    assert all(finished == probe for finished, probe, _ in counts)
    assert counts == sorted(counts)  # jobs and time only go up
    assert counts[-1][0] >= 1, done.stderr  # the jobs finished while lines were printed
    others = [line for line, m in zip(done.stderr.splitlines(), shown, strict=True) if m is None]
    assert not any("jobs finished" in line for line in others), others


@pytest.mark.parametrize("events", [None, "-"])
def test_no_progress_lines_in_an_event_stream_on_stderr(
    events: str | None,
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--events -` with stderr not a terminal feeds a program (`remora dashboard`), which
    would count progress lines as unreadable; without it the same run shows them."""
    monkeypatch.chdir(project)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.1)
    (project / "pkg" / "shout.py").write_text(THREE_FUNCTIONS)
    flags = ["--events", events] if events else []
    with ScriptedModelServer(rule=RULE, latency=0.15) as server:
        code = main(["analyze", "pkg", "--concurrency", "1", "--base-url", server.base_url, *flags])
    err = capsys.readouterr().err
    assert code == 1, err
    progress_lines = [line for line in err.splitlines() if PROGRESS.fullmatch(line)]
    if events is None:
        assert progress_lines, err  # 1.35 s of model time, a line every 0.1 s
    else:
        assert progress_lines == []
        events_seen = {json.loads(line)["event"] for line in err.splitlines() if line[:1] == "{"}
        assert {"run_started", "job_finished"} <= events_seen
