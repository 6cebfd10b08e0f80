"""The bundled lint agent on the bundled example: real ruff, real fixes. The runner's run_ruff
applies ruff's safe fixes itself; the scripted model is asked only to choose among unsafe fixes
(`--unsafe-fixes`), and a sensible one applies each of them, then submits."""

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
        # run_ruff's result as the model reads it: the unsafe fixes to apply or leave.
        if fix and len(results) == 1 and results[0]["unsafe_fixes"] and "apply_fix" in offered:
            return tool_call("apply_fix", {})
        return tool_call("submit_result", {})

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
    """Exit code, JSON report, stderr and the model requests of `remora analyze . --agents lint`."""
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
        requests = list(server.requests)
    captured = capsys.readouterr()
    report = json.loads(captured.out) if captured.out.strip() else None
    return code, report, captured.err, requests


def test_findings_are_exactly_what_ruff_reports(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = ruff_direct(demo)
    assert {code for *_, code in expected} >= {"F401", "B006", "E722", "T201"}
    code, report, _, requests = analyze(demo, capsys, fix=False)
    found = [
        (f["file"], f["line"], f["column"], f["rule"])
        for r in report["results"]
        for f in r["findings"]
    ]
    assert code == 1
    assert sorted(found) == sorted(expected)  # each reported once
    # One job per file (ruff answers a whole file), none per definition.
    assert {r["node"]["type"] for r in report["results"]} == {"file"}
    assert {r["status"] for r in report["results"]} == {"success"}
    # Nothing to choose without --unsafe-fixes: no job asked the model.
    assert requests == []
    assert {r["turns"] for r in report["results"]} == {0}
    assert sum(r["usage"]["requests"] for r in report["results"]) == 0


def test_safe_fixes_land_with_fix_and_unsafe_ones_need_the_flag(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = ruff_direct(demo)
    code, report, err, requests = analyze(demo, capsys, True, "--fix")
    assert "fixed inventory/stock.py" in err
    assert requests == []  # the safe fix (F401) was applied by run_ruff, not chosen by the model
    remaining = {rule for *_, rule in ruff_direct(demo)}
    assert "F401" not in remaining  # safe: fixed
    assert {"B006", "T201", "E722"} <= remaining  # unsafe or unfixable: still there
    # The report lists what ruff found in the code, as `ruff check` does; the job's summary
    # says what its fixes did.
    reported = {
        (f["file"], f["line"], f["column"], f["rule"])
        for r in report["results"]
        for f in r["findings"]
    }
    assert reported == found
    stock = next(r for r in report["results"] if r["node"]["file"] == "inventory/stock.py")
    assert (stock["outcome"], stock["summary"]) == (
        "fixed",
        "ruff: 4 problems, 1 fixed by ruff's safe fixes (F401), 3 remain; "
        "unsafe fixes need --unsafe-fixes: B006, T201",
    )
    assert code == 1

    code, _, err, requests = analyze(demo, capsys, True, "--fix", "--unsafe-fixes")
    remaining = {rule for *_, rule in ruff_direct(demo)}
    assert remaining == {"E722"}  # only the bare except, which ruff cannot fix
    assert "conflict" not in err
    compile((demo / "inventory" / "stock.py").read_text(), "stock.py", "exec")
    # The model was asked only by the files with an unsafe fix to choose: B006 and T201 in
    # report.py and stock.py.
    asked = {request["messages"][1]["content"].split()[1] for request in requests}
    assert asked == {"inventory/report.py.", "inventory/stock.py."}


def test_the_model_reads_the_choice_not_the_whole_node(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # stock.py has unsafe fixes (B006 in Stock.__init__, T201 in Stock.remove): with
    # --unsafe-fixes the model is asked.
    with ScriptedModelServer(rule=sensible_linter(False)) as server:
        main(
            [
                "analyze",
                "inventory/stock.py",
                "--agents",
                "lint",
                "--no-cache",
                "--unsafe-fixes",
                "--base-url",
                server.base_url,
            ]
        )
        requests = list(server.requests)
    capsys.readouterr()
    first = next(r for r in requests if "inventory/stock.py" in r["messages"][1]["content"])
    prompt = first["messages"][1]["content"]
    # The project's ruff configuration reaches the prompt...
    assert "# pyproject.toml\n[tool.ruff]\nline-length = 100" in prompt
    assert 'select = ["E", "F", "B", "T20", "UP"]' in prompt
    # ...the file's text does not: the observation shows the lines around each choice.
    assert "self.items = items" not in prompt
    observation = json.loads(first["messages"][-1]["content"])
    assert set(observation) == {"summary", "unsafe_fixes", "next"}
    # Lines of the file as ruff's safe fix (F401, `import os` removed) left it.
    choice, other = observation["unsafe_fixes"]
    assert (choice["rule"], choice["line"], other["rule"]) == ("B006", 5, "T201")
    assert choice["code"] == (
        "3: \n4: class Stock:\n5:     def __init__(self, items={}):\n"
        "6:         self.items = items\n7: "
    )
