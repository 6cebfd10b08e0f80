"""The orchestrator: concurrency, isolation of crashing jobs, clean Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer


def many_functions(project: Path, count: int) -> None:
    body = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(count))
    (project / "pkg" / "many.py").write_text(body)


def test_jobs_run_concurrently_up_to_the_limit(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    many_functions(project, 12)
    monkeypatch.chdir(project)
    rule = CallEveryTool(arguments={"replace_text": {"old": "x", "new": "y"}})
    with ScriptedModelServer(rule=rule, latency=0.2) as server:
        started = time.perf_counter()
        code = main(
            [
                "analyze",
                "pkg",
                "--format",
                "json",
                "--concurrency",
                "8",
                "--base-url",
                server.base_url,
            ]
        )
        elapsed = time.perf_counter() - started
        peak = server.max_in_flight
    report = json.loads(capsys.readouterr().out)
    assert code == 1  # shout has a TODO
    assert report["summary"]["jobs"] == 13
    assert report["summary"]["success"] == 13
    assert peak == 8
    # 13 jobs x 3 turns x 0.2 s sequentially would be 7.8 s; 8 at a time: 2 waves of 0.6 s.
    assert elapsed < 3.0


def test_a_crashing_job_becomes_an_error_and_the_others_finish(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    many_functions(project, 2)
    # The template renders for the load-time sample node (named "f") and for f0, but a missing
    # key raises for every other node: the job fails inside, not on a bad model reply.
    text = probe_agent.read_text().replace(
        "Inspect {{ node.qualified_name }}",
        "Inspect {{ {'f': 1, 'f0': 2}[node.name] }}",
    )
    probe_agent.write_text(text)
    monkeypatch.chdir(project)
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        code = main(["analyze", "pkg", "--format", "json", "--base-url", server.base_url])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    by_name: dict[str, Any] = {r["node"]["name"]: r for r in report["results"]}
    assert code == 2
    assert by_name["f0"]["status"] == "success"
    for name in ("f1", "shout"):
        assert by_name[name]["status"] == "error"
        assert by_name[name]["error"]["code"] == "agent_template"
        assert "has no attribute" in by_name[name]["error"]["message"]
    assert "pkg/many.py::f1 [probe]: agent_template" in captured.err


def test_ctrl_c_exits_130_and_writes_no_report(project: Path, probe_config: Path) -> None:
    many_functions(project, 4)
    with ScriptedModelServer(rule=CallEveryTool(), latency=30) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "remora", "analyze", "pkg", "-o", "report.json"],
            cwd=project,
            env={**os.environ, "REMORA_SERVER__BASE_URL": server.base_url},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 20
        while server.in_flight < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.in_flight == 5  # every job is waiting on the model
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 130, err
    assert "interrupted" in err
    assert "Traceback" not in err
    assert out == ""
    assert not (project / "report.json").exists()


def test_jobs_that_never_ask_the_model_run_beside_its_seats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--concurrency 1` bounds the jobs asking the model; lint jobs, which never do without
    unsafe fixes, still run several at a time (the cores were idle two jobs at a time)."""
    package = tmp_path / "pkg"
    package.mkdir()
    for i in range(12):
        (package / f"m{i}.py").write_text("import os\n\n\ndef f():\n    return 1\n")
    monkeypatch.chdir(tmp_path)
    events = tmp_path / "events.jsonl"
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        code = main(
            [
                "analyze", "pkg", "--agents", "lint", "--format", "json", "--no-cache",
                "--concurrency", "1", "--events", str(events), "--base-url", server.base_url,
            ]
        )  # fmt: skip
        asked = len(server.requests)
    report = json.loads(capsys.readouterr().out)
    assert code == 1  # F401 in every file
    assert report["summary"]["jobs"] == 12 and asked == 0
    in_flight = peak = 0
    for line in events.read_text().splitlines():
        event = json.loads(line)["event"]
        in_flight += {"job_started": 1, "job_finished": -1}.get(event, 0)
        peak = max(peak, in_flight)
    assert peak > 1


def test_jobs_asking_the_model_hold_a_seat_each_to_their_end(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    many_functions(project, 6)
    monkeypatch.chdir(project)
    rule = CallEveryTool(arguments={"replace_text": {"old": "x", "new": "y"}})
    with ScriptedModelServer(rule=rule, latency=0.05) as server:
        code = main(
            ["analyze", "pkg", "--format", "json", "--concurrency", "2", "--base-url",
             server.base_url]
        )  # fmt: skip
        peak = server.max_in_flight
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["summary"]["success"] == report["summary"]["jobs"] == 7
    assert peak == 2
