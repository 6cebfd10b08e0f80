"""`remora tool check` and `remora tool run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli.main import main


def test_tool_check_passes_on_the_bundled_agents(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "check", "lint"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "checked 2 tools of 1 agents: 0 problems" in captured.err


def test_tool_check_reports_type_errors_with_script_lines(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = probe_agent.parent / "tools" / "replace_text.pym"
    script.write_text(
        script.read_text()
        + "n: int = old\n"
        + "missing_name\n"
        + "r = run_command('ruff', [])\n"
        + "r['stdout']\n"
    )
    monkeypatch.chdir(project)
    assert main(["tool", "check", "probe"]) == 1
    out = capsys.readouterr().out.splitlines()
    header = 5  # lines of the script's header
    body = 3  # lines of the original body
    first = header + body + 1
    assert any(line.startswith(f"{script}:{first}:10: ") and "str" in line for line in out), out
    assert any(line.startswith(f"{script}:{first + 1}:1: ") for line in out), out
    assert any(line.startswith(f"{script}:{first + 3}:") for line in out), out  # no await
    assert len(out) == 3


def test_tool_check_reports_a_host_function_the_agent_does_not_declare(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A script is checked against the stubs of its agent's declared host functions only: a
    shared function left undeclared, or another agent's, is a name the script does not have."""
    script = probe_agent.parent / "tools" / "replace_text.pym"
    script.write_text(script.read_text() + "list_dir('.')\ncheck_tests('t.py', '')\n")
    monkeypatch.chdir(project)
    assert main(["tool", "check", "probe"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2, out
    assert "`list_dir` used when not defined" in out[0], out
    assert "`check_tests` used when not defined" in out[1], out


def test_tool_run_prints_the_outcome_and_the_diff(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    before = (project / "pkg" / "shout.py").read_text()
    code = main(
        [
            "tool",
            "run",
            "probe",
            "replace_text",
            "--node",
            "pkg/shout.py::shout",
            "--args",
            '{"old": "upper", "new": "lower"}',
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    outcome = json.loads(captured.out)
    assert outcome["ok"] is True and outcome["value"] == "replaced"
    assert "-    return text.upper()\n+    return text.lower()" in captured.err
    assert (project / "pkg" / "shout.py").read_text() == before

    assert (
        main(
            [
                "tool",
                "run",
                "probe",
                "find_todos",
                "--node",
                "pkg/shout.py::shout",
                "--format",
                "text",
            ]
        )
        == 0
    )
    text = json.loads(capsys.readouterr().out)
    assert text["findings"][0]["rule"] == "TD001"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["probe", "nope", "--node", "pkg/shout.py::shout"], "has no tool 'nope'"),
        (["probe", "find_todos", "--node", "pkg/shout.py::nope"], "no node 'nope'"),
        (["probe", "replace_text", "--node", "pkg/shout.py", "--args", "{"], "not valid JSON"),
        (["probe", "replace_text", "--node", "pkg/shout.py", "--args", '{"old": 1}'], "invalid"),
        (["nobody", "x", "--node", "pkg/shout.py"], "unknown agent(s) nobody"),
    ],
)
def test_tool_run_usage_errors_exit_2(
    args: list[str],
    message: str,
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    assert main(["tool", "run", *args]) == 2
    assert message in capsys.readouterr().err
