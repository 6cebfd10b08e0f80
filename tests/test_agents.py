"""Agent definitions: strict validation, model-facing schemas, the bundled agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.agents.definition import load_agent
from remora.agents.installed import installed_agents
from remora.cli.main import main
from remora.errors import UserInputError
from tests.conftest import PROBE_EXAMPLE as EXAMPLE


def test_model_schema_has_declared_inputs_only(probe_agent: Path) -> None:
    agent = load_agent(probe_agent, model="m")
    schemas = {s["function"]["name"]: s["function"] for s in agent.tool_schemas()}
    assert list(schemas) == ["find_todos", "replace_text", "submit_result"]
    assert schemas["find_todos"]["parameters"] == {
        "type": "object",
        "properties": {
            "marker": {
                "type": "string",
                "description": "The comment marker to look for.",
                "default": "TODO",
            }
        },
        "required": [],
    }
    assert schemas["submit_result"]["parameters"]["required"] == ["summary", "todo_count"]


@pytest.mark.parametrize(
    ("replace", "by", "expected"),
    [
        ("max_turns: 3", "max_turns: 3\nmax_turn: 4", r"agent\.yaml:5: max_turn: unknown key"),
        ("max_turns: 3", "max_turns: lots", r"agent\.yaml:4: max_turns: Input should be a valid"),
        ("node_types: [function]", "node_types: [lambda]", r":3: node_types\.0: Input should be"),
        ("Inspect {{", "Inspect {{ {%", r"node_context: Value error, template syntax error"),
        ("Inspect {{ node.qualified_name }}", "{{ nodes }}", r":\d+: node_context: cannot render"),
        ("tools/find_todos.pym", "tools/missing.pym", r"agent\.yaml:10: tools\.0\.script: no such"),
        (
            "- script: tools/replace_text.pym",
            "- script: tools/find_todos.pym",
            r"second tool named",
        ),
        (
            "- script: tools/replace_text.pym",
            "- scrip: x",
            r"agent\.yaml:11: tools\.1\.scrip: unknown",
        ),
        ("name: probe\n", "name: probe\n  bad: [\n", r"agent\.yaml:\d+: not valid YAML"),
    ],
)
def test_malformed_definitions_name_file_line_and_key(
    probe_agent: Path, replace: str, by: str, expected: str
) -> None:
    text = probe_agent.read_text()
    assert replace in text
    probe_agent.write_text(text.replace(replace, by, 1))
    with pytest.raises(UserInputError, match=expected) as caught:
        load_agent(probe_agent, model="m")
    assert str(probe_agent) in str(caught.value)


@pytest.mark.parametrize(
    ("replace", "by", "expected"),
    [
        ("# /// remora-tool\n", "", r"find_todos\.pym:1: a tool script starts with"),
        ('# type = "string"', '# type = "str"', r"find_todos\.pym:6: inputs\.marker\.type: Input"),
        ("# [inputs.marker]", "# [inputs.node]", r"find_todos\.pym:5: inputs: .*reserved"),
        ('# default = "TODO"', "# default = 3", r"inputs: Value error, marker: default does not"),
        ("# context =", "# contxt =", r"find_todos\.pym:3: contxt: unknown key"),
        ('# description = "Report', '# name = "find-todos"\n# description = "R', r"name: String"),
        (
            '# description = "Report',
            '# name = "submit_result"\n# description = "R',
            r"in the agent",
        ),
        ("# ///\nfindings", "findings", r"header has no closing"),
        ('# type = "string"', '# type = "string', r"find_todos\.pym:\d+: header is not valid TOML"),
    ],
)
def test_malformed_tool_headers_name_file_line_and_key(
    probe_agent: Path, replace: str, by: str, expected: str
) -> None:
    script = probe_agent.parent / "tools" / "find_todos.pym"
    text = script.read_text()
    assert replace in text
    script.write_text(text.replace(replace, by, 1))
    with pytest.raises(UserInputError, match=expected):
        load_agent(probe_agent, model="m")


def test_malformed_agent_exits_2_through_the_cli(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe_agent.write_text(
        probe_agent.read_text().replace("max_turns: 3", "max_turns: 3\nturns: 1")
    )
    monkeypatch.chdir(project)
    assert main(["analyze", ".", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert f"{probe_agent}:5: turns: unknown key" in err


def test_list_agents(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    assert main(["list-agents", "--format", "json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["lint"]["bundled"] is True and rows["lint"]["enabled"] is False
    assert rows["probe"]["bundled"] is False and rows["probe"]["enabled"] is True
    assert rows["probe"]["tools"] == ["find_todos", "replace_text"]
    assert main(["list-agents"]) == 0
    assert "find_todos, replace_text" in capsys.readouterr().out


def test_unknown_agent_names_are_errors(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    assert main(["analyze", ".", "--agents", "nope", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert "unknown agent(s) nope; known: " in err and "lint" in err and "probe" in err


BUNDLED = sorted(agent.definition for agent in installed_agents().values())


@pytest.mark.parametrize("path", BUNDLED)
def test_bundled_agents_load(path: Path) -> None:
    agent = load_agent(path, model="m")
    assert agent.tools
    assert agent.name == path.parent.name


@pytest.mark.parametrize(
    ("replace", "by", "expected"),
    [
        (
            "call: find_todos",
            "call: find_todo",
            r"agent\.yaml:\d+: examples\.0\.turns\.0\.call: no",
        ),
        ("todo_count: 1}", "todo_count: one}", r"examples\.0\.turns\.1\.arguments: 'one' is not"),
        ("        result: {", "        reslt: {", r"examples\.0\.turns\.0\.reslt: unknown key"),
        ("        result: {", "        arguments: {", r"examples\.0\.turns\.0\.arguments: Add"),
        (
            "todo_count: 1}\n",
            "todo_count: 1}\n        result: ok\n",
            r"examples\.0\.turns\.1\.result: submit_result has no result",
        ),
    ],
)
def test_malformed_examples_name_file_line_and_key(
    probe_agent: Path, replace: str, by: str, expected: str
) -> None:
    probe_agent.write_text(probe_agent.read_text() + EXAMPLE.replace(replace, by, 1))
    with pytest.raises(UserInputError, match=expected):
        load_agent(probe_agent, model="m")


def test_examples_become_the_same_messages_for_every_job(probe_agent: Path) -> None:
    probe_agent.write_text(probe_agent.read_text() + EXAMPLE)
    agent = load_agent(probe_agent, model="m")
    user, call, result, submit = agent.example_messages
    assert user == {"role": "user", "content": EXAMPLE.split('"')[1]}
    assert call["tool_calls"][0]["function"] == {"name": "find_todos", "arguments": "{}"}
    assert (
        result["role"] == "tool" and json.loads(result["content"])["summary"] == "1 TODO comments"
    )
    arguments = json.loads(submit["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"summary": "One TODO.", "todo_count": 1}
    again = load_agent(probe_agent, model="m")
    assert json.dumps(again.example_messages) == json.dumps(agent.example_messages)
