"""The command line: `remora nodes`, help text, retries seen from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli import build_parser, main
from remora.models.scripted import ScriptedModelServer, http_error, tool_call


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
        assert len(server.requests) == 3
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert code == 0
    assert result["status"] == "success"
