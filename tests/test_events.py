"""The event stream: one envelope everywhere, counts that match what happened, payloads only
on request and cut to the limit."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer


def run_with_events(
    project: Path, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[list[dict[str, Any]], int]:
    (project / "pkg" / "more.py").write_text("def a():\n    return 1\n\n\ndef b():\n    return 2\n")
    events = project / "events.jsonl"
    rule = CallEveryTool(arguments={"replace_text": {"old": "zz", "new": "zz"}})
    with ScriptedModelServer(rule=rule) as server:
        main(
            [
                "analyze",
                "pkg",
                "--no-cache",
                "--events",
                str(events),
                "--base-url",
                server.base_url,
                *flags,
            ]
        )
        requests = len(server.requests)
    capsys.readouterr()
    return [json.loads(line) for line in events.read_text().splitlines()], requests


def test_every_stage_emits_events_with_one_envelope(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    events, requests = run_with_events(project, capsys)
    kinds = Counter(event["event"] for event in events)
    assert kinds["discovery_done"] == kinds["run_started"] == kinds["run_finished"] == 1
    assert kinds["job_queued"] == kinds["job_started"] == kinds["job_finished"] == 3
    assert kinds["model_request"] == kinds["model_response"] == requests == 9
    assert kinds["tool_call"] == kinds["tool_result"] == 6
    assert len({event["run_id"] for event in events}) == 1
    for event in events:
        assert event["v"] == 1 and isinstance(event["ts"], float)
        if event["event"].startswith(("job_", "model_", "tool_")):
            assert event["job_id"] == f"{event['agent']}:{event['node_id']}"
        assert event.get("payload") is None  # payloads only on request
    responses = [e for e in events if e["event"] == "model_response"]
    assert all(e["latency_s"] >= 0 and e["prompt_tokens"] > 0 for e in responses)
    finished = [e for e in events if e["event"] == "job_finished"]
    assert {e["status"] for e in finished} == {"success"}
    assert events[-1]["event"] == "run_finished"
    assert events[-1]["summary"]["jobs"] == 3


def test_payloads_on_request_cut_to_the_limit(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    events, _ = run_with_events(
        project, capsys, "--events-payloads", "--events-payload-limit", "50"
    )
    request = next(e for e in events if e["event"] == "model_request")
    assert request["payload"].startswith('[{"role": "system"')
    assert "more]" in request["payload"] and len(request["payload"]) < 80
    result = next(e for e in events if e["event"] == "tool_result")
    assert result["payload"] is not None
