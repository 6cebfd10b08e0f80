"""The default text report (findings first, as ruff prints them; a few lines per agent; what to
do next), `--statistics`, the per-job table, and the statuses a user reads, in every format.
The expected outputs are written out whole, as ruff's snapshot tests do."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from remora.cli.main import main
from remora.discovery.nodes import Node, NodeType
from remora.findings.results import (
    Change,
    ErrorCode,
    Finding,
    JobError,
    JobResult,
    JobStatus,
    RunSummary,
)
from remora.jobs.endings import JobEnd
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer
from remora.report.github import render_github
from remora.report.json import render_json
from remora.report.sarif import render_sarif
from remora.report.table import render_table
from remora.report.text import TextOptions, render_text


def node(name: str, line: int, file: str = "pkg/mod.py") -> Node:
    return Node(
        id=f"{file}::{name}",
        type=NodeType.FUNCTION,
        name=name,
        qualified_name=name,
        file=file,
        start_line=line,
        start_column=1,
        end_line=line + 2,
        start_byte=0,
        end_byte=10,
        text=f"def {name}():\n    pass\n",
    )


def finding(rule: str, line: int, message: str, file: str = "pkg/mod.py", **kw: str) -> Finding:
    return Finding(rule=rule, message=message, file=file, line=line, column=5, **kw)  # type: ignore[arg-type]


EDIT = Change(file="pkg/mod.py", diff="--- a\n+++ b\n")
RESULTS = [
    JobResult(
        node=node("load", 3),
        agent="lint",
        status=JobStatus.SUCCESS,
        outcome="fixed",
        summary="ruff: 2 problems, 1 fixed by ruff's safe fixes (F401), 1 remain",
        findings=[
            finding("F401", 1, "`os` imported but unused", fix="edit"),
            finding("T201", 4, "`print` found"),
        ],
        changes=[EDIT],
    ),
    JobResult(
        node=node("load", 3),
        agent="docstring",
        status=JobStatus.SUGGESTED,
        summary="drafted by the model (summary): a suggestion, not written; suggested: 'Load.'",
        findings=[
            finding(
                "DOC100",
                3,
                "function `load` has no docstring; a suggestion, not written: 'Load it.'",
                fix="suggestion",
            )
        ],
        suggestions=[EDIT],
    ),
    JobResult(
        node=node("spin", 9, "pkg/other.py"),
        agent="test",
        status=JobStatus.NOT_POSSIBLE,
        summary="cannot generate tests: it is async (write_tests makes plain synchronous tests)",
        findings=[finding("TST100", 9, "`spin` has no tests", file="pkg/other.py")],
    ),
    JobResult(
        node=node("fetch", 20, "pkg/other.py"),
        agent="test",
        status=JobStatus.FAILED,
        error=JobError(
            code=ErrorCode.NOT_DONE,
            message="finished without a verified outcome (written): pytest timed out",
        ),
    ),
    JobResult(
        node=node("fetch", 20, "pkg/other.py"),
        agent="lint",
        status=JobStatus.ERROR,
        error=JobError(code=ErrorCode.COMMAND_TIMEOUT, message="ruff did not finish in 60 s"),
    ),
]
SUMMARY = RunSummary.of(3, RESULTS)

TEXT = """\
pkg/mod.py:1:5: F401 [*] `os` imported but unused
pkg/mod.py:3:5: DOC100 [~] function `load` has no docstring; a suggestion, not written: 'Load it.'
pkg/mod.py:4:5: T201 `print` found
pkg/other.py:9:5: TST100 `spin` has no tests

docstring: 1 job: 1 suggested
lint: 2 jobs: 1 fixed, 1 error
test: 2 jobs: 1 not possible, 1 not done
  pkg/other.py:20 fetch [test] not done: not_done: finished without a verified outcome \
(written): pytest timed out
  pkg/other.py:20 fetch [lint] error: command_timeout: ruff did not finish in 60 s
3 nodes, 5 jobs: 1 success, 1 suggested, 1 not possible, 1 failed, 1 error, 0 skipped; 4 findings
Edits to 1 file: --diff shows them, --fix applies them.
1 suggested edit, never applied: --diff shows them (on stderr) to take by hand.
1 not possible: --output-format table says why for each.
"""


def test_the_text_report_lists_findings_first_as_ruff_does() -> None:
    assert render_text(RESULTS, SUMMARY) == TEXT


def test_statistics_count_findings_per_rule() -> None:
    text = render_text(RESULTS, SUMMARY, options=TextOptions(statistics=True))
    assert text.split("\n\n")[0] == (
        "1\tDOC100\tfunction `load` has no docstring; a suggestion, not written: 'Load it.'\n"
        "1\tF401\t[*] `os` imported but unused\n"
        "1\tT201\t`print` found\n"
        "1\tTST100\t`spin` has no tests"
    )
    assert text.split("\n\n")[1] == TEXT.split("\n\n")[1]  # the same summary after it


def test_with_fix_the_report_does_not_say_how_to_apply() -> None:
    text = render_text(RESULTS, SUMMARY, options=TextOptions(fix=True))
    assert "--fix applies" not in text
    assert "pkg/mod.py:1:5: F401 [*] `os` imported but unused\n" in text


def test_the_table_keeps_every_reason_whole() -> None:
    reason = "cannot generate tests: " + "a reason that goes on " * 12 + "to its end"
    results = [RESULTS[2].model_copy(update={"summary": reason})]
    table = render_table(results, RunSummary.of(1, results))
    assert "not possible" in table
    assert " ".join(table.replace("│", " ").split()).count("to its end") == 1
    assert "…" not in table
    assert table.endswith(render_text(results, RunSummary.of(1, results)))


def test_statuses_in_every_format(tmp_path: Path) -> None:
    data = json.loads(render_json(RESULTS, SUMMARY))
    assert [r["status"] for r in data["results"]] == [
        "success",
        "suggested",
        "not_possible",
        "failed",
        "error",
    ]
    assert (data["summary"]["suggested"], data["summary"]["not_possible"]) == (1, 1)
    assert data["summary"]["agents"]["test"]["not_possible"] == 1
    assert data["results"][0]["findings"][0]["fix"] == "edit"
    # SARIF and GitHub: a suggestion or a job not possible is no failed run of the tool.
    sarif = json.loads(render_sarif(RESULTS, [], root=tmp_path))
    notified = [
        n["message"]["text"]
        for run in sarif["runs"]
        for n in run["invocations"][0].get("toolExecutionNotifications", [])
    ]
    assert len(notified) == 2 and all("fetch" in text for text in notified)
    summary_file = tmp_path / "summary.md"
    render_github(RESULTS, SUMMARY, step_summary=summary_file)
    table = summary_file.read_text().split("### Jobs that errored or did not finish")[1]
    assert "| failed |" in table and "| error |" in table
    assert "suggested" not in table and "not_possible" not in table


def test_exit_codes_stay_what_they_were() -> None:
    assert RunSummary.of(1, [RESULTS[1]]).exit_code() == 1  # a suggestion is a finding
    not_possible = RESULTS[2].model_copy(update={"findings": []})
    assert RunSummary.of(1, [not_possible]).exit_code() == 1  # as when it was `failed`
    assert RunSummary.of(3, RESULTS).exit_code() == 2  # only errors are 2


@pytest.mark.parametrize(
    ("suggested", "not_possible", "status"),
    [
        ("a suggestion", "", JobStatus.SUGGESTED),
        ("", "nothing to pin", JobStatus.NOT_POSSIBLE),
        ("a suggestion", "nothing to pin", JobStatus.SUGGESTED),
        ("", "", JobStatus.FAILED),
    ],
)
def test_a_job_not_done_is_a_suggestion_or_not_possible_when_its_tools_say_so(
    suggested: str, not_possible: str, status: JobStatus
) -> None:
    error = JobError(code=ErrorCode.NOT_DONE, message="finished without a verified outcome")
    end = JobEnd(JobStatus.FAILED, error, None, "")
    settled = end.settled(suggested=suggested, not_possible=not_possible)
    assert settled[0] is status
    assert settled[3] == (suggested or not_possible)
    # An error, a timeout or a verified outcome is never turned into one.
    timeout = JobError(code=ErrorCode.TIME_LIMIT, message="too long")
    late = JobEnd(JobStatus.FAILED, timeout, None, "").settled(suggested="x", not_possible="y")
    assert late[0] is JobStatus.FAILED
    done = JobEnd(JobStatus.FAILED, error, ("written", "3 tests"), "")
    assert done.settled(suggested="x", not_possible="y")[0] is JobStatus.SUCCESS


def test_the_demo_reads_as_findings_suggestions_and_reasons(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end with the scripted model: a docstring draft withheld is `suggested`, and the
    report's lines are the findings, the per-agent lines and what to do next."""
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        code = main(["analyze", ".", "--agents", "lint,docstring", "--base-url", server.base_url])
    out = capsys.readouterr().out
    assert code == 1
    lines = out.splitlines()
    blank = lines.index("")
    assert all(line.count(":") >= 3 for line in lines[:blank])  # path:line:col: CODE ...
    assert "inventory/stock.py:2:8: F401 [*] `os` imported but unused" in lines
    assert any(re.search(r" D10[1-7] \[~\] Missing docstring in ", line) for line in lines)
    assert lines[blank + 1].startswith("docstring: 11 jobs: 1 current, ")
    assert "suggested" in lines[blank + 1]
    assert "failed" not in lines[blank + 1]
    assert "Edits to 1 file: --diff shows them, --fix applies them." in lines
