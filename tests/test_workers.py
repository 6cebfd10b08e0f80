"""Worker processes (`--workers N`): the same report as one process, every job accounted for when
a worker dies, job events forwarded to the parent's stream, and the automatic count."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.jobs.workers.pool import AUTO_JOBS_PER_WORKER, prefetch, worker_count
from remora.models.scripted.server import Reply, ScriptedModelServer, tool_call, tool_calls


def bundled_agents(body: dict[str, Any]) -> Reply:
    """A sensible model for the bundled lint and docstring agents."""
    offered = {tool["function"]["name"] for tool in body["tools"]}
    results = {m["name"]: json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"}
    rules = results.get("run_ruff", {}).get("fixable_rules", [])
    if "apply_fix" in offered and "apply_fix" not in results and rules:
        return tool_calls(*[("apply_fix", {"rule": code}) for code in rules])
    status = results.get("inspect_docstring", {}).get("status")
    if (
        "write_docstring" in offered
        and "write_docstring" not in results
        and status
        in (
            "missing",
            "outdated",
        )
    ):
        return tool_call("write_docstring", {})
    return tool_call("submit_result", {"summary": "Done."})


def continuation(body: dict[str, Any]) -> str:
    """As a base model continues a docstring prompt."""
    prompt = body["prompt"]
    if prompt.endswith('"""'):
        name = re.findall(r"(?:def|class) (\w+)", prompt)[-1]
        return f"\n    Summary of {name}.\n    "
    if parameter := re.search(r"\n +\**(\w+)(?: \([^)]*\))?:$", prompt):
        return f" The {parameter[1]} to use.\n"
    name = re.findall(r"(?:def|class) (\w+)", prompt)[-1]
    return f" value of {name}.\n" if prompt.endswith("The") else ""


def analyze(
    capsys: pytest.CaptureFixture[str], server: ScriptedModelServer, *flags: str
) -> tuple[int, dict[str, Any]]:
    code = main(
        ["analyze", ".", "--format", "json", "--no-cache", "--base-url", server.base_url, *flags]
    )
    return code, json.loads(capsys.readouterr().out)


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k != "duration_s"}
    if isinstance(value, list):
        return [without_timings(item) for item in value]
    return value


def test_reports_are_identical_with_one_and_several_workers(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every draft written, however (un)grounded: this test is about workers, not drafts.
    flags = ["--agents", "lint,docstring", "--concurrency", "8"]
    flags += ["-c", "agents.docstring.options.min_confidence=0"]
    flags += ["-c", "agents.docstring.options.drafts=write"]
    with ScriptedModelServer(rule=bundled_agents, completion=continuation) as server:
        one_code, one = analyze(capsys, server, *flags, "--workers", "1")
        three_code, three = analyze(capsys, server, *flags, "--workers", "3")
    assert one_code == three_code
    statuses = {result["status"] for result in one["results"]}
    assert statuses == {"success"}, [r["error"] for r in one["results"] if r["error"]]
    written = [r for r in one["results"] if r["outcome"] == "written"]
    assert written and all(r["changes"] for r in written)  # real work, not empty jobs
    assert without_timings(one) == without_timings(three)


def test_a_worker_that_dies_errors_its_jobs_and_the_others_finish(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two workers of one job each (and two queued, `prefetch`); the model, when asked about
    f3, kills one of them (as the OOM killer would). The jobs that worker held are `internal`
    errors; every other job succeeds on the worker left, and the report adds up."""
    (project / "pkg" / "shout.py").write_text(
        "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(8))
    )
    monkeypatch.chdir(project)
    killed: list[int] = []

    def rule(body: dict[str, Any]) -> Reply:
        if "Inspect f3 " in body["messages"][1]["content"] and not killed:
            worker = min(child_workers())
            os.kill(worker, signal.SIGKILL)
            killed.append(worker)
        if len(body["messages"]) == 2:
            return tool_call("find_todos", {"marker": "FIXME"})
        return tool_call("submit_result", {"summary": "ok", "todo_count": 0})

    with ScriptedModelServer(rule=rule, latency=0.05) as server:
        code, report = analyze(capsys, server, "--workers", "2", "--concurrency", "2")
    assert killed
    results = report["results"]
    assert len(results) == report["summary"]["jobs"] == 8
    errors = [result for result in results if result["status"] == "error"]
    assert 1 <= len(errors) <= 1 + prefetch(1)
    for error in errors:
        assert error["error"]["code"] == "internal_error"
        assert f"worker process {killed[0]} exited with code -9" in error["error"]["message"]
    assert report["summary"]["success"] == 8 - len(errors)
    assert code == 2
    assert not child_workers()  # the other worker was closed, not left behind


def child_workers() -> list[int]:
    """This test process's worker children."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in read_proc(task / "children").split():
            # Threads end and children are reaped while we look: a vanished entry is no worker.
            if b"remora.jobs.workers.child" in read_proc(Path(f"/proc/{pid}/cmdline")).encode():
                found.append(int(pid))
    return found


def read_proc(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def test_job_events_from_workers_reach_the_parents_stream(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    (project / "pkg" / "shout.py").write_text(
        "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(4))
    )
    monkeypatch.chdir(project)
    events_file = tmp_path / "events.jsonl"

    def rule(body: dict[str, Any]) -> Reply:
        if len(body["messages"]) == 2:
            return tool_call("find_todos", {"marker": "FIXME"})
        return tool_call("submit_result", {"summary": "ok", "todo_count": 0})

    with ScriptedModelServer(rule=rule) as server:
        code, _ = analyze(capsys, server, "--workers", "2", "--events", str(events_file))
    assert code == 0
    records = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert len({record["run_id"] for record in records}) == 1
    for job in (f"probe:pkg/shout.py::f{i}" for i in range(4)):
        kinds = [record["event"] for record in records if record.get("job_id") == job]
        assert kinds[0] == "job_queued" and kinds[1] == "job_started", kinds
        assert "tool_call" in kinds, kinds
        assert kinds[-1] == "job_finished"


@pytest.mark.parametrize(
    ("setting", "jobs", "concurrency", "expected"),
    [
        (0, AUTO_JOBS_PER_WORKER - 1, 64, 1),  # too short a run to repay a second process
        (0, 100_000, 64, min(len(os.sched_getaffinity(0)), 64)),
        (4, 100, 64, 4),
        (4, 3, 64, 3),  # never more workers than jobs
        (8, 100, 2, 2),  # nor than jobs in flight
    ],
)
def test_worker_count(setting: int, jobs: int, concurrency: int, expected: int) -> None:
    assert worker_count(setting, jobs=jobs, concurrency=concurrency) == expected
