"""Honest outcomes: a job succeeds only when a tool verified its work, environment failures are
errors, requirements are checked before any model request, Remora writes the summary (real
ruff, real pytest, real Monty, the scripted model over HTTP)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call
from tests.conftest import write_files

DEMO = Path(__file__).parent.parent / "examples" / "demo"
SUBMIT = tool_call("submit_result", {"summary": "One sentence on what was fixed and what remains."})


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy)
    monkeypatch.chdir(copy)
    return copy


def analyze(
    capsys: pytest.CaptureFixture[str], rule: Any, *args: str
) -> tuple[int, dict[str, Any], str, int]:
    with ScriptedModelServer(rule=rule) as server:
        code = main(["analyze", *args, "--no-cache", "--base-url", server.base_url])
        requests = len(server.requests)
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip().startswith("{") else {"text": out}, err, requests


def first_then_submit(tool: str, arguments: dict[str, Any]) -> Any:
    def rule(body: dict[str, Any]) -> Any:
        called = any(m["role"] == "tool" for m in body["messages"])
        return SUBMIT if called else tool_call(tool, arguments)

    return rule


def by_qualname(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["node"]["qualified_name"]: r for r in report["results"]}


# --- requirements --------------------------------------------------------------------------


def test_a_missing_program_stops_the_run_before_any_model_request(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = write_files(
        tmp_path / "needs",
        {
            "agent.yaml": """\
                name: needs
                description: Needs a program nobody has.
                requires: {programs: [remora-no-such-program], python_modules: [no_such_mod_xyz]}
                system_prompt: x
                node_context: x
                done_when: [x]
                submit_result: {inputs: {}}
                """
        },
    )
    code, _, err, requests = analyze(
        capsys,
        first_then_submit("x", {}),
        "inventory",
        "-c",
        f"agents.needs.definition={agent / 'agent.yaml'}",
        "-c",
        "sandbox.commands.allowed=[ruff,pytest,remora-no-such-program]",
        "-c",
        "sandbox.commands.python_modules=[ruff,pytest,no_such_mod_xyz]",
    )
    assert code == 2
    assert requests == 0
    assert "agent needs: program remora-no-such-program is not installed" in err
    assert "-m pip install remora-no-such-program" in err
    assert "agent needs: python module no_such_mod_xyz is not installed" in err
    assert "nothing was analysed" in err
    assert not (demo / "tests").exists()


def test_ruff_not_available_to_the_lint_agent_stops_the_run(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err, requests = analyze(
        capsys,
        first_then_submit("run_ruff", {}),
        "inventory",
        "--agents",
        "lint",
        "-c",
        "sandbox.commands.allowed=[pytest]",
    )
    assert (code, requests) == (2, 0)
    assert "agent lint: program ruff is not allowed (add it to sandbox.commands.allowed)" in err


def test_list_agents_shows_requirements_and_whether_they_are_met(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list-agents", "--format", "json", "--isolated"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["lint"]["requires"] == ["ruff"]
    assert rows["test"]["requires"] == ["pytest"]
    assert all(row["unmet"] == [] for row in rows.values())


# --- verified outcomes, per bundled agent ---------------------------------------------------


def test_lint_is_done_by_the_runners_ruff_run_not_by_the_models_words(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run_ruff is the lint agent's observation: the runner makes it before the model's first
    turn, so whatever the model would say, ruff ran and its findings stand. It applies ruff's
    safe fixes itself (F401) and, with no unsafe fix to choose (they need --unsafe-fixes), ends
    the file's job without asking the model anything."""
    code, report, _, requests = analyze(
        capsys, lambda body: SUBMIT, "inventory/stock.py", "--agents", "lint", "--format", "json"
    )
    assert code == 1  # ruff's findings
    results = {r["node"]["qualified_name"]: r for r in report["results"]}
    assert {f["rule"] for r in results.values() for f in r["findings"]} == {
        "F401",
        "B006",
        "E722",
        "T201",
    }
    assert list(results) == ["<module>"]  # one job, the file's
    module = results["<module>"]
    assert (module["status"], module["turns"], requests) == ("success", 0, 0)
    assert module["outcome"] == "fixed"
    assert module["summary"] == (
        "ruff: 4 problems, 1 fixed by ruff's safe fixes (F401), 3 remain; "
        "unsafe fixes need --unsafe-fixes: B006, T201"
    )


def test_a_docstring_no_draft_fits_is_not_possible_with_its_reason(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def rule(body: dict[str, Any]) -> Any:
        if any(m["role"] == "tool" and m["name"] == "write_docstring" for m in body["messages"]):
            return SUBMIT
        return tool_call("write_docstring", {})

    with ScriptedModelServer(rule=rule, completion=lambda body: "It.") as server:
        code = main(
            ["analyze", "inventory/pricing.py", "--agents", "docstring", "--format", "json",
             "--no-cache", "--base-url", server.base_url]
        )  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    result = by_qualname(report)["apply_discount"]
    # write_docstring is observed and final: the job ends on its refusal, without a turn, and
    # no draft fits: not a failure, nothing this agent can do here, with the reason whole.
    assert result["status"] == "not_possible"
    assert result["error"] is None
    assert result["summary"].startswith("no sound draft: summary: the draft 'It.' is too short")
    assert result["changes"] == []
    assert code == 1


def test_docstring_written_gets_remoras_summary(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def rule(body: dict[str, Any]) -> Any:
        return tool_call("write_docstring", {})  # the tool ends the job: no submit needed

    def complete(body: dict[str, Any]) -> str:
        prompt = body["prompt"]
        if prompt.endswith(("price:", "price (float):")):
            return " The price to discount.\n"
        if prompt.endswith(("percent:", "percent (float):")):
            return " The percent of the price to discount.\n"
        if prompt.endswith("The"):
            return " discounted price.\n"
        return "\n    Take a percentage off a price.\n"

    with ScriptedModelServer(rule=rule, completion=complete) as server:
        main(
            ["analyze", "inventory/pricing.py", "--agents", "docstring", "--format", "json",
             "--no-cache", "--base-url", server.base_url,
             "-c", "agents.docstring.options.drafts=write"]
        )  # fmt: skip
        completions = len(server.completion_requests)
    report = json.loads(capsys.readouterr().out)
    result = by_qualname(report)["apply_discount"]
    assert result["status"] == "success", result["error"]
    assert result["outcome"] == "written"
    assert result["summary"].startswith("docstring written (google style, 2 parameters; confid")
    assert result["turns"] == 0 and result["submitted"] is None  # observed: no chat turn
    assert [c["file"] for c in result["changes"]] == ["inventory/pricing.py"]
    assert "+        percent: The percent of the price to discount." in result["changes"][0]["diff"]
    assert "+        The discounted price." in result["changes"][0]["diff"]
    assert completions >= 4
    # parse_sku's docstring is current: the runner's inspection ended it, no model request.
    assert by_qualname(report)["parse_sku"]["turns"] == 0


# --- environment failures are errors, not something for the model ---------------------------


def test_a_broken_ruff_configuration_is_an_error_not_a_tool_result(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (demo / "ruff.toml").write_text("[lint]\nselect = ['NOT-A-RULE']\n")
    code, report, err, _ = analyze(
        capsys,
        first_then_submit("run_ruff", {}),
        "inventory/pricing.py",
        "--agents",
        "lint",
        "--format",
        "json",
    )
    assert code == 2
    for result in report["results"]:
        assert result["status"] == "error"
        assert result["error"]["code"] == "tool_environment"
        assert "ruff failed" in result["error"]["message"]
    assert "tool_environment" in err


def test_a_program_missing_at_run_time_errors_that_job_and_the_others_go_on(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An agent that runs a program it did not declare: the job errors, others finish."""
    agent = write_files(
        tmp_path / "sloppy",
        {
            "agent.yaml": """\
                name: sloppy
                description: Runs a program it does not declare.
                node_types: [function]
                system_prompt: x
                node_context: "{{ node.qualified_name }}"
                tools: [{script: tools/run.pym}]
                host_functions: [run_command]
                done_when: [ran]
                submit_result: {inputs: {summary: {type: string, description: Say it.}}}
                """,
            "tools/run.pym": (
                '# /// remora-tool\n# description = "Run it."\n# ///\n'
                'if node["name"] == "apply_discount":\n'
                '    await run_command("remora-no-such-program", [])\n'
                '{"outcome": "ran", "summary": "ran"}\n'
            ),
        },
    )
    code, report, _, _ = analyze(
        capsys,
        first_then_submit("run", {}),
        "inventory/pricing.py",
        "--format",
        "json",
        "--agents",
        "sloppy",
        "-c",
        f"agents.sloppy.definition={agent / 'agent.yaml'}",
        "-c",
        "sandbox.commands.allowed=[ruff,pytest,remora-no-such-program]",
    )
    results = by_qualname(report)
    assert code == 2
    broken = results["apply_discount"]
    assert broken["status"] == "error"
    assert broken["error"]["code"] == "requirement_missing"
    assert "'remora-no-such-program' is allowed but not installed" in broken["error"]["message"]
    others = [r for name, r in results.items() if name != "apply_discount"]
    assert others and {r["status"] for r in others} == {"success"}


def test_the_closing_lines_say_per_agent_what_was_done(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, _, _ = analyze(
        capsys, first_then_submit("run_ruff", {}), "inventory/pricing.py", "--agents", "lint"
    )
    lines = report["text"].rstrip().splitlines()
    assert code == 0
    assert lines[-2] == "lint: 1 job: 1 checked"  # the file's
    assert lines[-1].startswith("4 nodes, 1 job: 1 success, 0 failed")


SLOW_AGENT = """\
name: slow
description: Runs a slow model-written test.
node_types: [function]
system_prompt: x
node_context: "{{ node.qualified_name }}"
tools: [{script: tools/slow.pym}]
host_functions: [write_file, run_command]
done_when: [ran]
submit_result: {inputs: {summary: {type: string, description: Say it.}}}
"""
SLOW_TOOL = (
    '# /// remora-tool\n# description = "Run a slow test."\n# ///\n'
    'write_file("test_slow.py", "import time\\n\\ndef test_slow():\\n    time.sleep(3)\\n")\n'
    'await run_command("python", ["-m", "pytest", "-q", "test_slow.py"])\n'
    '{"outcome": "ran", "summary": "ran"}\n'
)


def run_slow(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str, setting: str
) -> tuple[int, dict[str, Any]]:
    """The slow agent alone on `target`, with one more `-c` setting."""
    folder = write_files(tmp_path / "slow", {"agent.yaml": SLOW_AGENT, "tools/slow.pym": SLOW_TOOL})
    code, report, _, _ = analyze(
        capsys,
        first_then_submit("slow", {}),
        target,
        "--format",
        "json",
        "--agents",
        "slow",
        "-c",
        f"agents.slow.definition={folder / 'agent.yaml'}",
        "-c",
        setting,
    )
    return code, report


def test_a_command_timeout_is_an_error_whatever_the_script_reports(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = run_slow(
        capsys, tmp_path, "inventory/pricing.py", "sandbox.commands.timeout_s=0.5"
    )
    assert code == 2
    for result in report["results"]:
        assert result["status"] == "error"
        assert result["error"]["code"] == "command_timeout"
        assert "sandbox.commands.timeout_s=0.5" in result["error"]["message"]


def test_a_sandbox_worker_that_dies_mid_call_is_an_error(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Monty worker is killed while its script waits on a command: `sandbox_crashed`."""

    def kill_monty_workers() -> None:
        for entry in os.listdir("/proc"):
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().split()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if entry.isdigit() and int(stat[3]) == os.getpid() and b"monty" in cmdline:
                os.kill(int(entry), signal.SIGKILL)

    (demo / "one.py").write_text("def one():\n    return 1\n")
    killer = threading.Timer(1.5, kill_monty_workers)
    killer.start()
    try:
        code, report = run_slow(capsys, tmp_path, "one.py", "concurrency=1")
    finally:
        killer.cancel()
    (result,) = report["results"]
    assert code == 2
    assert result["status"] == "error"
    assert result["error"]["code"] == "sandbox_crashed"
