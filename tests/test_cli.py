"""The command line: `remora nodes`, help text, retries seen from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli.main import build_parser, main
from remora.models.scripted.server import ScriptedModelServer, http_error, tool_call


def test_nodes_json_fields_and_warnings_for_skipped_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mod.py").write_text("class A:\n    @staticmethod\n    def f():\n        pass\n")
    (tmp_path / "latin.py").write_bytes(b"x = '\xe9'\n")
    (tmp_path / "blob.py").write_bytes(b"\x00\x01\x02")
    monkeypatch.chdir(tmp_path)
    assert main(["nodes", ".", "--format", "json"]) == 0
    captured = capsys.readouterr()
    nodes = json.loads(captured.out)
    assert [(n["qualified_name"], n["type"], n["start_line"], n["end_line"]) for n in nodes] == [
        ("<module>", "file", 1, 4),
        ("A", "class", 1, 4),
        ("A.f", "method", 2, 4),
    ]
    assert set(nodes[2]) >= {"id", "type", "name", "qualified_name", "file", "start_line"}
    assert nodes[2]["id"] == "mod.py::A.f"
    assert "text" not in nodes[2]
    assert "latin.py" in captured.err and "blob.py" in captured.err


def test_nodes_on_a_missing_path_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["nodes", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_every_analyze_flag_is_in_help() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    help_text = commands["analyze"].format_help()
    for flag in (
        "--agents",
        "--format",
        "--output",
        "--base-url",
        "--model",
        "--concurrency",
        "--config",
        "-c KEY=VALUE",
    ):
        assert flag in help_text


def test_retries_ride_out_429_and_503(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    script = [
        http_error(429, "slow down", headers={"Retry-After": "0"}),
        http_error(503, "warming up"),
        tool_call("find_todos", {"marker": "FIXME"}),
        tool_call("submit_result", {"summary": "ok", "todo_count": 0}),
    ]
    with ScriptedModelServer(script=script) as server:
        code = main(
            [
                "analyze",
                "pkg",
                "--format",
                "json",
                "--base-url",
                server.base_url,
                "-c",
                "server.retries=2",
            ]
        )
        assert len(server.requests) == 4
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert code == 0
    assert result["status"] == "success"


def test_check_server_says_which_profile_and_exits_by_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from remora.models.scripted.server import CallEveryTool

    monkeypatch.chdir(tmp_path)
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        assert main(["check-server", "--base-url", server.base_url, "--agents", "lint"]) == 0
        out = capsys.readouterr().out
        assert "recommended: runner.model_profile: functiongemma-kit" in out
        assert "agent lint" in out
        dead = "http://127.0.0.1:9/v1"
        assert main(["check-server", "--base-url", server.base_url, "--base-url", dead]) == 2
        assert f"problem connect               cannot reach {dead}" in capsys.readouterr().out
    assert main(["check-server"]) == 2
    assert "no server to check" in capsys.readouterr().err


def test_analyze_spreads_jobs_over_replicas_and_survives_a_dead_one(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from remora.models.scripted.server import CallEveryTool

    for i in range(8):
        (project / "pkg" / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    monkeypatch.chdir(project)
    rule = CallEveryTool(arguments={"replace_text": {"old": "zz", "new": "zz"}})
    with (
        ScriptedModelServer(rule=rule, latency=0.05) as one,
        ScriptedModelServer(rule=rule, latency=0.05) as two,
    ):
        urls = [
            "--base-url",
            one.base_url,
            "--base-url",
            two.base_url,
            "--base-url",
            "http://127.0.0.1:9/v1",
        ]
        code = main(["analyze", "pkg", "--format", "json", "--no-cache", *urls])
        served = (len(one.requests), len(two.requests))
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 1
    assert report["summary"]["success"] == report["summary"]["jobs"] == 9
    assert min(served) > 0 and sum(served) == 27
    assert "replica http://127.0.0.1:9/v1 skipped" in captured.err
