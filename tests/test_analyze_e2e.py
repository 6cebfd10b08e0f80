"""`remora analyze` end to end against the scripted model server: the whole transcript."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call, tool_calls

INJECTED = {"node", "options", "file_text"}


def probe_script() -> list[object]:
    return [
        tool_calls(("find_todos", {}), ("replace_text", {"old": "TODO", "new": "NOTE"})),
        tool_call("find_todos", {"marker": "FIXME"}),
        tool_call("submit_result", {"summary": "One TODO, now a NOTE.", "todo_count": 1}),
    ]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_transcript_and_json_report(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    # Parallel calls need a profile that asks for them (FunctionGemma's keeps one per reply).
    monkeypatch.setenv("REMORA_RUNNER__MODEL_PROFILE", "openai")
    original = (project / "pkg/shout.py").read_text()
    with ScriptedModelServer(script=probe_script()) as server:
        code, out, err = run_cli(
            ["analyze", "pkg", "--format", "json", "--base-url", server.base_url], capsys
        )
        requests = server.requests

    assert len(requests) == 3
    first, second, third = requests
    # Turn 1: system + user with the rendered node context; every tool offered, a call required.
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"].startswith("Inspect shout in pkg/shout.py:\ndef shout")
    assert [t["function"]["name"] for t in first["tools"]] == [
        "find_todos",
        "replace_text",
        "submit_result",
    ]
    assert first["tool_choice"] == "required"
    assert first["model"] == "google/functiongemma-270m-it"
    for request in requests:
        for tool in request["tools"]:
            assert not INJECTED & set(tool["function"]["parameters"]["properties"])
    replace_schema = first["tools"][1]["function"]["parameters"]
    assert replace_schema["required"] == ["old", "new"]

    # Turn 2: the history grew by the assistant's calls and one tool result per call, in order.
    history = second["messages"]
    assert history[:2] == first["messages"]
    assistant, todo_result, replace_result = history[2:5]
    assert len(history) == 5
    call_ids = [call["id"] for call in assistant["tool_calls"]]
    assert len(set(call_ids)) == 2
    assert [m["role"] for m in (todo_result, replace_result)] == ["tool", "tool"]
    assert [todo_result["tool_call_id"], replace_result["tool_call_id"]] == call_ids
    assert [todo_result["name"], replace_result["name"]] == ["find_todos", "replace_text"]
    todo_payload = json.loads(todo_result["content"])
    assert todo_payload["findings"][0]["line"] == 5
    assert todo_payload["file_lines"] == 7  # file_text was injected
    assert replace_result["content"] == "replaced"
    assert second["tool_choice"] == "required"
    assert len(second["tools"]) == 3

    # Turn 3 is the last allowed one: submit_result is the named tool choice.
    assert len(third["tools"]) == 3
    assert third["tool_choice"] == {"type": "function", "function": {"name": "submit_result"}}
    assert third["messages"][:5] == history
    assert third["messages"][6]["role"] == "tool"

    # The report: JSON only on stdout.
    assert code == 1, err  # one finding
    report = json.loads(out)
    assert report["summary"] == {
        "nodes": 2,
        "jobs": 1,
        "success": 1,
        "suggested": 0,
        "not_possible": 0,
        "failed": 0,
        "error": 0,
        "skipped": 0,
        "findings": 1,
        "cached": 0,
        "agents": {
            "probe": {
                "jobs": 1,
                "outcomes": {"checked": 1},
                "suggested": 0,
                "not_possible": 0,
                "not_done": 0,
                "error": 0,
                "skipped": 0,
            }
        },
        "engine": None,  # a server answered: the embedded engine's counts are not there
    }
    (result,) = report["results"]
    assert result["agent"] == "probe"
    assert result["status"] == "success"
    # Remora's summary, from the last outcome a tool verified; the model's words are the note.
    assert result["summary"] == "0 FIXME comments"
    assert result["outcome"] == "checked"
    assert result["note"] == "One TODO, now a NOTE."
    assert result["turns"] == 3
    assert result["error"] is None
    assert result["node"]["qualified_name"] == "shout"
    assert result["node"]["type"] == "function"
    assert (result["node"]["start_line"], result["node"]["end_line"]) == (4, 6)
    assert result["findings"] == [
        {
            "rule": "TD001",
            "message": "# TODO: handle None",
            "file": "pkg/shout.py",
            "line": 5,
            "column": 7,
            "severity": "warning",
            "help_uri": None,
            "fix": None,
        }
    ]
    (change,) = result["changes"]
    assert change["file"] == "pkg/shout.py"
    assert "-    # TODO: handle None" in change["diff"]
    assert "+    # NOTE: handle None" in change["diff"]
    assert result["submitted"] == {"summary": "One TODO, now a NOTE.", "todo_count": 1}
    # The agent's edit stayed in its workspace.
    assert (project / "pkg/shout.py").read_text() == original


def test_table_report_and_output_file(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    with ScriptedModelServer(script=probe_script()) as server:
        code, out, _ = run_cli(
            ["analyze", ".", "--format", "table", "--base-url", server.base_url], capsys
        )
    assert code == 1
    assert "pkg/shout.py:4 shout" in out  # the job's row
    assert "pkg/shout.py:5:7: TD001 # TODO: handle None\n" in out
    assert "probe: 1 job: 1 checked\n" in out
    assert "2 nodes, 1 job: 1 success, 0 failed, 0 error, 0 skipped; 1 finding\n" in out

    with ScriptedModelServer(script=probe_script()) as server:
        code, out, _ = run_cli(
            [
                "analyze",
                ".",
                "--format",
                "json",
                "-o",
                "report.json",
                "--base-url",
                server.base_url,
            ],
            capsys,
        )
    assert code == 1
    assert out == ""
    assert json.loads((project / "report.json").read_text())["summary"]["findings"] == 1


def test_analyze_as_subprocess(project: Path, probe_config: Path) -> None:
    with ScriptedModelServer(script=probe_script()) as server:
        env = {**os.environ, "REMORA_SERVER__BASE_URL": server.base_url}
        done = subprocess.run(
            [sys.executable, "-m", "remora", "analyze", "pkg/shout.py", "--format", "json"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["results"][0]["status"] == "success"
    assert len(server.requests) == 3


def test_refused_connection_exits_2_naming_url_and_docs(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    with ScriptedModelServer(script=[]) as server:
        url = server.base_url  # a port that was just free; nothing listens after the block
    code, out, err = run_cli(["analyze", ".", "--base-url", url], capsys)
    assert code == 2
    assert out == ""
    assert url in err
    assert "docs/SERVER_SETUP.md" in err


def test_no_server_configured_exits_2(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.delenv("REMORA_SERVER__BASE_URL", raising=False)
    # With the embedded engine installed, `auto` would pick it: ask for the server explicitly.
    code, _, err = run_cli(["analyze", ".", "--engine", "server"], capsys)
    assert code == 2
    assert "--base-url" in err and "pip install 'remora[local]'" in err


def test_unknown_model_names_served_models(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    with ScriptedModelServer(script=[]) as server:
        code, _, err = run_cli(
            ["analyze", ".", "--base-url", server.base_url, "--model", "nope"], capsys
        )
    assert code == 2
    assert "does not serve nope" in err
    assert "google/functiongemma-270m-it" in err


def test_server_error_makes_job_error_and_exit_2(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from remora.models.scripted.server import http_error

    monkeypatch.chdir(project)
    with ScriptedModelServer(script=[http_error(500, "boom")]) as server:
        code, out, _err = run_cli(
            ["analyze", ".", "--format", "json", "--base-url", server.base_url], capsys
        )
    assert code == 2
    (result,) = json.loads(out)["results"]
    assert result["status"] == "error"
    assert result["error"]["code"] == "model_error"
    assert "500" in result["error"]["message"] and "boom" in result["error"]["message"]


def test_main_job_on_the_bundled_example(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's main job with the bundled lint agent (CallEveryTool stands in for the
    model): ruff's findings on the demo, each reported once, by the job of its file."""
    from remora.models.scripted.server import CallEveryTool

    monkeypatch.chdir(Path(__file__).parent.parent)
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        code, out, err = run_cli(
            [
                "analyze",
                "examples/demo",
                "--agents",
                "lint",
                "--format",
                "json",
                "--no-cache",
                "--base-url",
                server.base_url,
            ],
            capsys,
        )
    assert code == 1, err
    report = json.loads(out)
    assert (report["summary"]["nodes"], report["summary"]["jobs"]) == (15, 4)  # 4 files
    assert report["summary"]["success"] == 4
    found = {
        (f["file"].removeprefix("examples/demo/inventory/"), f["line"], f["column"], f["rule"])
        for r in report["results"]
        for f in r["findings"]
    }
    assert found == {
        ("report.py", 5, 24, "B006"),
        ("report.py", 7, 5, "T201"),
        ("stock.py", 2, 8, "F401"),
        ("stock.py", 6, 30, "B006"),
        ("stock.py", 16, 9, "E722"),
        ("stock.py", 17, 13, "T201"),
    }
