"""The bundled test agent on a copy of the bundled example: real pytest in the job's workspace,
a sensible scripted model that inspects the function, writes cases and submits the counts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remora.cli import main
from remora.models.scripted import ScriptedModelServer, tool_call, tool_calls

DEMO = Path(__file__).parent.parent / "examples" / "demo"
# hypothesis's pytest plugin adds seconds to the start of every pytest run; these tests do not
# use it, so most runs turn it off through the agent's pytest_args option.
FAST = ["-c", 'agents.test.options.pytest_args=["-p", "no:hypothesispytest"]']
PYTEST_QUIET = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]

GOOD_CASES = {
    "apply_discount": [
        "apply_discount(100.0, 10.0) == 90.0",
        "apply_discount(19.99, 0) == 19.99",
        "apply_discount(100.0, 150.0) raises ValueError",
    ],
    "bulk_price": [
        "bulk_price(2.0, 5) == 10.0",
        "bulk_price(1.0, 10) == 9.5",
        "assert bulk_price(1.0, 100, {100: 50.0}) == 50.0",
    ],
    "parse_sku": ['parse_sku("bolt-0042") == ("BOLT", 42)', 'parse_sku("NUT") raises ValueError'],
}


def function_of(body: dict[str, Any]) -> str:
    """The function a request is about, from the rendered node context."""
    context: str = body["messages"][1]["content"]
    assert context.startswith("Write tests for the function `")
    return context.split("`")[1]


def sensible_tester(attempts: dict[str, list[list[str]]]) -> Callable[[dict[str, Any]], Any]:
    """inspect_function; then write_tests with each attempt's cases in turn (a corrected
    attempt after a failure); then submit_result with the counts of the last write_tests."""

    def rule(body: dict[str, Any]) -> Any:
        offered = {tool["function"]["name"] for tool in body["tools"]}
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        writes = results[1:]
        planned = attempts.get(function_of(body), [])
        if not results and "inspect_function" in offered:
            return tool_call("inspect_function", {})
        last = writes[-1] if writes else {}
        done = last.get("test_file") or len(writes) >= len(planned)
        if results and results[0].get("testable") and not done and "write_tests" in offered:
            return tool_call("write_tests", {"cases": planned[len(writes)]})
        return tool_call(
            "submit_result",
            {
                "summary": f"{last.get('passed', 0)} passed, {last.get('failed', 0)} failed",
                "passed": last.get("passed", 0),
                "failed": last.get("failed", 0),
            },
        )

    return rule


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns(".ruff_cache", "__pycache__"))
    monkeypatch.chdir(copy)
    return copy


def analyze(
    target: str,
    attempts: dict[str, list[list[str]]],
    capsys: pytest.CaptureFixture[str],
    *flags: str,
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    with ScriptedModelServer(rule=sensible_tester(attempts)) as server:
        code = main(
            [
                "analyze",
                target,
                "--agents",
                "test",
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
    assert captured.out.strip(), captured.err
    return code, json.loads(captured.out), requests


def by_function(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {result["node"]["qualified_name"]: result for result in report["results"]}


def pytest_direct(tests: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real pytest on the files that landed, from outside the project (so nothing but the
    generated file's own sys.path line makes the package importable)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *PYTEST_QUIET, str(tests)],
        cwd=cwd,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_generated_tests_pass_land_with_fix_and_pass_under_pytest(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (demo / "inventory" / "pricing.py").read_bytes()
    attempts = {name: [cases] for name, cases in GOOD_CASES.items()}
    code, report, _ = analyze("inventory/pricing.py", attempts, capsys, "--fix", *FAST)

    results = by_function(report)
    assert set(results) == set(GOOD_CASES)
    for name, result in results.items():
        assert result["status"] == "success", result["error"]
        # One file per function: parallel jobs never write the same file.
        assert [change["file"] for change in result["changes"]] == [f"tests/test_pricing_{name}.py"]
        assert result["submitted"]["passed"] == len(GOOD_CASES[name])
        assert result["submitted"]["failed"] == 0
        # The demo has no tests: each function gets TST100 from inspect_function.
        assert [f["rule"] for f in result["findings"]] == ["TST100"]
        assert result["findings"][0]["severity"] == "info"
    assert code == 1  # the TST100 findings

    # The scratch run left the module exactly as it was.
    assert (demo / "inventory" / "pricing.py").read_bytes() == source
    written = sorted(path.name for path in (demo / "tests").iterdir())
    assert written == [f"test_pricing_{name}.py" for name in sorted(GOOD_CASES)]
    text = (demo / "tests" / "test_pricing_apply_discount.py").read_text()
    assert text.startswith('"""Tests for `apply_discount`, generated by Remora\'s test agent.')
    assert "from inventory.pricing import apply_discount  # noqa: E402" in text
    assert "assert apply_discount(100.0, 10.0) == pytest.approx(90.0)" in text
    assert "    with pytest.raises(ValueError):\n        apply_discount(100.0, 150.0)\n" in text

    # The files that landed pass under the real pytest, run from outside the project.
    done = pytest_direct(demo / "tests", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed" in done.stdout
    # And they are clean under the project's own ruff configuration.
    ruff = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "tests"],
        cwd=demo,
        capture_output=True,
        text=True,
    )
    assert ruff.returncode == 0, ruff.stdout


def test_a_wrong_expected_value_is_rejected_with_the_failure(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (demo / "inventory" / "pricing.py").read_bytes()
    attempts = {
        # A deliberately wrong expectation (10% off 100 is 90), next to a correct case.
        "apply_discount": [["apply_discount(100.0, 10.0) == 80.0", "apply_discount(50, 0) == 50"]],
        # A case that cannot run (an undefined name): the model's mistake, not a finding.
        "parse_sku": [["parse_sku(sku) == ('A', 1)"]],
    }
    # With the default options: pytest as the project has it, plugins and all.
    code, report, requests = analyze("inventory/pricing.py", attempts, capsys, "--fix")

    results = by_function(report)
    wrong = results["apply_discount"]
    # No test file was kept: not done, whatever the model submitted; the finding stays.
    assert wrong["status"] == "failed"
    assert wrong["error"]["code"] == "not_done"
    assert (
        "write_tests: apply_discount(100.0, 10.0) == 80.0: assert 90.0 == 80.0"
        in (wrong["error"]["message"])
    )
    assert wrong["changes"] == []  # rejected: no test file, and the module is untouched
    assert wrong["submitted"] == {"summary": "1 passed, 1 failed", "passed": 1, "failed": 1}
    rules = {f["rule"]: f for f in wrong["findings"]}
    assert set(rules) == {"TST100", "TST101"}
    failure = rules["TST101"]
    assert failure["message"].startswith(
        "generated test failed: `apply_discount(100.0, 10.0) == 80.0`: assert 90.0 == 80.0"
    )
    assert failure["file"] == "inventory/pricing.py"
    assert failure["line"] == 1  # the function's first line

    invalid = results["parse_sku"]
    assert invalid["changes"] == []
    assert [f["rule"] for f in invalid["findings"]] == ["TST100"]

    # What the model read: the counts, the failure, and why the other case did not run.
    tool_results = {
        function_of(body): json.loads(body["messages"][-1]["content"])
        for body in requests
        if len([m for m in body["messages"] if m["role"] == "tool"]) == 2
    }
    assert tool_results["apply_discount"]["passed"] == 1
    assert tool_results["apply_discount"]["failed"] == 1
    assert tool_results["apply_discount"]["test_file"] is None
    assert tool_results["apply_discount"]["failures"][0]["case"] == (
        "apply_discount(100.0, 10.0) == 80.0"
    )
    assert tool_results["parse_sku"]["invalid_cases"] == [
        {"case": "parse_sku(sku) == ('A', 1)", "error": "NameError: name 'sku' is not defined"}
    ]

    assert code == 1
    assert not (demo / "tests").exists()
    assert (demo / "inventory" / "pricing.py").read_bytes() == source


def test_corrected_cases_land_after_a_failure_which_stays_reported(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts = {
        "bulk_price": [
            ["bulk_price(1.0, 10) == 10.0"],  # forgets the 5% tier
            ["bulk_price(1.0, 10) == 9.5", "bulk_price(3.0, 1) == 3.0"],
        ]
    }
    _, report, _ = analyze("inventory/pricing.py", attempts, capsys, *FAST)
    result = by_function(report)["bulk_price"]
    assert result["turns"] == 4
    assert result["submitted"]["passed"] == 2
    assert [change["file"] for change in result["changes"]] == ["tests/test_pricing_bulk_price.py"]
    assert "+    assert bulk_price(1.0, 10) == pytest.approx(9.5)\n" in result["changes"][0]["diff"]
    # The failed first attempt is evidence worth a look (the function or the expectation is
    # wrong), so it stays reported.
    assert [f["rule"] for f in result["findings"]] == ["TST100", "TST101"]
    assert "bulk_price(1.0, 10) == 10.0" in result["findings"][1]["message"]


def test_cases_that_are_not_plain_calls_are_refused_without_running(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts = {
        "parse_sku": [
            [
                "import os",
                "len('x') == 1",
                "parse_sku('A-1'); parse_sku('B-2')",
                "parse_sku(open('x').read()) == 1",
                "parse_sku('A-1' == ('A', 1)",
            ]
        ]
    }
    _, report, requests = analyze("inventory/pricing.py", attempts, capsys)
    result = by_function(report)["parse_sku"]
    assert result["changes"] == []
    reply = next(
        json.loads(body["messages"][-1]["content"])
        for body in requests
        if function_of(body) == "parse_sku" and len(body["messages"]) == 6
    )
    assert reply["error"] == "some cases are not valid; nothing was run or written"
    assert [case["error"] for case in reply["invalid_cases"]] == [
        "'import' is not allowed in a case",
        "the case must call parse_sku(...)",
        "one expression per case, no ';' or ':='",
        "'open' is not allowed in a case",
        "brackets do not match",
    ]


def test_src_layout_in_a_subproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The package's import root (src/) and the project folder (the nearest pyproject.toml) are
    found from the file: analysed from the repository root, the tests land in the subproject."""
    project = tmp_path / "repo" / "services" / "calc"
    (project / "src" / "calc").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "calc"\n')
    (project / "src" / "calc" / "__init__.py").write_text("")
    (project / "src" / "calc" / "ops.py").write_text(
        "def double(x: int) -> int:\n    return 2 * x\n"
    )
    monkeypatch.chdir(tmp_path / "repo")
    attempts = {"double": [["double(2) == 4", "double(-3) == -6"]]}
    code, report, _ = analyze("services", attempts, capsys, "--fix", *FAST)
    (result,) = report["results"]
    assert result["status"] == "success"
    assert [c["file"] for c in result["changes"]] == ["services/calc/tests/test_ops_double.py"]
    text = (project / "tests" / "test_ops_double.py").read_text()
    assert "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))" in text
    assert "from calc.ops import double  # noqa: E402" in text
    done = pytest_direct(project / "tests", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert code == 1


def test_tool_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "check", "test"]) == 0, capsys.readouterr()


def test_parallel_write_tests_calls_never_leave_the_module_changed(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both calls share the scratch file (the module); whatever the interleaving, the module is
    written back as it was, and a call that lost its scratch reports it without findings."""
    first = ["apply_discount(100.0, 10.0) == 90.0"]
    second = ["apply_discount(100.0, 20.0) == 80.0", "apply_discount(1.0, 0) == 1.0"]

    def rule(body: dict[str, Any]) -> Any:
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        if function_of(body) != "apply_discount" or len(results) > 1:
            return tool_call("submit_result", {"summary": "done", "passed": 0, "failed": 0})
        if not results:
            return tool_call("inspect_function", {})
        return tool_calls(("write_tests", {"cases": first}), ("write_tests", {"cases": second}))

    with ScriptedModelServer(rule=rule) as server:
        args = ["analyze", "inventory/pricing.py", "--agents", "test", "--format", "json"]
        code = main([*args, "--no-cache", "--base-url", server.base_url, *FAST])
        requests = list(server.requests)
    report = json.loads(capsys.readouterr().out)
    result = by_function(report)["apply_discount"]
    assert result["status"] == "success"
    assert "inventory/pricing.py" not in [change["file"] for change in result["changes"]]
    assert [f["rule"] for f in result["findings"]] == ["TST100"]
    replies = [
        json.loads(m["content"])
        for body in requests
        for m in body["messages"]
        if m["role"] == "tool" and m["name"] == "write_tests"
    ]
    assert replies
    for reply in replies:
        assert reply.get("failed", 0) == 0
        assert not reply.get("findings")
    assert code == 1
