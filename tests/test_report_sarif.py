"""SARIF output: valid against the SARIF 2.1.0 schema, what GitHub code scanning needs, fixes
that reproduce the agents' edits, fingerprints that survive code moving."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remora import __version__
from remora.agents.definition import Agent, RuleSpec, load_agent
from remora.cli.main import main
from remora.discovery.discover import discover_nodes
from remora.discovery.nodes import Node
from remora.findings.fingerprint import finding_fingerprint as baseline_fingerprint
from remora.findings.results import Change, ErrorCode, Finding, JobError, JobResult, JobStatus
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer
from remora.report.sarif import (
    FINGERPRINT_KEY,
    diff_replacements,
    finding_fingerprint,
    render_sarif,
)

SCHEMA_PATH = Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json"
LINT_AGENT = Path(__file__).parent.parent / "remora" / "bundled_agents" / "lint" / "agent.yaml"

SOURCE = '''\
"""Module."""


def risky(items=[]):
    try:
        print(items)  # TODO: log instead
    except:
        pass
'''


# --- helpers -------------------------------------------------------------------------------


def schema_validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    checker = jsonschema.FormatChecker()

    # jsonschema checks "uri" only with an optional package installed; GitHub's upload checks
    # them, so check them here too.
    @checker.checks("uri")
    def is_uri(value: object) -> bool:
        return not isinstance(value, str) or (bool(urlsplit(value).scheme) and " " not in value)

    @checker.checks("uri-reference")
    def is_uri_reference(value: object) -> bool:
        return not isinstance(value, str) or not any(c.isspace() or c == "\\" for c in value)

    return jsonschema.Draft4Validator(schema, format_checker=checker)


def assert_valid_sarif(document: dict[str, Any]) -> None:
    errors = sorted(schema_validator().iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    # SARIF 2.1.0 Errata 01 (stricter than the vendored rtm.5 schema): a region needs a start.
    for run in document["runs"]:
        for result in run["results"]:
            for location in result["locations"]:
                assert "startLine" in location["physicalLocation"]["region"]
            for fix in result.get("fixes", []):
                for change in fix["artifactChanges"]:
                    for replacement in change["replacements"]:
                        assert "startLine" in replacement["deletedRegion"]


def render(results: list[JobResult], agents: list[Agent], root: Path, **kw: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(render_sarif(results, agents, root=root, **kw))
    assert_valid_sarif(document)
    return document


def nodes_of(root: Path, relative: str, text: str) -> dict[str, Node]:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    found = discover_nodes([path], root=root).nodes
    return {node.qualified_name: node for node in found}


def finding(rule: str, line: int, column: int = 1, **kw: Any) -> Finding:
    message = kw.pop("message", f"{rule} here")
    return Finding(rule=rule, message=message, file="pkg/mod.py", line=line, column=column, **kw)


def apply_replacements(text: str, replacements: list[dict[str, Any]]) -> str:
    """Apply SARIF replacements the way a viewer would: regions refer to the original text,
    lines and columns (code points) are 1-based, line N+1 column 1 is the end of the text."""
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]

    def offset(line: int, column: int) -> int:
        assert 1 <= line <= len(starts), (line, len(starts))
        return starts[line - 1] + column - 1

    for replacement in reversed(replacements):
        region = replacement["deletedRegion"]
        begin = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        assert begin <= end
        inserted = replacement.get("insertedContent", {}).get("text", "")
        text = text[:begin] + inserted + text[end:]
    return text


def unified(before: str, after: str, path: str = "pkg/mod.py") -> str:
    """The diff the workspace writes for a change."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return "".join(lines)


DECLARED = {
    "E722": RuleSpec(
        short="Bare except clause",
        full="A bare `except:` also catches KeyboardInterrupt and SystemExit.",
        help="Catch the exceptions you expect.",
    ),
    "T201": RuleSpec(short="print call", full="A `print` in library code.", help="Log instead."),
}


@pytest.fixture
def lint() -> Agent:
    """The bundled lint agent, with rule descriptions these tests control."""
    agent = load_agent(LINT_AGENT, model="m")
    rules = {**DECLARED, **agent.definition.rules}
    return agent.model_copy(
        update={"definition": agent.definition.model_copy(update={"rules": rules})}
    )


@pytest.fixture
def risky(tmp_path: Path) -> Node:
    return nodes_of(tmp_path, "pkg/mod.py", SOURCE)["risky"]


# --- the document --------------------------------------------------------------------------


def test_a_run_with_every_kind_of_job_validates_against_the_schema(
    tmp_path: Path, lint: Agent, risky: Node
) -> None:
    fixed = SOURCE.replace("except:", "except Exception:")
    outside = risky.model_copy(update={"file": "/elsewhere/other mod.py", "id": "x::risky"})
    results = [
        JobResult(
            node=risky,
            agent="lint",
            status=JobStatus.SUCCESS,
            summary="Found a bare except.",
            findings=[
                finding("E722", 7, 5, severity="error"),
                finding("T201", 6, 9),
                finding("FIX002", 6, 23, severity="info"),
                finding("Z999", 4, 1, message="Something the agent did not declare.\nMore."),
            ],
            changes=[Change(file="pkg/mod.py", diff=unified(SOURCE, fixed))],
        ),
        JobResult(
            node=risky,
            agent="probe",
            status=JobStatus.SUCCESS,
            changes=[Change(file="pkg/mod.py", diff=unified(SOURCE, fixed))],
        ),
        JobResult(
            node=outside,
            agent="lint",
            status=JobStatus.FAILED,
            findings=[finding("T201", 6, 9).model_copy(update={"file": outside.file})],
            error=JobError(code=ErrorCode.TURN_LIMIT, message="no submit_result in 3 turns"),
        ),
        JobResult(
            node=risky,
            agent="lint",
            status=JobStatus.ERROR,
            error=JobError(code=ErrorCode.MODEL_ERROR, message="server said 500"),
        ),
    ]
    document = render(results, [lint], tmp_path)
    assert document["version"] == "2.1.0"
    assert [run["automationDetails"]["id"] for run in document["runs"]] == [
        "remora/lint/",
        "remora/probe/",
    ]
    lint_run = document["runs"][0]
    assert lint_run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in lint_run["results"]]
    assert uris[0] == {"uri": "pkg/mod.py", "uriBaseId": "%SRCROOT%"}
    assert uris[-1] == {"uri": "file:///elsewhere/other%20mod.py"}


def test_driver_describes_every_declared_and_reported_rule(
    tmp_path: Path, lint: Agent, risky: Node
) -> None:
    result = JobResult(
        node=risky,
        agent="lint",
        status=JobStatus.SUCCESS,
        findings=[finding("Z999", 4, message="Odd thing, said at length.\nSecond line.")],
    )
    (run,) = render([result], [lint], tmp_path)["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("remora", __version__)
    assert driver["informationUri"].startswith("https://")
    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert list(rules) == ["lint/E722", "lint/T201", "lint/syntax-error", "lint/Z999"]
    spec = lint.definition.rules["E722"]
    assert rules["lint/E722"]["shortDescription"]["text"] == spec.short
    assert rules["lint/E722"]["fullDescription"]["text"] == spec.full
    assert rules["lint/E722"]["help"]["text"] == spec.help
    assert (
        rules["lint/Z999"]["shortDescription"]["text"] == "Odd thing, said at length. Second line."
    )
    assert "does not describe it" in rules["lint/Z999"]["fullDescription"]["text"]
    (sarif_result,) = run["results"]
    assert sarif_result["ruleId"] == "lint/Z999"
    assert driver["rules"][sarif_result["ruleIndex"]]["id"] == "lint/Z999"


def test_help_uri_is_kept_when_absolute(tmp_path: Path, lint: Agent) -> None:
    rules = dict(lint.definition.rules)
    rules["E722"] = rules["E722"].model_copy(update={"help_uri": "https://docs.example/E722"})
    rules["T201"] = rules["T201"].model_copy(update={"help_uri": "docs/T201.md"})
    definition = lint.definition.model_copy(update={"rules": rules})
    agent = lint.model_copy(update={"definition": definition})
    (run,) = render([], [agent], tmp_path)["runs"]
    by_id = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
    assert by_id["lint/E722"]["helpUri"] == "https://docs.example/E722"
    assert "helpUri" not in by_id["lint/T201"]  # GitHub rejects a relative helpUri


def test_results_carry_level_message_and_a_full_one_line_region(
    tmp_path: Path, lint: Agent, risky: Node
) -> None:
    method = nodes_of(tmp_path, "pkg/cls.py", "class C:\n    def m(self):  print(1)\n")["C.m"]
    results = [
        JobResult(
            node=risky,
            agent="lint",
            status=JobStatus.SUCCESS,
            findings=[
                finding("E722", 7, 5, severity="error", message="bare `except:`"),
                finding("T201", 6, 9),
                finding("FIX002", 6, 23, severity="info"),
                finding("B006", 40, 3),  # outside the node: no source line to measure
            ],
        ),
        JobResult(
            node=method,
            agent="lint",
            status=JobStatus.SUCCESS,
            findings=[Finding(rule="T201", message="print", file="pkg/cls.py", line=2, column=19)],
        ),
    ]
    (run,) = render(results, [lint], tmp_path)["runs"]
    got = [
        (r["ruleId"], r["level"], r["message"]["text"], r["locations"][0]["physicalLocation"])
        for r in run["results"]
    ]
    regions = [location["region"] for *_, location in got]
    assert [(rule, level) for rule, level, *_ in got] == [
        ("lint/E722", "error"),
        ("lint/T201", "warning"),
        ("lint/FIX002", "note"),
        ("lint/B006", "warning"),
        ("lint/T201", "warning"),
    ]
    assert got[0][2] == "bare `except:`"
    # "    except:" ends at column 12; "        print(items)  # TODO: log instead" at 42.
    assert regions[0] == {"startLine": 7, "startColumn": 5, "endLine": 7, "endColumn": 12}
    assert regions[1] == {"startLine": 6, "startColumn": 9, "endLine": 6, "endColumn": 42}
    assert regions[3] == {"startLine": 40, "startColumn": 3, "endLine": 40, "endColumn": 4}
    # The method's text starts at its column: its first line is shifted by the indentation.
    assert regions[4] == {"startLine": 2, "startColumn": 19, "endLine": 2, "endColumn": 27}
    logical = run["results"][4]["locations"][0]["logicalLocations"][0]
    assert logical == {"name": "m", "fullyQualifiedName": "C.m", "kind": "member"}


def test_one_run_per_agent_even_without_results_and_a_category_prefix(
    tmp_path: Path, lint: Agent
) -> None:
    document = render([], [lint], tmp_path, category="remora/shard-2-of-4/")
    (run,) = document["runs"]
    assert run["automationDetails"] == {"id": "remora/shard-2-of-4/lint/"}
    assert run["results"] == []
    assert run["invocations"] == [{"executionSuccessful": True}]


# --- fingerprints --------------------------------------------------------------------------


def test_fingerprint_survives_the_function_moving_and_changes_with_its_body(
    tmp_path: Path, lint: Agent
) -> None:
    def fingerprint(text: str) -> tuple[str, int]:
        node = nodes_of(tmp_path, "pkg/mod.py", text)["risky"]
        line = node.start_line + 3  # the `except:` line
        result = JobResult(
            node=node,
            agent="lint",
            status=JobStatus.SUCCESS,
            findings=[finding("E722", line, 5, severity="error")],
        )
        (run,) = render([result], [lint], tmp_path)["runs"]
        (sarif_result,) = run["results"]
        assert sarif_result["partialFingerprints"][FINGERPRINT_KEY].endswith(":1")
        region = sarif_result["locations"][0]["physicalLocation"]["region"]
        return sarif_result["partialFingerprints"][FINGERPRINT_KEY], region["startLine"]

    original, line = fingerprint(SOURCE)
    moved_text = SOURCE.replace('"""Module."""\n', '"""Module."""\n' + "\n" * 50)
    moved, moved_line = fingerprint(moved_text)
    assert moved_line == line + 50
    assert moved == original
    reindented, _ = fingerprint(SOURCE.replace("    try:", "    try:   "))
    assert reindented == original  # whitespace is normalised
    edited, _ = fingerprint(SOURCE.replace("pass", "raise"))
    assert edited != original


def test_fingerprint_function_is_the_baseline_one(risky: Node) -> None:
    result = JobResult(
        node=risky, agent="lint", status=JobStatus.SUCCESS, findings=[finding("E722", 7, 5)]
    )
    assert finding_fingerprint is baseline_fingerprint
    assert len(finding_fingerprint(result, result.findings[0])) >= 32


def test_identical_findings_get_distinct_fingerprints(
    tmp_path: Path, lint: Agent, risky: Node
) -> None:
    twice = [finding("T201", 6, 9), finding("T201", 6, 9)]
    result = JobResult(node=risky, agent="lint", status=JobStatus.SUCCESS, findings=twice)
    (run,) = render([result], [lint], tmp_path)["runs"]
    values = [r["partialFingerprints"][FINGERPRINT_KEY] for r in run["results"]]
    assert values[0].endswith(":1") and values[1].endswith(":2")
    assert values[0].split(":")[0] == values[1].split(":")[0]


# --- fixes ---------------------------------------------------------------------------------


def test_changes_become_fixes_on_the_jobs_results(tmp_path: Path, lint: Agent, risky: Node) -> None:
    fixed = SOURCE.replace("except:", "except Exception:").replace("items=[]", "items=None")
    change = Change(file="pkg/mod.py", diff=unified(SOURCE, fixed))
    result = JobResult(
        node=risky,
        agent="lint",
        status=JobStatus.SUCCESS,
        summary="Narrowed the except.",
        findings=[finding("E722", 7, 5), finding("B006", 4, 12)],
        changes=[change],
    )
    (run,) = render([result], [lint], tmp_path)["runs"]
    for sarif_result in run["results"]:
        (fix,) = sarif_result["fixes"]
        assert fix["description"]["text"] == "Narrowed the except."
        (artifact_change,) = fix["artifactChanges"]
        assert artifact_change["artifactLocation"] == {
            "uri": "pkg/mod.py",
            "uriBaseId": "%SRCROOT%",
        }
        assert apply_replacements(SOURCE, artifact_change["replacements"]) == fixed


def test_a_change_without_findings_gets_a_note_that_carries_it(
    tmp_path: Path, lint: Agent, risky: Node
) -> None:
    fixed = SOURCE.replace("pass", "raise")
    results = [
        JobResult(
            node=risky,
            agent="lint",
            status=JobStatus.SUCCESS,
            changes=[Change(file="pkg/mod.py", diff=unified(SOURCE, fixed))],
        )
    ]
    (run,) = render(results, [lint], tmp_path)["runs"]
    (note,) = run["results"]
    assert (note["ruleId"], note["level"], note["message"]["text"]) == (
        "lint/change",
        "note",
        "proposed change",
    )
    results[0].summary = "Raised instead of passing."
    (summarised,) = render(results, [lint], tmp_path)["runs"][0]["results"]
    assert summarised["message"]["text"] == "Raised instead of passing."
    # The model's wording differs from run to run; the alert must stay the same one.
    assert summarised["partialFingerprints"] == note["partialFingerprints"]
    assert run["tool"]["driver"]["rules"][note["ruleIndex"]]["id"] == "lint/change"
    assert note["locations"][0]["physicalLocation"]["region"]["startLine"] == risky.start_line
    replacements = note["fixes"][0]["artifactChanges"][0]["replacements"]
    assert apply_replacements(SOURCE, replacements) == fixed


def test_jobs_that_did_not_succeed_contribute_no_fixes(
    tmp_path: Path, lint: Agent, risky: Node
) -> None:
    change = Change(file="pkg/mod.py", diff=unified(SOURCE, SOURCE.replace("pass", "raise")))
    results = [
        JobResult(
            node=risky,
            agent="lint",
            status=status,
            findings=[finding("E722", 7, 5)],
            changes=[change],
            error=JobError(code=ErrorCode.TURN_LIMIT, message="out of turns"),
        )
        for status in (JobStatus.FAILED, JobStatus.ERROR)
    ]
    (run,) = render(results, [lint], tmp_path)["runs"]
    assert len(run["results"]) == 2
    assert all("fixes" not in r for r in run["results"])


def test_a_diff_that_does_not_add_up_gives_no_fix(tmp_path: Path, lint: Agent, risky: Node) -> None:
    broken = "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,3 +1,3 @@\n-a\n+b\n"
    assert diff_replacements(broken) is None
    result = JobResult(
        node=risky,
        agent="lint",
        status=JobStatus.SUCCESS,
        findings=[finding("E722", 7, 5)],
        changes=[Change(file="pkg/mod.py", diff=broken)],
    )
    (run,) = render([result], [lint], tmp_path)["runs"]
    assert "fixes" not in run["results"][0]


def test_replacements_of_git_style_diffs_without_final_newline() -> None:
    before, after = "a\nb\nlast", "a\nB\nlast line\n"
    diff = (
        "--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n a\n-b\n-last\n\\ No newline at end of file\n"
        "+B\n+last line\n"
    )
    replacements = diff_replacements(diff)
    assert replacements is not None
    assert apply_replacements(before, replacements) == after
    keep_no_newline = "--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-x\n+y\n\\ No newline at end of file\n"
    replacements = diff_replacements(keep_no_newline)
    assert replacements is not None
    assert apply_replacements("x\n", replacements) == "y"


def test_replacements_for_a_new_file() -> None:
    replacements = diff_replacements(unified("", "one\ntwo\n"))
    assert replacements == [
        {
            "deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1},
            "insertedContent": {"text": "one\ntwo\n"},
        }
    ]


LINES = st.lists(
    st.sampled_from(["a", "b", "c", "", "    x = 1", "é\u2028ü", "tab\there", "cr\r"]).map(
        lambda line: line + "\n"
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(before=LINES, after=LINES, context=st.integers(min_value=0, max_value=4))
def test_replacements_reproduce_any_edit(before: list[str], after: list[str], context: int) -> None:
    old, new = "".join(before), "".join(after)
    diff = "".join(difflib.unified_diff(before, after, "a/f", "b/f", n=context))
    replacements = diff_replacements(diff)
    assert replacements is not None
    assert apply_replacements(old, replacements) == new


# --- job errors ----------------------------------------------------------------------------


def test_errored_jobs_become_tool_execution_notifications(
    tmp_path: Path, lint: Agent, risky: Node
) -> None:
    results = [
        JobResult(node=risky, agent="lint", status=JobStatus.SUCCESS),
        JobResult(
            node=risky,
            agent="lint",
            status=JobStatus.ERROR,
            error=JobError(code=ErrorCode.SERVER_UNREACHABLE, message="connection refused"),
        ),
    ]
    (run,) = render(results, [lint], tmp_path)["runs"]
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert notification["message"]["text"] == (
        "pkg/mod.py::risky [lint]: server_unreachable: connection refused"
    )
    assert run["results"] == []


# --- end to end ----------------------------------------------------------------------------


def test_analyze_writes_valid_sarif_with_fixes(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    rule = CallEveryTool(arguments={"replace_text": {"old": "TODO", "new": "DONE"}})
    with ScriptedModelServer(rule=rule) as server:
        code = main(
            [
                "analyze",
                "pkg",
                "--output-format",
                "sarif",
                "-o",
                "out.sarif",
                "--no-cache",
                "--base-url",
                server.base_url,
            ]
        )
    assert code == 1
    document = json.loads((project / "out.sarif").read_text())
    assert_valid_sarif(document)
    (run,) = document["runs"]
    assert run["automationDetails"]["id"] == "remora/probe/"
    (result,) = run["results"]
    assert result["ruleId"] == "probe/TD001"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/shout.py"
    replacements = result["fixes"][0]["artifactChanges"][0]["replacements"]
    source = (project / "pkg" / "shout.py").read_text()
    assert apply_replacements(source, replacements) == source.replace("TODO", "DONE")
