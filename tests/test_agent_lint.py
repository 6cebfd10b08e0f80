"""The bundled lint agent on the bundled example: real ruff, real fixes, a sensible scripted
model that runs ruff, fixes what ruff can fix, and submits."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call

DEMO = Path(__file__).parent.parent / "examples" / "demo"


def sensible_linter(fix: bool) -> Any:
    def rule(body: dict[str, Any]) -> Any:
        offered = {tool["function"]["name"] for tool in body["tools"]}
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        if "run_ruff" in offered and not results:
            return tool_call("run_ruff", {})
        rules = results[0].get("fixable_rules", []) if results else []
        # One fix a turn: the FunctionGemma profile keeps one call per reply.
        if fix and 1 <= len(results) <= len(rules) and "apply_fix" in offered:
            return tool_call("apply_fix", {"rule": rules[len(results) - 1]})
        return tool_call("submit_result", {"summary": f"{len(results)} tool results"})

    return rule


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy)
    monkeypatch.chdir(copy)
    return copy


def ruff_direct(root: Path) -> set[tuple[str, int, int, str]]:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "json", "--exit-zero", "."],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        (
            Path(p["filename"]).relative_to(root).as_posix(),
            p["location"]["row"],
            p["location"]["column"],
            p["code"],
        )
        for p in json.loads(done.stdout)
    }


def analyze(demo: Path, capsys: pytest.CaptureFixture[str], fix: bool, *flags: str) -> Any:
    with ScriptedModelServer(rule=sensible_linter(fix)) as server:
        code = main(
            [
                "analyze",
                ".",
                "--agents",
                "lint",
                "--format",
                "json",
                "--no-cache",
                "--base-url",
                server.base_url,
                *flags,
            ]
        )
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def test_findings_are_exactly_what_ruff_reports(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = ruff_direct(demo)
    assert {code for *_, code in expected} >= {"F401", "B006", "E722", "T201"}
    code, report, _ = analyze(demo, capsys, fix=False)
    found = [
        (f["file"], f["line"], f["column"], f["rule"])
        for r in report["results"]
        for f in r["findings"]
    ]
    assert code == 1
    assert sorted(found) == sorted(expected)  # each reported once, by the node that owns it
    assert {r["status"] for r in report["results"]} == {"success"}


def test_safe_fixes_land_with_fix_and_unsafe_ones_need_the_flag(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = analyze(demo, capsys, True, "--fix")
    assert "fixed inventory/stock.py" in err
    remaining = {rule for *_, rule in ruff_direct(demo)}
    assert "F401" not in remaining  # safe: fixed
    assert {"B006", "T201", "E722"} <= remaining  # unsafe or unfixable: still there
    reported = {f["rule"] for r in report["results"] for f in r["findings"]}
    assert "F401" not in reported  # the job reports what remains after its fix
    assert code == 1

    code, _, err = analyze(demo, capsys, True, "--fix", "--unsafe-fixes")
    remaining = {rule for *_, rule in ruff_direct(demo)}
    assert remaining == {"E722"}  # only the bare except, which ruff cannot fix
    assert "conflict" not in err  # fixes in different nodes of one file were merged
    compile((demo / "inventory" / "stock.py").read_text(), "stock.py", "exec")


def test_the_projects_ruff_configuration_reaches_the_prompt(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # stock.py has a fixable problem (F401): the model is asked what to fix.
    with ScriptedModelServer(rule=sensible_linter(False)) as server:
        main(
            [
                "analyze",
                "inventory/stock.py",
                "--agents",
                "lint",
                "--no-cache",
                "--base-url",
                server.base_url,
            ]
        )
        prompt = server.requests[0]["messages"][1]["content"]
    capsys.readouterr()
    assert "# pyproject.toml\n[tool.ruff]\nline-length = 100" in prompt
    assert 'select = ["E", "F", "B", "T20", "UP"]' in prompt
