"""docs/WRITING_AGENTS.md's tutorial, run as written: the files are copied out of the page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call

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
    app = (
        "def main():\n    # TODO: greet\n    return 'hi'\n\n\n"
        "def done():\n    return 'ok'\n\n\n"
        "def later():\n    # TODO\n    return None\n"
    )
    (tmp_path / "app.py").write_text(app)
    monkeypatch.chdir(tmp_path)

    assert main(["tool", "check", "todo"]) == 0
    assert main(["tool", "run", "todo", "find_todos", "--node", "app.py::main"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["value"]["count"] == 1 and outcome["value"]["final"] is False

    def model(body: dict[str, Any]) -> Any:
        # The observation is in the transcript before the model's first turn.
        assert body["messages"][-1]["name"] == "find_todos"
        return tool_call("rename_todos", {})

    def completion(body: dict[str, Any]) -> str:
        assert body["prompt"].endswith("def later():\n    # NOTE: ")
        return "return a value\nmore text"

    with ScriptedModelServer(rule=model, completion=completion) as server:
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
        chats, completions = server.requests, server.completion_requests
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    jobs = {job["node"]["qualified_name"]: job for job in report["results"]}
    assert {name: job["outcome"] for name, job in jobs.items()} == {
        "main": "renamed",
        "done": "checked",
        "later": "renamed",
    }
    assert [(f["rule"], f["line"], f["column"]) for f in jobs["main"]["findings"]] == [
        ("TD001", 2, 5)
    ]
    # `done` had no TODO: its job ended after the observation, with no model request.
    assert len(chats) == 2 and len(completions) == 1
    assert all("def done" not in json.dumps(request["messages"]) for request in chats)
    # The worked example comes first, the same bytes in both requests.
    example = [json.dumps(request["messages"][1:5]) for request in chats]
    assert example[0] == example[1] and "store.py" in example[0]
    assert (tmp_path / "app.py").read_text() == app.replace(
        "# TODO: greet", "# NOTE: greet"
    ).replace("# TODO\n", "# NOTE: return a value\n")
