"""Fingerprints a CI user can rely on: the same alert and the same baseline entry after blank
lines are added at the top of every file and after an unrelated function is edited (real ruff,
the bundled lint agent, the scripted model over HTTP)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from remora.analysis.request import AnalyzeRequest
from remora.analysis.run import analyze
from remora.cli.main import main
from remora.config.loading import load_settings
from remora.findings.fingerprint import finding_fingerprint_v1
from remora.models.scripted.server import ScriptedModelServer, tool_call

DEMO = Path(__file__).parent.parent / "examples" / "demo"


def submit(body: dict[str, Any]) -> Any:
    """The lint agent's run_ruff is an observation: the model only has to submit."""
    return tool_call("submit_result", {"summary": "done"})


def run_lint(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    """`remora analyze . --agents lint`: exit code, stdout (the report) and stderr."""
    with ScriptedModelServer(rule=submit) as server:
        code = main(
            [
                "analyze",
                ".",
                "--agents",
                "lint",
                "--no-cache",
                "--base-url",
                server.base_url,
                *flags,
            ]
        )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lint(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str]:
    code, out, err = run_lint(capsys, *flags)
    return code, out + err


def alerts(capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[str, str, int]]:
    """Fingerprint -> (rule, file, line) of every SARIF result. The SARIF log is stdout alone:
    stderr says what else happened (e.g. that ruff's safe fixes were not applied)."""
    _, out, _ = run_lint(capsys, "--format", "sarif")
    found = {}
    for run in json.loads(out)["runs"]:
        for result in run["results"]:
            location = result["locations"][0]["physicalLocation"]
            key = result["partialFingerprints"]["remora/v2"]
            where = (location["artifactLocation"]["uri"], location["region"]["startLine"])
            found[key] = (result["ruleId"], *where)
    return found


def add_blank_lines_and_edit_a_function(root: Path) -> None:
    for path in sorted(root.rglob("*.py")):
        path.write_text("\n" * 50 + path.read_text())
    stock = root / "inventory" / "stock.py"
    text = stock.read_text()
    assert "return sum(self.items.values())" in text  # Stock.total: no finding of its own
    stock.write_text(
        text.replace("return sum(self.items.values())", "return sum(self.items.values()) + 0")
    )


def test_alerts_keep_their_fingerprints_through_blank_lines_and_edits_elsewhere(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = alerts(capsys)
    assert {rule for rule, _, _ in before.values()} >= {"lint/F401", "lint/E722", "lint/B006"}
    assert len(before) == 6  # ruff's 6 problems in the demo, each its own alert
    add_blank_lines_and_edit_a_function(demo)
    after = alerts(capsys)
    assert set(after) == set(before)
    for key, (rule, file, line) in after.items():
        assert before[key] == (rule, file, line - 50)
    # The alert's own line edited: a new alert (the code was touched, so it is reviewed again).
    stock = demo / "inventory" / "stock.py"
    stock.write_text(stock.read_text().replace("import os", "import os  # unused"))
    edited = alerts(capsys)
    assert len(set(edited) - set(before)) == 1


def test_a_baseline_recorded_before_the_edits_still_hides_every_finding(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, said = lint(capsys, "--baseline", "baseline.json")
    assert code == 0 and "recorded 6 findings in the baseline" in said
    assert json.loads((demo / "baseline.json").read_text())["fingerprint_version"] == 2
    add_blank_lines_and_edit_a_function(demo)
    code, said = lint(capsys, "--baseline", "baseline.json", "--format", "json")
    report = json.loads(said[: said.rindex("}") + 1])
    assert sum(len(result["findings"]) for result in report["results"]) == 0
    assert "6 findings hidden by the baseline" in said
    assert code == 0


def test_a_version_1_baseline_still_loads_and_matches(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Recorded by an older Remora (no fingerprint_version, whole-node fingerprints)."""
    loaded = load_settings(None, cwd=demo)
    request = AnalyzeRequest(paths=(Path("."),), agents=("lint",), use_cache=False)
    with ScriptedModelServer(rule=submit) as server:
        loaded = load_settings(None, cli={"server": {"base_url": server.base_url}}, cwd=demo)
        outcome = anyio.run(lambda: analyze(request, loaded))
    old = sorted({finding_fingerprint_v1(r, f) for r in outcome.results for f in r.findings})
    assert len(old) == 6
    (demo / "old.json").write_text(json.dumps({"remora": "0.1.0", "fingerprints": old}))
    code, said = lint(capsys, "--baseline", "old.json")
    assert code == 0 and "6 findings hidden by the baseline" in said
    (demo / "future.json").write_text(json.dumps({"fingerprint_version": 9, "fingerprints": []}))
    code, said = lint(capsys, "--baseline", "future.json")
    assert code == 2
    assert "recorded with fingerprint version 9, which this Remora" in said
    assert "delete the file to record a new baseline" in " ".join(said.split())
