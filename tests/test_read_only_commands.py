"""Read-only commands run once per distinct input in a run, and their result is shared by every
job that asks (sandbox/read_only.py); commands that write never are. Real processes only: a
counting program of our own on PATH, and the real ruff for the same-results check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli.main import main
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer
from remora.sandbox.read_only import shared_key

ENTRIES = ["ruff check --output-format json"]


@pytest.mark.parametrize(
    ("argv", "written", "shared"),
    [
        (["ruff", "check", "--output-format", "json", "a.py"], set(), True),
        (["ruff", "check", "--output-format", "json", "a.py"], {"a.py"}, True),  # its own edit
        (["ruff", "check", "--output-format", "json", "--fix", "a.py"], set(), False),
        (["ruff", "check", "a.py"], set(), False),  # not the listed command
        (["ruff", "check", "--output-format", "json"], set(), False),  # no operand
        (["ruff", "check", "--output-format", "json", "gone.py"], set(), False),
        (["ruff", "check", "--output-format", "json", "a.py"], {"ruff.toml"}, False),
    ],
)
def test_which_commands_share(argv: list[str], written: set[str], shared: bool) -> None:
    files = {"a.py": "x = 1\n", "ruff.toml": ""}
    key = shared_key(ENTRIES, argv, files.get, frozenset(written))
    assert (key is not None) == shared


def test_the_key_is_the_content_the_job_sees() -> None:
    argv = ["ruff", "check", "--output-format", "json", "a.py"]
    one = shared_key(ENTRIES, argv, {"a.py": "x = 1\n"}.get, frozenset())
    same = shared_key(ENTRIES, argv, {"a.py": "x = 1\n"}.get, frozenset())
    other = shared_key(ENTRIES, argv, {"a.py": "x = 2\n"}.get, frozenset())
    assert one == same != other


CHECK_TOOL = """\
# /// remora-tool
# description = "Check the file."
# ///
result = await run_command("countcheck", ["--json", node["file"]])
{"findings": [], "outcome": "checked", "summary": result["stdout"].strip()}
"""


def test_a_read_only_command_runs_once_per_file_in_a_run(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Four function nodes in two files, each job running `countcheck --json FILE`: two runs."""
    log = tmp_path / "runs.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "countcheck"
    program.write_text(f'#!/bin/sh\necho "$2" >> \'{log}\'\nwc -l < "$2"\n')
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    (probe_agent.parent / "tools" / "check_file.pym").write_text(CHECK_TOOL)
    probe_agent.write_text(
        probe_agent.read_text()
        .replace("  - script: tools/find_todos.pym\n  - script: tools/replace_text.pym\n", "")
        .replace("tools:\n", "tools:\n  - script: tools/check_file.pym\n")
    )
    (project / "pkg" / "more.py").write_text("def a():\n    return 1\n\n\ndef b():\n    return 2\n")
    (project / "pkg" / "shout.py").write_text(
        "def c():\n    return 3\n\n\ndef d():\n    return 4\n"
    )
    monkeypatch.chdir(project)
    flags = ["-c", "sandbox.commands.allowed=[countcheck]", "-c", "sandbox.commands.isolation=none"]

    def run(*more: str) -> list[str]:
        log.unlink(missing_ok=True)
        with ScriptedModelServer(rule=CallEveryTool()) as server:
            code = main(
                ["analyze", "pkg", "--no-cache", "--format", "json", "--base-url",
                 server.base_url, *flags, *more]
            )  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0, out
        report = json.loads(out)
        assert [r["summary"] for r in report["results"]] == ["6"] * 4  # each file has 6 lines
        return sorted(log.read_text().split())

    listed = ["-c", "sandbox.commands.read_only=['countcheck --json']"]
    assert run(*listed) == ["pkg/more.py", "pkg/shout.py"]
    # Not listed: every job runs its own.
    assert run() == ["pkg/more.py", "pkg/more.py", "pkg/shout.py", "pkg/shout.py"]


def test_the_lint_agent_reports_the_same_with_and_without_sharing(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def findings(*flags: str) -> list[tuple[str, str, int]]:
        with ScriptedModelServer(rule=CallEveryTool()) as server:
            main(
                ["analyze", ".", "--agents", "lint", "--no-cache", "--format", "json",
                 "--base-url", server.base_url, *flags]
            )  # fmt: skip
        report = json.loads(capsys.readouterr().out)
        return sorted(
            (r["node"]["id"], f["rule"], f["line"])
            for r in report["results"]
            for f in r["findings"]
        )

    shared = findings()
    assert len(shared) >= 6
    assert shared == findings("-c", "sandbox.commands.read_only=[]")
