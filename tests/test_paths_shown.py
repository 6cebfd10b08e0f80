"""Paths a user can open from where they ran Remora, as ruff prints them: relative to the
current directory when inside it, absolute otherwise (SARIF keeps repository-relative URIs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call

PROBE = [
    tool_call("find_todos", {}),
    tool_call("submit_result", {"summary": "one TODO", "todo_count": 1}),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with ScriptedModelServer(script=PROBE) as server:
        code = main([*argv, "--base-url", server.base_url, "--no-cache"])
    return code, capsys.readouterr().out


def nodes(capsys: pytest.CaptureFixture[str], target: str) -> list[str]:
    assert main(["nodes", target, "--format", "json"]) == 0
    return [node["id"] for node in json.loads(capsys.readouterr().out)]


@pytest.mark.parametrize(
    ("where", "target", "expected"),
    [
        ("inside", "pkg", "pkg/shout.py"),  # cwd is the project
        ("parent", "project/pkg", "project/pkg/shout.py"),  # cwd above the project
        ("sibling", "../project/pkg", "ABSOLUTE"),  # the folder is outside the cwd
        ("sibling", "ABSOLUTE_PKG", "ABSOLUTE"),
    ],
)
def test_nodes_and_reports_print_paths_the_user_can_open(
    project: Path,
    probe_config: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
    target: str,
    expected: str,
) -> None:
    cwd = {"inside": project, "parent": tmp_path, "sibling": tmp_path / "elsewhere"}[where]
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    absolute = (project / "pkg" / "shout.py").as_posix()
    target = target.replace("ABSOLUTE_PKG", (project / "pkg").as_posix())
    expected = expected.replace("ABSOLUTE", absolute)
    assert Path(expected).is_file()  # what is printed opens from here
    assert nodes(capsys, target) == [f"{expected}::<module>", f"{expected}::shout"]
    config = ["--config", str(probe_config)]

    code, out = run(capsys, "analyze", target, "--format", "json", *config)
    assert code == 1
    (result,) = json.loads(out)["results"]
    assert result["node"]["file"] == expected and result["node"]["id"] == f"{expected}::shout"
    assert [finding["file"] for finding in result["findings"]] == [expected]

    code, out = run(capsys, "analyze", target, *config)
    assert f"{expected}:5:7: TD001" in out  # the table's findings

    code, out = run(capsys, "analyze", target, "--format", "github", *config)
    assert f"file={expected},line=5" in out

    code, out = run(capsys, "analyze", target, "--format", "sarif", *config)
    (location,) = [
        r["locations"][0]["physicalLocation"]["artifactLocation"]
        for run in json.loads(out)["runs"]
        for r in run["results"]
    ]
    assert location["uriBaseId"] == "%SRCROOT%" and not os.path.isabs(location["uri"])
