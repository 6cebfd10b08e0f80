"""docs/WRITING_AGENTS.md's tutorial, run as written: the files are copied out of the page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from remora.cli import main
from remora.models.scripted import ScriptedModelServer, tool_call

DOC = Path(__file__).parent.parent / "docs" / "WRITING_AGENTS.md"
FILE_BLOCK = re.compile(r"<!-- file: (?P<path>\S+) -->\n```\w*\n(?P<body>.*?)```", re.DOTALL)


def tutorial_files() -> dict[str, str]:
    return {m["path"]: m["body"] for m in FILE_BLOCK.finditer(DOC.read_text())}


def test_the_tutorial_agent_works_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files = tutorial_files()
    assert set(files) == {
        "agents/todo/agent.yaml",
        "agents/todo/tools/find_todos.pym",
        "agents/todo/tools/rename_todos.pym",
        "remora.yaml",
    }
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    (tmp_path / "app.py").write_text("def main():\n    # TODO: greet\n    return 'hi'\n")
    monkeypatch.chdir(tmp_path)

    assert main(["tool", "check", "todo"]) == 0
    assert main(["tool", "run", "todo", "find_todos", "--node", "app.py::main"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["value"]["count"] == 1

    def model(body: dict[str, Any]) -> Any:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return tool_call("find_todos", {})
        if len(results) == 1:
            return tool_call("rename_todos", {})
        return tool_call("submit_result", {"summary": "one TODO, renamed"})

    with ScriptedModelServer(rule=model) as server:
        code = main(
            [
                "analyze",
                ".",
                "--agents",
                "todo",
                "--fix",
                "--format",
                "json",
                "--base-url",
                server.base_url,
            ]
        )
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    (finding,) = report["results"][0]["findings"]
    assert (finding["rule"], finding["line"], finding["column"]) == ("TD001", 2, 5)
    assert (tmp_path / "app.py").read_text() == "def main():\n    # NOTE: greet\n    return 'hi'\n"
